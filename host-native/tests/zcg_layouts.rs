//! Crush, Zed and Goose: a real `watch --layout <client>` over files written in each client's
//! own format (Crush's `crush.json`, Zed's `settings.json` with comments and trailing commas,
//! Goose's YAML `config.yaml`) at its real default paths under a temp `HOME`; every kind of
//! edit applied live (add, change, remove, switch off and on), the client's off-switch
//! honoured, a project entry's approval round trip (Crush, Zed), what cannot run refused with a
//! note; and `install` / `uninstall` of Zed and Crush, lossless across a re-install.

use crate::common;

use std::fs;
use std::path::Path;

use common::machine::{reason, tools, Machine};
use common::{output_text, pid_of, state_of};
use serde_json::{json, Value};

/// A fixture server entry of Crush's (`type: stdio`) or Zed's (`command` and `args`).
fn server(m: &Machine, name: &str, tools: &str) -> Value {
    let mut entry = m.server(name, tools);
    if m.layout == "crush" {
        entry["type"] = json!("stdio");
    }
    entry
}

/// A fixture server extension of Goose's.
fn extension(m: &Machine, name: &str, tools: &str) -> Value {
    let (command, args) = m.argv(name, tools);
    json!({ "enabled": true, "type": "stdio", "name": name, "cmd": command, "args": args })
}

/// Polls the watch log until it holds `text`.
fn wait_log(m: &Machine, text: &str) {
    m.wait_output(&format!("{text:?} in the log"), |log| log.contains(text));
}

/// The edits every layout here goes through, on the user's file `write(user1, user2, off)`
/// (each `None` leaves that server out): `user1` up and `off` off from the start; then `user1`
/// changed, `user2` added and `off` switched on; then `user2` removed and `user1` switched
/// off — each applied live, touching only that server.
fn edits_apply_live(m: &Machine, write: &dyn Fn(&str, bool, bool, bool)) {
    write("echo", true, false, false);
    let status = m.wait("user1 up", |s| state_of(s, "user1") == "connected");
    assert_ne!(state_of(&status, "off"), "connected", "{status:#?}");
    assert!(
        !m.marker("off").exists(),
        "a switched-off server never starts"
    );
    let user1 = pid_of(&status, "user1");

    write("echo,add", true, true, true);
    let status = m.wait("user1 changed, user2 added, off switched on", |s| {
        tools(s, "user1") == json!(2)
            && state_of(s, "user2") == "connected"
            && state_of(s, "off") == "connected"
    });
    assert_ne!(pid_of(&status, "user1"), user1, "a changed entry restarts");
    let off = pid_of(&status, "off");

    write("echo,add", false, false, true);
    let status = m.wait("user2 removed, user1 switched off", |s| {
        state_of(s, "user2") == "absent" && state_of(s, "user1") != "connected"
    });
    assert_eq!(
        pid_of(&status, "off"),
        off,
        "an untouched server keeps running"
    );
}

/// Crush: the user's `crush.json` (its `disabled` switch honoured live), the project's
/// `crush.json` and `.crush.json` (which wins) and the git root's above it, gated until
/// approved; an entry with a `$(…)` command substitution is refused and its command never runs.
#[test]
fn crushs_files_are_read_live_with_its_switches() {
    let m = Machine::in_project("crush", "repo/sub");
    fs::create_dir_all(m.path("repo/.git")).expect("git dir");
    m.write_json(
        &m.path("repo/crush.json"),
        &json!({ "mcp": { "far": server(&m, "far", "echo"), "proj": server(&m, "proj", "echo") } }),
    );
    let user_file = m.home().join(".config/crush/crush.json");
    let pwned = m.path("pwned");
    let write = |user1_tools: &str, user1_on: bool, user2: bool, off_on: bool| {
        let mut mcp = json!({
            "user1": server(&m, "user1", user1_tools),
            "off": server(&m, "off", "echo"),
            "sneaky": server(&m, "sneaky", "echo"),
        });
        mcp["user1"]["disabled"] = json!(!user1_on);
        mcp["off"]["disabled"] = json!(!off_on);
        mcp["sneaky"]["env"] = json!({ "X": format!("$(touch {})", pwned.display()) });
        if user2 {
            mcp["user2"] = server(&m, "user2", "echo");
        }
        m.write_json(
            &user_file,
            &json!({ "options": { "debug": false }, "mcp": mcp }),
        );
    };
    m.write_json(
        &m.project().join("crush.json"),
        &json!({ "mcp": { "proj": server(&m, "proj", "echo") } }),
    );
    m.write_json(
        &m.project().join(".crush.json"),
        &json!({ "mcp": { "proj": server(&m, "proj", "echo,add") } }),
    );
    let _watch = m.watch();
    edits_apply_live(&m, &write);

    let status = m.status();
    assert_eq!(reason(&status, "proj"), "pending_approval", "{status:#?}");
    assert_eq!(reason(&status, "far"), "pending_approval", "{status:#?}");
    assert_eq!(state_of(&status, "sneaky"), "absent", "{status:#?}");
    wait_log(&m, "\"sneaky\"");
    assert!(m.log().contains("never does"), "{}", m.log());
    assert!(!pwned.exists(), "a command in a value never runs");
    assert!(!m.marker("sneaky").exists());

    m.approve("proj");
    let status = m.wait("proj approved", |s| state_of(s, "proj") == "connected");
    assert_eq!(
        tools(&status, "proj"),
        json!(2),
        ".crush.json wins over crush.json"
    );
}

