//! The sharing scopes of the daemon's pool (issue 41), end to end: real `daemon` and `serve`
//! processes, real fixture servers, processes counted by their marker files. Each `serve`
//! brings the per-session environment a real client hands it (measured: Codex's helper
//! directory on `PATH` with a per-session `.lock`, qwen-code's `QWEN_CODE_SESSION_ID`, Claude
//! Code's `CLAUDE_PROJECT_DIR` and `CLAUDE_CODE_SESSION_ID`).

use crate::common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// A `serve` of `project` (a directory under the test's temp dir) on the test's daemon in
/// `runtime`, with `env` on top of the test's environment.
async fn serve(p: &Project, runtime: &Path, project: &str, env: &[(&str, String)]) -> Served {
    let (mut command, log) = serve_command(p, project, 150);
    command
        .env("XDG_RUNTIME_DIR", runtime)
        .envs(env.iter().map(|(k, v)| (k, v)));
    Served::spawn(command, log).await
}

/// Waits until every session lists `tools`.
async fn listing(sessions: &[&Served], tools: &[&str]) {
    for (i, session) in sessions.iter().enumerate() {
        let has = |names: &[String]| tools.iter().all(|t| names.iter().any(|n| n == t));
        session
            .wait_tools(&format!("{tools:?} in session {i}"), has)
            .await;
    }
}

/// `status --json` of `project`'s daemon session (the first one of its files).
fn status(p: &Project, runtime: &Path, project: &str) -> Vec<Value> {
    let out = Command::new(cli())
        .args(["status", "--json"])
        .args(p.flags_in(project))
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        .output()
        .expect("status runs");
    assert!(out.status.success(), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    serde_json::from_str(text.lines().next().unwrap_or("[]")).expect("status JSON")
}

/// The human `status` of `project`'s daemon session.
fn status_text(p: &Project, runtime: &Path, project: &str) -> String {
    let out = Command::new(cli())
        .arg("status")
        .args(p.flags_in(project))
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        .output()
        .expect("status runs");
    output_text(&out)
}

fn server_in<'a>(status: &'a [Value], name: &str) -> &'a Value {
    status
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {status:?}"))
}

