//! End-to-end: a real `mcp-reconcile serve` (child process, own process group) driven by
//! rmcp's client over its stdin/stdout, with real fixture servers behind it.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use rmcp::model::{CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest};
use rmcp::service::PeerRequestOptions;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sees_qualified_tools_edits_and_the_removed_message() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo,add"),
    }}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let mut served = Served::start(&p).await;

    // The first listing already has both servers (it waits for the start pass), and the
    // gateway's status tool: the project server waits for approval.
    let names = served.tool_names().await;
    assert_eq!(
        names,
        [
            "mcp__a__echo",
            "mcp__b__echo",
            "mcp__b__add",
            "mcp_reconcile_status"
        ]
    );

    // Forwarded to b.
    let sum = served.call("mcp__b__add", json!({"a": 2, "b": 3})).await;
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    assert_eq!(text(&sum), "5");

    // The pending project server is not spawned; its tool says why.
    let pending = served.call("mcp__proj__echo", json!({"text": "x"})).await;
    assert_eq!(pending.is_error, Some(true));
    assert!(text(&pending).contains("approv"), "{}", text(&pending));
    assert_eq!(p.spawns("proj"), 0);

    // Edit: remove a, add c → list_changed, and the new list.
    p.write_settings(json!({"mcpServers": {
        "b": p.server("b", "echo,add"),
        "c": p.server("c", "echo"),
    }}));
    served.tools_changed().await;
    let start = Instant::now();
    let mut names = served.tool_names().await;
    while names.iter().any(|n| n.starts_with("mcp__a__")) || !names.contains(&"mcp__c__echo".into())
    {
        assert!(start.elapsed() < PATIENCE, "list never settled: {names:?}");
        served.tools_changed().await;
        names = served.tool_names().await;
    }
    assert_eq!(
        names,
        [
            "mcp__b__echo",
            "mcp__b__add",
            "mcp__c__echo",
            "mcp_reconcile_status"
        ]
    );

    // The removed server's tool: the "removed" message as a tool error.
    let removed = served.call("mcp__a__echo", json!({"text": "x"})).await;
    assert_eq!(removed.is_error, Some(true));
    let message = text(&removed);
    assert!(
        message.contains("removed") && message.contains("\"a\""),
        "{message}"
    );
    // A name no server could own.
    let unknown = served.call("nothing", json!({})).await;
    assert_eq!(unknown.is_error, Some(true));

    // b kept its process through the edit (spawned once).
    assert_eq!(p.spawns("b"), 1);
    assert_eq!(p.spawns("proj"), 0, "a pending server is never spawned");

    // The client goes away: serve exits and stops every server.
    let all: Vec<u64> = ["a", "b", "c"].iter().flat_map(|n| pids(&p, n)).collect();
    assert_eq!(all.len(), 3);
    let status = served.close().await;
    assert!(status.success(), "serve exit status {status}");
    wait_until_async("every server process gone", || {
        all.iter().all(|pid| !alive(*pid))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_and_cancellation_are_forwarded() {
    let p = Project::new();
    let stderr_log = p.path("slow.stderr");
    // The fixture's stderr goes to a file, so the test can see it was cancelled.
    let fixture_args = p.server("slow", "sleep")["args"].clone();
    let mut args = vec![
        json!("-c"),
        json!(format!(
            "exec \"$0\" \"$@\" 2>>'{}'",
            stderr_log.to_string_lossy()
        )),
        json!(fixture().to_string_lossy()),
    ];
    args.extend(fixture_args.as_array().cloned().unwrap_or_default());
    p.write_settings(json!({"mcpServers": {"slow": {"command": "sh", "args": args}}}));
    let mut served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__slow__sleep"]);

    // Progress: rmcp's client sends a progress token with every request.
    let done = served.call("mcp__slow__sleep", json!({"ms": 600})).await;
    assert_eq!(text(&done), "slept 600 ms");
    let mut progress = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_millis(300), served.heard.recv()).await
    {
        if let Heard::Progress(value) = event {
            progress.push(value);
        }
    }
    assert!(!progress.is_empty(), "no progress forwarded");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress increases: {progress:?}"
    );

    // Cancellation: the upstream sleep is cancelled too.
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("mcp__slow__sleep").with_arguments(
            json!({"ms": 30000})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        ),
    ));
    let handle = served
        .client()
        .peer()
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .expect("request sent");
    // Wait until the call is running upstream (progress arrives), then cancel.
    let start = Instant::now();
    loop {
        match tokio::time::timeout(PATIENCE, served.heard.recv()).await {
            Ok(Some(Heard::Progress(_))) => break,
            Ok(Some(_)) => {}
            _ => panic!("the long call never reported progress"),
        }
        assert!(start.elapsed() < PATIENCE);
    }
    handle
        .cancel(Some("test cancels".into()))
        .await
        .expect("cancel sent");
    wait_until_async("the fixture's sleep cancelled", || {
        fs::read_to_string(&stderr_log).is_ok_and(|t| t.contains("sleep cancelled"))
    })
    .await;
    // The gateway still works afterwards.
    let again = served.call("mcp__slow__sleep", json!({"ms": 10})).await;
    assert_eq!(text(&again), "slept 10 ms");
    served.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_on_a_dying_server_fails_clearly_and_a_pending_one_never_spawns() {
    let p = Project::new();
    let dying = with_args(p.server("dying", "sleep"), &["--crash-after", "1500"]);
    p.write_settings(json!({"mcpServers": {"dying": dying}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let served = Served::start(&p).await;
    // The gateway's status tool too: the project server waits for approval.
    assert_eq!(
        served.tool_names().await,
        ["mcp__dying__sleep", "mcp_reconcile_status"]
    );
    let started = Instant::now();
    let result = served.call("mcp__dying__sleep", json!({"ms": 60000})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let message = text(&result);
    assert!(
        message.contains("dying") && message.contains("closed"),
        "{message}"
    );
    assert!(
        message.contains("crashing as asked"),
        "the stderr tail says why: {message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the call failed when the server died, not at its timeout"
    );
    // status --json goes to the same session.
    let s = p.status();
    assert!(s
        .iter()
        .any(|x| x["name"] == "proj" && x["reason"] == "pending_approval"));
    assert_eq!(p.spawns("proj"), 0);
    served.close().await;
}

/// `serve --http 127.0.0.1:0`: every HTTP client is a session of the same host; each hears
/// An edit that only removes a server is announced by itself: nothing else happens after it
/// (no start, no event) that could wake the session and carry the announcement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_that_only_removes_a_server_is_announced_at_once() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo"),
    }}));
    let mut served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo", "mcp__b__echo"]);
    p.write_settings(json!({"mcpServers": {"b": p.server("b", "echo")}}));
    served.tools_changed().await;
    assert_eq!(served.tool_names().await, ["mcp__b__echo"]);
    served.close().await;
}

