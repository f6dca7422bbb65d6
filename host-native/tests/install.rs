//! `install CLIENT` / `uninstall CLIENT` on real files in each client's format (under a temp
//! `HOME`): the gateway added and the client limited to it, the rest of each file byte for
//! byte as it was; a second install changes nothing; `--dry-run` changes nothing; uninstall
//! restores every file byte-identical (or, after the client changed it, takes out only what
//! install added); and the installed gateway, started as the client starts it, reaches the
//! user's servers under short names and never itself.

use crate::common;
use crate::install_home;

use std::fs;
use std::path::Path;
use std::process::Stdio;

use common::*;
use install_home::{jsonc, read, Home};
use serde_json::{json, Value};

/// A `~/.claude.json` as Claude Code writes it (two-space JSON), with a user server.
const CLAUDE_STATE: &str = r#"{
  "numStartups": 12,
  "installMethod": "npm",
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {
        "GITHUB_TOKEN": "ghp_not_a_real_token"
      }
    }
  },
  "projects": {}
}
"#;

#[test]
fn claude_install_is_exact_idempotent_and_undone_byte_for_byte() {
    let h = Home::new();
    let state = h.write(".claude.json", CLAUDE_STATE);
    let settings = h.home().join(".claude/settings.json");

    let (ok, dry) = h.run(&["install", "claude", "--dry-run"]);
    assert!(ok, "{dry}");
    assert!(dry.contains("+") && dry.contains("\"reconcile\""), "{dry}");
    assert!(
        !dry.contains("ghp_not_a_real_token"),
        "no secret in the diff: {dry}"
    );
    assert_eq!(read(&state), CLAUDE_STATE, "a dry run changes nothing");
    assert!(!settings.exists());

    let (ok, said) = h.run(&["install", "claude"]);
    assert!(ok, "{said}");
    let installed: Value = serde_json::from_str(&read(&state)).expect("still JSON");
    let entry = &installed["mcpServers"]["reconcile"];
    assert_eq!(
        entry["args"],
        json!(["serve", "--layout", "claude", "--tool-names", "short"])
    );
    assert_eq!(entry["env"]["MCP_RECONCILE_INSTALLED"], "claude");
    assert_eq!(
        installed["mcpServers"]["github"]["env"]["GITHUB_TOKEN"],
        "ghp_not_a_real_token"
    );
    let allow: Value = serde_json::from_str(&read(&settings)).expect("settings JSON");
    assert_eq!(
        allow["allowedMcpServers"],
        json!([{"serverName": "reconcile"}])
    );
    assert!(
        read(&state).starts_with("{\n  \"numStartups\": 12,\n  \"installMethod\": \"npm\",\n  \"mcpServers\": {\n    \"github\": {"),
        "the rest of the file is as it was:\n{}",
        read(&state)
    );
    let after_first = (read(&state), read(&settings));

    let (ok, again) = h.run(&["install", "claude"]);
    assert!(ok && again.contains("already installed"), "{again}");
    assert_eq!((read(&state), read(&settings)), after_first, "idempotent");

    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(ok, "{said}");
    assert_eq!(read(&state), CLAUDE_STATE, "byte-identical");
    assert!(!settings.exists(), "a file install made is removed again");
    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(ok && said.contains("not installed"), "{said}");
}

