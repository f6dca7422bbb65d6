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