/// `list_changed`, also when a server changes its own list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_every_client_hears_list_changed() {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;
    use tokio::io::AsyncBufReadExt;

    let p = Project::new();
    let late = with_args(p.server("late", "echo"), &["--change-tools-after", "1500"]);
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo"), "late": late}}));
    let err = fs::File::create(p.path("serve.log")).expect("log file");
    let mut command = std::process::Command::new(cli());
    command
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .process_group(0);
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .expect("serve starts");
    let group = KillGroup(child.id().expect("a pid"));
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .expect("the URL in time")
        .expect("stdout")
        .expect("a URL line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // The next line is the file with this run's bearer token.
    let token_file = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .expect("the token file in time")
        .expect("stdout")
        .expect("a token file line");
    let token = fs::read_to_string(&token_file).expect("the token file");
    let token = token.trim().to_owned();

    let mut clients = Vec::new();
    mcp_reconcile::tls::install_crypto_provider();
    for _ in 0..2 {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("HTTP client");
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(token.clone()),
        );
        let (tx, heard) = mpsc::unbounded_channel();
        let client = tokio::time::timeout(PATIENCE, Listener { heard: tx }.serve(transport))
            .await
            .expect("handshake in time")
            .expect("handshake");
        clients.push((client, heard));
    }
    for (client, _) in &clients {
        let names = tool_names(client).await;
        assert!(names.starts_with(&["mcp__a__echo".to_owned()]), "{names:?}");
    }
    // `late` adds a tool on its own after 1.5 s and says so: relayed to both clients.
    for (client, heard) in &mut clients {
        let start = Instant::now();
        loop {
            let names = tool_names(client).await;
            if names.contains(&"mcp__late__late".to_owned()) {
                break;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "late tool never listed: {names:?}"
            );
            match tokio::time::timeout(PATIENCE, heard.recv()).await {
                Ok(Some(_)) => {}
                _ => panic!("no list_changed for the server's own change"),
            }
        }
    }
    // A settings edit: both hear it.
    p.write_settings(
        json!({"mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")}}),
    );
    for (client, heard) in &mut clients {
        let start = Instant::now();
        loop {
            let names = tool_names(client).await;
            if names == ["mcp__a__echo", "mcp__b__echo"] {
                break;
            }
            assert!(start.elapsed() < PATIENCE, "edit never seen: {names:?}");
            let _ = tokio::time::timeout(PATIENCE, heard.recv()).await;
        }
    }
    let pids_before: Vec<u64> = ["a", "b", "late"]
        .iter()
        .flat_map(|n| pids(&p, n))
        .collect();
    for (client, _) in clients {
        let _ = client.cancel().await;
    }
    // SIGTERM stops serve and every server.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(group.0 as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .expect("serve exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");
    wait_until_async("every server process gone", || {
        pids_before.iter().all(|pid| !alive(*pid))
    })
    .await;
}