/// `install` run from a binary that is not the user's `mcp-reconcile` command (an npx cache, a
/// build folder) writes a per-user, versioned copy's path, which runs; run from the user's own
/// command (on `PATH`), it writes that command's path.
#[test]
fn install_writes_a_path_that_outlives_the_binary_that_ran_it() {
    let h = Home::new();
    let state = h.write(".claude.json", CLAUDE_STATE);
    let out = h
        .command()
        .args(["install", "claude"])
        .env("PATH", "/usr/bin:/bin")
        .env("MCP_RECONCILE_TEST_VERSION", "9.8.7")
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let installed: Value = serde_json::from_str(&read(&state)).expect("JSON");
    let copy = h
        .home()
        .join(".local/share/mcp-reconcile/bin/9.8.7/mcp-reconcile");
    assert_eq!(
        installed["mcpServers"]["reconcile"]["command"],
        json!(copy.to_string_lossy()),
        "{}",
        output_text(&out)
    );
    assert!(output_text(&out).contains("put this binary at"));
    let version = std::process::Command::new(&copy)
        .arg("--version")
        .output()
        .expect("the copy runs");
    assert!(output_text(&version).starts_with("mcp-reconcile "));
    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(ok, "{said}");

    // From the user's own command: that path, nothing copied.
    let bin = fs::canonicalize(cli()).expect("real path");
    let dir = bin.parent().expect("dir").to_string_lossy().into_owned();
    let out = h
        .command()
        .args(["install", "claude"])
        .env("PATH", format!("{dir}:/usr/bin:/bin"))
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let installed: Value = serde_json::from_str(&read(&state)).expect("JSON");
    assert_eq!(
        installed["mcpServers"]["reconcile"]["command"],
        json!(bin.to_string_lossy())
    );
    assert!(!output_text(&out).contains("put this binary at"));
}

/// After `install claude`, Claude Code refuses `claude mcp add`; `mcp-reconcile mcp add`
/// writes the entry where Claude Code would (local scope: this project's key in
/// `~/.claude.json`), `mcp get` shows it without the values of its variables, `mcp list`
/// lists it, and `mcp remove` takes it out again.
#[test]
fn mcp_add_get_list_remove_work_behind_the_installed_gateway() {
    let h = Home::new();
    let state = h.write(".claude.json", CLAUDE_STATE);
    let (ok, said) = h.run(&["install", "claude"]);
    assert!(ok, "{said}");
    let fixture = fixture().to_string_lossy().into_owned();
    let (ok, said) = h.run(&[
        "mcp",
        "add",
        "extra",
        "-e",
        "EXTRA_TOKEN=s3cret-value",
        "--",
        &fixture,
        "--name",
        "extra",
    ]);
    assert!(ok && said.contains("local scope"), "{said}");
    let written: Value = serde_json::from_str(&read(&state)).expect("JSON");
    let key = fs::canonicalize(h.path("project")).expect("real path");
    let entry = &written["projects"][key.to_string_lossy().as_ref()]["mcpServers"]["extra"];
    assert_eq!(
        entry,
        &json!({"type": "stdio", "command": fixture, "args": ["--name", "extra"],
                "env": {"EXTRA_TOKEN": "s3cret-value"}}),
        "{written}"
    );
    assert!(
        written["mcpServers"].get("reconcile").is_some(),
        "the gateway stays"
    );

    let (ok, got) = h.run(&["mcp", "get", "extra"]);
    assert!(
        ok && got.contains("EXTRA_TOKEN (values not shown)"),
        "{got}"
    );
    assert!(!got.contains("s3cret-value"), "no secret value: {got}");
    let (ok, listed) = h.run(&["mcp", "list"]);
    assert!(ok && listed.contains("extra"), "{listed}");

    let (ok, said) = h.run(&["mcp", "remove", "extra"]);
    assert!(ok && said.contains("local scope"), "{said}");
    let left: Value = serde_json::from_str(&read(&state)).expect("JSON");
    assert!(
        left["projects"][key.to_string_lossy().as_ref()]["mcpServers"]
            .get("extra")
            .is_none(),
        "{left}"
    );
    let (ok, said) = h.run(&["mcp", "remove", "extra"]);
    assert!(!ok && said.contains("no server named"), "{said}");
}

