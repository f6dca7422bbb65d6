//! The language tools (SPEC §14.5) against hostile repositories and hostile language servers,
//! through the real tool path (`lsp::tools::call` on a running connection): real servers
//! (vscode-json-language-server from the root `node_modules`, installed by
//! `bash scripts/setup.sh`) and small scripted ones written by the tests.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{installed, KillGroup};

use mcp_reconcile::lsp::connection::{LspConnection, LspEvent, LspStart};
use mcp_reconcile::lsp::tools::{self, LspRoute, LspTool};
use mcp_reconcile_kernel::json::{self, Object, Value};
use serde_json::json;
use tokio::sync::mpsc;

struct Running {
    connection: LspConnection,
    route: LspRoute,
    events: mpsc::UnboundedReceiver<LspEvent>,
    _guard: Option<KillGroup>,
}

impl Running {
    async fn call(&self, tool: LspTool, arguments: serde_json::Value) -> Result<String, String> {
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        tools::call(tool, &self.route, &arguments).await
    }

    async fn stop(self) {
        self.connection.stop().await;
    }
}

fn entry(value: serde_json::Value) -> Object {
    match json::parse(&value.to_string()).expect("valid json") {
        Value::Object(object) => object,
        other => panic!("expected an object, got {other:?}"),
    }
}

/// Starts language server `name` from `entry_json` for the project at `project`, routed as
/// `language`.
async fn start(
    name: &str,
    mut entry_json: serde_json::Value,
    project: &Path,
    language: &str,
) -> Running {
    // Node and Python start slowly on a loaded CI machine; the default is 10 s.
    entry_json["startupTimeout"] = json!(60_000);
    let start = LspStart::from_entry(&entry(entry_json), project).expect("a valid entry");
    let (tx, events) = mpsc::unbounded_channel();
    let connection = LspConnection::start(name, start, 1, tx)
        .await
        .unwrap_or_else(|e| panic!("{name} did not start: {e}"));
    let guard = connection.pid().map(KillGroup);
    let route = LspRoute {
        server: name.to_owned(),
        handle: connection.handle(),
        language_id: language.to_owned(),
        project_root: project.to_path_buf(),
    };
    Running {
        connection,
        route,
        events,
        _guard: guard,
    }
}

fn json_server() -> serde_json::Value {
    json!({
        "command": installed("node_modules/.bin/vscode-json-language-server"),
        "args": ["--stdio"],
        "settings": {"json": {"validate": {"enable": true}}},
    })
}

const SECRET: &str = "LEAKED_SECRET_7f3a";

/// A committed symbolic link can lead a language tool anywhere the host can read: a
/// credentials file beside the project, the host's own environment (`/proc/self/environ`: in
/// daemon mode the daemon's), or a file under a linked directory. None of them is opened:
/// the call fails naming the file and why, and nothing of the target comes back. A link that
/// stays inside the project still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn language_tools_never_follow_a_link_out_of_the_project() {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("project");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(
        outside.join("credentials.json"),
        format!("{{\"{SECRET}\": \"hunter2\"}}\n"),
    )
    .expect("write");
    std::fs::write(project.join("real.json"), "{\"inside_key\": 1}\n").expect("write");
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, project.join(name)).expect("symlink");
    };
    link("../outside/credentials.json", "leak.json");
    link("/proc/self/environ", "environ.json");
    link("../outside", "linked");
    link("real.json", "alias.json");

    let json = start("json", json_server(), &project, "json").await;

    let inside = json
        .call(LspTool::DocumentSymbols, json!({"path": "alias.json"}))
        .await
        .expect("a link inside the project is read");
    assert!(inside.contains("inside_key"), "{inside}");

    for name in ["leak.json", "environ.json", "linked/credentials.json"] {
        let at = json!({"path": name, "line": 1, "character": 3});
        for tool in LspTool::ALL {
            let answer = json.call(tool, at.clone()).await;
            let error = answer.expect_err(&format!("{} on {name} is refused", tool.name()));
            assert!(
                error.contains(name) && error.contains("outside the project"),
                "{}: {error}",
                tool.name()
            );
            assert!(!error.contains(SECRET), "{error}");
            assert!(!error.contains("PATH="), "{error}");
        }
    }
    // The server was never handed the outside file: it has only the project's document open.
    let open: Vec<PathBuf> = json
        .route
        .handle
        .open_documents()
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    let real = std::fs::canonicalize(project.join("real.json")).expect("canonical");
    assert_eq!(
        open,
        [real],
        "opened by its resolved path, and nothing else"
    );
    json.stop().await;
}

