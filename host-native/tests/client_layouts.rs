//! Other clients' own files, read live (SPEC §15): a real `watch --layout <client>` over files
//! written in each client's format at its real default paths (under a temp `HOME`), with user,
//! project and policy scopes; every kind of edit hot-applied; an approval round trip; the
//! client's own rejection and policy honoured; an edit of an approved project entry asked
//! about again.

use crate::common;

use std::fs;
use std::path::PathBuf;

use common::machine::{reason, Machine};
use common::{fixture, pid_of, state_of};
use serde_json::{json, Value};

/// Gemini CLI trusts the project (`~/.gemini/trustedFolders.json`).
fn trust_in_gemini(m: &Machine) {
    let project = m.project().canonicalize().expect("project");
    m.write_json(
        &m.home().join(".gemini/trustedFolders.json"),
        &json!({ project.to_string_lossy(): "TRUST_FOLDER" }),
    );
}

/// Claude Code: user and local scopes in `~/.claude.json`, the project's `.mcp.json` (its
/// `${VAR:-default}` expanded), an approval round trip, a rejection in
/// `.claude/settings.local.json` honoured, the administrator's deny list honoured, and an edit
/// of an approved project entry asked about again.
#[test]
fn claude_codes_files_are_read_live() {
    let m = Machine::new("claude");
    let project = m.project().canonicalize().expect("project");
    let state = m.home().join(".claude.json");
    let write_state = |user: Value, local: Value| {
        m.write_json(
            &state,
            &json!({
                "numStartups": 3,
                "mcpServers": user,
                "projects": { project.to_string_lossy(): { "mcpServers": local, "allowedTools": [] } }
            }),
        );
    };
    let mut user = m.server("user1", "echo");
    user["type"] = json!("stdio");
    write_state(
        json!({ "user1": user }),
        json!({ "local1": m.server("local1", "echo") }),
    );
    let mut shared = m.server("shared", "echo");
    shared["env"] = json!({ "TOKEN": "${TEAM_TOKEN}", "MODE": "${UNSET_MODE:-fast}" });
    m.write_json(
        &m.project().join(".mcp.json"),
        &json!({ "mcpServers": { "shared": shared, "other": m.server("other", "echo") } }),
    );

    // Named in the repository's own Claude settings: the review says so, and it never approves.
    m.write_json(
        &m.project().join(".claude/settings.json"),
        &json!({ "enabledMcpjsonServers": ["other"] }),
    );
    let _watch = m.watch();
    let status = m.wait("user and local servers up, project ones pending", |s| {
        state_of(s, "user1") == "connected"
            && state_of(s, "local1") == "connected"
            && reason(s, "shared") == "pending_approval"
            && reason(s, "other") == "pending_approval"
    });
    let user_pid = pid_of(&status, "user1").expect("pid");
    assert!(
        m.log().contains(&format!(
            "the repository's own {} lists it in enabledMcpjsonServers — that is not an approval",
            project.join(".claude/settings.json").display()
        )),
        "{}",
        m.log()
    );

    // Approval round trip: approved with its hash, it starts.
    m.approve("shared");
    let status = m.wait("shared approved and up", |s| {
        state_of(s, "shared") == "connected"
    });
    let shared_pid = pid_of(&status, "shared").expect("pid");

    // A rejection in Claude's own settings wins over this host's approval.
    m.write_json(
        &m.project().join(".claude/settings.local.json"),
        &json!({ "disabledMcpjsonServers": ["shared"], "enabledMcpjsonServers": ["other"] }),
    );
    m.wait("shared rejected by Claude's settings", |s| {
        reason(s, "shared") == "rejected" && reason(s, "other") == "pending_approval"
    });
    fs::remove_file(m.project().join(".claude/settings.local.json")).expect("rm");
    let status = m.wait("shared back", |s| state_of(s, "shared") == "connected");
    assert_eq!(
        pid_of(&status, "user1"),
        Some(user_pid),
        "the user server was never touched"
    );

    // An edit of the approved project entry asks again (Claude itself would not).
    let mut edited = m.server("shared", "echo,add");
    edited["env"] = json!({ "TOKEN": "${TEAM_TOKEN}" });
    m.write_json(
        &m.project().join(".mcp.json"),
        &json!({ "mcpServers": { "shared": edited, "other": m.server("other", "echo") } }),
    );
    m.wait("the edited project entry pending again", |s| {
        reason(s, "shared") == "pending_approval"
    });
    assert!(
        !common::alive(shared_pid),
        "the old shared server was stopped when its entry changed"
    );

    // The local scope wins over the project's entry of the same name, whole, ungated.
    write_state(
        json!({ "user1": user }),
        json!({ "local1": m.server("local1", "echo"), "shared": m.server("shared", "add") }),
    );
    m.wait("the local entry replaces the project one", |s| {
        state_of(s, "shared") == "connected"
    });

    // The administrator's deny list (managed settings) turns a server off.
    m.write_json(
        &m.path("etc/managed-settings.json"),
        &json!({ "deniedMcpServers": [ { "serverName": "local1" } ] }),
    );
    let status = m.wait("local1 blocked by policy", |s| {
        reason(s, "local1") == "blocked"
    });
    assert_eq!(pid_of(&status, "user1"), Some(user_pid));

    // managed-mcp.json is exclusive: only its servers remain.
    m.write_json(
        &m.path("etc/managed-mcp.json"),
        &json!({ "mcpServers": { "corp": m.server("corp", "echo") } }),
    );
    m.wait("only the managed server remains", |s| {
        state_of(s, "corp") == "connected"
            && state_of(s, "user1") == "absent"
            && state_of(s, "shared") == "absent"
    });
}

