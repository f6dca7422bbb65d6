//! `install opencode` / `uninstall opencode` on OpenCode's own `opencode.jsonc`: the gateway
//! goes in as an OpenCode `local` entry, every other `mcp` key (V1 entries and V2's
//! `servers`) moves as written to `mcp-reconcile.json` beside it, comments and the rest of the
//! file stay; install again changes nothing; uninstall brings back the servers — one added in
//! between with its secret too — and restores the bytes when only install touched the file.

use crate::install_home;

use install_home::{jsonc, read, Home};
use serde_json::json;

/// The user's file as OpenCode users write it: comments, a model, V1 and V2 servers.
const USER: &str = "// my OpenCode setup\n{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"model\": \"fake/fake-model\",\n  \"mcp\": {\n    \"first\": { \"type\": \"local\", \"command\": [\"first-server\", \"--x\"] }, // kept\n    \"servers\": { \"v2\": { \"type\": \"remote\", \"url\": \"https://example.com/mcp\" } }\n  }\n}\n";

/// Install moves OpenCode's servers beside its file and writes the gateway in OpenCode's own
/// form; a second install changes nothing; uninstall right after restores the bytes.
#[test]
fn install_opencode_moves_its_servers_beside_and_uninstall_restores_the_bytes() {
    let h = Home::new();
    let file = h.write(".config/opencode/opencode.jsonc", USER);
    let (ok, said) = h.run(&["install", "opencode"]);
    assert!(ok, "{said}");
    let text = read(&file);
    assert!(
        text.starts_with("// my OpenCode setup"),
        "comments stay: {text}"
    );
    let value = jsonc(&text);
    assert_eq!(value["model"], "fake/fake-model");
    let keys: Vec<&String> = value["mcp"].as_object().expect("mcp").keys().collect();
    assert_eq!(keys, ["reconcile"], "{text}");
    let gateway = &value["mcp"]["reconcile"];
    assert_eq!(gateway["type"], "local");
    let program = gateway["command"][0].as_str().expect("the program");
    assert!(program.ends_with("/mcp-reconcile"), "{program}");
    assert_eq!(
        gateway["command"].as_array().expect("argv")[1..4],
        [json!("serve"), json!("--layout"), json!("opencode")]
    );
    assert_eq!(
        gateway["environment"]["MCP_RECONCILE_INSTALLED"],
        "opencode"
    );
    let sidecar = jsonc(&read(&h.home().join(".config/opencode/mcp-reconcile.json")));
    assert_eq!(
        sidecar["mcp"]["first"]["command"],
        json!(["first-server", "--x"])
    );
    assert_eq!(
        sidecar["mcp"]["servers"]["v2"]["url"],
        "https://example.com/mcp"
    );

    let (ok, said) = h.run(&["install", "opencode"]);
    assert!(ok, "{said}");
    assert_eq!(read(&file), text, "a second install changes nothing");

    let (ok, said) = h.run(&["uninstall", "opencode"]);
    assert!(ok, "{said}");
    assert_eq!(read(&file), USER, "the original bytes are back");
    assert_eq!(
        read(&h.home().join(".config/opencode/mcp-reconcile.json")),
        "<absent>"
    );
}

/// A server OpenCode's user adds between two installs moves on the second one, and uninstall
/// puts every server back — that one with its secret — without the gateway.
#[test]
fn an_opencode_server_added_between_two_installs_survives_uninstall() {
    let h = Home::new();
    let file = h.write(".config/opencode/opencode.jsonc", USER);
    let (ok, said) = h.run(&["install", "opencode"]);
    assert!(ok, "{said}");
    let mut value = jsonc(&read(&file));
    value["mcp"]["added"] = json!({
        "type": "local",
        "command": ["added-server"],
        "environment": {"ADDED_TOKEN": "added-secret-value"}
    });
    std::fs::write(&file, serde_json::to_string_pretty(&value).expect("json")).expect("write");
    let (ok, said) = h.run(&["install", "opencode"]);
    assert!(ok, "{said}");
    let keys: Vec<String> = jsonc(&read(&file))["mcp"]
        .as_object()
        .expect("mcp")
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["reconcile"]);

    let (ok, said) = h.run(&["uninstall", "opencode"]);
    assert!(ok, "{said}");
    let back = jsonc(&read(&file));
    assert_eq!(
        back["mcp"]["added"]["environment"]["ADDED_TOKEN"],
        "added-secret-value"
    );
    assert_eq!(
        back["mcp"]["first"]["command"],
        json!(["first-server", "--x"])
    );
    assert_eq!(back["mcp"]["servers"]["v2"]["type"], "remote");
    assert!(back["mcp"].get("reconcile").is_none(), "{back}");
}