/// A server that hangs in its handshake does not hold up the first listing for its whole
/// timeout: after a bounded wait the client gets what is connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_server_does_not_block_the_first_listing() {
    let p = Project::new();
    let mut slow = with_args(p.server("slow", "echo"), &["--hang-handshake"]);
    slow["discoveryTimeoutMs"] = json!(60000);
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo"), "slow": slow}}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo"]);
    let s = p.status();
    assert_eq!(state_of(&s, "slow"), "connecting", "{s:#?}");
    let all: Vec<u64> = ["a", "slow"].iter().flat_map(|n| pids(&p, n)).collect();
    assert_eq!(all.len(), 2);
    served.close().await;
    wait_until_async("every server process gone, the connecting one too", || {
        all.iter().all(|pid| !alive(*pid))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_resources_are_offered_and_forwarded() {
    let p = Project::new();
    let rich = with_args(
        p.server("rich", "echo"),
        &["--prompts", "greet", "--resources", "1"],
    );
    p.write_settings(json!({"mcpServers": {"rich": rich}}));
    let served = Served::start(&p).await;
    let client = served.client();
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["mcp__rich__greet"]);
    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("Ada"));
    let prompt = client
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new("mcp__rich__greet").with_arguments(args),
        )
        .await
        .expect("prompts/get forwarded");
    assert!(format!("{:?}", prompt.messages).contains("Say hello to Ada."));
    let resources = client.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["fixture://resources/1"]);
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "fixture://resources/1",
        ))
        .await
        .expect("resources/read forwarded");
    assert!(format!("{:?}", read.contents).contains("fixture resource 1"));
    assert!(client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("mcp__gone__greet"))
        .await
        .is_err());
    served.close().await;
}

