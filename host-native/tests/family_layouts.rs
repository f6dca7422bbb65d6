//! The `mcpServers` family read live (SPEC §15): a real `watch --layout <client>` over Cline's,
//! Windsurf's, Junie's and Roo Code's files written in each client's format at its real
//! default path (under a temp `HOME`): every kind of edit hot-applied, the client's off switch
//! and its own keys honoured, its variables expanded, and for Junie's and Roo Code's project
//! files an approval round trip and a rejection. (Kiro's is `client_layouts::kiros_files_are_read_live_with_its_switches`.)

use crate::common;

use std::fs;

use common::machine::{reason, tools, Machine};
use common::{fixture, pid_of, state_of};
use serde_json::{json, Value};

/// A machine for `layout` whose commands see `FAMILY_TOOLS` (Windsurf's `${env:}` test).
fn machine(layout: &'static str) -> Machine {
    Machine::new(layout).with_env("FAMILY_TOOLS", "echo,add")
}

/// Cline: `~/.cline/data/settings/cline_mcp_settings.json` in Cline's spellings (`type:
/// stdio`, the nested `transport` form), read live: `disabled: true` keeps a server off until
/// it is switched on; an edit of Cline's own keys (`autoApprove`, `timeout`) restarts nothing;
/// an added server starts alone, a changed one restarts, a removed one stops.
#[test]
fn clines_file_is_read_live_with_its_switches_and_spellings() {
    let m = machine("cline");
    let file = m
        .home()
        .join(".cline/data/settings/cline_mcp_settings.json");
    let mut user1 = m.server("user1", "echo");
    user1["type"] = json!("stdio");
    user1["autoApprove"] = json!([]);
    user1["timeout"] = json!(60);
    let nested = json!({ "transport": { "type": "stdio", "command": fixture().to_string_lossy(),
        "args": ["--name", "nested", "--marker", m.marker("nested").to_string_lossy()] } });
    let mut off = m.server("off", "echo");
    off["disabled"] = json!(true);
    let write = |servers: Value| m.write_json(&file, &json!({ "mcpServers": servers }));
    write(json!({ "user1": user1, "nested": nested, "off": off }));
    let _watch = m.watch();
    let status = m.wait("user1 and the nested entry up", |s| {
        state_of(s, "user1") == "connected" && state_of(s, "nested") == "connected"
    });
    assert_ne!(state_of(&status, "off"), "connected", "{status:#?}");
    assert!(!m.marker("off").exists(), "a disabled server never starts");
    let user1_pid = pid_of(&status, "user1").expect("pid");
    let nested_pid = pid_of(&status, "nested").expect("pid");

    // Cline's own keys change nothing here; switching `off` on starts it, and only it.
    user1["autoApprove"] = json!(["echo"]);
    user1["timeout"] = json!(120);
    off["disabled"] = json!(false);
    write(json!({ "user1": user1, "nested": nested, "off": off }));
    let status = m.wait("off switched on", |s| state_of(s, "off") == "connected");
    assert_eq!(pid_of(&status, "user1"), Some(user1_pid), "{status:#?}");

    // A change restarts that server; a removal stops it; the switch turns one off again.
    let mut changed = m.server("user1", "echo,add");
    changed["type"] = json!("stdio");
    off["disabled"] = json!(true);
    write(json!({ "user1": changed, "off": off }));
    let status = m.wait("user1 changed, nested removed, off switched off", |s| {
        tools(s, "user1") == json!(2)
            && state_of(s, "nested") == "absent"
            && state_of(s, "off") != "connected"
    });
    assert_ne!(pid_of(&status, "user1"), Some(user1_pid));
    assert!(!common::alive(nested_pid), "the removed server was stopped");
}

/// Windsurf: `~/.codeium/windsurf/mcp_config.json`, its `${file:…}` and `${env:…}` expanded
/// into what runs (the file's final line break dropped), `disabledTools` hiding tools, and
/// `disabled: true` turning a server off live.
#[test]
fn windsurfs_file_is_read_live_with_its_variables_and_switches() {
    let m = machine("windsurf");
    let file = m.home().join(".codeium/windsurf/mcp_config.json");
    fs::write(m.home().join("tools.txt"), "echo,add\n").expect("write");
    let mut from_file = m.server("from_file", "echo");
    from_file["args"] = json!([
        "--name",
        "from_file",
        "--marker",
        m.marker("from_file").to_string_lossy()
    ]);
    from_file["env"] = json!({ "FIXTURE_TOOLS": "${file:~/tools.txt}" });
    let mut from_env = m.server("from_env", "echo");
    from_env["args"] = json!([
        "--name",
        "from_env",
        "--marker",
        m.marker("from_env").to_string_lossy()
    ]);
    from_env["env"] = json!({ "FIXTURE_TOOLS": "${env:FAMILY_TOOLS}" });
    from_env["disabledTools"] = json!(["add"]);
    let write = |servers: Value| m.write_json(&file, &json!({ "mcpServers": servers }));
    write(json!({ "from_file": from_file, "from_env": from_env }));
    let _watch = m.watch();
    let status = m.wait("both up", |s| {
        state_of(s, "from_file") == "connected" && state_of(s, "from_env") == "connected"
    });
    assert_eq!(tools(&status, "from_file"), json!(2), "{status:#?}");
    assert_eq!(tools(&status, "from_env"), json!(1), "{status:#?}");
    let file_pid = pid_of(&status, "from_file").expect("pid");

    // Switched off: it stops; the other server is untouched. An added server starts.
    from_env["disabled"] = json!(true);
    write(
        json!({ "from_file": from_file, "from_env": from_env, "added": m.server("added", "echo") }),
    );
    let status = m.wait("from_env off, added up", |s| {
        state_of(s, "from_env") != "connected" && state_of(s, "added") == "connected"
    });
    assert_eq!(pid_of(&status, "from_file"), Some(file_pid));
}

