//! Entries merged field by field across a client's files (Codex's `config.toml` files): which
//! files a file merges over is its kind's `merges_over` (`Client`), set by the client's
//! `files`; `Admission` applies it to every file alike.

use std::path::PathBuf;

use mcp_reconcile_kernel::{LayerSource, Object, ServerConfig, Servers, Value};

use super::ClientContent;

/// `content`'s entries as a client that merges its files takes them: each merged field by
/// field over the entries of the same name in the earlier files of kinds `bases` (in file
/// order; tables key by key), the later file's fields winning. The merged entry stays in
/// `content`'s layer.
pub(super) fn merged(
    mut content: ClientContent,
    read: &[(PathBuf, ClientContent)],
    bases: &[LayerSource],
) -> ClientContent {
    if bases.is_empty() {
        return content;
    }
    let below: Vec<&(LayerSource, Servers, Servers)> = read
        .iter()
        .flat_map(|(_, c)| &c.layers)
        .filter(|(source, _, _)| bases.contains(source))
        .collect();
    for (_, used, written) in &mut content.layers {
        for (servers, pick) in [(used, 1), (written, 2)] {
            let names: Vec<String> = servers.keys().cloned().collect();
            for name in names {
                let base = below
                    .iter()
                    .filter_map(|layer| match pick {
                        1 => layer.1.get(&name),
                        _ => layer.2.get(&name),
                    })
                    .fold(None, |acc: Option<Object>, entry| {
                        Some(match acc {
                            Some(acc) => deep_merge(&acc, entry.object()),
                            None => entry.object().clone(),
                        })
                    });
                if let (Some(base), Some(over)) = (base, servers.get(&name)) {
                    let merged = deep_merge(&base, over.object());
                    servers.insert(name, ServerConfig::new(merged));
                }
            }
        }
    }
    content
}

/// `over` laid over `base`: objects merged key by key, anything else replaced.
fn deep_merge(base: &Object, over: &Object) -> Object {
    let mut out = base.clone();
    for (key, value) in over {
        let merged = match (out.get(key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => Value::Object(deep_merge(b, o)),
            _ => value.clone(),
        };
        out.insert(key.clone(), merged);
    }
    out
}
