//! `install` run again, on files the user changed in between, and on files install must not
//! turn into something else: a later uninstall keeps every server and secret added since the
//! first install (the originals are put back byte for byte only while nothing but install
//! touched a file); a symlinked client file stays a link, written through to its target; the
//! directories install makes are private whatever the umask.

use crate::common;
use crate::install_home;

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use common::*;
use install_home::{jsonc, read, Home};
use serde_json::{json, Value};

/// This binary at a second path (the user moved or upgraded it), so a second install rewrites
/// the gateway's entry even where nothing else is left to change. A hard link where the
/// filesystem allows one; `current_exe` names the path it was started by.
fn moved_cli(h: &Home) -> PathBuf {
    let dir = h.path("bin");
    fs::create_dir_all(&dir).expect("bin");
    let moved = dir.join("mcp-reconcile");
    if fs::hard_link(cli(), &moved).is_err() {
        fs::copy(cli(), &moved).expect("copy the binary");
    }
    moved
}

/// Runs `install client` from the moved binary.
fn install_from(h: &Home, program: &Path, client: &str) {
    let out = h
        .command_of(program)
        .args(["install", client])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", output_text(&out));
}

/// Adds the server `added` with a secret in its env to the JSON file at `path` under `key`,
/// as the client's own `mcp add` does (it rewrites the whole file).
fn add_json_server(path: &Path, key: &str) {
    let mut value = jsonc(&read(path));
    value[key]["added"] = json!({
        "command": "added-server",
        "args": [],
        "env": {"ADDED_TOKEN": "added-secret-value"}
    });
    fs::write(path, serde_json::to_string_pretty(&value).expect("json")).expect("write");
}

/// The server added between two installs, and its secret, are in `value`'s `key`; the gateway
/// is not.
fn assert_kept(value: &Value, key: &str, client: &str) {
    assert_eq!(
        value[key]["added"]["env"]["ADDED_TOKEN"], "added-secret-value",
        "{client}: the server added between the installs and its secret survive: {value}"
    );
    assert!(
        value[key].get("reconcile").is_none(),
        "{client}: the gateway is gone: {value}"
    );
}

/// Install, the user adds a server with a secret, install again (from a moved binary), then
/// uninstall: the added server and its secret are in the client's file, the gateway is gone —
/// for Claude Code, a JSON settings client (Gemini CLI) and an editor (Cursor).
#[test]
fn a_server_added_between_two_installs_survives_uninstall() {
    for (client, rel, key) in [
        ("claude", ".claude.json", "mcpServers"),
        ("gemini", ".gemini/settings.json", "mcpServers"),
        ("cursor", ".cursor/mcp.json", "mcpServers"),
    ] {
        let h = Home::new();
        let file = h.write(
            rel,
            "{\n  \"mcpServers\": {\n    \"first\": { \"command\": \"first-server\" }\n  }\n}\n",
        );
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        add_json_server(&file, key);
        install_from(&h, &moved_cli(&h), client);

        let (ok, said) = h.run(&["uninstall", client]);
        assert!(ok, "{client}: {said}");
        let value = jsonc(&read(&file));
        assert_kept(&value, key, client);
        assert_eq!(value[key]["first"]["command"], "first-server", "{client}");
        let settings = h.home().join(".claude/settings.json");
        if client == "claude" && settings.exists() {
            assert!(jsonc(&read(&settings)).get("allowedMcpServers").is_none());
        }
        if client == "gemini" {
            assert!(value["mcp"].get("allowed").is_none(), "{value}");
        }
    }
}

