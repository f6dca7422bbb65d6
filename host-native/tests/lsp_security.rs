//! The language tools (SPEC §14.5) against hostile repositories and hostile language servers,
//! through the real tool path (`lsp::tools::call` on a running connection): real servers
//! (vscode-json-language-server from the root `node_modules`, installed by
//! `bash scripts/setup.sh`) and small scripted ones written by the tests.

use std::path::{Path, PathBuf};

use mcp_reconcile::lsp::connection::{LspConnection, LspEvent, LspStart};
use mcp_reconcile::lsp::tools::{self, LspRoute, LspTool};
use mcp_reconcile_kernel::json::{self, Object, Value};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::json;
use tokio::sync::mpsc;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// An installed server binary, or a failure that says how to install it.
fn installed(relative: &str) -> String {
    let path = workspace_root().join(relative);
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/setup.sh` at the repository root ({}) first",
        path.display(),
        workspace_root().display()
    );
    path.to_string_lossy().into_owned()
}

/// Kills the server's process group if a test fails before `stop`.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
}

struct Running {
    connection: LspConnection,
    route: LspRoute,
    #[allow(dead_code)] // read by the tests of hostile servers
    events: mpsc::UnboundedReceiver<LspEvent>,
    _guard: GroupGuard,
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
    let guard = GroupGuard(connection.pid());
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