/// `install claude --permissions` renames the user's permission rules to the gateway's tool
/// names (shown first with `--dry-run`, which changes nothing); uninstall names them back.
#[test]
fn permission_rules_follow_the_gateway_and_come_back() {
    let h = Home::new();
    h.write(".claude.json", CLAUDE_STATE);
    let settings = h.write(
        ".claude/settings.json",
        "{\n  \"permissions\": {\"allow\": [\"mcp__github__create_issue\", \"mcp__notes\", \"Read\"]}\n}\n",
    );
    let original = read(&settings);
    let (ok, dry) = h.run(&["install", "claude", "--permissions", "--dry-run"]);
    assert!(
        ok && dry.contains("mcp__reconcile__github__create_issue"),
        "{dry}"
    );
    assert_eq!(read(&settings), original, "a dry run changes nothing");

    let (ok, said) = h.run(&["install", "claude", "--permissions"]);
    assert!(ok, "{said}");
    let installed: Value = serde_json::from_str(&read(&settings)).expect("JSON");
    assert_eq!(
        installed["permissions"]["allow"],
        json!([
            "mcp__reconcile__github__create_issue",
            "mcp__reconcile__notes__*",
            "Read"
        ])
    );
    assert_eq!(
        installed["allowedMcpServers"],
        json!([{"serverName": "reconcile"}])
    );

    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(ok, "{said}");
    let back: Value = serde_json::from_str(&read(&settings)).expect("JSON");
    assert_eq!(
        back["permissions"]["allow"],
        json!(["mcp__github__create_issue", "mcp__notes__*", "Read"])
    );
    assert!(back.get("allowedMcpServers").is_none(), "{back}");
}

#[test]
fn uninstall_after_the_client_changed_the_file_takes_out_only_the_gateway() {
    let h = Home::new();
    let state = h.write(".claude.json", CLAUDE_STATE);
    assert!(h.run(&["install", "claude"]).0);
    // What `claude mcp add notes -- notes-server` does meanwhile (Claude rewrites the file).
    let mut changed: Value = serde_json::from_str(&read(&state)).expect("json");
    changed["mcpServers"]["notes"] =
        json!({"type": "stdio", "command": "notes-server", "args": []});
    changed["numStartups"] = json!(13);
    fs::write(
        &state,
        serde_json::to_string_pretty(&changed).expect("json"),
    )
    .expect("write");

    let (ok, said) = h.run(&["uninstall", "claude"]);
    assert!(
        ok && said.contains("took out only what install added"),
        "{said}"
    );
    let left: Value = serde_json::from_str(&read(&state)).expect("json");
    assert!(left["mcpServers"].get("reconcile").is_none());
    assert_eq!(left["mcpServers"]["notes"]["command"], "notes-server");
    assert_eq!(left["numStartups"], 13);
}

#[test]
fn gemini_and_qwen_install_limit_the_client_with_mcp_allowed() {
    for (client, rel) in [
        ("gemini", ".gemini/settings.json"),
        ("qwen", ".qwen/settings.json"),
    ] {
        let h = Home::new();
        let original = "{\n  // my settings\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"notes\": { \"command\": \"notes\" }\n  }\n}\n";
        let settings = h.write(rel, original);
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{said}");
        let text = read(&settings);
        assert!(text.contains("// my settings"), "comments kept: {text}");
        let value = mcp_reconcile_kernel::json::parse_jsonc(&text).expect("jsonc");
        let value: Value = serde_json::from_str(&value.to_json()).expect("json");
        assert_eq!(value["mcp"]["allowed"], json!(["reconcile"]));
        assert_eq!(value["mcpServers"]["reconcile"]["args"][2], client);
        // qwen-code lists tools once per session: its first listing waits longer for a slow
        // server; Gemini CLI re-lists on list_changed and keeps the default grace.
        let grace = &value["mcpServers"]["reconcile"]["env"]["MCP_RECONCILE_START_GRACE_MS"];
        match client {
            "qwen" => assert_eq!(grace, &json!("5000")),
            _ => assert!(grace.is_null(), "{value}"),
        }
        assert!(h.run(&["uninstall", client]).0);
        assert_eq!(read(&settings), original, "{client}: byte-identical");
    }
}

