//! End-to-end: what a server lists cannot hurt the host or its clients. A server that pages
//! `tools/list` forever ends `failed` (bounded), tools and prompts with names MCP clients
//! reject are dropped while the valid ones are offered, and a server whose sanitized tool
//! prefix another server owns is neither offered nor routed to.

use crate::common;

use common::*;
use serde_json::{json, Value};

fn last_error(status: &[Value], name: &str) -> String {
    status
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["lastError"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_server_that_pages_forever_ends_failed_with_the_pages_error() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "endless": with_args(p.server("endless", "echo"), &["--fault", "endless-pages"]),
        "fine": p.server("fine", "echo"),
    }}));
    let watch = p.watch();
    let status = p.wait_for("endless to fail", |s| {
        state_of(s, "endless") == "failed" && state_of(s, "fine") == "connected"
    });
    let error = last_error(&status, "endless");
    assert!(
        error.contains("tools/list returned more than 100 pages; the server is misbehaving"),
        "{error}"
    );
    drop(watch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_tool_and_prompt_names_are_dropped_and_valid_ones_offered() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "bad": with_args(p.server("bad", "echo"), &["--prompts", "greet", "--fault", "bad-names"]),
    }}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__bad__echo"]);
    assert_eq!(served.prompt_names().await, ["mcp__bad__greet"]);
    let echoed = served.call("mcp__bad__echo", json!({"text": "hi"})).await;
    assert_eq!(text(&echoed), "hi");

    let log = served.log();
    let warnings = log
        .lines()
        .filter(|l| l.contains("not offering tool"))
        .count();
    assert_eq!(warnings, 4, "one warning per dropped tool:\n{log}");
    assert!(
        log.contains(r#"not offering tool "bad\e[2Jname""#),
        "the control sequence is escaped:\n{log}"
    );
    assert!(!log.contains('\u{1b}'), "no raw escape in the log");
    assert!(log.contains("(5000 characters)"), "{log}");
    assert!(log.contains("more than 128"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_server_with_the_same_tool_prefix_is_not_offered_nor_routed_to() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "fs_tools": p.server("fs_tools", "echo"),
        "fs.tools": p.server("fs.tools", "echo,add"),
    }}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__fs_tools__echo"]);

    // `add` only exists on the later server: the call must not reach it.
    let sum = served
        .call("mcp__fs_tools__add", json!({"a": 2, "b": 3}))
        .await;
    assert_eq!(sum.is_error, Some(true), "{}", text(&sum));
    assert!(!text(&sum).contains('5'), "{}", text(&sum));
    assert!(p.spawns("fs.tools") >= 1, "the later server still runs");

    let status = p.status();
    let error = last_error(&status, "fs.tools");
    let expected = "server \"fs.tools\" is not offered: its tool prefix mcp__fs_tools__ is taken \
                    by \"fs_tools\"; rename one of them";
    assert_eq!(error, expected);
    assert!(served.log().contains(expected), "{}", served.log());
    assert_eq!(last_error(&status, "fs_tools"), "");
}

/// An approved project server that lists a resource's exact URI does not capture a read that a
/// user server's template matches, in a session of its own process as in the daemon's: the
/// read goes to the user's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_servers_listing_never_captures_a_user_servers_template() {
    let p = Project::new();
    let with = |mut server: Value, extra: [&str; 2]| {
        if let Some(args) = server["args"].as_array_mut() {
            args.extend(extra.iter().map(|a| json!(a)));
        }
        server
    };
    let user = with(
        p.server("user", "echo"),
        ["--resource-template", "fixture://resources/{n}"],
    );
    p.write_settings(json!({"mcpServers": {"user": user}}));
    let proj = with(p.server("proj", "echo"), ["--resources", "1"]);
    p.write(&p.mcp_json(), &json!({"mcpServers": {"proj": proj}}));
    let approved = p.run(&["approve", "proj"]);
    assert!(approved.status.success(), "{approved:?}");
    let served = Served::start(&p).await;
    p.wait_for("both connected", |s| all_connected(s, &["user", "proj"]));
    let read = tokio::time::timeout(
        PATIENCE,
        served
            .client()
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "fixture://resources/1",
            )),
    )
    .await
    .expect("read in time")
    .expect("read");
    let text = serde_json::to_string(&read).expect("json");
    assert!(
        text.contains("fixture template: fixture://resources/1"),
        "the user server's template must win: {text}"
    );
}