/// The language tools (SPEC §14.5) over a real `vscode-json-language-server`: diagnostics of
/// the file on disk, a settings-only edit that changes the answer (pushed to the same process),
/// symbols with 1-based positions, clear tool errors, and `list_changed` when the tools come and
/// go with the language servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn language_tools_answer_from_the_running_server_and_follow_its_settings() {
    let server = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/.bin/vscode-json-language-server");
    assert!(
        server.exists(),
        "{} is missing: run `bash scripts/setup.sh`",
        server.display()
    );
    let p = Project::new();
    let entry = |validate: bool| {
        json!({"json": {
            "command": server.to_string_lossy(),
            "args": ["--stdio"],
            "extensionToLanguage": {".json": "json"},
            "settings": {"json": {"validate": {"enable": validate}}},
        }})
    };
    fs::write(p.path("project/broken.json"), "{\"a\": 1,,}\n").expect("write");
    fs::write(
        p.path("project/ok.json"),
        "{\n  \"name\": \"x\",\n  \"list\": [1]\n}\n",
    )
    .expect("write");
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(&p.user_lsp(), &entry(true));
    let mut served = Served::start(&p).await;
    let names = served.tool_names().await;
    for tool in [
        "lsp_diagnostics",
        "lsp_hover",
        "lsp_definition",
        "lsp_references",
        "lsp_document_symbols",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} in {names:?}");
    }

    let parsed = |result: &CallToolResult| -> Value {
        assert_ne!(result.is_error, Some(true), "{}", text(result));
        serde_json::from_str(&text(result)).expect("JSON text")
    };
    let found = parsed(
        &served
            .call("lsp_diagnostics", json!({"path": "broken.json"}))
            .await,
    );
    let found = found.as_array().cloned().unwrap_or_default();
    assert!(!found.is_empty(), "a syntax error is reported");
    assert!(
        found.iter().all(|d| d["line"] == 1),
        "1-based lines: {found:?}"
    );

    let symbols = parsed(
        &served
            .call("lsp_document_symbols", json!({"path": "ok.json"}))
            .await,
    );
    let symbol_names: Vec<&str> = symbols
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(symbol_names, ["name", "list"]);
    assert_eq!(symbols[0]["line"], 2, "1-based: {symbols}");

    // A settings-only edit: pushed to the same process, and the answer follows it.
    let before = p.status();
    let lsp = |s: &[Value]| {
        s.iter()
            .find(|x| x["kind"] == "lsp")
            .cloned()
            .unwrap_or_default()
    };
    let pid = lsp(&before)["pid"].clone();
    p.write(&p.user_lsp(), &entry(false));
    let after = p.wait_for("the settings pushed", |s| lsp(s)["settingsPushes"] == 2);
    assert_eq!(lsp(&after)["pid"], pid, "the same process");
    let found = parsed(
        &served
            .call("lsp_diagnostics", json!({"path": "broken.json"}))
            .await,
    );
    assert_eq!(found, json!([]), "validation is off now");

    // Tool errors that say why.
    let outside = served
        .call("lsp_diagnostics", json!({"path": "../x.json"}))
        .await;
    assert_eq!(outside.is_error, Some(true));
    assert!(
        text(&outside).contains("outside the project"),
        "{}",
        text(&outside)
    );
    let unrouted = served
        .call(
            "lsp_hover",
            json!({"path": "a.py", "line": 1, "character": 1}),
        )
        .await;
    assert_eq!(unrouted.is_error, Some(true));
    assert!(
        text(&unrouted).contains("no language server handles .py"),
        "{}",
        text(&unrouted)
    );

    // No language server configured any more: the tools go, with list_changed.
    p.write(&p.user_lsp(), &json!({}));
    let start = Instant::now();
    loop {
        served.tools_changed().await;
        if !served
            .tool_names()
            .await
            .iter()
            .any(|n| n.starts_with("lsp_"))
        {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the language tools never left");
    }
    served.close().await;
}

/// A language server restarted by a seed edit gets the documents its predecessor had open
/// (SPEC §14.4), so its answers do not start from an empty workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_language_server_gets_the_open_documents_again() {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lsp_edge_server.py");
    let p = Project::new();
    let opened = p.path("opened.log");
    let entry = |mode_flag: &str| {
        json!({"edge": {
            "command": "python3",
            "args": [script.to_string_lossy(), "normal", mode_flag],
            "env": {"OPENED_LOG": opened.to_string_lossy()},
            "extensionToLanguage": {".txt": "plaintext"},
        }})
    };
    fs::write(p.path("project/notes.txt"), "hello\n").expect("write");
    p.write(&p.user_lsp(), &entry("first"));
    let served = Served::start(&p).await;
    let first = served
        .call("lsp_diagnostics", json!({"path": "notes.txt"}))
        .await;
    assert_ne!(first.is_error, Some(true), "{}", text(&first));
    let lines = || fs::read_to_string(&opened).unwrap_or_default();
    assert_eq!(lines().lines().count(), 1, "{}", lines());

    // A seed edit: a new process, which is handed notes.txt without being asked about it.
    p.write(&p.user_lsp(), &entry("second"));
    wait_until_async("the new process opened notes.txt", || {
        let log = lines();
        let pids: std::collections::BTreeSet<&str> =
            log.lines().filter_map(|l| l.split(' ').next()).collect();
        pids.len() == 2 && log.lines().all(|l| l.ends_with("/notes.txt"))
    })
    .await;
    served.close().await;
}