/// A Codex-like helper directory for one session: links to the same helper, and a lock file
/// of its own.
fn codex_helper_dir(p: &Project, session: &str) -> PathBuf {
    let helper = p.path("codex-helper");
    if !helper.exists() {
        fs::write(&helper, "#!/bin/sh\nexit 0\n").expect("helper");
        fs::set_permissions(&helper, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let dir = p.path(&format!("codex-arg0-{session}"));
    if !dir.exists() {
        fs::create_dir_all(&dir).expect("dir");
        symlink(&helper, dir.join("apply_patch")).expect("link");
        fs::write(dir.join(".lock"), session).expect("lock file");
    }
    dir
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Codex-like sessions (each its own helper dir with a `.lock` on `PATH`) and qwen-like ones
/// (each its own `QWEN_CODE_SESSION_ID`) share a `project` server; the default gives every
/// session its own process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_of_codex_and_qwen_share_under_project_and_the_default_keeps_them_apart() {
    let p = Project::new();
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime");
    let mut shared = p.server("shared", "echo");
    shared["share"] = json!("project");
    p.write_settings(json!({"mcpServers": {
        "shared": shared,
        "own": p.server("own", "echo"),
    }}));
    let _daemon = start_daemon(&p, &runtime);
    let session = |helper: &str, qwen: &str| {
        vec![
            ("PATH", path_with(&codex_helper_dir(&p, helper))),
            ("QWEN_CODE_SESSION_ID", qwen.to_owned()),
        ]
    };
    // One and two differ only in Codex's helper dir, two and three only in qwen's session id.
    let one = serve(&p, &runtime, "project", &session("1", "q-1")).await;
    let two = serve(&p, &runtime, "project", &session("2", "q-1")).await;
    let three = serve(&p, &runtime, "project", &session("2", "q-3")).await;
    listing(
        &[&one, &two, &three],
        &["mcp__shared__echo", "mcp__own__echo"],
    )
    .await;

    assert_eq!(
        pids(&p, "shared").len(),
        1,
        "one process for three sessions"
    );
    assert_eq!(
        pids(&p, "own").len(),
        3,
        "by default, one process per session"
    );

    let servers = status(&p, &runtime, "project");
    assert_eq!(server_in(&servers, "shared")["share"], "project");
    assert_eq!(server_in(&servers, "shared")["sessions"], 3);
    assert_eq!(server_in(&servers, "own")["share"], "session");
    assert_eq!(server_in(&servers, "own")["sessions"], 1);
    let text = status_text(&p, &runtime, "project");
    assert!(text.contains("shared project, 3 sessions"), "{text}");
    assert!(text.contains("shared session, 1 session"), "{text}");
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", output_text(&out));
}

/// K = 5 Claude-like sessions in 2 projects, one of them in 3 git worktrees, with the servers
/// shared per user: one process per server, run in the home directory without the project's
/// variables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sessions_in_two_projects_and_three_worktrees_share_one_process_per_server() {
    let p = Project::new();
    let runtime = p.path("run");
    let home = p.path("home");
    for dir in [&runtime, &home, &p.path("repo"), &p.path("other")] {
        fs::create_dir_all(dir).expect("dir");
    }
    let repo = p.path("repo");
    git(&repo, &["init", "-q"]);
    fs::write(repo.join("README"), "x").expect("file");
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "one"]);
    for tree in ["tree-1", "tree-2"] {
        let at = p.path(tree);
        git(&repo, &["worktree", "add", "-q", &at.to_string_lossy()]);
    }
    p.write_settings(json!({
        "mcp": {"share": "user"},
        "mcpServers": {
            "a": p.server("a", "echo,env"),
            "b": p.server("b", "echo"),
        },
    }));
    let _daemon = start_daemon(&p, &runtime);
    let mut sessions = Vec::new();
    for (i, project) in ["repo", "tree-1", "tree-2", "other", "repo"]
        .into_iter()
        .enumerate()
    {
        let dir = p.path(project).to_string_lossy().into_owned();
        let env = vec![
            ("HOME", home.to_string_lossy().into_owned()),
            ("CLAUDE_PROJECT_DIR", dir.clone()),
            ("PWD", dir),
            ("CLAUDE_CODE_SESSION_ID", format!("claude-{i}")),
        ];
        sessions.push(serve(&p, &runtime, project, &env).await);
    }
    let all: Vec<&Served> = sessions.iter().collect();
    listing(&all, &["mcp__a__echo", "mcp__b__echo"]).await;
    assert_eq!(pids(&p, "a").len(), 1, "one a for 5 sessions");
    assert_eq!(pids(&p, "b").len(), 1, "one b for 5 sessions");

    // It runs in the home directory, without the variables that name a project.
    let pid = pids(&p, "a")[0];
    let cwd = fs::read_link(format!("/proc/{pid}/cwd")).expect("cwd");
    assert_eq!(cwd, home);
    let project_dir = sessions[1]
        .call_text("mcp__a__env", json!({"name": "CLAUDE_PROJECT_DIR"}))
        .await;
    assert!(project_dir.contains("is not set"), "{project_dir}");
    let servers = status(&p, &runtime, "tree-2");
    assert_eq!(server_in(&servers, "a")["share"], "user");
    assert_eq!(server_in(&servers, "a")["sessions"], 5);
}

/// A repository's entry asking `user` is shared only within its project, and a workspace
/// `mcp.share` never widens what the user's settings allow, only narrows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_cannot_widen_sharing() {
    let p = Project::new();
    let runtime = p.path("run");
    let home = p.path("home");
    fs::create_dir_all(&runtime).expect("runtime");
    fs::create_dir_all(&home).expect("home");
    // The user shares `mine` per user and leaves `plain` at the default; both projects'
    // `.mcp.json` ask `user` for `theirs`.
    let mut mine = p.server("mine", "echo");
    mine["share"] = json!("user");
    p.write_settings(json!({"mcpServers": {"mine": mine, "plain": p.server("plain", "echo")}}));
    let mut theirs = p.server("theirs", "echo");
    theirs["share"] = json!("user");
    for project in ["alpha", "beta"] {
        let dir = p.path(project);
        fs::create_dir_all(dir.join(".mcp-reconcile")).expect("dir");
        p.write(
            &dir.join(".mcp.json"),
            &json!({"mcpServers": {"theirs": theirs}}),
        );
        let out = Command::new(cli())
            .args(["approve", "theirs"])
            .args(p.flags_in(project))
            .stdin(Stdio::null())
            .output()
            .expect("approve runs");
        assert!(out.status.success(), "{}", output_text(&out));
    }
    // Beta's workspace settings ask for `user` as every server's default.
    let workspace = p.path("beta/.mcp-reconcile/settings.json");
    p.write(&workspace, &json!({"mcp": {"share": "user"}}));
    let _daemon = start_daemon(&p, &runtime);
    let env = |project: &str| {
        vec![
            ("HOME", home.to_string_lossy().into_owned()),
            ("PWD", p.path(project).to_string_lossy().into_owned()),
        ]
    };
    let a1 = serve(&p, &runtime, "alpha", &env("alpha")).await;
    let a2 = serve(&p, &runtime, "alpha", &env("alpha")).await;
    let b1 = serve(&p, &runtime, "beta", &env("beta")).await;
    let b2 = serve(&p, &runtime, "beta", &env("beta")).await;
    let tools = ["mcp__mine__echo", "mcp__plain__echo", "mcp__theirs__echo"];
    listing(&[&a1, &a2, &b1, &b2], &tools).await;
    assert_eq!(
        pids(&p, "mine").len(),
        1,
        "the user's own server: one process"
    );
    assert_eq!(
        pids(&p, "theirs").len(),
        2,
        "a repository's server: one process per project"
    );
    assert_eq!(
        pids(&p, "plain").len(),
        4,
        "beta's workspace did not widen the default: one process per session"
    );
    let alpha = status(&p, &runtime, "alpha");
    assert_eq!(server_in(&alpha, "theirs")["share"], "project");
    assert_eq!(server_in(&alpha, "theirs")["sessions"], 2);
    assert_eq!(server_in(&alpha, "mine")["sessions"], 4);

    // A workspace narrowing is kept: beta's settings now say `session`, so its next session
    // gets a process of `mine` of its own.
    p.write(&workspace, &json!({"mcp": {"share": "session"}}));
    let b3 = serve(&p, &runtime, "beta", &env("beta")).await;
    listing(&[&b3], &tools).await;
    assert_eq!(pids(&p, "mine").len(), 2, "beta's workspace narrowed it");
}