/// The editors have no switch that keeps a server listed but not started: install moves the
/// user's servers, as written, to `mcp-reconcile.json` beside the editor's file and leaves the
/// gateway there; uninstall puts the file back byte for byte and removes the sidecar.
#[test]
fn editor_install_moves_the_servers_beside_and_uninstall_puts_them_back() {
    for (client, rel, key) in [
        ("cursor", ".cursor/mcp.json", "mcpServers"),
        ("vscode", ".config/Code/User/mcp.json", "servers"),
        ("copilot", ".copilot/mcp-config.json", "mcpServers"),
    ] {
        let h = Home::new();
        let original = format!(
            "{{\n  // my servers\n  \"{key}\": {{\n    \"github\": {{ \"command\": \"npx\", \"args\": [\"-y\", \"gh\"] }},\n    \"web\": {{ \"url\": \"https://example.test/mcp\" }}\n  }}\n}}\n"
        );
        let file = h.write(rel, &original);
        let sidecar = file.with_file_name("mcp-reconcile.json");
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        let editor = jsonc(&read(&file));
        let names: Vec<&String> = editor[key].as_object().expect("servers").keys().collect();
        assert_eq!(names, ["reconcile"], "{client}: only the gateway is left");
        assert_eq!(editor[key]["reconcile"]["args"][2], client);
        let moved = jsonc(&read(&sidecar));
        assert_eq!(
            moved[key]["github"],
            json!({"command": "npx", "args": ["-y", "gh"]}),
            "{client}"
        );
        assert_eq!(
            moved[key]["web"],
            json!({"url": "https://example.test/mcp"})
        );
        let (ok, said) = h.run(&["install", client]);
        assert!(ok && said.contains("already installed"), "{client}: {said}");

        assert!(h.run(&["uninstall", client]).0);
        assert_eq!(read(&file), original, "{client}: byte-identical");
        assert!(!sidecar.exists(), "{client}: the sidecar is gone");
    }
}

/// A server added in the editor's file while installed is handed over by the next install; an
/// edit made in the sidecar survives uninstall (the servers go back as the sidecar has them).
#[test]
fn editor_uninstall_keeps_what_changed_while_installed() {
    let h = Home::new();
    let file = h.write(
        ".cursor/mcp.json",
        r#"{"mcpServers": {"github": {"command": "npx", "args": ["gh"]}}}"#,
    );
    let sidecar = file.with_file_name("mcp-reconcile.json");
    assert!(h.run(&["install", "cursor"]).0);
    // Added with Cursor's own UI meanwhile.
    let mut editor = jsonc(&read(&file));
    editor["mcpServers"]["notes"] = json!({"command": "notes-server"});
    fs::write(&file, serde_json::to_string_pretty(&editor).expect("json")).expect("write");
    let (ok, said) = h.run(&["install", "cursor"]);
    assert!(ok, "{said}");
    assert_eq!(
        jsonc(&read(&sidecar))["mcpServers"]["notes"],
        json!({"command": "notes-server"}),
        "handed over"
    );
    // An edit of a moved server, made where it now lives.
    let mut side = jsonc(&read(&sidecar));
    side["mcpServers"]["github"]["args"] = json!(["gh", "--verbose"]);
    fs::write(&sidecar, serde_json::to_string_pretty(&side).expect("json")).expect("write");

    let (ok, said) = h.run(&["uninstall", "cursor"]);
    assert!(ok, "{said}");
    let back = jsonc(&read(&file));
    assert!(back["mcpServers"].get("reconcile").is_none(), "{back}");
    assert_eq!(
        back["mcpServers"]["github"]["args"],
        json!(["gh", "--verbose"])
    );
    assert_eq!(back["mcpServers"]["notes"]["command"], "notes-server");
    assert!(!sidecar.exists());
}

