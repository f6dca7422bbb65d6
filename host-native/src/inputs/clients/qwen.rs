//! qwen-code (the TypeScript CLI): its settings files are this host's schema, so its layout
//! only moves paths (`paths`), and `install qwen` edits `mcp.allowed` in its user settings.

use crate::inputs::lsp_formats::LspFormat;
use crate::install::{How, Install};

use super::table::{no_files, ClientSpec, UserLsp};

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
    files: no_files,
    editor: None,
    install: Some(Install {
        how: How::Settings(|env| {
            Ok(crate::inputs::qwen_home(env, "qwen-code's settings")?.join("settings.json"))
        }),
        stdio_type: false,
        lists_tools_once: true,
        pass_env: &[],
        afterwards: crate::install::SETTINGS_AFTERWARDS,
    }),
};
