//! Kiro (the IDE and `kiro-cli`): `~/.kiro/settings/mcp.json` (the user's) and the workspace's
//! `.kiro/settings/mcp.json` (gated), both `{"mcpServers": {…}}`, read by the `mcpServers`
//! family's parser (`family`). Per entry, Kiro's `disabled: true` turns the server off and
//! `disabledTools` hides tools (this host's `excludeTools`); `autoApprove` is Kiro's own
//! tool-call prompt and changes nothing here. Kiro expands `${VAR}` only for the variables its
//! `kiroAgent.mcpApprovedEnvVars` lists and otherwise passes the text as written; this layout
//! passes every value as written. `install kiro` moves the user's servers to the sidecar.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object};

use super::expand::Context;
use super::family::{Family, Url};
use super::spec::{ClientSpec, Editor};
use super::{ClientContent, ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Kiro's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "kiro",
    title: "Kiro",
    about: "Kiro's mcp.json files",
    help: "~/.kiro/settings/mcp.json (and mcp-reconcile.json beside it), \
           <project>/.kiro/settings/mcp.json",
    project_servers: ".kiro/settings/mcp.json",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    ..ClientSpec::EDITOR
};

/// How Kiro spells its entries.
const KIRO: Family = Family {
    client: "Kiro",
    key: "mcpServers",
    off: Some("disabled"),
    disabled_tools: Some("disabledTools"),
    url_aliases: &[],
    bare_url: Url::Http,
    type_aliases: &[],
    types: None,
    nested: None,
    expand: None,
    own_keys: &["autoApprove"],
};

/// Kiro's `mcp.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "kiro",
    parse: |top, _, scope, ctx| parse(top, scope, ctx),
});

/// `~/.kiro/settings/mcp.json`.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(env.home("Kiro's mcp.json")?.join(".kiro/settings/mcp.json"))
}

/// The sidecar, the user's file, then the workspace's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(
        FORMAT,
        user_file(env)?,
        Some(project.join(".kiro/settings/mcp.json")),
    ))
}

/// A Kiro `mcp.json`: its servers as one layer of kind `scope`, those with `disabled: true`
/// switched off.
pub(super) fn parse(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    super::family::parse(&KIRO, top, scope, ctx)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Kiro's switches: `disabled` turns a server off, `disabledTools` becomes `excludeTools`,
    /// `autoApprove` is not part of what runs.
    #[test]
    fn kiros_switches_map_onto_this_hosts_fields() {
        let top = mcp_reconcile_kernel::json::parse_jsonc(
            r#"{"mcpServers": {
                "on": {"command": "x", "disabledTools": ["b"], "autoApprove": ["a"]},
                "off": {"command": "y", "disabled": true},
                "web": {"url": "https://example.com/mcp"}
            }}"#,
        )
        .ok()
        .and_then(|v| v.as_object().cloned())
        .expect("object");
        let vars = BTreeMap::new();
        let content = parse(&top, LayerSource::User, &Context::at_p(&vars));
        assert_eq!(content.disabled, ["off"]);
        let (_, used, _) = &content.layers[0];
        let on = used.get("on").expect("on").object();
        assert!(on.contains_key("excludeTools") && !on.contains_key("autoApprove"));
        assert!(used
            .get("web")
            .expect("web")
            .object()
            .contains_key("httpUrl"));
    }
}