/// Zed: `context_servers` in the user's `settings.json` (comments, trailing commas, Zed's own
/// settings beside them; `enabled: false` honoured live) and the project's
/// `.zed/settings.json` gated until approved; an extension's entry is left to Zed, said once.
#[test]
fn zeds_settings_are_read_live_with_its_switches() {
    let m = Machine::new("zed");
    let user_file = m.home().join(".config/zed/settings.json");
    let write = |user1_tools: &str, user1_on: bool, user2: bool, off_on: bool| {
        let entry = |name: &str, tools: &str, on: bool| {
            let mut e = server(&m, name, tools);
            e["enabled"] = json!(on);
            serde_json::to_string(&e).expect("json")
        };
        let user2 = if user2 {
            format!("\"user2\": {},", entry("user2", "echo", true))
        } else {
            String::new()
        };
        m.write(
            &user_file,
            &format!(
                "// Zed settings\n{{\n  \"theme\": \"One Dark\",\n  \"context_servers\": {{\n    \
                 \"user1\": {},\n    {user2}\n    \"off\": {}, /* switched */\n    \
                 \"ext\": {{ \"settings\": {{ \"key\": \"v\" }} }},\n  }},\n}}\n",
                entry("user1", user1_tools, user1_on),
                entry("off", "echo", off_on),
            ),
        );
    };
    m.write(
        &m.project().join(".zed/settings.json"),
        &format!(
            "{{ \"context_servers\": {{ \"proj\": {}, }} }}",
            server(&m, "proj", "echo")
        ),
    );
    let _watch = m.watch();
    edits_apply_live(&m, &write);
    wait_log(&m, "Zed extension");
    assert_eq!(state_of(&m.status(), "ext"), "absent");

    assert_eq!(reason(&m.status(), "proj"), "pending_approval");
    m.approve("proj");
    m.wait("proj approved", |s| state_of(s, "proj") == "connected");
}

/// Goose: `extensions` in its YAML `config.yaml` (`enabled: false` honoured live); a builtin
/// is Goose's own, noted; `env_keys` come from the environment, and an extension whose key is
/// not there is not started, the error naming the key.
#[test]
fn gooses_extensions_are_read_live_with_its_switches() {
    let m = Machine::new("goose");
    let user_file = m.home().join(".config/goose/config.yaml");
    let write = |user1_tools: &str, user1_on: bool, user2: bool, off_on: bool| {
        let mut user1 = extension(&m, "user1", user1_tools);
        user1["enabled"] = json!(user1_on);
        user1["env_keys"] = json!(["TEAM_TOKEN"]);
        let mut off = extension(&m, "off", "echo");
        off["enabled"] = json!(off_on);
        let mut keyed = extension(&m, "keyed", "echo");
        keyed["env_keys"] = json!(["ONLY_IN_THE_KEYRING"]);
        let mut yaml = String::from(
            "GOOSE_PROVIDER: openai\n# the user's extensions\nextensions:\n  developer:\n    \
             enabled: true\n    type: builtin\n    name: developer\n",
        );
        // JSON is YAML's flow style.
        for (name, entry) in [("user1", user1), ("off", off), ("keyed", keyed)]
            .into_iter()
            .chain(user2.then(|| ("user2", extension(&m, "user2", "echo"))))
        {
            yaml.push_str(&format!("  {name}: {entry}\n"));
        }
        m.write(&user_file, &yaml);
    };
    let _watch = m.watch();
    edits_apply_live(&m, &write);
    wait_log(&m, "ONLY_IN_THE_KEYRING");
    wait_log(&m, "\"developer\" is of type builtin");
    let status = m.status();
    assert_eq!(state_of(&status, "keyed"), "absent", "{status:#?}");
    assert!(!m.marker("keyed").exists());
}

