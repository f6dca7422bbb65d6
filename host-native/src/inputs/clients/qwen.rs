//! qwen-code (the TypeScript CLI): its settings files are this host's schema, so its layout
//! only moves paths (`paths`), and `install qwen` edits `mcp.allowed` in its user settings.

use super::strategy::{How, Install};
use crate::inputs::lsp_formats::LspFormat;

use std::path::{Path, PathBuf};

use super::spec::{no_files, ClientSpec, Dialect, Keeps, SettingsFiles, UserLsp};
use crate::auth::TokenFormat;
use crate::inputs::host_env::qwen_home;

/// qwen-code's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "qwen",
    title: "qwen-code",
    about: "the TypeScript (qwen-code) CLI's files, to run beside it",
    help: "\
$QWEN_HOME/settings.json (~/.qwen/settings.json; user), <project>/.qwen/settings.json
(workspace), $QWEN_CODE_SYSTEM_SETTINGS_PATH or /etc/qwen-code/settings.json (macOS:
/Library/Application Support/QwenCode/), $QWEN_CODE_SYSTEM_DEFAULTS_PATH or system-defaults.json
beside it, <project>/.mcp.json; approvals in $QWEN_CODE_MCP_APPROVALS_PATH or
$QWEN_HOME/mcpApprovals.json, language-server approvals in $QWEN_HOME/lspApprovals.json, OAuth
tokens in $QWEN_HOME/mcp-oauth-tokens.json; no user language-server file; <project>/.lsp.json",
    reads_client_files: false,
    reads_mcp_json: true,
    lsp: LspFormat::Own,
    project_servers: ".mcp.json",
    project_lsp: ".lsp.json",
    user_lsp: UserLsp::None,
    settings: SettingsFiles {
        user: |env| Ok(qwen_home(env, "user settings")?.join("settings.json")),
        workspace_dir: ".qwen",
        system_dir,
        system_var: Some("QWEN_CODE_SYSTEM_SETTINGS_PATH"),
        defaults_var: Some("QWEN_CODE_SYSTEM_DEFAULTS_PATH"),
        dialect: Dialect::Own,
    },
    // The TypeScript CLI's own files, so both share approvals and logins.
    keeps: Some(Keeps {
        approvals: |env| match env.var("QWEN_CODE_MCP_APPROVALS_PATH") {
            Some(p) => Ok(env.absolute(Path::new(p))),
            None => Ok(qwen_home(env, "approvals file")?.join("mcpApprovals.json")),
        },
        lsp_approvals: |env| {
            Ok(qwen_home(env, "language-server approvals file")?.join("lspApprovals.json"))
        },
        tokens: |env| Ok(qwen_home(env, "OAuth token file")?.join("mcp-oauth-tokens.json")),
        token_format: TokenFormat::Qwen,
    }),
    files: no_files,
    editor: None,
    install: Some(Install {
        how: How::Settings(|env| Ok(qwen_home(env, "qwen-code's settings")?.join("settings.json"))),
        stdio_type: false,
        lists_tools_once: true,
        pass_env: &[],
        afterwards: super::strategy::SETTINGS_AFTERWARDS,
    }),
};

/// qwen-code's administrator directory: `/Library/Application Support/QwenCode` on macOS,
/// `/etc/qwen-code` elsewhere.
fn system_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/QwenCode")
    } else {
        PathBuf::from("/etc/qwen-code")
    }
}
