//! End-to-end: dev mode (issue 25, item 5). A fixture server whose entry says
//! `"dev": {"watch": …}` over a temp source directory is restarted — make before break — when
//! a matching file is edited, and only then; in `watch --no-daemon`, in `serve` and in a daemon
//! session. Real processes, real file edits; "nothing happened" is checked behind a barrier (a
//! second dev server's restart, whose file was edited after), never after a sleep.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use rmcp::model::CallToolRequestParams;
use serde_json::{json, Value};

/// A fixture server `name` running in `dir` that restarts when `globs` change.
fn dev_server(p: &Project, name: &str, tools: &str, dir: &Path, globs: Value) -> Value {
    let mut server = p.server(name, tools);
    server["cwd"] = json!(dir.to_string_lossy());
    server["dev"] = json!({ "watch": globs });
    server
}

/// A source tree in the temp dir: `files` created (with their directories).
fn sources(p: &Project, dir: &str, files: &[&str]) -> PathBuf {
    let root = p.path(dir);
    for file in files {
        let path = root.join(file);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, "// v0\n").expect("write");
    }
    root
}

/// Saves `path` as an editor does (temp file + rename) with new content.
fn save(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp~");
    fs::write(&tmp, content).expect("write");
    fs::rename(&tmp, path).expect("rename");
}

/// The number of passes whose trigger mentions `text`.
fn passes_with(watch: &Watch, text: &str) -> usize {
    watch
        .pass_headers()
        .iter()
        .filter(|h| h.contains(text))
        .count()
}

#[test]
fn a_matching_source_edit_restarts_only_that_server_and_other_edits_nothing() {
    let p = Project::new();
    let app = sources(&p, "app", &["src/deep/x.ts", "src/x.js", "notes.txt"]);
    let lib = sources(&p, "lib", &["y.py"]);
    p.write_settings(json!({"mcpServers": {
        "dev": dev_server(&p, "dev", "echo", &app, json!("src/**/*.ts")),
        // Absolute glob, one level: the barrier of the checks below.
        "barrier": dev_server(&p, "barrier", "echo", &app, json!([lib.join("*.py").to_string_lossy()])),
        "plain": p.server("plain", "echo"),
    }}));
    let watch = p.watch();
    let s = p.wait_for("all connected", |s| {
        all_connected(s, &["dev", "barrier", "plain"])
    });
    let (dev, plain) = (pid_of(&s, "dev"), pid_of(&s, "plain"));

    // Files the glob does not name: nothing restarts. The barrier's edit comes after them, so
    // once the barrier has restarted, they have been seen.
    save(&app.join("notes.txt"), "notes");
    save(&app.join("src/x.js"), "// js");
    fs::write(app.join("src/deep/x.ts.orig"), "backup").expect("write");
    let barrier = pid_of(&s, "barrier");
    save(&lib.join("y.py"), "# v1");
    let s = p.wait_for("the barrier restarted", |s| {
        state_of(s, "barrier") == "connected" && pid_of(s, "barrier") != barrier
    });
    assert_eq!(pid_of(&s, "dev"), dev, "{s:#?}");
    assert_eq!(p.spawns("dev"), 1);
    watch.wait_output("the barrier's restart line", |o| {
        o.contains("~ reconnect barrier (source changed: ")
    });
    assert_eq!(
        passes_with(&watch, "source changed"),
        1,
        "{}",
        watch.output()
    );

    // A matching file, two directories down: dev restarts, the others keep their process.
    save(&app.join("src/deep/x.ts"), "// v1");
    let s = p.wait_for("dev restarted", |s| {
        state_of(s, "dev") == "connected" && pid_of(s, "dev").is_some() && pid_of(s, "dev") != dev
    });
    assert_eq!(
        field(&s, "dev", "tools"),
        &json!(1),
        "its tools are listed again"
    );
    assert_eq!(pid_of(&s, "plain"), plain);
    assert_ne!(pid_of(&s, "barrier"), barrier);
    assert_eq!(p.spawns("barrier"), 2);
    assert_eq!(p.spawns("plain"), 1);
    watch.wait_output("the restart says why", |o| {
        o.contains("~ reconnect dev (source changed: src/deep/x.ts)")
            && o.contains("(source changed: src/deep/x.ts)")
    });
    // The old process is retired once its replacement is up.
    wait_until("the old dev process to exit", || !alive(dev.unwrap_or(0)));
    watch.stop();
}