/// A process of scope `session` is that session's alone, so it stops when the session ends
/// instead of draining (no later session could take it over); a `project` one still drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_own_process_stops_with_it_and_a_shared_one_drains() {
    let p = Project::new();
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime");
    let mut shared = p.server("shared", "echo");
    shared["share"] = json!("project");
    p.write_settings(json!({"mcpServers": {"shared": shared, "own": p.server("own", "echo")}}));
    // A drain and an idle exit far longer than any wait here: a process that stops was
    // neither drained nor stopped with the daemon.
    let long = Duration::from_secs(120);
    let _daemon = start_daemon_with(&p, &runtime, 120_000, long);
    let one = serve(&p, &runtime, "project", &[]).await;
    let two = serve(&p, &runtime, "project", &[]).await;
    listing(&[&one, &two], &["mcp__shared__echo", "mcp__own__echo"]).await;
    let [first, second] = pids(&p, "own")[..] else {
        panic!("one process of own per session: {:?}", pids(&p, "own"));
    };
    let shared_pid = pids(&p, "shared")[0];
    one.close().await;
    two.close().await;
    wait_until_async("both sessions' own processes stop", || {
        !alive(first) && !alive(second)
    })
    .await;
    assert!(alive(shared_pid), "the shared process drains");
}

/// After `install claude` the sessions read Claude Code's files alone, yet the sharing default
/// is this host's: `mcp.share` in mcp-reconcile's own user settings file applies to the
/// servers of `~/.claude.json`, and without it each session has its own process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharing_default_of_our_own_settings_applies_to_a_client_layout() {
    for (share, expected) in [(None, 2), (Some("project"), 1)] {
        let p = Project::new();
        let runtime = p.path("run");
        let home = p.path("home");
        fs::create_dir_all(&runtime).expect("runtime");
        fs::create_dir_all(home.join(".config/mcp-reconcile")).expect("config dir");
        let state = json!({"mcpServers": {"notes": p.server("notes", "echo")}});
        fs::write(home.join(".claude.json"), state.to_string()).expect("claude state");
        if let Some(share) = share {
            let own = json!({"mcp": {"share": share}});
            fs::write(
                home.join(".config/mcp-reconcile/settings.json"),
                own.to_string(),
            )
            .expect("own settings");
        }
        let _daemon = start_daemon(&p, &runtime);
        let claude = |session: &str| {
            let log = p.path(&format!("serve-{session}.log"));
            let mut command = Command::new(cli());
            command
                .args(["serve", "--layout", "claude"])
                .current_dir(p.path("project"))
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", home.join(".config"))
                .env("XDG_RUNTIME_DIR", &runtime)
                .env("CLAUDE_CODE_SESSION_ID", session)
                .stderr(fs::File::create(&log).expect("log"));
            Served::spawn(command, log)
        };
        let one = claude("s-1").await;
        let two = claude("s-2").await;
        listing(&[&one, &two], &["mcp__notes__echo"]).await;
        assert_eq!(pids(&p, "notes").len(), expected, "mcp.share = {share:?}");
    }
}
