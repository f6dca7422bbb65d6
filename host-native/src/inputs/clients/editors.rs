//! Editors' files: Cursor's and VS Code's `mcp.json`, and Copilot CLI's `mcp-config.json`.

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::{Context, Syntax};
use super::normalize::{entries, transport, BareUrl};
use super::ClientContent;

/// Fields that name another file to read: its content would run without being part of the
/// approved entry, so an entry with one is refused until this host reads and hashes it.
fn refuse_unread_files(object: &Object) -> Result<(), String> {
    if object.contains_key("envFile") {
        return Err(
            "its \"envFile\" is not read by mcp-reconcile (the file's variables \
                    would not be part of what you approve) — move the variables into \"env\""
                .into(),
        );
    }
    Ok(())
}

/// One entry of an editor's file: expanded, then normalized.
fn entry(ctx: &Context<'_>, object: &Object) -> Result<(Object, Object), String> {
    refuse_unread_files(object)?;
    let written = transport(object.clone(), BareUrl::Http)?;
    let (expanded, _) = ctx.expand_entry(Syntax::Editor, object, None)?;
    let used = transport(expanded, BareUrl::Http)?;
    Ok((used, written))
}

fn read(
    top: &Object,
    key: &str,
    scope: LayerSource,
    mut entry: impl FnMut(&Object) -> Result<(Object, Object), String>,
) -> ClientContent {
    let mut out = ClientContent::default();
    match top.get(key) {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            let (used, written) = entries(map, key, &mut out.entry_errors, &mut entry);
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "{key} must be an object of server entries, found {} — no servers are loaded from it",
            other.preview(60)
        )),
    }
    out
}

/// Cursor's `mcp.json`: `mcpServers`.
pub(super) fn cursor(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    read(top, "mcpServers", scope, |o| entry(ctx, o))
}

/// VS Code's `mcp.json`: `servers` (its `inputs` are prompts nobody can answer here; an entry
/// that uses one fails, naming the field).
pub(super) fn vscode(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    read(top, "servers", scope, |o| entry(ctx, o))
}

/// Copilot CLI's `mcp-config.json`: `mcpServers`; its `tools` list (`["*"]`: all) becomes
/// this host's `includeTools`.
pub(super) fn copilot(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    read(top, "mcpServers", scope, |o| {
        let (mut used, written) = entry(ctx, o)?;
        if let Some(Value::Array(tools)) = used.get("tools") {
            if !tools.iter().any(|t| t.as_str() == Some("*")) && !used.contains_key("includeTools")
            {
                let tools = Value::Array(tools.clone());
                used.insert("includeTools".into(), tools);
            }
        }
        Ok((used, written))
    })
}

/// Copilot CLI's `config.json`: whether one of its `trusted_folders` holds the project (a
/// folder is trusted with everything below it; paths compare by real path).
pub(super) fn copilot_config(top: &Object, ctx: &Context<'_>) -> ClientContent {
    let real = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let trusts_project = match top.get("trusted_folders") {
        Some(Value::Array(folders)) => folders
            .iter()
            .filter_map(Value::as_str)
            .filter(|f| std::path::Path::new(f).is_absolute())
            .any(|f| real(ctx.project).starts_with(real(std::path::Path::new(f)))),
        _ => false,
    };
    ClientContent {
        trusts_project,
        ..ClientContent::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::inputs::object;

    #[test]
    fn vscode_servers_expand_and_inputs_fail_by_name() {
        let vars = BTreeMap::from([("KEY".to_owned(), "k".to_owned())]);
        let ctx = Context {
            home: Some(Path::new("/home/u")),
            ..Context::at_p(&vars)
        };
        let top = object(
            r#"{"inputs":[{"id":"pat","type":"promptString"}],"servers":{
                "gh":{"type":"http","url":"https://api/mcp","headers":{"Authorization":"Bearer ${input:pat}"}},
                "fs":{"type":"stdio","command":"npx","args":["${workspaceFolder}"],"env":{"K":"${env:KEY}"},
                      "dev":{"watch":"src/**/*.ts"}},
                "envfile":{"command":"x","envFile":"${workspaceFolder}/.env"}}}"#,
        );
        let content = vscode(&top, LayerSource::Project, &ctx);
        let (_, used, _) = &content.layers[0];
        assert_eq!(used.keys().collect::<Vec<_>>(), ["fs"]);
        assert_eq!(
            Value::Object(used.get("fs").expect("fs").object().clone()).to_json(),
            r#"{"command":"npx","args":["/p"],"env":{"K":"k"},"dev":{"watch":"src/**/*.ts"}}"#
        );
        assert!(
            content.entry_errors[0].contains("\"gh\"")
                && content.entry_errors[0].contains("${input:pat}")
        );
        assert!(content.entry_errors[1].contains("envFile"));
    }

    #[test]
    fn copilot_tools_become_a_filter() {
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        let top = object(
            r#"{"mcpServers":{"a":{"type":"local","command":"a","tools":["x"]},
                              "b":{"type":"local","command":"b","tools":["*"]}}}"#,
        );
        let content = copilot(&top, LayerSource::User, &ctx);
        let used = &content.layers[0].1;
        assert!(used.get("a").and_then(|c| c.get("includeTools")).is_some());
        assert!(used.get("b").and_then(|c| c.get("includeTools")).is_none());
    }
}