/// Junie: `~/.junie/mcp/mcp.json` runs at once; the project's `.junie/mcp/mcp.json` waits for
/// an approval, and a rejected entry stays off; an edit of an approved entry asks again.
#[test]
fn junies_files_are_read_live_and_its_project_file_is_gated() {
    let m = machine("junie");
    m.write_json(
        &m.home().join(".junie/mcp/mcp.json"),
        &json!({ "mcpServers": { "user1": m.server("user1", "echo") } }),
    );
    let project_file = m.project().join(".junie/mcp/mcp.json");
    m.write_json(
        &project_file,
        &json!({ "mcpServers": { "proj": m.server("proj", "echo"), "bad": m.server("bad", "echo") } }),
    );
    let _watch = m.watch();
    m.wait("user up, project entries pending", |s| {
        state_of(s, "user1") == "connected"
            && reason(s, "proj") == "pending_approval"
            && reason(s, "bad") == "pending_approval"
    });
    assert!(
        !m.marker("proj").exists(),
        "nothing from the repository ran"
    );
    m.decide("approve", "proj");
    m.decide("reject", "bad");
    m.wait("proj approved, bad rejected", |s| {
        state_of(s, "proj") == "connected" && reason(s, "bad") == "rejected"
    });
    assert!(!m.marker("bad").exists(), "the rejected entry never ran");

    // The repository changes the approved entry: it is asked about again.
    m.write_json(
        &project_file,
        &json!({ "mcpServers": { "proj": m.server("proj", "echo,add"), "bad": m.server("bad", "echo") } }),
    );
    m.wait("the edited entry pending again", |s| {
        reason(s, "proj") == "pending_approval"
    });
}

/// Roo Code: its `mcp_settings.json` in VS Code's globalStorage runs at once, `${env:…}`
/// expanded, `disabledTools` and `disabled` honoured, its own keys restarting nothing; the
/// workspace's `.roo/mcp.json` waits for an approval (of the entry with `${workspaceFolder}`
/// put in), a rejected entry stays off, and an edit of an approved one asks again.
#[test]
fn roos_files_are_read_live_with_its_variables_and_its_project_file_is_gated() {
    let m = machine("roo");
    let file = m.home().join(
        ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
    );
    let mut from_env = m.server("from_env", "echo");
    from_env["args"] = json!(["--name", "from_env"]);
    from_env["env"] = json!({ "FIXTURE_TOOLS": "${env:FAMILY_TOOLS}" });
    from_env["disabledTools"] = json!(["add"]);
    let mut off = m.server("off", "echo");
    off["disabled"] = json!(true);
    let write = |servers: Value| m.write_json(&file, &json!({ "mcpServers": servers }));
    write(json!({ "from_env": from_env, "off": off }));
    let (command, _) = m.argv("proj", "echo");
    let project = |tools: &str| {
        let proj = json!({ "command": command, "args":
            ["--name", "proj", "--tools", tools, "--marker", "${workspaceFolder}/proj.marker"] });
        json!({ "mcpServers": { "proj": proj, "bad": m.server("bad", "echo") } })
    };
    let project_file = m.project().join(".roo/mcp.json");
    m.write_json(&project_file, &project("echo"));
    let _watch = m.watch();
    let status = m.wait("user up, project pending", |s| {
        state_of(s, "from_env") == "connected"
            && reason(s, "proj") == "pending_approval"
            && reason(s, "bad") == "pending_approval"
    });
    assert_eq!(tools(&status, "from_env"), json!(1), "{status:#?}");
    assert_ne!(state_of(&status, "off"), "connected");
    let pid = pid_of(&status, "from_env").expect("pid");

    m.decide("approve", "proj");
    m.decide("reject", "bad");
    m.wait("proj approved, bad rejected", |s| {
        state_of(s, "proj") == "connected" && reason(s, "bad") == "rejected"
    });
    assert!(
        m.project().join("proj.marker").exists(),
        "${{workspaceFolder}} put in"
    );
    assert!(!m.marker("bad").exists(), "the rejected entry never ran");

    // Roo Code's own keys restart nothing; the switched-on server starts.
    from_env["alwaysAllow"] = json!(["echo"]);
    from_env["timeout"] = json!(30);
    off["disabled"] = json!(false);
    write(json!({ "from_env": from_env, "off": off }));
    let status = m.wait("off up", |s| state_of(s, "off") == "connected");
    assert_eq!(
        pid_of(&status, "from_env"),
        Some(pid),
        "own keys restart nothing"
    );

    // The repository edits the approved entry: it is asked about again.
    m.write_json(&project_file, &project("echo,add"));
    m.wait("the edited entry pending again", |s| {
        reason(s, "proj") == "pending_approval"
    });
}