/// A scripted language server (standard library Python) whose answers are hostile on demand:
/// argv[1] `huge` announces a message of 99999999999 bytes as its answer to any hover; hover at
/// line 1 (0-based 0) answers plainly, at line 2 with an answer nested 300 levels deep, at
/// line 3 with 3 MiB of text; symbols, references and diagnostics come 20000 at a time.
const SCRIPTED_SERVER: &str = r#"
import json, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
MODE = sys.argv[1]

def raw(body):
    out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    out.flush()

def send(message):
    message["jsonrpc"] = "2.0"
    raw(json.dumps(message).encode())

def receive():
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(inp.read(length))

def span(line):
    return {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}}

MANY = 20000
while True:
    message = receive()
    if message is None:
        break
    method = message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        send({"id": message["id"], "result": {"capabilities": {
            "textDocumentSync": 1, "hoverProvider": True, "documentSymbolProvider": True,
            "referencesProvider": True, "definitionProvider": True}}})
    elif method == "textDocument/hover" and MODE == "huge":
        out.write(b"Content-Length: 99999999999\r\n\r\n")
        out.flush()
    elif method == "textDocument/didOpen":
        document = params["textDocument"]
        send({"method": "textDocument/publishDiagnostics", "params": {
            "uri": document["uri"], "version": document["version"],
            "diagnostics": [{"range": span(i), "message": "problem %d" % i} for i in range(MANY)]}})
    elif method == "textDocument/hover":
        line = params["position"]["line"]
        if line == 1:
            raw(b'{"jsonrpc":"2.0","id":%d,"result":{"contents":%s"x"%s}}'
                % (message["id"], b"[" * 300, b"]" * 300))
        else:
            text = "x" * (3 * 1024 * 1024) if line == 2 else "hover from " + MODE
            send({"id": message["id"], "result": {"contents": text}})
    elif method == "textDocument/documentSymbol":
        uri = params["textDocument"]["uri"]
        send({"id": message["id"], "result": [
            {"name": "symbol%d" % i, "kind": 12, "location": {"uri": uri, "range": span(i)}}
            for i in range(MANY)]})
    elif method in ("textDocument/references", "textDocument/definition"):
        uri = params["textDocument"]["uri"]
        send({"id": message["id"], "result": [{"uri": uri, "range": span(i)} for i in range(MANY)]})
    elif method == "shutdown":
        send({"id": message["id"], "result": None})
    elif method == "exit":
        break
    elif "id" in message:
        send({"id": message["id"], "result": None})
"#;

/// The scripted server in `mode`, its script written into `dir`.
fn scripted_server(dir: &Path, mode: &str) -> serde_json::Value {
    let script = dir.join("scripted_server.py");
    std::fs::write(&script, SCRIPTED_SERVER).expect("write the script");
    json!({"command": "python3", "args": [script, mode]})
}

/// Bound on waiting for a connection's end (a failure guard, not a timing assertion).
const PATIENCE: Duration = Duration::from_secs(60);

/// A server that announces a 100 GB message fails its own connection — with a last error that
/// names the server and the limit — instead of making the host allocate it and abort. The
/// host (this test process) lives on, and another language server keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_message_fails_only_its_own_connection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(project.join("doc.txt"), "text\n").expect("write");
    let calm = start(
        "calm",
        scripted_server(dir.path(), "normal"),
        &project,
        "plaintext",
    )
    .await;
    let mut huge = start(
        "huge",
        scripted_server(dir.path(), "huge"),
        &project,
        "plaintext",
    )
    .await;

    // The bad header comes as the answer to a request, once the connection is up (sent at
    // `initialized`, it raced with the end of the start, which then failed instead).
    let at = json!({"path": "doc.txt", "line": 1, "character": 1});
    assert!(huge.call(LspTool::Hover, at.clone()).await.is_err());
    let ended = tokio::time::timeout(PATIENCE, huge.events.recv())
        .await
        .expect("the connection fails")
        .expect("an event");
    let LspEvent::Closed { error, .. } = ended;
    assert!(
        error.contains("`huge`") && error.contains("99999999999") && error.contains("64 MiB"),
        "{error}"
    );

    let answer = calm
        .call(LspTool::Hover, at)
        .await
        .expect("the other server answers");
    assert!(answer.contains("hover from normal"), "{answer}");
    calm.stop().await;
    huge.stop().await;
}

