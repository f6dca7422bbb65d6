//! Lazy servers (issue 41), end to end on both backends: real `serve` (and daemon) processes,
//! real fixture servers counted by their marker files, the kept listings on disk. No timing is
//! asserted: "not started" is a spawn count, "stopped" is a process gone, "waited" is an answer.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;
use serde_json::{json, Value};

const ECHO: &str = "mcp__lz__echo";
const ADD: &str = "mcp__lz__add";

/// Where the test's serves meet their daemon (`None`: each `serve --no-daemon`).
struct Backend {
    runtime: Option<PathBuf>,
    _daemon: Option<Group>,
}

impl Backend {
    /// A daemon of the test's own that outlives a gap between two sessions, or none.
    fn new(p: &Project, daemon: bool) -> Backend {
        if !daemon {
            return Backend {
                runtime: None,
                _daemon: None,
            };
        }
        let runtime = p.path("run");
        fs::create_dir_all(&runtime).expect("runtime dir");
        let group = start_daemon_with(p, &runtime, 300, PATIENCE);
        Backend {
            runtime: Some(runtime),
            _daemon: Some(group),
        }
    }

    /// A `serve` of `p` on this backend with a client on its stdio.
    async fn serve(&self, p: &Project) -> Served {
        let (mut command, log) = serve_command(p, "project", 100);
        command.env("MCP_RECONCILE_LOG", "info");
        match &self.runtime {
            Some(runtime) => command.env("XDG_RUNTIME_DIR", runtime),
            None => command.arg("--no-daemon"),
        };
        Served::spawn(command, log).await
    }

