//! Cline (the VS Code extension, the JetBrains plugin and the `cline` CLI): one user file,
//! `cline_mcp_settings.json`, shared by all three since Cline 3.0 (the extension migrates its
//! older globalStorage file into it once and then reads only this one). Where it is, as
//! `@cline/shared` resolves it: `$CLINE_MCP_SETTINGS_PATH`, else
//! `$CLINE_DATA_DIR/settings/cline_mcp_settings.json`, else
//! `$CLINE_DIR/data/settings/cline_mcp_settings.json`, else
//! `~/.cline/data/settings/cline_mcp_settings.json`. Cline has no project file: user scope
//! only. Read by the `mcpServers` family's parser (`family`): `type` is `stdio`, `sse` or
//! `streamableHttp` (the legacy `transportType` also takes `http`), a bare `url` is SSE, the
//! transport may also sit in a nested `transport` object; `disabled: true` turns a server
//! off; `autoApprove`/`alwaysAllow` (its tool-call prompt), `timeout` (seconds, its request
//! timeout) and its `metadata` and OAuth state are its own. Values are passed as written
//! (Cline expands no variables). `install cline` moves the servers to the sidecar.

use std::path::{Path, PathBuf};

use super::family::{Family, Url};
use super::spec::{ClientSpec, Editor};
use super::strategy::Install;
use super::{ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Cline's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "cline",
    title: "Cline",
    about: "Cline's cline_mcp_settings.json (extension and CLI)",
    help: "\
~/.cline/data/settings/cline_mcp_settings.json ($CLINE_MCP_SETTINGS_PATH, $CLINE_DATA_DIR,
$CLINE_DIR; and mcp-reconcile.json beside it); Cline has no project file",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    install: Some(Install {
        stdio_type: true,
        // Cline CLI 3.0 lists a server's tools once per session and handles no
        // `list_changed` (measured: a server added mid-session is not offered).
        lists_tools_once: true,
        // Where the installing shell moved Cline's files, so the gateway reads the same one
        // whatever environment Cline gives its servers.
        pass_env: &["CLINE_MCP_SETTINGS_PATH", "CLINE_DATA_DIR", "CLINE_DIR"],
        ..Install::EDITOR
    }),
    ..ClientSpec::CLIENT
};

/// How Cline spells its entries.
const CLINE: Family = Family {
    client: "Cline",
    key: "mcpServers",
    off: Some("disabled"),
    disabled_tools: None,
    url_aliases: &[],
    bare_url: Url::Sse,
    type_aliases: &["transportType"],
    types: Some(&["stdio", "sse", "streamableHttp"]),
    nested: Some("transport"),
    expand: None,
    own_keys: &[
        "autoApprove",
        "alwaysAllow",
        "timeout",
        "metadata",
        "oauth",
        "oauthClient",
        "transportType",
    ],
};

/// Cline's `cline_mcp_settings.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "cline",
    parse: |top, _, scope, ctx| super::family::parse(&CLINE, top, scope, ctx),
});

/// Cline's settings file, where `@cline/shared`'s `resolveMcpSettingsPath` puts it.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    let absolute = |dir: &str| env.absolute(Path::new(dir.trim()));
    let name = "cline_mcp_settings.json";
    Ok(match env.var("CLINE_MCP_SETTINGS_PATH").map(str::trim) {
        Some(path) if !path.is_empty() => absolute(path),
        _ => match env.var("CLINE_DATA_DIR").map(str::trim) {
            Some(dir) if !dir.is_empty() => absolute(dir).join("settings").join(name),
            _ => match env.var("CLINE_DIR").map(str::trim) {
                Some(dir) if !dir.is_empty() => absolute(dir).join("data/settings").join(name),
                _ => env
                    .home("Cline's cline_mcp_settings.json")?
                    .join(".cline/data/settings")
                    .join(name),
            },
        },
    })
}

/// The sidecar, then the user's file.
fn files(_: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(FORMAT, user_file(env)?, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HostEnv {
        HostEnv::of(vars, "/cwd", "/home/u")
    }

    /// Cline's file moves as `@cline/shared` moves it: the file's own variable first, then
    /// the data directory, then Cline's directory, else under the home; blank values count as
    /// unset and relative ones are taken from the current directory.
    #[test]
    fn clines_file_is_where_cline_resolves_it() {
        let at = |vars: &[(&str, &str)]| user_file(&env(vars)).expect("path");
        let name = "cline_mcp_settings.json";
        assert_eq!(
            at(&[]),
            Path::new("/home/u/.cline/data/settings").join(name)
        );
        assert_eq!(
            at(&[("CLINE_DIR", "c"), ("CLINE_DATA_DIR", "  ")]),
            Path::new("/cwd/c/data/settings").join(name)
        );
        assert_eq!(
            at(&[("CLINE_DIR", "/c"), ("CLINE_DATA_DIR", "/d")]),
            Path::new("/d/settings").join(name)
        );
        assert_eq!(
            at(&[
                ("CLINE_DATA_DIR", "/d"),
                ("CLINE_MCP_SETTINGS_PATH", "/m.json")
            ]),
            Path::new("/m.json")
        );
    }
}