/// Claude Code keys a project's local scope by its git root and reads every `.mcp.json` from
/// the project up: a session in a subdirectory of a repository gets the repository's local
/// servers and the repository's `.mcp.json` (gated).
#[test]
fn claude_finds_the_git_roots_local_scope_and_parent_mcp_json() {
    let m = Machine::in_project("claude", "repo/sub");
    let repo = m.path("repo");
    fs::create_dir_all(repo.join(".git")).expect("git dir");
    let key = repo.canonicalize().expect("repo");
    m.write_json(
        &m.home().join(".claude.json"),
        &json!({ "projects": { key.to_string_lossy(): { "mcpServers": { "local1": m.server("local1", "echo") } } } }),
    );
    m.write_json(
        &repo.join(".mcp.json"),
        &json!({ "mcpServers": { "parent": m.server("parent", "echo") } }),
    );
    let _watch = m.watch();
    m.wait(
        "the repository's local server up, its .mcp.json server pending",
        |s| state_of(s, "local1") == "connected" && reason(s, "parent") == "pending_approval",
    );
}

/// Claude Code's plugins: a plugin installed for the user and enabled in the user's settings
/// runs its server as `plugin:<plugin>:<server>`, its `${CLAUDE_PLUGIN_ROOT}` expanded to the
/// installed version's directory; a plugin that only the project's settings switch on waits
/// for approval; switching the user's plugin off stops its server, live, and a plugin update
/// (a new install path) restarts it from the new version.
#[test]
fn claudes_enabled_plugins_run_their_servers() {
    let m = Machine::new("claude");
    let plugins = m.home().join(".claude/plugins");
    let version = |plugin: &str, v: &str| plugins.join(format!("cache/mkt/{plugin}/{v}"));
    let notes_server = json!({
        "command": fixture().to_string_lossy(),
        "args": ["--name", "notes", "--tools", "echo", "--marker", "${CLAUDE_PLUGIN_ROOT}/notes.marker"],
    });
    for v in ["1.0.0", "1.1.0"] {
        m.write_json(
            &version("notes", v).join(".mcp.json"),
            &json!({ "mcpServers": { "notes": notes_server } }),
        );
    }
    // The other plugin declares its server inline in its manifest.
    m.write_json(
        &version("tools", "2.0.0").join(".claude-plugin/plugin.json"),
        &json!({ "name": "tools", "mcpServers": { "tools": m.server("tools", "echo") } }),
    );
    let install = |notes_version: &str| {
        m.write_json(
            &plugins.join("installed_plugins.json"),
            &json!({ "version": 2, "plugins": {
                "notes@mkt": [{ "scope": "user", "installPath": version("notes", notes_version), "version": notes_version }],
                "tools@mkt": [{ "scope": "user", "installPath": version("tools", "2.0.0") }],
            }}),
        );
    };
    install("1.0.0");
    let user_settings = m.home().join(".claude/settings.json");
    m.write_json(
        &user_settings,
        &json!({ "enabledPlugins": { "notes@mkt": true } }),
    );
    m.write_json(
        &m.project().join(".claude/settings.json"),
        &json!({ "enabledPlugins": { "tools@mkt": true } }),
    );
    let _watch = m.watch();
    m.wait(
        "the user's plugin server up, the project-enabled one pending",
        |s| {
            state_of(s, "plugin:notes:notes") == "connected"
                && reason(s, "plugin:tools:tools") == "pending_approval"
        },
    );
    assert!(
        version("notes", "1.0.0").join("notes.marker").is_file(),
        "${{CLAUDE_PLUGIN_ROOT}} is the installed version's directory"
    );
    assert!(
        m.log().contains("\"plugin:tools:tools\" (from ")
            && m.log().contains("installed_plugins.json) wants to start"),
        "the review names the file the entry came from:\n{}",
        m.log()
    );
    m.approve("plugin:tools:tools");
    m.wait("the approved plugin's server up", |s| {
        state_of(s, "plugin:tools:tools") == "connected"
    });

    // An update moves the plugin to a new directory: its server restarts from there.
    install("1.1.0");
    m.wait("the updated plugin's server up", |_| {
        version("notes", "1.1.0").join("notes.marker").is_file()
    });
    m.wait("the updated plugin's server connected", |s| {
        state_of(s, "plugin:notes:notes") == "connected"
    });

    // Switched off in the user's settings: its server goes.
    m.write_json(
        &user_settings,
        &json!({ "enabledPlugins": { "notes@mkt": false } }),
    );
    m.wait("the disabled plugin's server gone", |s| {
        state_of(s, "plugin:notes:notes") == "absent"
    });
}

