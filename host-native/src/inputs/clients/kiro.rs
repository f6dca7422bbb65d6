//! Kiro (the IDE and `kiro-cli`): `~/.kiro/settings/mcp.json` (the user's) and the workspace's
//! `.kiro/settings/mcp.json` (gated), both `{"mcpServers": {…}}`. Per entry, Kiro's
//! `disabled: true` turns the server off and `disabledTools` hides tools (this host's
//! `excludeTools`); `autoApprove` is Kiro's own tool-call prompt and changes nothing here.
//! Kiro expands `${VAR}` only for the variables its `kiroAgent.mcpApprovedEnvVars` lists and
//! otherwise passes the text as written; this layout passes every value as written.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::{entries, transport, BareUrl};
use super::spec::ClientSpec;
use super::{ClientContent, ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Kiro's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "kiro",
    title: "Kiro",
    about: "Kiro's mcp.json files",
    help: "~/.kiro/settings/mcp.json, <project>/.kiro/settings/mcp.json",
    project_servers: ".kiro/settings/mcp.json",
    files,
    ..ClientSpec::CLIENT
};

/// Kiro's `mcp.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "kiro",
    parse: |top, scope, _: &Context<'_>| parse(top, scope),
});

/// The user's file, then the workspace's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    let file =
        |scope, dir: &Path| ClientFile::new(FORMAT, scope, dir.join(".kiro/settings/mcp.json"));
    Ok(vec![
        file(LayerSource::User, env.home("Kiro's mcp.json")?),
        file(LayerSource::Project, project),
    ])
}

/// A Kiro `mcp.json`: its servers as one layer of kind `scope`, those with `disabled: true`
/// switched off.
pub(super) fn parse(top: &Object, scope: LayerSource) -> ClientContent {
    let mut out = ClientContent::default();
    match top.get("mcpServers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            out.disabled = map
                .iter()
                .filter(|(_, e)| {
                    e.as_object().and_then(|e| e.get("disabled")) == Some(&Value::Bool(true))
                })
                .map(|(name, _)| name.clone())
                .collect();
            let (used, written) = entries(map, "mcpServers", &mut out.entry_errors, entry);
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "mcpServers must be an object of server entries, found {} — no servers are loaded \
             from it",
            other.preview(60)
        )),
    }
    out
}

/// One entry: its transport normalized (a bare `url` is streamable HTTP), `disabledTools` as
/// `excludeTools`, Kiro's own switches left out of what runs.
fn entry(object: &Object) -> Result<(Object, Object), String> {
    let written = transport(object.clone(), BareUrl::Http)?;
    let mut used = written.clone();
    used.remove("disabled");
    used.remove("autoApprove");
    if let Some(tools) = used.remove("disabledTools") {
        used.insert("excludeTools".into(), tools);
    }
    Ok((used, written))
}

#[cfg(test)]
mod tests {
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
        let content = parse(&top, LayerSource::User);
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