#[test]
fn install_refuses_to_replace_a_users_own_allow_list() {
    let h = Home::new();
    let original = r#"{"mcp": {"allowed": ["notes"]}, "mcpServers": {"notes": {"command": "n"}}}"#;
    let settings = h.write(".gemini/settings.json", original);
    let (ok, said) = h.run(&["install", "gemini"]);
    assert!(!ok && said.contains("mcp.allowed"), "{said}");
    assert_eq!(read(&settings), original);
}

#[test]
fn codex_install_switches_the_other_servers_to_the_gateway_and_back() {
    let h = Home::new();
    let original = "# my Codex config\nmodel = \"o3\"\n\n[mcp_servers.notes]\ncommand = \"notes\" # the notes server\nargs = [\"--fast\"]\n\n[mcp_servers.off]\ncommand = \"off\"\nenabled = false\n";
    let config = h.write(".codex/config.toml", original);
    let (ok, said) = h.run(&["install", "codex"]);
    assert!(ok, "{said}");
    let text = read(&config);
    assert!(
        text.contains("# the notes server") && text.contains("# my Codex config"),
        "{text}"
    );
    let table: toml::Table = text.parse().expect("toml");
    let servers = table["mcp_servers"].as_table().expect("servers");
    assert_eq!(servers["notes"]["enabled"].as_bool(), Some(false));
    assert!(
        text.contains("enabled = false # mcp-reconcile: reached through the gateway"),
        "{text}"
    );
    assert_eq!(servers["reconcile"]["args"][2].as_str(), Some("codex"));
    assert!(h.run(&["uninstall", "codex"]).0);
    assert_eq!(read(&config), original, "byte-identical");
}

/// The installed gateway, started the way Claude Code starts it (the entry's command and
/// args, in the project directory), reaches the user's servers under short names and skips
/// its own entry without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_installed_claude_gateway_reaches_the_users_servers() {
    let h = Home::new();
    let state = json!({
        "mcpServers": {
            "notes": {"type": "stdio", "command": fixture().to_string_lossy(),
                      "args": ["--name", "notes", "--tools", "echo"]},
        },
        "projects": {}
    });
    let state_path = h.write(
        ".claude.json",
        &serde_json::to_string_pretty(&state).expect("json"),
    );
    let (ok, said) = h.run(&["install", "claude"]);
    assert!(ok, "{said}");
    let installed: Value = serde_json::from_str(&read(&state_path)).expect("json");
    let entry = &installed["mcpServers"]["reconcile"];

    let runtime = h.path("run");
    fs::create_dir_all(&runtime).expect("runtime");
    let p = Project::new();
    let _daemon = {
        let mut command = h.command();
        command
            .args(["daemon", "--drain-ms", "300", "--idle-exit-ms", "800"])
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdout(Stdio::null())
            .stderr(fs::File::create(p.path("daemon.log")).expect("log"));
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let daemon = Group::new(command.spawn().expect("daemon"));
        wait_until("the daemon listens", || {
            std::os::unix::net::UnixStream::connect(runtime.join("mcp-reconcile/daemon.sock"))
                .is_ok()
        });
        daemon
    };
    // As Claude Code starts it: the entry's command and args, its env, in the project.
    let mut command = h.command_of(Path::new(entry["command"].as_str().expect("command")));
    command
        .args(
            entry["args"]
                .as_array()
                .expect("args")
                .iter()
                .map(|a| a.as_str().expect("arg")),
        )
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("MCP_RECONCILE_INSTALLED", "claude")
        .stderr(fs::File::create(p.path("serve.log")).expect("log"));
    command.stdin(Stdio::piped());
    let served = Served::spawn(command, p.path("serve.log")).await;
    let tools = served.wait_tool("notes__echo").await;
    assert!(
        tools.iter().all(|t| !t.starts_with("reconcile__")),
        "{tools:?}"
    );
    let result = served
        .call("notes__echo", json!({"text": "through the gateway"}))
        .await;
    assert_eq!(text(&result), "through the gateway");
    assert!(
        !served.log().contains("runs this gateway itself"),
        "the installed entry is skipped silently:\n{}",
        served.log()
    );
}