/// Cursor: `~/.cursor/mcp.json` and the project's `.cursor/mcp.json` with `${env:…}` and
/// `${workspaceFolder}`; an `envFile` entry refused by name; an edit hot-applied.
#[test]
fn cursors_files_are_read_live() {
    let m = Machine::new("cursor");
    let mut user = m.server("user1", "echo");
    user["env"] = json!({ "TOKEN": "${env:TEAM_TOKEN}" });
    m.write_json(
        &m.home().join(".cursor/mcp.json"),
        &json!({ "mcpServers": { "user1": user } }),
    );
    let mut proj = m.server("proj", "echo");
    proj["env"] = json!({ "WS": "${workspaceFolder}", "HOME_DIR": "${userHome}" });
    let mut envfile = m.server("envfile", "echo");
    envfile["envFile"] = json!("${workspaceFolder}/.env");
    m.write_json(
        &m.project().join(".cursor/mcp.json"),
        &json!({ "mcpServers": { "proj": proj, "envfile": envfile } }),
    );
    let _watch = m.watch();
    let status = m.wait("user up, project pending", |s| {
        state_of(s, "user1") == "connected" && reason(s, "proj") == "pending_approval"
    });
    assert_eq!(state_of(&status, "envfile"), "absent");
    let user_pid = pid_of(&status, "user1");
    m.approve("proj");
    m.wait("proj approved", |s| state_of(s, "proj") == "connected");
    // Add a server to the user file: only it starts.
    m.write_json(
        &m.home().join(".cursor/mcp.json"),
        &json!({ "mcpServers": { "user1": user, "user2": m.server("user2", "echo") } }),
    );
    let status = m.wait("user2 added", |s| state_of(s, "user2") == "connected");
    assert_eq!(pid_of(&status, "user1"), user_pid);
    let log = m.log();
    assert!(
        log.contains("envfile") && log.contains("envFile"),
        "the refused entry is named with its field: {log}"
    );
}