/// Make before break: while a changed server's new process starts, the old one keeps serving
/// (its tools stay listed, calls reach it); a new process that cannot come up beside it gets
/// the old one stopped and is started once more. `"stopBeforeRestart": true` opts out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_server_keeps_serving_until_its_replacement_is_up() {
    let p = Project::new();
    let server = |extra: &[&str], opt_out: bool| {
        let mut s = with_args(p.server("a", "echo"), extra);
        s["discoveryTimeoutMs"] = json!(3000);
        if opt_out {
            s["stopBeforeRestart"] = json!(true);
        }
        s
    };
    p.write_settings(json!({"mcpServers": {"a": server(&[], false)}}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo"]);
    let old = pids(&p, "a");
    assert_eq!(old.len(), 1);

    // The replacement never finishes its handshake: until it gives up, the old one serves.
    p.write_settings(json!({"mcpServers": {"a": server(&["--hang-handshake"], false)}}));
    wait_until_async("the replacement spawned", || pids(&p, "a").len() == 2).await;
    assert!(alive(old[0]), "the old process still runs");
    assert_eq!(
        served.tool_names().await,
        ["mcp__a__echo"],
        "its tools stay offered"
    );
    let a = p
        .status()
        .into_iter()
        .find(|s| s["name"] == "a")
        .expect("a");
    assert_eq!(
        (a["tools"].as_u64(), a["pid"].as_u64()),
        (Some(1), Some(old[0])),
        "status counts what the old process still offers: {a}"
    );
    let answer = served
        .call("mcp__a__echo", json!({"text": "still here"}))
        .await;
    assert_ne!(answer.is_error, Some(true), "{}", text(&answer));
    assert!(text(&answer).contains("still here"));
    // It gave up beside the old one: the old one is stopped and it is started once more.
    wait_until_async("the old process stopped and a third start", || {
        !alive(old[0]) && pids(&p, "a").len() >= 3
    })
    .await;
    assert!(
        served
            .log()
            .contains("could not start beside the running one"),
        "{}",
        served.log()
    );

    // Opted out: stopped first, then started (no second process beside it).
    p.write_settings(json!({"mcpServers": {"a": server(&[], true)}}));
    wait_until_async("a connected again", || {
        p.status()
            .iter()
            .any(|s| s["name"] == "a" && s["state"] == "connected")
    })
    .await;
    // (A hanging start still under way when the entry changed ends at its handshake timeout.)
    let running = || -> Vec<u64> { pids(&p, "a").into_iter().filter(|p| alive(*p)).collect() };
    wait_until_async("one process left", || running().len() == 1).await;
    let before = running();
    p.write_settings(json!({"mcpServers": {"a": server(&["--resources", "1"], true)}}));
    wait_until_async("the opted-out server replaced", || {
        let now = running();
        now.len() == 1 && now != before
    })
    .await;
    served.close().await;
}

/// A call a client made to a changed server before its replacement came up is answered by the
/// old process: that one is stopped only once the calls routed to it are done (within a bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_across_a_replacement_is_answered() {
    let p = Project::new();
    let server = |extra: &[&str]| with_args(p.server("a", "echo,sleep"), extra);
    p.write_settings(json!({"mcpServers": {"a": server(&[])}}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo", "mcp__a__sleep"]);
    let old = pids(&p, "a");
    assert_eq!(old.len(), 1);
    let peer = served.client().peer().clone();
    let params = CallToolRequestParams::new("mcp__a__sleep")
        .with_arguments(json!({"ms": 3000}).as_object().cloned().unwrap_or_default());
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    p.write_settings(json!({"mcpServers": {"a": server(&["--resources", "1"])}}));
    wait_until_async("the replacement connected", || {
        pids(&p, "a").len() == 2
            && p.status()
                .iter()
                .any(|s| s["name"] == "a" && s["state"] == "connected" && s["resources"] == 1)
    })
    .await;
    let answer = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("answered in time")
        .expect("call task")
        .expect("tools/call answers");
    assert_ne!(answer.is_error, Some(true), "{}", text(&answer));
    assert_eq!(text(&answer), "slept 3000 ms");
    wait_until_async("the old process stopped", || !alive(old[0])).await;
    served.close().await;
}

/// `status` counts the tools a client is offered, after `includeTools` / `excludeTools`, not
/// every tool the server lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_the_tools_a_client_is_offered() {
    let p = Project::new();
    let mut included = p.server("inc", "echo,add,sleep");
    included["includeTools"] = json!(["add"]);
    let mut excluded = p.server("exc", "echo,add,sleep");
    excluded["excludeTools"] = json!(["sleep"]);
    p.write_settings(json!({"mcpServers": {"inc": included, "exc": excluded}}));
    let served = Served::start(&p).await;
    let names = served.tool_names().await;
    assert_eq!(names, ["mcp__inc__add", "mcp__exc__echo", "mcp__exc__add"]);
    let s = p.status();
    let tools = |name: &str| {
        s.iter()
            .find(|x| x["name"] == name)
            .map(|x| x["tools"].clone())
    };
    assert_eq!(tools("inc"), Some(json!(1)), "{s:#?}");
    assert_eq!(tools("exc"), Some(json!(2)), "{s:#?}");
    served.close().await;
}

/// A client that calls a tool, gets a prompt or reads a resource it knows (from an earlier
/// session, say) before the start pass has finished waits for the pass, as `tools/list` does,
/// instead of hearing "not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_the_start_pass_finishes_wait_for_it() {
    let p = Project::new();
    // The server is slow to start, so the client's first requests arrive while it connects.
    let fixture_args = with_args(
        p.server("slow", "echo"),
        &["--prompts", "greet", "--resources", "1"],
    )["args"]
        .clone();
    let mut args = vec![
        json!("-c"),
        json!("sleep 2; exec \"$0\" \"$@\""),
        json!(fixture().to_string_lossy()),
    ];
    args.extend(fixture_args.as_array().cloned().unwrap_or_default());
    p.write_settings(json!({"mcpServers": {"slow": {"command": "sh", "args": args}}}));
    let served = Served::start(&p).await;
    let client = served.client();
    let mut greet = serde_json::Map::new();
    greet.insert("name".into(), json!("Ada"));
    let (echo, prompt, read) = tokio::join!(
        served.call("mcp__slow__echo", json!({"text": "early"})),
        client.get_prompt(
            rmcp::model::GetPromptRequestParams::new("mcp__slow__greet").with_arguments(greet)
        ),
        client.read_resource(rmcp::model::ReadResourceRequestParams::new(
            "fixture://resources/1"
        )),
    );
    assert_ne!(echo.is_error, Some(true), "{}", text(&echo));
    assert_eq!(text(&echo), "early");
    let prompt = prompt.expect("prompts/get waits for the start pass");
    assert!(format!("{:?}", prompt.messages).contains("Say hello to Ada."));
    let read = read.expect("resources/read waits for the start pass");
    assert!(format!("{:?}", read.contents).contains("fixture resource 1"));
    served.close().await;
}