#[test]
fn a_burst_of_saves_is_one_restart() {
    let p = Project::new();
    let app = sources(&p, "app", &["src/x.ts", "src/y.ts"]);
    let lib = sources(&p, "lib", &["y.py"]);
    p.write_settings(json!({"mcpServers": {
        "dev": dev_server(&p, "dev", "echo", &app, json!("src/*.ts")),
        "barrier": dev_server(&p, "barrier", "echo", &lib, json!("*.py")),
    }}));
    // A long debounce: the burst below is written well inside it.
    let watch = p.watch_with(&["--debounce-ms", "1500"]);
    let s = p.wait_for("both connected", |s| all_connected(s, &["dev", "barrier"]));
    let dev = pid_of(&s, "dev");
    for i in 0..10 {
        save(&app.join("src/x.ts"), &format!("// v{i}"));
        fs::write(app.join("src/y.ts"), format!("// in place {i}")).expect("write");
    }
    p.wait_for("dev restarted", |s| {
        state_of(s, "dev") == "connected" && pid_of(s, "dev") != dev
    });
    // Everything of the burst was seen before the barrier's edit.
    let barrier = pid_of(&p.status(), "barrier");
    save(&lib.join("y.py"), "# v1");
    p.wait_for("the barrier restarted", |s| {
        state_of(s, "barrier") == "connected" && pid_of(s, "barrier") != barrier
    });
    assert_eq!(p.spawns("dev"), 2, "one restart for the burst");
    assert_eq!(
        passes_with(&watch, "source changed: src/"),
        1,
        "{}",
        watch.output()
    );
}

/// A call in flight when the sources change is answered by the old process, which is stopped
/// only afterwards; the new one is listed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_across_a_source_restart_is_answered() {
    let p = Project::new();
    let app = sources(&p, "app", &["main.py"]);
    p.write_settings(json!({"mcpServers": {
        "a": dev_server(&p, "a", "echo,sleep", &app, json!("*.py")),
    }}));
    let served = Served::start(&p).await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo", "mcp__a__sleep"]);
    let old = pids(&p, "a");
    assert_eq!(old.len(), 1);
    let peer = served.client().peer().clone();
    let params = CallToolRequestParams::new("mcp__a__sleep")
        .with_arguments(json!({"ms": 3000}).as_object().cloned().unwrap_or_default());
    let call = tokio::spawn(async move { peer.call_tool(params).await });
    save(&app.join("main.py"), "print('v1')");
    wait_until_async("the replacement connected", || {
        pids(&p, "a").len() == 2
            && p.status()
                .iter()
                .any(|s| s["name"] == "a" && s["state"] == "connected" && s["pid"] != json!(old[0]))
    })
    .await;
    assert_eq!(served.tool_names().await, ["mcp__a__echo", "mcp__a__sleep"]);
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

/// In a daemon session a relative glob starts from the session's project root (the server has
/// no `cwd`: it runs there), and a source edit restarts the pooled process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_session_restarts_a_server_whose_sources_changed() {
    let p = Project::new();
    let root = p.path("project");
    fs::create_dir_all(root.join("src")).expect("mkdir");
    fs::write(root.join("src/x.ts"), "// v0").expect("write");
    let mut dev = p.server("dev", "echo");
    dev["dev"] = json!({"watch": "src/*.ts"});
    p.write_settings(json!({"mcpServers": {"dev": dev, "plain": p.server("plain", "echo")}}));
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    let _daemon = start_daemon(&p, &runtime);
    let log = p.path("serve.log");
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("MCP_RECONCILE_LOG", "info")
        .stderr(fs::File::create(&log).expect("log"));
    let served = Served::spawn(command, log).await;
    served
        .wait_tools("both listed", |names| names.len() == 2)
        .await;
    let (dev, plain) = (pids(&p, "dev"), pids(&p, "plain"));
    assert_eq!((dev.len(), plain.len()), (1, 1));
    save(&root.join("src/x.ts"), "// v1");
    wait_until_async("dev restarted", || pids(&p, "dev").len() == 2).await;
    served
        .wait_tools("dev listed again", |names| {
            names.iter().any(|n| n == "mcp__dev__echo")
        })
        .await;
    let answer = served.call("mcp__dev__echo", json!({"text": "new"})).await;
    assert_eq!(text(&answer), "new");
    wait_until_async("the old process stopped", || !alive(dev[0])).await;
    assert_eq!(pids(&p, "plain"), plain);
    assert!(alive(plain[0]));
    served.close().await;
}