/// Kiro: `~/.kiro/settings/mcp.json` and the workspace's `.kiro/settings/mcp.json` (gated), in
/// Kiro's format: `disabled: true` keeps a server off until it is switched on, live;
/// `disabledTools` hides those tools; `autoApprove` changes nothing.
#[test]
fn kiros_files_are_read_live_with_its_switches() {
    let m = Machine::new("kiro");
    let user_file = m.home().join(".kiro/settings/mcp.json");
    let mut user = m.server("user1", "echo,add");
    user["disabledTools"] = json!(["add"]);
    user["autoApprove"] = json!(["echo"]);
    let mut off = m.server("off", "echo");
    off["disabled"] = json!(true);
    m.write_json(
        &user_file,
        &json!({ "mcpServers": { "user1": user, "off": off } }),
    );
    m.write_json(
        &m.project().join(".kiro/settings/mcp.json"),
        &json!({ "mcpServers": { "proj": m.server("proj", "echo") } }),
    );
    let _watch = m.watch();
    let status = m.wait("user up, project pending", |s| {
        state_of(s, "user1") == "connected" && reason(s, "proj") == "pending_approval"
    });
    let tools = |s: &[Value], name: &str| {
        s.iter()
            .find(|x| x["name"] == name)
            .map(|x| x["tools"].clone())
    };
    assert_eq!(tools(&status, "user1"), Some(json!(1)), "{status:#?}");
    assert_ne!(state_of(&status, "off"), "connected", "{status:#?}");
    assert!(!m.marker("off").exists(), "a disabled server never starts");
    let user_pid = pid_of(&status, "user1");
    // Switching `off` on starts it, and only it.
    off["disabled"] = json!(false);
    m.write_json(
        &user_file,
        &json!({ "mcpServers": { "user1": user, "off": off } }),
    );
    let status = m.wait("off switched on", |s| state_of(s, "off") == "connected");
    assert_eq!(pid_of(&status, "user1"), user_pid);
    m.approve("proj");
    m.wait("proj approved", |s| state_of(s, "proj") == "connected");
}

/// After `install cursor` the gateway runs the servers install moved to
/// `~/.cursor/mcp-reconcile.json` and applies edits there live; a server added to Cursor's own
/// file afterwards, and the project's `.cursor/mcp.json`, are Cursor's to start (it has no
/// switch to keep them off): the gateway leaves them alone and says how to hand one over.
#[test]
fn an_installed_cursor_gateway_runs_the_moved_servers() {
    let m = Machine::new("cursor");
    let file = m.home().join(".cursor/mcp.json");
    m.write_json(
        &file,
        &json!({ "mcpServers": { "user1": m.server("user1", "echo") } }),
    );
    m.write_json(
        &m.project().join(".cursor/mcp.json"),
        &json!({ "mcpServers": { "proj": m.server("proj", "echo") } }),
    );
    let install = m
        .command()
        .args(["install", "cursor"])
        .env("XDG_STATE_HOME", m.path("xdg-state"))
        .output()
        .expect("install runs");
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let _watch = m.watch();
    let status = m.wait("the moved server up", |s| {
        state_of(s, "user1") == "connected"
    });
    assert_eq!(
        state_of(&status, "proj"),
        "absent",
        "Cursor starts it itself"
    );
    assert_eq!(state_of(&status, "reconcile"), "absent");
    let user1 = pid_of(&status, "user1");

    // An edit where the server now lives is applied; the other server is untouched.
    let sidecar = m.home().join(".cursor/mcp-reconcile.json");
    m.write_json(
        &sidecar,
        &json!({ "mcpServers": {
            "user1": m.server("user1", "echo"),
            "user2": m.server("user2", "echo"),
        } }),
    );
    let status = m.wait("user2 added in the sidecar", |s| {
        state_of(s, "user2") == "connected"
    });
    assert_eq!(pid_of(&status, "user1"), user1);

    // Added with Cursor's own UI: Cursor starts it; the gateway says how to hand it over.
    let mut editor: Value =
        serde_json::from_str(&fs::read_to_string(&file).expect("read")).expect("json");
    editor["mcpServers"]["late"] = m.server("late", "echo");
    m.write_json(&file, &editor);
    m.wait_output("the hand-over hint", |log| {
        log.contains("\"late\" is started by the editor itself")
    });
    assert_eq!(state_of(&m.status(), "late"), "absent");
}