/// A tool of a server that keeps failing answers with what the host knows of it (backing off,
/// when it is retried, its stderr tail), not "may be disconnected or still starting up".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_of_a_failing_server_says_what_the_host_knows() {
    let p = Project::new();
    let failing = with_args(
        p.server("failing", "echo"),
        &["--stderr-lines", "1", "--exit-immediately"],
    );
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo"), "failing": failing}}));
    let served = Served::start(&p).await;
    // The gateway's status tool too: a server is failing.
    assert_eq!(
        served.tool_names().await,
        ["mcp__a__echo", "mcp_reconcile_status"]
    );
    // Between its retries it backs off; a call that lands while a retry connects hears that.
    served.backing_off("failing", "mcp__failing__echo").await;
    served.close().await;
}

/// `serve --passthrough NAME`: one server under its own names (no `mcp__NAME__` prefix),
/// nothing of the others, and hot reload as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_offers_one_server_under_its_own_names_and_follows_edits() {
    let p = Project::new();
    let extra = ["--prompts", "greet", "--resources", "1"];
    p.write_settings(json!({"mcpServers": {
        "rich": with_args(p.server("rich", "echo,add"), &extra),
        "other": p.server("other", "echo"),
    }}));
    let mut served = Served::start_with(&p, &["--passthrough", "rich"]).await;
    let mut names = served.tool_names().await;
    names.sort();
    assert_eq!(names, ["add", "echo"], "{}", served.log());
    let sum = served.call("add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&sum), "5");
    let qualified = served.call("mcp__rich__add", json!({"a": 1, "b": 1})).await;
    assert_eq!(qualified.is_error, Some(true), "{qualified:?}");
    let other = served.call("mcp__other__echo", json!({"text": "x"})).await;
    assert_eq!(
        other.is_error,
        Some(true),
        "another server stays hidden: {other:?}"
    );

    let client = served.client();
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    let prompt_names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(prompt_names, ["greet"]);
    let mut args = serde_json::Map::new();
    args.insert("name".into(), json!("Ada"));
    let prompt = client
        .get_prompt(rmcp::model::GetPromptRequestParams::new("greet").with_arguments(args))
        .await
        .expect("prompts/get forwarded");
    assert!(format!("{:?}", prompt.messages).contains("Say hello to Ada."));
    let resources = client.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["fixture://resources/1"]);

    // An edit to the server: its new tool appears under its own name.
    p.write_settings(json!({"mcpServers": {
        "rich": with_args(p.server("rich", "echo,add,sleep"), &extra),
        "other": p.server("other", "echo"),
    }}));
    served.tools_changed().await;
    let mut names = served.tool_names().await;
    names.sort();
    assert_eq!(names, ["add", "echo", "sleep"], "{}", served.log());
    served.close().await;
}