/// A project's glob is armed only once its entry is approved, and can never make the host
/// watch the whole disk or more directories than the session's bound: the session says which
/// server of which file is not watched, and the server itself runs as usual.
#[test]
fn a_repository_glob_is_bounded_and_applies_only_once_approved() {
    let p = Project::new();
    let app = sources(&p, "project/tool", &["src/x.ts"]);
    // More directories than a session watches for dev mode.
    let wide = p.path("project/wide");
    for i in 0..=mcp_reconcile_kernel::dev::MAX_WATCHED_DIRS / 2 {
        fs::create_dir_all(wide.join(format!("d{i}/e"))).expect("mkdir");
    }
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {
            "everything": dev_server(&p, "everything", "echo", &app, json!("/**/*.ts")),
            "wide": dev_server(&p, "wide", "echo", &wide, json!("**/*.ts")),
            "tool": dev_server(&p, "tool", "echo", &app, json!("src/*.ts")),
        }}),
    );
    let watch = p.watch();
    p.wait_for("all pending", |s| {
        ["everything", "wide", "tool"]
            .iter()
            .all(|n| state_of(s, n) == "skipped")
    });
    let errors = || output_text(&p.run(&["status", "--json"]));
    assert!(!errors().contains("dev mode"), "{}", errors());

    assert!(p.run(&["approve", "--all"]).status.success());
    let s = p.wait_for("all connected", |s| {
        all_connected(s, &["everything", "wide", "tool"])
    });
    let said = errors();
    let file = p.mcp_json().display().to_string();
    assert!(
        said.contains(&format!(
            "dev mode is off for server \"everything\" ({file})"
        )) && said.contains("would watch the whole file system"),
        "{said}"
    );
    assert!(
        said.contains(&format!("dev mode is off for server \"wide\" ({file})"))
            && said.contains(&format!(
                "needs more than {} directories",
                mcp_reconcile_kernel::dev::MAX_WATCHED_DIRS
            )),
        "{said}"
    );
    assert!(!said.contains("server \"tool\""), "{said}");
    watch.wait_output("the pass says it too", |o| {
        o.contains("! dev mode is off for server \"wide\"")
    });
    // The bounded one still works.
    let tool = pid_of(&s, "tool");
    save(&app.join("src/x.ts"), "// v1");
    p.wait_for("tool restarted", |s| {
        state_of(s, "tool") == "connected" && pid_of(s, "tool") != tool
    });
}

/// The `server` lines a fixture's `--marker` file holds: how many times it started.
fn starts(marker: &Path) -> usize {
    fs::read_to_string(marker)
        .map(|t| t.lines().filter(|l| l.starts_with("server")).count())
        .unwrap_or(0)
}

/// What `status` says of the inputs and dev mode (its error lines).
fn status_errors(p: &Project) -> String {
    String::from_utf8_lossy(&p.run(&["status", "--json"]).stderr).into_owned()
}

