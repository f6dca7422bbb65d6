//! `serve --tool-names short`: the servers' tools named `SERVER__TOOL` for clients that put
//! their own `mcp__GATEWAY__` in front (Claude Code, Codex), called under that name, on both
//! backends; the language tools keep their names.

use crate::common;

use std::fs;

use common::*;
use serde_json::json;

async fn short_names_round_trip(daemon: bool) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"notes": p.server("notes", "echo,add")}}));
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "150", "--tool-names", "short"])
        .stderr(fs::File::create(p.path("serve.log")).expect("log"));
    let _daemon = on_backend(&p, &mut command, daemon);
    let served = Served::spawn(command, p.path("serve.log")).await;
    wait_until_async("notes connects", || p.spawns("notes") == 1).await;
    let tools = served.wait_tool("notes__echo").await;
    assert!(
        tools.iter().all(|t| !t.starts_with("mcp__notes__")),
        "no qualified name leaks: {tools:?}"
    );
    let result = served.call("notes__echo", json!({"text": "hi"})).await;
    assert_eq!(text(&result), "hi", "{result:?}");
    let missing = served.call("mcp__notes__echo", json!({"text": "hi"})).await;
    assert_eq!(
        missing.is_error,
        Some(true),
        "the long name is not the client's name in this style: {missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_tool_names_in_process() {
    short_names_round_trip(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_tool_names_through_the_daemon() {
    short_names_round_trip(true).await;
}