/// Copilot CLI: the user's `~/.copilot/mcp-config.json`, and — only while its `config.json`
/// trusts the folder — the repository's `.github/mcp.json` and every `.mcp.json` from the
/// repository's root down to the project (the nearest wins), gated.
#[test]
fn copilot_reads_project_files_only_in_a_trusted_folder() {
    let m = Machine::in_project("copilot", "repo/sub");
    let repo = m.path("repo");
    fs::create_dir_all(repo.join(".git")).expect("git dir");
    m.write_json(
        &m.home().join(".copilot/mcp-config.json"),
        &json!({ "mcpServers": { "user1": m.server("user1", "echo") } }),
    );
    m.write_json(
        &repo.join(".mcp.json"),
        &json!({ "mcpServers": { "shared": m.server("far", "echo") } }),
    );
    m.write_json(
        &repo.join("sub/.mcp.json"),
        &json!({ "mcpServers": { "shared": m.server("near", "echo") } }),
    );
    m.write_json(
        &repo.join(".github/mcp.json"),
        &json!({ "mcpServers": { "gh": m.server("gh", "echo") } }),
    );
    // Copilot trusts another folder, and a sibling whose name starts like the repository's.
    let elsewhere = m.path("repo-other");
    fs::create_dir_all(&elsewhere).expect("mkdir");
    m.write_json(
        &m.home().join(".copilot/config.json"),
        &json!({ "trusted_folders": [elsewhere.canonicalize().expect("dir").to_string_lossy()] }),
    );
    let _watch = m.watch();
    let status = m.wait("user1 up, project files not read", |s| {
        state_of(s, "user1") == "connected"
    });
    assert_eq!(state_of(&status, "shared"), "absent");
    assert_eq!(state_of(&status, "gh"), "absent");
    assert!(
        m.log().contains("does not trust this project"),
        "{}",
        m.log()
    );

    m.write_json(
        &m.home().join(".copilot/config.json"),
        &json!({ "trusted_folders": [repo.canonicalize().expect("repo").to_string_lossy()] }),
    );
    m.wait("project servers pending in the trusted folder", |s| {
        reason(s, "shared") == "pending_approval" && reason(s, "gh") == "pending_approval"
    });
    m.approve("shared");
    m.wait("the nearest shared approved and up", |s| {
        state_of(s, "shared") == "connected"
    });
    assert!(m.marker("near").exists() && !m.marker("far").exists());
}

/// VS Code: the profile's `mcp.json` and `.vscode/mcp.json` with `servers`; an entry that
/// needs an `${input:…}` fails, naming the field; removal hot-applied.
#[test]
fn vscodes_files_are_read_live() {
    let m = Machine::new("vscode");
    let mut user = m.server("user1", "echo");
    user["type"] = json!("stdio");
    m.write_json(
        &m.home().join(".config/Code/User/mcp.json"),
        &json!({ "servers": { "user1": user, "user2": m.server("user2", "echo") } }),
    );
    let mut asks = m.server("asks", "echo");
    asks["env"] = json!({ "KEY": "${input:api-key}" });
    m.write_json(
        &m.project().join(".vscode/mcp.json"),
        &json!({
            "inputs": [ { "id": "api-key", "type": "promptString", "password": true } ],
            "servers": { "proj": m.server("proj", "echo"), "asks": asks }
        }),
    );
    let _watch = m.watch();
    m.wait("user servers up, project pending", |s| {
        state_of(s, "user1") == "connected"
            && state_of(s, "user2") == "connected"
            && reason(s, "proj") == "pending_approval"
    });
    assert!(m.log().contains("${input:api-key}"), "{}", m.log());
    m.write_json(
        &m.home().join(".config/Code/User/mcp.json"),
        &json!({ "servers": { "user1": user } }),
    );
    m.wait("user2 removed", |s| state_of(s, "user2") == "absent");
}