/// `completion/complete` goes to the server of the prompt it names, under the server's own
/// prompt name, or to the server that lists the resource template it names; an unknown one is
/// an error, not a hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_is_routed_by_its_prompt_or_template() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "ref": {"command": fixture(), "args": ["--conformance-reference"]},
        "plain": p.server("plain", "echo"),
    }}));
    let served = Served::start(&p).await;
    wait_until_listed(&served, "mcp__ref__test_simple_text").await;
    let client = served.client();
    let complete = |prompt: &str| {
        rmcp::model::CompleteRequestParams::new(
            rmcp::model::Reference::for_prompt(prompt),
            rmcp::model::ArgumentInfo::new("arg1", "par"),
        )
    };
    let done = client
        .complete(complete("mcp__ref__test_prompt_with_arguments"))
        .await
        .expect("completion/complete forwarded");
    assert_eq!(done.completion.values, ["paris", "park", "party"]);
    assert!(client
        .complete(complete("mcp__gone__test_prompt_with_arguments"))
        .await
        .is_err());
    // A resource template's argument goes to the server that lists the template.
    let template = |uri: &str| {
        rmcp::model::CompleteRequestParams::new(
            rmcp::model::Reference::Resource(rmcp::model::ResourceTemplateReference::new(uri)),
            rmcp::model::ArgumentInfo::new("id", "par"),
        )
    };
    let done = client
        .complete(template("test://template/{id}/data"))
        .await
        .expect("completion/complete forwarded by its template");
    assert_eq!(done.completion.values, ["paris", "park", "party"]);
    assert!(client
        .complete(template("test://nobody/{id}"))
        .await
        .is_err());
    served.close().await;
}

