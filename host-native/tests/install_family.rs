//! `install` / `uninstall` for the `mcpServers` family (Kiro, Cline, Windsurf, Junie, Roo Code): the
//! user's servers move, as written, to `mcp-reconcile.json` beside the client's file, which
//! then holds only the gateway; uninstall puts the original back byte for byte while nothing
//! else touched it, and keeps a server the client added between two installs.

use crate::install_home;

use std::fs;

use install_home::{jsonc, read, Home};
use serde_json::json;

/// Each family client: its name and its user file under the home.
const CLIENTS: &[(&str, &str)] = &[
    ("kiro", ".kiro/settings/mcp.json"),
    ("cline", ".cline/data/settings/cline_mcp_settings.json"),
    ("windsurf", ".codeium/windsurf/mcp_config.json"),
    ("junie", ".junie/mcp/mcp.json"),
    (
        "roo",
        ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
    ),
];

/// The user's file in the client's own shape, with Cline's and Kiro's own keys in it.
const ORIGINAL: &str = "{\n  \"mcpServers\": {\n    \"first\": { \"command\": \"first-server\", \
                        \"disabled\": false, \"autoApprove\": [] }\n  }\n}\n";

/// Install moves every server to the sidecar and leaves only the gateway (which runs `serve
/// --layout <client>`); install again changes nothing; uninstall restores the file byte for
/// byte and removes the sidecar it made.
#[test]
fn each_family_client_installs_and_uninstalls_losslessly() {
    for (client, rel) in CLIENTS {
        let h = Home::new();
        let file = h.write(rel, ORIGINAL);
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        let installed = jsonc(&read(&file));
        let servers = installed["mcpServers"].as_object().expect("servers");
        assert_eq!(
            servers.keys().collect::<Vec<_>>(),
            ["reconcile"],
            "{client}"
        );
        let args = &installed["mcpServers"]["reconcile"]["args"];
        assert_eq!(args[2], json!(client), "{client}: {installed}");
        // Cline lists the gateway's tools once per session: its first listing waits longer
        // for a slow server.
        let grace = &installed["mcpServers"]["reconcile"]["env"]["MCP_RECONCILE_START_GRACE_MS"];
        match *client {
            "cline" => assert_eq!(grace, &json!("5000"), "{installed}"),
            _ => assert!(grace.is_null(), "{client}: {installed}"),
        }
        let sidecar = file.with_file_name("mcp-reconcile.json");
        let moved = jsonc(&read(&sidecar));
        assert_eq!(
            moved["mcpServers"]["first"],
            json!({"command": "first-server", "disabled": false, "autoApprove": []}),
            "{client}: moved as written"
        );
        let before = (read(&file), read(&sidecar));
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        assert_eq!(
            (read(&file), read(&sidecar)),
            before,
            "{client}: install is idempotent"
        );

        let (ok, said) = h.run(&["uninstall", client]);
        assert!(ok, "{client}: {said}");
        assert_eq!(read(&file), ORIGINAL, "{client}: restored byte for byte");
        assert!(!sidecar.exists(), "{client}: the sidecar is gone");
    }
}

/// A server the client's own UI added after install (its file rewritten whole) moves on the
/// next install and is back in the client's file after uninstall, with its secret.
#[test]
fn a_server_a_family_client_added_between_installs_survives_uninstall() {
    for (client, rel) in CLIENTS {
        let h = Home::new();
        let file = h.write(rel, ORIGINAL);
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        let mut value = jsonc(&read(&file));
        value["mcpServers"]["added"] =
            json!({"command": "added-server", "env": {"ADDED_TOKEN": "added-secret-value"}});
        fs::write(&file, serde_json::to_string_pretty(&value).expect("json")).expect("write");
        let (ok, said) = h.run(&["install", client]);
        assert!(ok, "{client}: {said}");
        assert!(!said.contains("added-secret-value"), "{client}: {said}");
        let (ok, said) = h.run(&["uninstall", client]);
        assert!(ok, "{client}: {said}");
        let back = jsonc(&read(&file));
        assert_eq!(
            back["mcpServers"]["added"]["env"]["ADDED_TOKEN"],
            "added-secret-value"
        );
        assert_eq!(back["mcpServers"]["first"]["command"], "first-server");
        assert!(
            back["mcpServers"].get("reconcile").is_none(),
            "{client}: {back}"
        );
    }
}