/// `install zed` and `install crush` move the user's servers to `mcp-reconcile.json` beside the
/// client's file, leave only the gateway (and Zed's extension entries) there, and the layout
/// runs the moved servers; a server the client's own UI added between two installs moves on the
/// second, and uninstall puts every server back, the added one with its secret.
#[test]
fn installing_zed_and_crush_hands_their_servers_over_losslessly() {
    for (layout, rel, key) in [
        ("zed", ".config/zed/settings.json", "context_servers"),
        ("crush", ".config/crush/crush.json", "mcp"),
    ] {
        let m = Machine::new(layout);
        let file = m.home().join(rel);
        let mut servers = json!({ "user1": server(&m, "user1", "echo") });
        if layout == "zed" {
            servers["ext"] = json!({ "settings": {} });
        }
        m.write_json(&file, &json!({ "other": "kept", key: servers }));
        let install = |what: &str| {
            let out = m.command().args([what, layout]).output().expect("runs");
            assert!(
                out.status.success(),
                "{layout} {what}: {}",
                output_text(&out)
            );
        };
        install("install");
        let read = |path: &Path| -> Value {
            serde_json::from_str(&fs::read_to_string(path).expect("read")).expect("json")
        };
        let sidecar = file.with_file_name("mcp-reconcile.json");
        let editor = read(&file);
        let mut left: Vec<&String> = editor[key].as_object().expect("servers").keys().collect();
        left.sort();
        let expected: &[&str] = if layout == "zed" {
            &["ext", "reconcile"]
        } else {
            &["reconcile"]
        };
        assert_eq!(left, expected, "{layout}: {editor}");
        assert_eq!(editor["other"], "kept");
        if layout == "crush" {
            assert_eq!(
                editor[key]["reconcile"]["type"], "stdio",
                "Crush requires a type"
            );
        }
        assert!(read(&sidecar)[key]["user1"].is_object(), "{layout}");

        {
            let _watch = m.watch();
            let status = m.wait("the moved server up", |s| {
                state_of(s, "user1") == "connected"
            });
            assert_eq!(
                state_of(&status, "reconcile"),
                "absent",
                "{layout}: not itself"
            );
        }

        let mut added = read(&file);
        added[key]["added"] = server(&m, "added", "echo");
        added[key]["added"]["env"] = json!({ "ADDED_TOKEN": "added-secret-value" });
        m.write_json(&file, &added);
        install("install");
        assert!(
            read(&sidecar)[key]["added"].is_object(),
            "{layout}: moved on reinstall"
        );
        install("uninstall");
        let back = read(&file);
        assert_eq!(
            back[key]["added"]["env"]["ADDED_TOKEN"], "added-secret-value",
            "{layout}"
        );
        assert!(back[key]["user1"].is_object(), "{layout}: {back}");
        assert!(back[key].get("reconcile").is_none(), "{layout}: {back}");
        assert_eq!(back["other"], "kept");
    }
}

/// `install goose` moves Goose's stdio and streamable HTTP extensions to
/// `mcp-reconcile.json` beside its `config.yaml`, keeps its builtins and settings there, and
/// the layout runs the moved ones; an extension Goose added between two installs moves on the
/// second, and uninstall puts every one back with its secret; untouched, the original bytes
/// (comments too) come back.
#[test]
fn installing_goose_hands_its_extensions_over_losslessly() {
    let m = Machine::new("goose");
    let file = m.home().join(".config/goose/config.yaml");
    let original = format!(
        "# mine\nGOOSE_PROVIDER: openai\nextensions:\n  developer: {{enabled: true, type: builtin, name: developer}}\n  user1: {}\n",
        extension(&m, "user1", "echo")
    );
    m.write(&file, &original);
    let run = |what: &str| {
        let out = m.command().args([what, "goose"]).output().expect("runs");
        assert!(out.status.success(), "{what}: {}", output_text(&out));
    };
    let yaml = || -> serde_norway::Value {
        serde_norway::from_str(&fs::read_to_string(&file).expect("read")).expect("yaml")
    };
    let names = |doc: &serde_norway::Value| -> Vec<String> {
        let exts = doc["extensions"].as_mapping().expect("extensions");
        exts.keys()
            .filter_map(|k| k.as_str())
            .map(str::to_owned)
            .collect()
    };
    run("install");
    assert_eq!(names(&yaml()), ["developer", "reconcile"]);
    assert_eq!(yaml()["GOOSE_PROVIDER"].as_str(), Some("openai"));
    {
        let _watch = m.watch();
        let status = m.wait("the moved extension up", |s| {
            state_of(s, "user1") == "connected"
        });
        assert_eq!(state_of(&status, "reconcile"), "absent", "not itself");
        assert_eq!(state_of(&status, "developer"), "absent", "Goose's own");
    }
    run("uninstall");
    assert_eq!(
        fs::read_to_string(&file).expect("read"),
        original,
        "untouched: byte for byte"
    );

    run("install");
    // Goose's own `configure` rewrites the whole file with the extension added.
    let mut doc = yaml();
    let mut added = extension(&m, "added", "echo");
    added["envs"] = json!({ "ADDED_TOKEN": "added-secret-value" });
    doc["extensions"]
        .as_mapping_mut()
        .expect("extensions")
        .insert("added".into(), serde_norway::to_value(added).expect("yaml"));
    m.write(&file, &serde_norway::to_string(&doc).expect("yaml"));
    run("install");
    assert_eq!(
        names(&yaml()),
        ["developer", "reconcile"],
        "moved on reinstall"
    );
    run("uninstall");
    let back = yaml();
    assert_eq!(names(&back), ["developer", "user1", "added"]);
    assert_eq!(
        back["extensions"]["added"]["envs"]["ADDED_TOKEN"].as_str(),
        Some("added-secret-value")
    );
}
