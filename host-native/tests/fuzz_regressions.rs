//! The client-file fuzz targets' entry points (`mcp_reconcile::inputs::fuzz`) on their seed
//! corpus (`fuzz/corpus/<target>/`), and every input a fuzz run found to fail, by name: the
//! seeds stay real-looking files each parser reads as meant, and what once failed stays fixed.

use std::fs;
use std::path::{Path, PathBuf};

use mcp_reconcile::inputs::fuzz;

/// The seed files of fuzz target `target`, by name.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a seed").path();
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, fs::read(&path).expect("a seed's bytes"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{target} has seeds");
    files
}

/// A private directory for the plugin target's files.
fn plugin_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_path_buf();
    (dir, path)
}

/// Guards the JSON client seeds: each reads as its client's file, with no load error.
#[test]
fn every_json_client_seed_parses_as_its_clients_file() {
    for (name, data) in seeds("client_json") {
        let parsed = fuzz::client_json(&data);
        assert!(!parsed.starts_with("error:"), "{name}: {parsed}");
    }
}

/// Guards the TOML client seeds: each reads as Codex's file, with its servers.
#[test]
fn every_codex_seed_parses_with_its_servers() {
    for (name, data) in seeds("client_toml") {
        let parsed = fuzz::client_toml(&data);
        assert!(!parsed.starts_with("error:"), "{name}: {parsed}");
        assert!(parsed.contains("\"fs\""), "{name}: {parsed}");
    }
}

/// Guards the plugin seeds: the installed plugin's servers are read from its files.
#[test]
fn the_plugin_seed_reads_the_plugins_own_files() {
    let (_keep, dir) = plugin_dir();
    let by_name: Vec<(String, String)> = seeds("claude_plugin")
        .into_iter()
        .map(|(name, data)| (name, fuzz::claude_plugin(&dir, &data)))
        .collect();
    let full = &by_name.iter().find(|(n, _)| n == "full").expect("full").1;
    for server in ["plugin:kit:inline", "plugin:kit:db", "plugin:kit:web"] {
        assert!(full.contains(server), "{server}: {full}");
    }
    let old = &by_name
        .iter()
        .find(|(n, _)| n == "old-version")
        .expect("old")
        .1;
    assert!(old.starts_with("error: not version 2"), "{old}");
}

/// Guards the language-server seeds: each converts and parses to its server.
#[test]
fn every_language_server_seed_converts_and_parses() {
    for (name, data) in seeds("lsp_formats") {
        let parsed = fuzz::lsp_file(&data);
        assert!(
            !parsed.is_empty() && !parsed.starts_with("Err"),
            "{name}: {parsed}"
        );
    }
}

/// `f` run on its own thread: its answer, or `None` when it has not answered within a generous
/// deadline (a loop that never ends fails the test instead of hanging it).
fn answers<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(45)).ok()
}

/// Guards `jsonc_edit`'s first finding: a stray `]`, `}` or `/` where a value should be made
/// install's JSONC scanner loop forever; it is an error now, and the file is left alone.
#[test]
fn a_stray_bracket_or_slash_in_a_jsonc_file_is_an_error_not_a_hang() {
    use mcp_reconcile::install::jsonc;
    for text in [
        "{\n  /* block */ \"mcp\": {\"allowe\"]},\n}",
        "{\"a\": [1, }]}",
        "{\"a\": / }",
    ] {
        let owned = text.to_owned();
        let keys = answers(move || jsonc::keys(&owned, &["mcp"])).expect("keys answers");
        assert!(keys.is_empty(), "{text}: {keys:?}");
        let owned = text.to_owned();
        let set = answers(move || {
            jsonc::set(
                &owned,
                &["mcp"],
                "allowed",
                &serde_json::json!(["reconcile"]),
            )
            .map_err(|e| e.to_string())
        })
        .expect("set answers");
        assert!(set.is_err(), "{text}: {set:?}");
    }
}

/// Guards `jsonc_edit`'s second finding: a member added to an object that held only a line
/// comment went after the comment on its line, so the comment swallowed the closing brace and
/// the file no longer parsed.
#[test]
fn a_member_added_to_an_object_holding_only_a_comment_keeps_the_file_valid() {
    use mcp_reconcile::install::jsonc;
    let value = serde_json::json!(["reconcile"]);
    for (text, path, comment) in [
        ("{\n  // no servers yet\n}\n", &[][..], "// no servers yet"),
        (
            "{\"mcp\": {\n    // allowed: [\"a\"]\n  }}",
            &["mcp"][..],
            "// allowed: [\"a\"]",
        ),
        ("{ /* empty */ }", &[][..], "/* empty */"),
    ] {
        let set = jsonc::set(text, path, "allowed", &value).expect("set");
        assert!(
            mcp_reconcile_kernel::json::parse_jsonc(&set).is_ok(),
            "{text:?} became {set:?}"
        );
        assert_eq!(
            jsonc::get(&set, path, "allowed"),
            Some(value.clone()),
            "{set}"
        );
        assert!(set.contains(comment), "the comment stays: {set}");
    }
}