/// Guards the restart-storm brake: a server that writes into its own watched folder when it
/// starts is restarted at most the brake's count, then its dev restarts pause and status says
/// so, until a reconnect or a change after its sources were quiet.
#[test]
fn a_server_writing_into_its_own_watched_folder_is_paused_after_the_brakes_count() {
    use mcp_reconcile_kernel::dev::{BRAKE_QUIET, BRAKE_RESTARTS};
    let p = Project::new();
    let app = sources(&p, "app", &["src/x.ts"]);
    let lib = sources(&p, "lib", &["y.py"]);
    // The fixture appends `server PID` to its marker when it starts: inside its own glob.
    let log = app.join("src/started.log");
    let mut storm = dev_server(&p, "storm", "echo", &app, json!("src/*"));
    storm["args"] = json!(["--name", "storm", "--marker", log.to_string_lossy()]);
    p.write_settings(json!({"mcpServers": {
        "storm": storm,
        "barrier": dev_server(&p, "barrier", "echo", &lib, json!("*.py")),
    }}));
    let watch = p.watch_with(&["--debounce-ms", "100"]);
    p.wait_for("both connected", |s| {
        all_connected(s, &["storm", "barrier"])
    });
    // Its first start may come before the watches are armed: an edit starts the storm.
    save(&app.join("src/x.ts"), "// v1");
    let paused = "dev mode paused for server \"storm\": restarted 5 times in 10 s by changes \
                  under src/started.log";
    wait_until("the storm paused", || status_errors(&p).contains(paused));
    let said = status_errors(&p);
    assert!(said.contains("`mcp-reconcile reconnect storm`"), "{said}");
    let at_pause = starts(&log);
    assert!(at_pause > BRAKE_RESTARTS, "{at_pause} starts");
    // Behind a barrier (a later edit's restart): the storm restarted nothing more.
    let s = p.wait_for("storm connected", |s| state_of(s, "storm") == "connected");
    let (storm_pid, barrier) = (pid_of(&s, "storm"), pid_of(&s, "barrier"));
    save(&lib.join("y.py"), "# v1");
    let s = p.wait_for("the barrier restarted", |s| {
        state_of(s, "barrier") == "connected" && pid_of(s, "barrier") != barrier
    });
    assert_eq!(starts(&log), at_pause, "{}", watch.output());
    assert_eq!(pid_of(&s, "storm"), storm_pid);

    // A reconnect resumes dev restarts: its new process's write restarts it again, until the
    // brake pauses it anew.
    assert!(p.run(&["reconnect", "storm"]).status.success());
    wait_until("dev restarts resumed", || starts(&log) >= at_pause + 2);
    wait_until("the storm paused again", || {
        status_errors(&p).contains(paused)
    });
    let again = starts(&log);
    assert!(again <= at_pause + 1 + BRAKE_RESTARTS, "{again} starts");

    // Quiet for the brake's period, then an edit restarts it too.
    std::thread::sleep(std::time::Duration::from_millis(BRAKE_QUIET.0 + 500));
    save(&app.join("src/x.ts"), "// v2");
    wait_until("an edit after quiet restarted it", || starts(&log) > again);
    watch.stop();
}

/// The brake is the session engine's, so a daemon session's storm pauses too, and the
/// gateway's attention tells the client (`mcp_reconcile_status`) why and what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_sessions_storm_is_paused_and_the_client_is_told() {
    use mcp_reconcile_kernel::dev::BRAKE_RESTARTS;
    let p = Project::new();
    let app = sources(&p, "app", &["src/x.ts"]);
    let log = app.join("src/started.log");
    let mut storm = dev_server(&p, "storm", "echo", &app, json!("src/*"));
    storm["args"] = json!(["--name", "storm", "--marker", log.to_string_lossy()]);
    p.write_settings(json!({"mcpServers": {"storm": storm}}));
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "100"])
        .stderr(fs::File::create(p.path("serve.log")).expect("log"));
    let _daemon = on_backend(&p, &mut command, true);
    let served = Served::spawn(command, p.path("serve.log")).await;
    served
        .wait_tools("storm listed", |names| {
            names.iter().any(|n| n == "mcp__storm__echo")
        })
        .await;
    save(&app.join("src/x.ts"), "// v1");
    served
        .wait_tools("the status tool offered", |names| {
            names.iter().any(|n| n == "mcp_reconcile_status")
        })
        .await;
    let paused = "dev mode paused for server \\\"storm\\\"";
    let mut said = String::new();
    for _ in 0..200 {
        let status = served.call("mcp_reconcile_status", json!({})).await;
        said = serde_json::to_string(&status.content).expect("json");
        if said.contains(paused) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(said.contains(paused), "{said}");
    assert!(said.contains("reconnect storm"), "{said}");
    let at_pause = starts(&log);
    assert!(at_pause > BRAKE_RESTARTS, "{at_pause} starts");
    served.close().await;
}
