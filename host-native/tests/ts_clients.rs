//! Real clients of both MCP eras through one `mcp-reconcile serve --http` at the same time
//! (issue #24, SPEC §16): the official TypeScript SDK 2.x (`@modelcontextprotocol/client`),
//! opted into MCP 2026-07-28, and the TypeScript SDK 1.x (`@modelcontextprotocol/sdk`, what
//! Gemini CLI bundles), which speaks 2025-11-25 — both pinned in the root `package.json`,
//! installed by `scripts/setup.sh`, driven by `tests/node/era_clients.mjs` on the `node` of
//! `PATH` (Node 20 or later).
//!
//! Behind serve: a modern upstream (the fixture's `--conformance-reference --modern` over
//! streamable HTTP, which the host opens with `server/discover`) and a legacy one (the fixture
//! over stdio). Each client lists, calls a tool of each server, and calls the modern server's
//! `test_input_required_result_elicitation`: its input-required result passes through to the
//! modern client (whose SDK answers from its elicitation handler and calls again) and becomes an
//! `elicitation/create` of serve's own to the legacy client. Then the test adds a server to the
//! settings: the legacy client hears `notifications/tools/list_changed` on its GET stream, the
//! modern one on its `subscriptions/listen` stream, and both list and call the new tool.
//!
//! What each client negotiated is checked twice: what its SDK reports, and what it sent and got
//! on the wire (the script's recording `fetch`).

use crate::common;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;

use common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_and_a_legacy_typescript_client_share_one_serve_across_a_hot_reload() {
    let script = script();
    let mut upstream = HttpFixture::modern_reference();
    let p = Project::new();
    let servers = |added: bool| {
        let mut servers = json!({
            "modern": {"httpUrl": upstream.url},
            "legacy": p.server("legacy", "echo"),
        });
        if added {
            servers["added"] = p.server("added", "add");
        }
        json!({"mcpServers": servers})
    };
    p.write_settings(servers(false));
    let mut served = ServeHttp::start(&p);
    // Both servers up before the clients come: the list changes of serve's start are
    // announced before anyone listens, so what the clients hear later is the edit's.
    p.wait_for("both servers connected", |s| {
        all_connected(s, &["modern", "legacy"])
    });

    let mut command = std::process::Command::new("node");
    command
        .arg(&script)
        .arg(&served.url)
        .arg(&served.token_file)
        .current_dir(workspace_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .expect("node starts the clients");
    let group = KillGroup(child.id().expect("a pid"));
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let stderr = child.stderr.take().expect("stderr");
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ =
            tokio::io::AsyncReadExt::read_to_string(&mut BufReader::new(stderr), &mut text).await;
        text
    });

    // Every step the script printed, for the failure message.
    let mut steps: Vec<Value> = Vec::new();
    let mut report = None;
    let mut done = false;
    loop {
        let line = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the clients stalled after {steps:#?}\nserve log:\n{}",
                    served.log()
                )
            })
            .expect("the script's stdout");
        let Some(line) = line else { break };
        let step: Value =
            serde_json::from_str(&line).unwrap_or(json!({"step": "text", "line": line}));
        match step["step"].as_str() {
            Some("ready") => {
                // Both clients listed and called: a hot reload adds a third server.
                p.write_settings(servers(true));
                stdin.write_all(b"edited\n").await.expect("tell the script");
                stdin.flush().await.expect("tell the script");
            }
            Some("report") => report = Some(step.clone()),
            Some("done") => done = true,
            _ => {}
        }
        steps.push(step);
    }
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("the script exits")
        .expect("the script ran");
    group.disarm();
    let stderr = stderr.await.unwrap_or_default();
    let context = format!(
        "exit {status}\nsteps:\n{steps:#?}\nstderr:\n{stderr}\nserve log:\n{}",
        served.log()
    );
    assert!(status.success() && done, "the clients failed: {context}");
    let report = report.expect("a report");

    // The modern client: 2026-07-28 by the SDK's own account, opened with `server/discover` and
    // never `initialize`, every request stamped with that version (header and `_meta`), no
    // session; the elicitation came to it as an input-required result, and was answered once.
    let modern = &report["modern"];
    assert_eq!(modern["version"], "2026-07-28", "{context}");
    assert_eq!(modern["era"], "modern", "{context}");
    let wire = modern["wire"].as_array().expect("the modern wire");
    assert_eq!(wire[0]["method"], "server/discover", "{context}");
    for request in wire.iter().filter(|r| r["method"].is_string()) {
        assert_ne!(request["method"], "initialize", "{context}");
        assert_eq!(request["session"], false, "{request}");
        assert_eq!(request["protocolHeader"], "2026-07-28", "{request}");
        assert_eq!(request["metaVersion"], "2026-07-28", "{request}");
        assert_eq!(request["methodHeader"], request["method"], "{request}");
    }
    assert!(
        wire.iter().any(|r| r["method"] == "subscriptions/listen"),
        "no listen stream: {context}"
    );
    let result_types: Vec<&Value> = wire
        .iter()
        .filter(|r| r["method"] == "tools/call")
        .flat_map(|r| r["answers"].as_array().into_iter().flatten())
        .map(|a| &a["resultType"])
        .collect();
    assert!(
        result_types.iter().any(|t| *t == "input_required")
            && result_types
                .iter()
                .all(|t| *t == "input_required" || *t == "complete"),
        "every call answered with a resultType, one input-required: {result_types:?}\n{context}"
    );
    assert_eq!(modern["asked"], json!(["What is your name?"]), "{context}");
    assert_eq!(modern["honored"]["toolsListChanged"], true, "{context}");

    // The legacy client: `initialize` at 2025-11-25, answered with 2025-11-25, a session, no
    // `server/discover`; the modern server's question came to it as `elicitation/create`.
    let legacy = &report["legacy"];
    assert_eq!(legacy["version"], "2025-11-25", "{context}");
    assert_eq!(legacy["session"], true, "{context}");
    let wire = legacy["wire"].as_array().expect("the legacy wire");
    assert_eq!(wire[0]["method"], "initialize", "{context}");
    assert_eq!(wire[0]["offered"], "2025-11-25", "{context}");
    assert_eq!(
        wire[0]["answers"][0]["protocolVersion"], "2025-11-25",
        "{context}"
    );
    assert!(
        wire.iter().all(|r| r["method"] != "server/discover"),
        "{context}"
    );
    assert_eq!(legacy["asked"], json!(["What is your name?"]), "{context}");

    // Both heard the hot reload, and the modern upstream stayed on 2026-07-28.
    for client in ["modern", "legacy"] {
        assert!(
            steps
                .iter()
                .any(|s| s["step"] == "heard" && s["client"] == client),
            "{client} was not told of the edit: {context}"
        );
        assert!(
            steps.iter().any(|s| s["step"] == "called"
                && s["client"] == client
                && s["tool"] == "mcp__added__add"),
            "{client} did not call the new tool: {context}"
        );
    }
    let status = p.server_status("modern").expect("modern in status");
    assert_eq!(status["protocol"], "2026-07-28", "{status}");
    let status = p.server_status("legacy").expect("legacy in status");
    assert_ne!(status["protocol"], "2026-07-28", "{status}");

    served.stop();
    upstream.stop();
}

/// The script, after checking that Node 20 or later is on `PATH` and both SDKs are installed.
fn script() -> PathBuf {
    require_node_20("the TypeScript SDKs");
    installed("node_modules/@modelcontextprotocol/client/package.json");
    installed("node_modules/@modelcontextprotocol/sdk/package.json");
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/node/era_clients.mjs")
}