async fn wait_until_listed(served: &Served, tool: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !served.tool_names().await.iter().any(|t| t == tool) {
        assert!(
            Instant::now() < deadline,
            "{tool} never listed: {}",
            served.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A real server that asks its client something (`elicitation/create` during a tool call)
/// reaches the real client through `serve`, and the answer goes back; a server removed while
/// its question is pending ends the call with an error that says so — nothing hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_question_reaches_the_client_and_a_removed_server_ends_its_call() {
    let p = Project::new();
    let reference = json!({"command": fixture(), "args": ["--conformance-reference"]});
    p.write_settings(json!({"mcpServers": {
        "ref": reference,
        "a": p.server("a", "echo"),
    }}));
    let mut served = Served::start(&p).await;
    wait_until_listed(&served, "mcp__ref__test_elicitation").await;
    let answered = served
        .call(
            "mcp__ref__test_elicitation",
            json!({"message": "Who are you?"}),
        )
        .await;
    assert_ne!(answered.is_error, Some(true), "{answered:?}");
    let said = text(&answered);
    assert!(
        said.contains("action=accept") && said.contains("ada@example.org"),
        "the client's answer reached the server: {said}"
    );
    let heard = std::iter::from_fn(|| served.heard.try_recv().ok())
        .any(|h| matches!(&h, Heard::Elicited(m) if m == "Who are you?"));
    assert!(heard, "the client was asked");

    // The server goes away while the client has not answered yet.
    let client = served.client().peer().clone();
    let pending = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("mcp__ref__test_elicitation");
        if let Value::Object(map) = json!({"message": "never answered"}) {
            params = params.with_arguments(map);
        }
        client.call_tool(params).await
    });
    let start = Instant::now();
    loop {
        match tokio::time::timeout(PATIENCE, served.heard.recv()).await {
            Ok(Some(Heard::Elicited(m))) if m == "never answered" => break,
            Ok(Some(_)) => {}
            _ => panic!("the second question never reached the client"),
        }
        assert!(start.elapsed() < PATIENCE, "the second question never came");
    }
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let ended = tokio::time::timeout(PATIENCE, pending)
        .await
        .expect("the pending call ends when its server goes away")
        .expect("joined")
        .expect("tools/call answers (a tool error is a result)");
    assert_eq!(ended.is_error, Some(true), "{ended:?}");
    let message = text(&ended);
    assert!(
        message.contains("ref") && message.contains("stopped"),
        "the error says the server went away: {message}"
    );
    served.close().await;
}

/// Resource templates in prefixed mode: offered as the server gives them, a URI no server lists
/// is read from the server whose template produces it, subscriptions are routed by URI, and a
/// URI nobody serves is refused with a message that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_templates_and_subscriptions_are_routed_by_uri() {
    use rmcp::model::{ReadResourceRequestParams, SubscribeRequestParams};
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "ref": {"command": fixture(), "args": ["--conformance-reference"]},
    }}));
    let served = Served::start(&p).await;
    wait_until_listed(&served, "mcp__ref__test_simple_text").await;
    let client = served.client();
    let templates = tokio::time::timeout(PATIENCE, client.list_all_resource_templates())
        .await
        .expect("in time")
        .expect("resources/templates/list");
    let listed: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(listed, ["test://template/{id}/data"]);

    let read = tokio::time::timeout(
        PATIENCE,
        client.read_resource(ReadResourceRequestParams::new("test://template/7/data")),
    )
    .await
    .expect("in time")
    .expect("a templated URI is read from its server");
    let body = serde_json::to_string(&read.contents).expect("JSON");
    assert!(body.contains("Data for ID: 7"), "{body}");

    #[allow(deprecated)]
    let subscribed = client
        .subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await;
    assert!(subscribed.is_ok(), "{subscribed:?}");
    #[allow(deprecated)]
    let refused = client
        .subscribe(SubscribeRequestParams::new("nobody://serves/this"))
        .await;
    let message = format!("{refused:?}");
    assert!(
        refused.is_err() && message.contains("nobody://serves/this"),
        "{message}"
    );
    served.close().await;
}