/// An answer nested deeper than serde_json's recursion limit fails that one request with an
/// error that says so; the connection stays up and answers the next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_nested_too_deep_fails_only_that_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(project.join("doc.txt"), "text\n").expect("write");
    let mut server = start(
        "deep",
        scripted_server(dir.path(), "normal"),
        &project,
        "plaintext",
    )
    .await;

    let deep = server
        .call(
            LspTool::Hover,
            json!({"path": "doc.txt", "line": 2, "character": 1}),
        )
        .await
        .expect_err("a too deep answer is an error");
    assert!(
        deep.contains("`deep`") && deep.contains("more than 100 levels"),
        "{deep}"
    );
    let next = server
        .call(
            LspTool::Hover,
            json!({"path": "doc.txt", "line": 1, "character": 1}),
        )
        .await
        .expect("the connection still answers");
    assert!(next.contains("hover from normal"), "{next}");
    assert!(
        server.events.try_recv().is_err(),
        "the connection did not end"
    );
    server.stop().await;
}

/// What a language server answers reaches the MCP client bounded: 3 MiB of hover text and
/// 20000 diagnostics, symbols or references come back as at most 1 MiB of text and 2000 items,
/// with a note of how much was left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_answers_reach_the_client_bounded_with_a_note() {
    use mcp_reconcile::lsp::bounded::{MAX_ITEMS, MAX_OUTPUT_BYTES};
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(project.join("doc.txt"), "text\n").expect("write");
    let server = start(
        "large",
        scripted_server(dir.path(), "normal"),
        &project,
        "plaintext",
    )
    .await;

    let hover = server
        .call(
            LspTool::Hover,
            json!({"path": "doc.txt", "line": 3, "character": 1}),
        )
        .await
        .expect("hover");
    assert!(hover.len() <= MAX_OUTPUT_BYTES, "{} bytes", hover.len());
    let hover: serde_json::Value = serde_json::from_str(&hover).expect("JSON");
    let contents = hover["contents"].as_str().unwrap_or_default();
    assert!(contents.starts_with("xxxx") && contents.contains("… truncated: "));

    let at = json!({"path": "doc.txt", "line": 1, "character": 1});
    for (tool, what) in [
        (LspTool::Diagnostics, "diagnostics"),
        (LspTool::DocumentSymbols, "symbols"),
        (LspTool::References, "locations"),
        (LspTool::Definition, "locations"),
    ] {
        let text = server
            .call(tool, at.clone())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", tool.name()));
        assert!(
            text.len() <= MAX_OUTPUT_BYTES,
            "{}: {} bytes",
            tool.name(),
            text.len()
        );
        let items: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON list");
        assert_eq!(items.len(), MAX_ITEMS + 1, "{}", tool.name());
        let note = items[MAX_ITEMS]["truncated"].as_str().unwrap_or_default();
        assert!(
            note.contains(&format!("18000 more {what}")),
            "{}: {note}",
            tool.name()
        );
        assert_eq!(items[0]["line"], 1, "{}: {}", tool.name(), items[0]);
    }
    server.stop().await;
}

/// A workspace folder inside the project as written but linked out of it (`src -> ..`) would
/// run the server on, and have it read, files outside the project: it is not started, and the
/// error says where the folder leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_folder_linked_out_of_the_project_is_not_started() {
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(dir.path().join("outside")).expect("mkdir");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::os::unix::fs::symlink("../outside", project.join("linked")).expect("symlink");
    let mut entry_json = scripted_server(dir.path(), "normal");
    entry_json["workspaceFolder"] = json!("linked");
    let start = LspStart::from_entry(&entry(entry_json), &project).expect("valid as written");
    let (tx, _events) = mpsc::unbounded_channel();
    let error = LspConnection::start("linked", start, 1, tx)
        .await
        .expect_err("not started");
    assert!(
        error.contains("`linked`") && error.contains("outside the project"),
        "{error}"
    );
}
