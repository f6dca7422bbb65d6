//! Goose's `config.yaml`: install hands its servers over as an editor's (see `editors`). Goose
//! re-reads nothing live (a session keeps the extensions it started with), so every `stdio`
//! and `streamable_http` extension moves, as written, under `extensions` in
//! `mcp-reconcile.json` beside it (JSON, which is YAML: the layout reads it with Goose's
//! parser), and the gateway becomes one `stdio` extension there; Goose's own kinds (`builtin`,
//! `platform`, ...) stay. Goose itself rewrites the whole file on every change it makes (its
//! comments do not survive that), so this edit re-writes the YAML too; uninstall still puts
//! the original bytes back while nothing but install touched the file.

use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use serde_norway::{Mapping, Value as Yaml};

use super::{jsonc, GATEWAY};

/// The key Goose keeps its extensions under.
const KEY: &str = "extensions";

/// Whether the editor's file is YAML (Goose's `config.yaml`), edited here, not as JSON.
pub(super) fn is_yaml(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "yaml")
}

/// The document's top mapping (an empty file is an empty one).
fn document(text: &str) -> anyhow::Result<Mapping> {
    if text.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match serde_norway::from_str(text).context("not valid YAML")? {
        Yaml::Mapping(map) => Ok(map),
        Yaml::Null => Ok(Mapping::new()),
        _ => bail!("its top level is not a YAML mapping"),
    }
}

/// The document's extensions.
fn extensions(doc: &Mapping) -> anyhow::Result<Mapping> {
    match doc.get(KEY) {
        None | Some(Yaml::Null) => Ok(Mapping::new()),
        Some(Yaml::Mapping(map)) => Ok(map.clone()),
        Some(_) => bail!("its \"extensions\" is not a mapping"),
    }
}

/// The document with `extensions`, as YAML text.
fn write(mut doc: Mapping, extensions: Mapping) -> anyhow::Result<String> {
    doc.insert(Yaml::from(KEY), Yaml::Mapping(extensions));
    serde_norway::to_string(&Yaml::Mapping(doc)).context("cannot be written as YAML")
}

/// Whether the gateway can start the extension (Goose's own kinds stay with Goose).
fn movable(extension: &Yaml) -> bool {
    matches!(
        extension.get("type").and_then(Yaml::as_str),
        Some("stdio" | "streamable_http")
    )
}

/// The gateway's entry (`command`, `args`, `env`) as a Goose extension.
fn extension_of(entry: &Value) -> Value {
    json!({
        "enabled": true,
        "type": "stdio",
        "name": GATEWAY,
        "description": "mcp-reconcile: every server, edits applied live",
        "cmd": entry["command"],
        "args": entry["args"],
        "envs": entry.get("env").cloned().unwrap_or_else(|| json!({})),
        "timeout": 300,
    })
}

/// `(config.yaml, sidecar)` after install: every extension the gateway can start moved from
/// `config.yaml` into the sidecar's `extensions` (one of the same name there is replaced: the
/// config's is the newer), and the gateway's extension set.
pub(super) fn install(
    config: &str,
    sidecar: &str,
    entry: &Value,
) -> anyhow::Result<(String, String)> {
    let doc = document(config)?;
    let mut exts = extensions(&doc)?;
    let (original_sidecar, mut sidecar) = (sidecar, sidecar.to_owned());
    for (key, extension) in exts.clone() {
        let Some(name) = key.as_str().filter(|n| *n != GATEWAY) else {
            continue;
        };
        if !movable(&extension) {
            continue;
        }
        let json = serde_json::to_value(&extension)
            .with_context(|| format!("the extension {name:?} has no JSON form"))?;
        sidecar = jsonc::set(&sidecar, &[KEY], name, &json)?;
        exts.remove(&key);
    }
    let gateway = serde_norway::to_value(extension_of(entry)).context("the gateway's entry")?;
    let moved = sidecar != original_sidecar;
    if !moved && exts.get(GATEWAY) == Some(&gateway) {
        // Installed already: the text stays as it is, byte for byte.
        return Ok((config.to_owned(), sidecar));
    }
    exts.insert(Yaml::from(GATEWAY), gateway);
    Ok((write(doc, exts)?, sidecar))
}

/// `config.yaml` after uninstall, when it changed since install: without the gateway's
/// extension, and with the sidecar's extensions back (one `config.yaml` has by then keeps
/// Goose's version).
pub(super) fn uninstall(config: &str, sidecar: &str) -> anyhow::Result<String> {
    let doc = document(config)?;
    let mut exts = extensions(&doc)?;
    let mut changed = exts.remove(GATEWAY).is_some();
    for name in jsonc::keys(sidecar, &[KEY]) {
        if exts.contains_key(name.as_str()) {
            continue;
        }
        if let Some(extension) = jsonc::get(sidecar, &[KEY], &name) {
            let yaml = serde_norway::to_value(extension).context("an extension as YAML")?;
            exts.insert(Yaml::from(name), yaml);
            changed = true;
        }
    }
    // Nothing to take out or put back: the text stays as it is, byte for byte (uninstall
    // computes again on a file it has just restored).
    if !changed {
        return Ok(config.to_owned());
    }
    write(doc, exts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n    type: builtin\n    name: developer\n  github:\n    enabled: true\n    type: stdio\n    name: GitHub\n    cmd: npx\n    args: [-y, gh]\n    envs: {GITHUB_TOKEN: t}\n";

    /// The servers move beside and come back; Goose's own extensions and settings stay; a
    /// second install changes nothing.
    #[test]
    fn gooses_extensions_move_beside_and_come_back() -> anyhow::Result<()> {
        let entry = json!({"command": "mcp-reconcile", "args": ["serve"], "env": {"M": "goose"}});
        let (config, sidecar) = install(CONFIG, "", &entry)?;
        let doc = document(&config)?;
        let exts = extensions(&doc)?;
        let names: Vec<_> = exts.keys().filter_map(Yaml::as_str).collect();
        assert_eq!(names, ["developer", GATEWAY]);
        assert_eq!(
            doc.get("GOOSE_PROVIDER").and_then(Yaml::as_str),
            Some("openai")
        );
        assert_eq!(exts[GATEWAY]["cmd"].as_str(), Some("mcp-reconcile"));
        assert_eq!(exts[GATEWAY]["envs"]["M"].as_str(), Some("goose"));
        assert_eq!(
            jsonc::get(&sidecar, &[KEY], "github").map(|g| g["envs"]["GITHUB_TOKEN"].clone()),
            Some(json!("t"))
        );
        let (again, same) = install(&config, &sidecar, &entry)?;
        let commented = format!("# kept\n{config}");
        assert_eq!(
            install(&commented, &sidecar, &entry)?.0,
            commented,
            "installed already"
        );
        assert_eq!(
            (again.as_str(), same.as_str()),
            (config.as_str(), sidecar.as_str())
        );

        let restored = uninstall(&config, &sidecar)?;
        assert_eq!(
            uninstall(&restored, &sidecar)?,
            restored,
            "a second pass changes nothing"
        );
        let back = document(&restored)?;
        let names: Vec<_> = extensions(&back)?
            .keys()
            .filter_map(Yaml::as_str)
            .map(str::to_owned)
            .collect();
        assert_eq!(names, ["developer", "github"]);
        assert!(install("extensions: [a]", "", &entry).is_err());
        Ok(())
    }
}