/// Codex: `~/.codex/config.toml` tables, `enabled = false` honoured, an unknown field refused
/// by name, and the project's `.codex/config.toml` read only once the user's config trusts the
/// project.
#[test]
fn codexs_files_are_read_live() {
    let m = Machine::new("codex");
    let project = m.project().canonicalize().expect("project");
    let table = |name: &str, tools: &str, extra: &str| {
        format!(
            "[mcp_servers.{name}]\ncommand = {:?}\nargs = [\"--name\", \"{name}\", \"--tools\", \"{tools}\", \"--marker\", {:?}]\n{extra}\n",
            fixture().to_string_lossy(),
            m.marker(name).to_string_lossy()
        )
    };
    let user_config = |extra: &str| {
        format!(
            "model = \"o3\"\n\n{}{}{}{extra}",
            table("user1", "echo", "startup_timeout_sec = 20"),
            table("off", "echo", "enabled = false"),
            table("both", "echo", "url = \"https://127.0.0.1:9/mcp\""),
        )
    };
    let config = m.home().join(".codex/config.toml");
    m.write(&config, &user_config(""));
    // The project's table for user1 sets one field: Codex merges it over the user's table.
    m.write(
        &m.project().join(".codex/config.toml"),
        &format!(
            "{}[mcp_servers.user1]\ntool_timeout_sec = 30\n",
            table("proj", "echo", "")
        ),
    );
    let _watch = m.watch();
    let status = m.wait("user1 up, off blocked", |s| {
        state_of(s, "user1") == "connected" && reason(s, "off") == "blocked"
    });
    assert_eq!(
        state_of(&status, "proj"),
        "absent",
        "the project is not trusted yet"
    );
    assert!(
        m.log().contains("\"both\"") && m.log().contains("\"url\""),
        "{}",
        m.log()
    );

    // Trust the project in Codex's own config: its file is read, gated.
    m.write(
        &config,
        &user_config(&format!(
            "\n[projects.{:?}]\ntrust_level = \"trusted\"\n",
            project.to_string_lossy()
        )),
    );
    m.wait("the trusted project's servers pending", |s| {
        reason(s, "proj") == "pending_approval" && reason(s, "user1") == "pending_approval"
    });
    m.approve("proj");
    // Merged field by field, user1 keeps the user's command: approved, it runs.
    m.approve("user1");
    m.wait("proj and the merged user1 approved", |s| {
        state_of(s, "proj") == "connected" && state_of(s, "user1") == "connected"
    });
}

/// Codex's administrator files (`/etc/codex`, moved beside `--system-settings` here): the
/// system `config.toml` under the user's (merged field by field), `managed_config.toml` over
/// it, and `requirements.toml`'s allow list by name and identity, each applied live.
#[test]
fn codexs_administrator_files_are_honoured() {
    let m = Machine::new("codex");
    let fixture = fixture().to_string_lossy().into_owned();
    let args = |name: &str| {
        format!(
            "args = [\"--name\", \"{name}\", \"--tools\", \"echo\", \"--marker\", {:?}]",
            m.marker(name).to_string_lossy()
        )
    };
    // The administrator gives `base` its command; the user adds the arguments.
    m.write(
        &m.path("etc/config.toml"),
        &format!("[mcp_servers.base]\ncommand = {fixture:?}\n"),
    );
    m.write(
        &m.home().join(".codex/config.toml"),
        &format!(
            "[mcp_servers.base]\n{}\n\n[mcp_servers.mine]\ncommand = {fixture:?}\n{}\n",
            args("base"),
            args("mine")
        ),
    );
    m.write(
        &m.path("etc/managed_config.toml"),
        &format!(
            "[mcp_servers.corp]\ncommand = {fixture:?}\n{}\n",
            args("corp")
        ),
    );
    let _watch = m.watch();
    m.wait("base (merged), mine and corp up", |s| {
        ["base", "mine", "corp"]
            .iter()
            .all(|n| state_of(s, n) == "connected")
    });

    // The allow list: `mine` is not on it, `base` is with another command.
    let requirements = m.path("etc/requirements.toml");
    m.write(
        &requirements,
        &format!(
            "[mcp_servers.corp.identity]\ncommand = {fixture:?}\n\n[mcp_servers.base.identity]\ncommand = \"/usr/bin/other\"\n"
        ),
    );
    m.wait("only corp is allowed", |s| {
        state_of(s, "corp") == "connected"
            && reason(s, "mine") == "blocked"
            && reason(s, "base") == "blocked"
    });
    m.write(
        &requirements,
        &format!("[mcp_servers.corp.identity]\ncommand = {fixture:?}\n\n[mcp_servers.base.identity]\ncommand = {fixture:?}\n"),
    );
    m.wait("base allowed again", |s| state_of(s, "base") == "connected");
}