/// Codex: a server `codex mcp add` wrote between two installs is switched off by the second
/// one; uninstall takes only install's switches and table out, and the server with its secret
/// stays.
#[test]
fn a_codex_server_added_between_two_installs_survives_uninstall() {
    let h = Home::new();
    let config = h.write(
        ".codex/config.toml",
        "model = \"o3\"\n\n[mcp_servers.first]\ncommand = \"first-server\"\n",
    );
    assert!(h.run(&["install", "codex"]).0);
    let mut text = read(&config);
    text.push_str(
        "\n[mcp_servers.added]\ncommand = \"added-server\"\n\n[mcp_servers.added.env]\nADDED_TOKEN = \"added-secret-value\"\n",
    );
    fs::write(&config, &text).expect("write");
    let (ok, said) = h.run(&["install", "codex"]);
    assert!(ok, "{said}");
    assert!(
        read(&config).contains("[mcp_servers.added]\ncommand = \"added-server\"\nenabled = false"),
        "{}",
        read(&config)
    );

    let (ok, said) = h.run(&["uninstall", "codex"]);
    assert!(ok, "{said}");
    let table: toml::Table = read(&config).parse().expect("toml");
    let servers = table["mcp_servers"].as_table().expect("servers");
    assert_eq!(
        servers["added"]["env"]["ADDED_TOKEN"].as_str(),
        Some("added-secret-value"),
        "{table}"
    );
    assert!(servers["added"].get("enabled").is_none(), "{table}");
    assert!(servers["first"].get("enabled").is_none(), "{table}");
    assert!(servers.get("reconcile").is_none(), "{table}");
}

/// Reinstalling from a moved binary when nothing else touched the files still lets uninstall
/// put the originals back byte for byte.
#[test]
fn only_installs_in_between_still_restore_byte_for_byte() {
    let h = Home::new();
    let original =
        "{\n  // mine\n  \"mcpServers\": {\n    \"first\": { \"command\": \"f\" }\n  }\n}\n";
    let file = h.write(".cursor/mcp.json", original);
    assert!(h.run(&["install", "cursor"]).0);
    install_from(&h, &moved_cli(&h), "cursor");
    let (ok, said) = h.run(&["uninstall", "cursor"]);
    assert!(ok && said.contains("restored"), "{said}");
    assert_eq!(read(&file), original);
    assert!(!file.with_file_name("mcp-reconcile.json").exists());
}

/// A symlinked `~/.claude.json` and `~/.codex/config.toml` (dotfiles kept elsewhere) stay
/// links through install and uninstall; the targets get the edits and their bytes back.
#[test]
fn a_symlinked_client_file_stays_a_link() {
    for (client, rel, original) in [
        (
            "claude",
            ".claude.json",
            "{\n  \"mcpServers\": {\n    \"first\": { \"command\": \"f\" }\n  }\n}\n",
        ),
        (
            "codex",
            ".codex/config.toml",
            "[mcp_servers.first]\ncommand = \"f\"\n",
        ),
    ] {
        let h = Home::new();
        let target = h.path("dotfiles/client-file");
        fs::create_dir_all(target.parent().expect("dir")).expect("dotfiles");
        fs::write(&target, original).expect("target");
        let link = h.home().join(rel);
        fs::create_dir_all(link.parent().expect("dir")).expect("dir");
        // Relative, as dotfile managers make them: from the link's own directory.
        let up = "../".repeat(rel.matches('/').count() + 1);
        std::os::unix::fs::symlink(format!("{up}dotfiles/client-file"), &link).expect("link");
        assert_eq!(read(&link), original, "{client}: the link resolves");

        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        assert!(
            link.symlink_metadata()
                .expect("lstat")
                .file_type()
                .is_symlink(),
            "{client}: still a link"
        );
        assert!(
            read(&target).contains("reconcile"),
            "{client}: the target got the edit"
        );

        let (ok, said) = h.run(&["uninstall", client]);
        assert!(ok, "{client}: {said}");
        assert!(
            link.symlink_metadata()
                .expect("lstat")
                .file_type()
                .is_symlink(),
            "{client}: a link after uninstall"
        );
        assert_eq!(
            read(&target),
            original,
            "{client}: the target's bytes are back"
        );
    }
}

