//! Codex's `config.toml`, edited with `toml_edit` (comments and layout kept): the gateway's
//! table, and `enabled = false` on every other server, marked so that `--layout codex` still
//! runs it ([`CODEX_MARK`](crate::inputs::CODEX_MARK)).

use anyhow::Context as _;
use serde_json::Value;
use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};

use super::GATEWAY;
use crate::inputs::CODEX_MARK;

fn parse(text: &str) -> anyhow::Result<DocumentMut> {
    text.parse::<DocumentMut>()
        .context("Codex's config.toml is not valid TOML; fix it first")
}

/// The text with the gateway's table and every other server switched off (marked).
pub(super) fn install(text: &str, entry: &Value) -> anyhow::Result<String> {
    let mut doc = parse(text)?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .context("mcp_servers in Codex's config.toml is not a table")?;
    for (name, item) in servers.iter_mut() {
        if name == GATEWAY {
            continue;
        }
        let Some(table) = item.as_table_like_mut() else {
            continue;
        };
        if table.get("enabled").and_then(Item::as_bool) == Some(false) {
            continue;
        }
        table.insert("enabled", value(false));
        if let Some(mut key) = table.key_mut("enabled") {
            key.leaf_decor_mut().set_prefix("");
        }
        if let Some(Item::Value(v)) = table.get_mut("enabled") {
            v.decor_mut().set_suffix(format!(" # {CODEX_MARK}"));
        }
    }
    let mut gateway = Table::new();
    gateway.insert(
        "command",
        value(entry["command"].as_str().unwrap_or_default()),
    );
    let mut args = Array::new();
    for arg in entry["args"].as_array().into_iter().flatten() {
        args.push(arg.as_str().unwrap_or_default());
    }
    gateway.insert("args", value(args));
    let mut env = InlineTable::new();
    for (key, val) in entry["env"].as_object().into_iter().flatten() {
        env.insert(key, val.as_str().unwrap_or_default().into());
    }
    gateway.insert("env", value(env));
    servers.insert(GATEWAY, Item::Table(gateway));
    Ok(doc.to_string())
}

/// The text without the gateway's table and without the switches install put in.
pub(super) fn uninstall(text: &str) -> anyhow::Result<String> {
    let mut doc = parse(text)?;
    if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_mut) {
        servers.remove(GATEWAY);
        for (_, item) in servers.iter_mut() {
            let Some(table) = item.as_table_like_mut() else {
                continue;
            };
            let marked = table
                .get("enabled")
                .and_then(Item::as_value)
                .is_some_and(|v| {
                    v.decor()
                        .suffix()
                        .and_then(|s| s.as_str())
                        .is_some_and(|s| s.contains(CODEX_MARK))
                });
            if marked {
                table.remove("enabled");
            }
        }
    }
    Ok(doc.to_string())
}