/// Gemini CLI: `~/.gemini/settings.json` and the workspace's `.gemini/settings.json` in a
/// folder Gemini trusts (`trustedFolders.json`), with `mcp.excluded` honoured, `mcp.allowed: []`
/// read as Gemini reads it (no restriction), `"type": "http"` with `url` as streamable HTTP, and
/// `gemini mcp disable`'s switch file applied live; no `.mcp.json` is read.
#[test]
fn gemini_clis_files_are_read_live() {
    let m = Machine::new("gemini");
    trust_in_gemini(&m);
    let remote = common::HttpFixture::start(&["--http", "127.0.0.1:0"]);
    m.write_json(
        &m.home().join(".gemini/settings.json"),
        &json!({
            "mcpServers": {
                "user1": m.server("user1", "echo"),
                "user2": m.server("user2", "echo"),
                // What `gemini mcp add -t http` writes.
                "remote": { "url": remote.url, "type": "http" },
            },
            "mcp": { "excluded": ["user2"], "allowed": [] }
        }),
    );
    m.write_json(
        &m.project().join(".gemini/settings.json"),
        &json!({ "mcpServers": { "ws": m.server("ws", "echo") } }),
    );
    m.write_json(
        &m.project().join(".mcp.json"),
        &json!({ "mcpServers": { "notread": m.server("notread", "echo") } }),
    );
    let _watch = m.watch();
    let status = m.wait("user1 and remote up, user2 excluded, ws pending", |s| {
        state_of(s, "user1") == "connected"
            && state_of(s, "remote") == "connected"
            && reason(s, "user2") == "excluded"
            && reason(s, "ws") == "pending_approval"
    });
    assert_eq!(state_of(&status, "notread"), "absent");
    let user1 = pid_of(&status, "user1").expect("pid");

    // `gemini mcp disable User1` (the file keys names lowercased) turns it off; enable, on.
    let switches = m.home().join(".gemini/mcp-server-enablement.json");
    m.write_json(&switches, &json!({ "user1": { "enabled": false } }));
    m.wait("user1 switched off", |s| reason(s, "user1") == "blocked");
    assert!(!common::alive(user1), "user1 was stopped");
    m.write_json(&switches, &json!({}));
    m.wait("user1 back", |s| state_of(s, "user1") == "connected");
}

/// After `install gemini`, the user's `mcp.allowed: ["reconcile"]` is there so that Gemini CLI
/// starts only the gateway: it does not narrow what the gateway reaches, while the
/// administrator's allow list still does (Gemini intersects the lists).
#[test]
fn an_installed_gemini_gateway_keeps_the_administrators_allow_list() {
    let m = Machine::new("gemini");
    trust_in_gemini(&m);
    m.write_json(
        &m.home().join(".gemini/settings.json"),
        &json!({ "mcpServers": {
            "notes": m.server("notes", "echo"),
            "other": m.server("other", "echo"),
        } }),
    );
    let install = m
        .command()
        .args(["install", "gemini"])
        .env("XDG_STATE_HOME", m.path("xdg-state"))
        .output()
        .expect("install runs");
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    let system = m.path("etc/managed-settings.json");
    m.write_json(
        &system,
        &json!({ "mcp": { "allowed": ["notes", "reconcile"] } }),
    );
    let _watch = m.watch();
    m.wait("notes up, other outside the administrator's list", |s| {
        state_of(s, "notes") == "connected" && reason(s, "other") == "not_allowed"
    });
    fs::remove_file(&system).expect("rm");
    m.wait("other up without the administrator's list", |s| {
        state_of(s, "other") == "connected"
    });
}