/// Under `umask 000`, the directories install makes for a client's file and for its record
/// are 0700, and the files it makes 0600 (the sidecar too, made once there is a server to
/// move into it).
#[test]
fn install_makes_private_directories_whatever_the_umask() {
    let h = Home::new();
    let install = |client: &str| {
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
            .arg(cli())
            .args(["install", client]);
        let base = h.command();
        for (k, v) in base.get_envs() {
            match v {
                Some(v) => command.env(k, v),
                None => command.env_remove(k),
            };
        }
        command.current_dir(h.path("project"));
        let out = command.output().expect("runs");
        assert!(out.status.success(), "{client}: {}", output_text(&out));
    };
    for client in ["cursor", "claude"] {
        install(client);
    }
    // Cursor gets a server of its own; the next install moves it into a new sidecar.
    let cursor = h.home().join(".cursor/mcp.json");
    let mut value = jsonc(&read(&cursor));
    value["mcpServers"]["added"] = json!({"command": "added-server"});
    fs::write(&cursor, serde_json::to_string_pretty(&value).expect("json")).expect("write");
    install("cursor");
    let mode = |p: PathBuf| {
        fs::metadata(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    for dir in [
        h.home().join(".cursor"),
        h.home().join(".claude"),
        h.path("state/mcp-reconcile"),
        h.path("state/mcp-reconcile/install/cursor"),
    ] {
        assert_eq!(mode(dir.clone()), 0o700, "{}", dir.display());
    }
    for file in [
        h.home().join(".cursor/mcp.json"),
        h.home().join(".cursor/mcp-reconcile.json"),
        h.home().join(".claude/settings.json"),
        h.home().join(".claude.json"),
    ] {
        assert_eq!(mode(file.clone()), 0o600, "{}", file.display());
    }
}

/// A `~/.claude.json` over the 4 MiB bound of repository files (Claude Code keeps every
/// project's history there; users report 15–65 MB) is installed into and restored byte for
/// byte, and the servers behind the gateway are still read from it.
#[test]
fn a_large_claude_state_file_is_installed_and_restored() {
    let h = Home::new();
    let history: Vec<Value> = (0..80_000)
        .map(|i| json!({ "display": format!("prompt number {i} of a long history") }))
        .collect();
    let original = serde_json::to_string_pretty(&json!({
        "mcpServers": { "first": { "type": "stdio", "command": "first-server" } },
        "projects": { "/elsewhere": { "history": history } },
    }))
    .expect("json");
    assert!(original.len() > 5 * 1024 * 1024, "{}", original.len());
    let file = h.write(".claude.json", &original);

    let (ok, said) = h.run(&["install", "claude"]);
    assert!(ok, "{said}");
    let value = jsonc(&read(&file));
    assert!(value["mcpServers"].get("reconcile").is_some(), "{said}");
    assert_eq!(
        value["projects"]["/elsewhere"]["history"][59_999]["display"],
        "prompt number 59999 of a long history"
    );

    let out = h
        .command()
        .args(["status", "--layout", "claude", "--json"])
        .output()
        .expect("status");
    let status = output_text(&out);
    assert!(status.contains("first"), "{status}");
    assert!(!status.contains("larger than"), "{status}");

    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(ok, "{said}");
    assert!(
        read(&file) == original,
        "uninstall restores the large file byte for byte: {said}"
    );
}

/// Every file under `dir`, but the binaries install keeps under the data directory (shared by
/// every client's gateway), each with its text.
fn client_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.ends_with(".local/share/mcp-reconcile") {
            continue;
        }
        if path.is_dir() {
            found.extend(client_files(&path));
        } else {
            found.push((path.clone(), read(&path)));
        }
    }
    found.sort();
    found
}

/// Every client of the table of clients that `install` knows, on a home where it was never
/// set up (none of its files exists): install makes only files that name the gateway, a
/// second install changes nothing, and uninstall leaves the home as it was — no file made to
/// hold nothing, no empty sidecar left behind.
#[test]
fn every_installable_client_installs_and_uninstalls_on_a_fresh_home() {
    let installable = mcp_reconcile::inputs::CLIENTS
        .iter()
        .filter(|client| client.install.is_some());
    let mut seen = 0;
    for client in installable {
        seen += 1;
        let name = client.name;
        let h = Home::new();
        let (ok, said) = h.run(&["install", name]);
        assert!(ok, "{name}: {said}");
        let made = client_files(&h.home());
        assert!(!made.is_empty(), "{name}: install wrote nothing");
        for (path, text) in &made {
            assert!(
                text.contains("reconcile"),
                "{name}: {}: {text}",
                path.display()
            );
        }
        let (ok, said) = h.run(&["install", name]);
        assert!(ok, "{name}: {said}");
        assert_eq!(
            client_files(&h.home()),
            made,
            "{name}: install is idempotent"
        );
        let (ok, said) = h.run(&["uninstall", name]);
        assert!(ok, "{name}: {said}");
        assert_eq!(client_files(&h.home()), [], "{name}: uninstall left files");
    }
    assert!(seen >= 16, "only {seen} installable clients in the table");
}