    /// `status --json` of the session (the daemon's when there is one).
    fn status(&self, p: &Project) -> Vec<Value> {
        let mut command = Command::new(cli());
        command.args(["status", "--json"]).args(p.flags());
        if let Some(runtime) = &self.runtime {
            command.env("XDG_RUNTIME_DIR", runtime);
        }
        let out = command.stdin(Stdio::null()).output().expect("status runs");
        assert!(out.status.success(), "{}", output_text(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str(text.lines().next().unwrap_or("[]")).expect("status JSON")
    }
}

/// A lazy fixture server `lz` offering `tools`, idle `idle_ms` before it is stopped.
fn lazy_project(tools: &str, idle_ms: u64) -> Project {
    let p = Project::new();
    write_lazy(&p, tools, idle_ms);
    p
}

fn write_lazy(p: &Project, tools: &str, idle_ms: u64) {
    let mut server = p.server("lz", tools);
    server["lazy"] = json!(true);
    p.write_settings(json!({
        "mcp": {"lazyIdleMs": idle_ms},
        "mcpServers": {"lz": server},
    }));
}

/// The kept listings (files of the state directory's `lazy/`).
fn kept_listings(p: &Project) -> Vec<PathBuf> {
    fs::read_dir(p.path("state/lazy"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.path())
                .filter(|path| path.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until exactly one listing is kept and it names `tool`; its path.
fn wait_kept(p: &Project, tool: &str) -> PathBuf {
    let mut found = None;
    wait_until(&format!("a kept listing with {tool}"), || {
        let files = kept_listings(p);
        found = files.first().cloned();
        files.len() == 1 && read(&files[0]).contains(&format!("\"name\":\"{tool}\""))
    });
    found.expect("listing")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// Waits until every process `lz` ever ran is gone.
fn wait_all_stopped(p: &Project) {
    wait_until("every lz process stopped", || {
        pids(p, "lz").into_iter().all(|pid| !alive(pid))
    });
}

/// A first session learns the listing of `lz` (it has none kept yet: started once), and `lz`
/// is stopped once idle.
async fn learn(p: &Project, backend: &Backend) {
    let served = backend.serve(p).await;
    served.wait_tool(ECHO).await;
    wait_kept(p, "echo");
    wait_all_stopped(p);
    assert_eq!(p.spawns("lz"), 1);
    served.close().await;
}

/// Guards the lazy start: a session offers a dormant server's kept listing without spawning
/// it; the first call starts it and gets the real answer; its listing is then refreshed (a
/// tool only the kept file named disappears, from the list and from the file).
async fn a_dormant_server_is_offered_from_its_listing_and_the_first_call_starts_it(daemon: bool) {
    let p = lazy_project("echo", 600_000);
    let backend = Backend::new(&p, daemon);
    let first = backend.serve(&p).await;
    first.wait_tool(ECHO).await;
    let kept = wait_kept(&p, "echo");
    first.close().await;
    wait_all_stopped(&p);
    assert_eq!(p.spawns("lz"), 1);

    // A tool only the kept listing names: served from the file, gone once `lz` re-lists.
    let mut listing: Value = serde_json::from_str(&read(&kept)).expect("listing JSON");
    listing["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "ghost", "inputSchema": {"type": "object"}}));
    fs::write(&kept, listing.to_string()).expect("write listing");

    let mut second = backend.serve(&p).await;
    let listed = second.tool_names().await;
    assert!(listed.contains(&ECHO.to_owned()), "{listed:?}");
    assert!(listed.contains(&"mcp__lz__ghost".to_owned()), "{listed:?}");
    assert_eq!(p.spawns("lz"), 1, "a dormant server was spawned");
    let status = backend.status(&p);
    assert_eq!(state_of(&status, "lz"), "dormant", "{status:?}");
    assert_eq!(field(&status, "lz", "lazy"), &json!(true));
    assert_eq!(field(&status, "lz", "tools"), &json!(2));

    let answer = second.call_text(ECHO, json!({"text": "woken"})).await;
    assert!(answer.contains("woken"), "{answer}");
    assert_eq!(p.spawns("lz"), 2);
    second.tools_changed().await;
    second
        .wait_tools("the refreshed listing", |names| {
            names.contains(&ECHO.to_owned()) && !names.iter().any(|n| n == "mcp__lz__ghost")
        })
        .await;
    wait_until("the kept listing refreshed", || {
        !read(&kept).contains("ghost")
    });
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dormant_server_is_offered_from_its_listing_and_the_first_call_starts_it_in_process() {
    a_dormant_server_is_offered_from_its_listing_and_the_first_call_starts_it(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dormant_server_is_offered_from_its_listing_and_the_first_call_starts_it_on_the_daemon() {
    a_dormant_server_is_offered_from_its_listing_and_the_first_call_starts_it(true).await;
}

/// Guards the idle stop: a lazy server that served nothing for `mcp.lazyIdleMs` is stopped
/// (its process gone) while its tools stay listed, and the next call starts it again.
async fn an_idle_lazy_server_stops_and_the_next_call_starts_it_again(daemon: bool) {
    let p = lazy_project("echo", 300);
    let backend = Backend::new(&p, daemon);
    let served = backend.serve(&p).await;
    served.wait_tool(ECHO).await;
    wait_kept(&p, "echo");
    wait_all_stopped(&p);
    assert_eq!(p.spawns("lz"), 1);
    let listed = served.tool_names().await;
    assert!(listed.contains(&ECHO.to_owned()), "{listed:?}");

    for round in 2..=3 {
        let answer = served
            .call_text(ECHO, json!({"text": format!("round {round}")}))
            .await;
        assert!(answer.contains(&format!("round {round}")), "{answer}");
        assert_eq!(p.spawns("lz"), round);
        wait_all_stopped(&p);
    }
    let listed = served.tool_names().await;
    assert!(listed.contains(&ECHO.to_owned()), "{listed:?}");
    served.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lazy_server_stops_and_the_next_call_starts_it_again_in_process() {
    an_idle_lazy_server_stops_and_the_next_call_starts_it_again(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lazy_server_stops_and_the_next_call_starts_it_again_on_the_daemon() {
    an_idle_lazy_server_stops_and_the_next_call_starts_it_again(true).await;
}

/// Guards the identity rule: an edit of a dormant lazy server's identity drops its kept
/// listing (memory and file); the stale tools are not offered, the new ones are learned.
async fn an_identity_edit_of_a_dormant_server_drops_its_stale_listing(daemon: bool) {
    let p = lazy_project("echo", 300);
    let backend = Backend::new(&p, daemon);
    let served = backend.serve(&p).await;
    served.wait_tool(ECHO).await;
    let old = wait_kept(&p, "echo");
    wait_all_stopped(&p);

    write_lazy(&p, "add", 300);
    served
        .wait_tools("the new listing", |names| names.contains(&ADD.to_owned()))
        .await;
    let listed = served.tool_names().await;
    assert!(!listed.contains(&ECHO.to_owned()), "stale: {listed:?}");
    assert!(!old.exists(), "the stale listing is still kept");
    wait_kept(&p, "add");
    served.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_edit_of_a_dormant_server_drops_its_stale_listing_in_process() {
    an_identity_edit_of_a_dormant_server_drops_its_stale_listing(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_edit_of_a_dormant_server_drops_its_stale_listing_on_the_daemon() {
    an_identity_edit_of_a_dormant_server_drops_its_stale_listing(true).await;
}

/// Guards the failed wake: a dormant server that cannot start answers the call with an error
/// that names it and says why (its stderr), instead of "not found" or a hang.
async fn a_dormant_server_that_cannot_start_answers_the_call_with_why(daemon: bool) {
    let p = Project::new();
    let broken = p.path("broken");
    // The entry stays the same; whether its process starts depends on a file.
    let script = format!(
        "if [ -e '{}' ]; then echo 'lz: cannot start today' >&2; exit 3; fi; exec '{}' --name lz --tools echo --marker '{}'",
        broken.display(),
        fixture().display(),
        p.marker("lz").display()
    );
    p.write_settings(json!({
        "mcp": {"lazyIdleMs": 300},
        "mcpServers": {"lz": {"command": "sh", "args": ["-c", script], "lazy": true}},
    }));
    let backend = Backend::new(&p, daemon);
    learn(&p, &backend).await;

    let served = backend.serve(&p).await;
    fs::write(&broken, "").expect("break lz");
    let result = served.call(ECHO, json!({"text": "x"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let message = text(&result);
    assert!(message.contains("server \"lz\""), "{message}");
    assert!(message.contains("cannot start today"), "{message}");
    assert_eq!(p.spawns("lz"), 1);
    served.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dormant_server_that_cannot_start_answers_the_call_with_why_in_process() {
    a_dormant_server_that_cannot_start_answers_the_call_with_why(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dormant_server_that_cannot_start_answers_the_call_with_why_on_the_daemon() {
    a_dormant_server_that_cannot_start_answers_the_call_with_why(true).await;
}

/// Guards the other requests a dormant server serves: its kept prompts and resources are
/// listed without starting it, and a prompts/get or resources/read starts it and is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_or_resource_request_starts_a_dormant_server() {
    let p = Project::new();
    let mut server = with_args(
        p.server("lz", "echo"),
        &["--prompts", "greet", "--resources", "1"],
    );
    server["lazy"] = json!(true);
    p.write_settings(json!({"mcp": {"lazyIdleMs": 300}, "mcpServers": {"lz": server}}));
    let backend = Backend::new(&p, false);
    learn(&p, &backend).await;

    let served = backend.serve(&p).await;
    let client = served.client();
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let resources = client.list_all_resources().await.expect("resources/list");
    assert_eq!(resources.len(), 1, "{resources:?}");
    assert_eq!(p.spawns("lz"), 1, "listing started a dormant server");

    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("Ada"));
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("mcp__lz__greet").with_arguments(args))
        .await
        .expect("prompts/get answered");
    assert!(format!("{:?}", prompt.messages).contains("Say hello to Ada."));
    assert_eq!(p.spawns("lz"), 2);
    wait_all_stopped(&p);
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "fixture://resources/1",
        ))
        .await
        .expect("resources/read answered");
    assert!(format!("{:?}", read.contents).contains("fixture resource 1"));
    assert_eq!(p.spawns("lz"), 3);
    served.close().await;
}

/// Guards admission over the kept listing: a lazy server the lists now exclude is not offered
/// from its kept listing, and a call does not start it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_listing_is_not_offered_for_a_server_no_longer_admitted() {
    let p = lazy_project("echo", 300);
    let backend = Backend::new(&p, false);
    let served = backend.serve(&p).await;
    served.wait_tool(ECHO).await;
    wait_kept(&p, "echo");
    wait_all_stopped(&p);

    let mut settings: Value = serde_json::from_str(&read(&p.user_settings())).expect("JSON");
    settings["mcp"]["excluded"] = json!(["lz"]);
    p.write_settings(settings);
    served
        .wait_tools("lz no longer offered", |names| {
            !names.contains(&ECHO.to_owned())
        })
        .await;
    let result = served.call(ECHO, json!({"text": "x"})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(p.spawns("lz"), 1, "an excluded server was started");
    served.close().await;
}

/// Not a test of behaviour: the first-call cost, a call to a dormant server against a call to
/// the same server running (printed; `cargo test --test lazy -- --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn measure_the_first_call_cost() {
    for daemon in [false, true] {
        let p = lazy_project("echo", 300);
        let backend = Backend::new(&p, daemon);
        let served = backend.serve(&p).await;
        served.wait_tool(ECHO).await;
        wait_kept(&p, "echo");
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            wait_all_stopped(&p);
            let t = Instant::now();
            served.call_text(ECHO, json!({"text": "cold"})).await;
            cold.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            served.call_text(ECHO, json!({"text": "warm"})).await;
            warm.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        eprintln!(
            "daemon={daemon}: first call to a dormant server {cold:.1?} ms; to the running one {warm:.1?} ms"
        );
        served.close().await;
    }
}