/// In a folder Gemini CLI does not trust it starts no MCP server, the user's included; neither
/// does `--layout gemini`, and it says why and what to do.
#[test]
fn gemini_starts_nothing_in_a_folder_it_does_not_trust() {
    let m = Machine::new("gemini");
    m.write_json(
        &m.home().join(".gemini/settings.json"),
        &json!({ "mcpServers": { "user1": m.server("user1", "echo") } }),
    );
    let _watch = m.watch();
    m.wait("user1 skipped in the untrusted folder", |s| {
        reason(s, "user1") == "untrusted_folder"
    });
    let out = m.run(&["status"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        m.log().contains("Gemini CLI does not trust") || text.contains("Gemini CLI does not trust"),
        "the reason is said: {text}\n{}",
        m.log()
    );
    assert!(!m.marker("user1").exists(), "nothing was started");
}

/// The JSON language server from the repository's `node_modules`.
fn json_server() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/.bin/vscode-json-language-server");
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/setup.sh`",
        path.display()
    );
    path
}

fn lsp_state(status: &[Value], name: &str) -> String {
    status
        .iter()
        .find(|s| s["kind"] == "lsp" && s["name"] == name)
        .and_then(|s| s["state"].as_str())
        .unwrap_or("absent")
        .to_owned()
}

/// Copilot CLI's language-server files (`~/.copilot/lsp-config.json`, `lspServers`,
/// `fileExtensions`) start a real language server; an entry without `fileExtensions` is
/// refused by name.
#[test]
fn copilots_language_server_file_is_read_in_its_format() {
    let m = Machine::new("copilot");
    m.write_json(
        &m.home().join(".copilot/lsp-config.json"),
        &json!({ "lspServers": {
            "json": { "command": json_server().to_string_lossy(), "args": ["--stdio"],
                      "fileExtensions": { ".json": "json" } },
            "nofiles": { "command": json_server().to_string_lossy(), "args": ["--stdio"] }
        }}),
    );
    let _watch = m.watch();
    let status = m.wait("the JSON language server up", |s| {
        lsp_state(s, "json") == "connected"
    });
    assert_eq!(lsp_state(&status, "nofiles"), "absent");
    assert!(m.log().contains("fileExtensions"), "{}", m.log());
}

/// Under `--layout claude` the project's `.lsp.json` is a Claude Code plugin's: the same file
/// that this host's own layout runs is refused without `extensionToLanguage`.
#[test]
fn claudes_lsp_json_is_read_as_claude_reads_it() {
    let entry = json!({ "command": json_server().to_string_lossy(), "args": ["--stdio"] });
    for (layout, expected) in [("claude", "absent"), ("default", "pending")] {
        let m = Machine::new(layout);
        m.write_json(&m.project().join(".lsp.json"), &json!({ "json": entry }));
        let _watch = m.watch();
        if expected == "absent" {
            m.wait("the refusal said", |_| {
                m.log().contains("extensionToLanguage")
            });
            assert_eq!(lsp_state(&m.status(), "json"), "absent", "{}", m.log());
        } else {
            m.wait("the entry pending approval under this host's format", |s| {
                s.iter().any(|x| x["kind"] == "lsp" && x["name"] == "json")
            });
        }
    }
}

/// A Claude Code plugin's language server (`.lsp.json` at the plugin's root) starts while the
/// user's settings enable the plugin — a real JSON language server — and stops when they
/// switch it off.
#[test]
fn claudes_plugin_language_servers_start_while_enabled() {
    let m = Machine::new("claude");
    let plugins = m.home().join(".claude/plugins");
    let root = plugins.join("cache/mkt/lang/1.0.0");
    m.write_json(
        &root.join(".lsp.json"),
        &json!({ "json": { "command": json_server().to_string_lossy(), "args": ["--stdio"],
                           "extensionToLanguage": { ".json": "json" } } }),
    );
    m.write_json(
        &plugins.join("installed_plugins.json"),
        &json!({ "version": 2, "plugins": {
            "lang@mkt": [{ "scope": "user", "installPath": root }],
        }}),
    );
    let settings = m.home().join(".claude/settings.json");
    m.write_json(
        &settings,
        &json!({ "enabledPlugins": { "lang@mkt": true } }),
    );
    let _watch = m.watch();
    m.wait("the plugin's language server up", |s| {
        lsp_state(s, "plugin:lang:json") == "connected"
    });
    m.write_json(
        &settings,
        &json!({ "enabledPlugins": { "lang@mkt": false } }),
    );
    m.wait("the plugin's language server gone", |s| {
        lsp_state(s, "plugin:lang:json") == "absent"
    });
}
