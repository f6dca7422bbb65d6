//! The per-user daemon against other local users and against many sessions (issue 22): another
//! user must never be able to pose as the daemon (item 1), and many sessions must not use up
//! the user's inotify instances (item 11).
//!
//! The fake daemons here are real processes listening on real Unix sockets; those that must run
//! as another user are started with `setpriv` as `nobody` (uid 65534), which needs root: those
//! tests are ignored unless asked for (`--include-ignored`), and `scripts/test.sh` runs them
//! when it runs as root, as CI does. A fake daemon records every
//! connection and every byte it receives; the client's environment carries a secret. After a
//! real `serve`, `status` and `daemon --status`, the record must hold no byte sent by them.

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const NOBODY: u32 = 65534;
const SECRET: &str = "s3cret-token-of-the-victim";

/// Listens on argv[1]; for every connection appends `connection` and then `data N: …` for
/// every chunk received to the already open record file argv[2]. Answers an attach so that
/// an old client would go on to send MCP.
const FAKE_DAEMON: &str = r#"
import os, socket, sys, threading
record = open(sys.argv[2], "ab", buffering=0)
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
server.listen(16)
print("ready", flush=True)
def serve(conn):
    record.write(b"connection\n")
    conn.settimeout(5)
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            record.write(b"data " + str(len(data)).encode() + b": " + data + b"\n")
            conn.sendall(b'{"ok":{"session":"fake"}}\n')
    except OSError:
        pass
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"#;

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path)
        .expect("exists")
        .permissions()
        .mode()
        & 0o7777
}

/// A runtime dir the test owns, which `nobody` may traverse (0711).
fn runtime_dir() -> tempfile::TempDir {
    let rt = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(rt.path(), fs::Permissions::from_mode(0o711)).expect("chmod");
    rt
}

/// The fake daemon as `nobody`, in its own process group, killed on drop.
struct Fake {
    group: Group,
    record: PathBuf,
}

impl Fake {
    /// Starts the fake daemon listening on `dir/daemon.sock`, `dir` owned by `nobody`.
    fn start_as_nobody(dir: &Path) -> Fake {
        fs::create_dir(dir).expect("mkdir");
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        let record = dir.join("received");
        fs::File::create(&record).expect("record file");
        for path in [dir, record.as_path()] {
            nix::unistd::chown(path, Some(nix::unistd::Uid::from_raw(NOBODY)), None)
                .expect("chown");
        }
        let mut child = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            // The system's Python: one under root's home (pyenv) is out of nobody's reach.
            .arg(if Path::new("/usr/bin/python3").exists() {
                "/usr/bin/python3"
            } else {
                "python3"
            })
            .arg("-c")
            .arg(FAKE_DAEMON)
            .arg(dir.join("daemon.sock"))
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("setpriv runs");
        let stdout = child.stdout.take().expect("stdout");
        let group = Group::new(child);
        let mut ready = String::new();
        BufReader::new(stdout)
            .read_line(&mut ready)
            .expect("fake daemon output");
        assert_eq!(ready.trim(), "ready", "the fake daemon did not start");
        Fake { group, record }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&fs::read(&self.record).expect("record")).into_owned()
    }
}

/// A project with no servers.
fn project() -> Project {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    p
}

/// `serve` (stdio, so a daemon session by default), `status` and `daemon --status`, each with
/// `XDG_RUNTIME_DIR=rt` and the secret in its environment; their outputs.
fn every_client(p: &Project, rt: &Path) -> Vec<(String, Output)> {
    let env = [
        ("XDG_RUNTIME_DIR", rt.to_str().expect("utf-8 path")),
        ("VICTIM_TOKEN", SECRET),
    ];
    let runs: [&[&str]; 3] = [&["serve"], &["status", "--json"], &["daemon", "--status"]];
    runs.iter()
        .map(|args| {
            let output = if args[0] == "daemon" {
                // `daemon --status` takes no layer flags.
                Command::new(cli())
                    .args(*args)
                    .envs(env)
                    .stdin(Stdio::null())
                    .output()
                    .expect("cli runs")
            } else {
                bounded(p, args, &env)
            };
            (args.join(" "), output)
        })
        .collect()
}

/// [`Project::run_env`], killed after [`PATIENCE`] (a `serve` whose stdin is closed ends).
fn bounded(p: &Project, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(cli())
        .args(args)
        .args(p.flags())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("cli runs");
    let group = KillGroup(child.id());
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > PATIENCE {
            group.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let output = child.wait_with_output().expect("output");
    // Reaped: its pid may be reused, so the guard must not signal it any more.
    group.disarm();
    output
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
#[ignore = "needs root: run with --include-ignored as root"]
fn a_daemon_directory_owned_by_another_user_receives_nothing() {
    let p = project();
    let rt = runtime_dir();
    let fake = Fake::start_as_nobody(&rt.path().join("mcp-reconcile"));
    let runs = every_client(&p, rt.path());
    let received = fake.received();
    assert!(
        received.is_empty(),
        "the other user's daemon was contacted: {received:?}"
    );
    let (_, serve) = &runs[0];
    let said = stderr(serve);
    assert!(
        said.contains("belongs to uid 65534")
            && said.contains("running the session in this process"),
        "serve must name the foreign directory and run the session itself: {said}"
    );
    let (_, daemon_status) = &runs[2];
    assert!(!daemon_status.status.success(), "daemon --status must fail");
    assert!(
        stderr(daemon_status).contains("belongs to uid 65534"),
        "{}",
        stderr(daemon_status)
    );
}

#[test]
#[ignore = "needs root: run with --include-ignored as root"]
fn a_daemon_socket_served_by_another_uid_receives_nothing() {
    let p = project();
    let rt = runtime_dir();
    let dir = rt.path().join("mcp-reconcile");
    let fake = Fake::start_as_nobody(&dir);
    // The directory and the socket file now look like ours; only the listening process is
    // another user's: the client must ask the socket who it is before it sends a byte.
    for path in [dir.clone(), dir.join("daemon.sock")] {
        nix::unistd::chown(&path, Some(nix::unistd::geteuid()), None).expect("chown");
    }
    let runs = every_client(&p, rt.path());
    let received = fake.received();
    assert!(
        received.lines().all(|line| line == "connection"),
        "bytes were sent to another user's process: {received:?}"
    );
    assert!(
        !received.contains(SECRET),
        "the environment reached another user"
    );
    for (what, output) in &runs[..1] {
        let said = stderr(output);
        assert!(
            said.contains("served by uid 65534"),
            "{what} must say who listens: {said}"
        );
    }
}

#[test]
fn a_symlinked_daemon_directory_is_refused_and_its_target_untouched() {
    let p = project();
    let rt = runtime_dir();
    let victim = p.path("victim");
    fs::create_dir(&victim).expect("mkdir");
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::symlink(&victim, rt.path().join("mcp-reconcile")).expect("symlink");
    let runs = every_client(&p, rt.path());
    assert_eq!(mode(&victim), 0o755, "the link's target was chmodded");
    let names: Vec<_> = fs::read_dir(&victim)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        names.is_empty(),
        "a daemon used the link's target: {names:?}"
    );
    let (_, serve) = &runs[0];
    assert!(
        stderr(serve).contains("is a symbolic link"),
        "{}",
        stderr(serve)
    );
}

#[test]
fn the_daemon_directory_does_not_depend_on_the_client_passing_xdg_runtime_dir() {
    let home = tempfile::tempdir().expect("home");
    let mut without = mcp_reconcile::inputs::HostEnv::from_process().expect("env");
    without.vars.remove("XDG_RUNTIME_DIR");
    without.home = Some(home.path().to_path_buf());
    let dir = mcp_reconcile::daemon::socket_dir(&without);
    assert!(!dir.starts_with("/tmp/mcp-reconcile"), "{}", dir.display());
    let uid = nix::unistd::geteuid().as_raw();
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    if run_user.is_dir() {
        // What a login session's XDG_RUNTIME_DIR names: the same daemon with or without it.
        let mut with = without.clone();
        with.vars
            .insert("XDG_RUNTIME_DIR".into(), run_user.to_string_lossy().into());
        assert_eq!(dir, mcp_reconcile::daemon::socket_dir(&with));
    } else {
        assert_eq!(dir, home.path().join(".local/state/mcp-reconcile/daemon"));
    }
}

/// The inotify instances `pid` holds.
fn inotify_instances(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fds")
        .flatten()
        .filter(|fd| {
            fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == "anon_inode:inotify")
        })
        .count()
}

#[tokio::test]
async fn many_sessions_share_one_inotify_instance() {
    let rt = runtime_dir();
    let (daemon, log) = start_daemon(rt.path());
    // Three sessions in three projects, each watching its own files.
    let projects: Vec<Project> = (0..3).map(|_| project()).collect();
    let mut attached = Vec::new();
    for p in &projects {
        attached.push(attach(rt.path(), p).await);
    }
    assert_eq!(
        inotify_instances(daemon.group.id()),
        1,
        "one watcher for every session; daemon log:\n{}",
        daemon.received()
    );
    drop(attached);
    drop(log);
}

/// A real daemon in `rt` (killed with its group on drop) and its log file.
fn start_daemon(rt: &Path) -> (Fake, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().expect("log");
    let daemon = Command::new(cli())
        .args(["daemon", "--drain-ms", "300", "--idle-exit-ms", "5000"])
        .env("XDG_RUNTIME_DIR", rt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log"))
        .process_group(0)
        .spawn()
        .expect("daemon starts");
    let daemon = Fake {
        group: Group::new(daemon),
        record: log.path().to_path_buf(),
    };
    wait_until("the daemon to listen", || {
        rt.join("mcp-reconcile/daemon.sock").exists()
    });
    (daemon, log)
}

/// A session of the daemon in `rt` for `p`'s files, attached through the library's bridge;
/// it lasts as long as the returned connection.
async fn attach(
    rt: &Path,
    p: &Project,
) -> (
    String,
    tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    tokio::net::unix::OwnedWriteHalf,
) {
    let stream = tokio::net::UnixStream::connect(rt.join("mcp-reconcile/daemon.sock"))
        .await
        .expect("connect");
    let env = mcp_reconcile::inputs::HostEnv::from_process().expect("env");
    tokio::time::timeout(
        PATIENCE,
        mcp_reconcile::daemon::bridge::attach(
            stream,
            &p.options(),
            env,
            "test",
            mcp_reconcile::gateway::ToolNames::Mcp,
            false,
        ),
    )
    .await
    .expect("attached in time")
    .expect("attached")
}

#[tokio::test]
async fn a_servers_grandchild_dies_when_the_daemon_is_killed() {
    let rt = runtime_dir();
    let (mut daemon, _log) = start_daemon(rt.path());
    let p = Project::new();
    let pidfile = p.path("grandchild.pid");
    p.write_settings(json!({"mcpServers": {"g": server_with_grandchild(&pidfile)}}));
    let session = attach(rt.path(), &p).await;
    let grandchild = read_pid(&pidfile);
    let leader_group = fs::read_to_string(format!("/proc/{grandchild}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit(") ").next().map(str::to_owned))
        .and_then(|rest| rest.split(' ').nth(2).and_then(|g| g.parse::<u32>().ok()))
        .expect("the grandchild's group");
    let _cleanup = KillGroup(leader_group);
    assert!(alive(grandchild));

    // kill -9 the daemon alone: its servers' groups are not its own.
    daemon.group.signal(nix::sys::signal::Signal::SIGKILL);
    assert!(daemon.group.wait_exit(), "the daemon dies on SIGKILL");
    let start = Instant::now();
    while alive(grandchild) && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(grandchild),
        "the server's child (pid {grandchild}) outlived the killed daemon; log:\n{}",
        daemon.received()
    );
    drop(session);
}

#[test]
fn a_daemon_session_passes_on_environment_values_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let rt = runtime_dir();
    let (daemon, _log) = start_daemon(rt.path());
    let p = Project::new();
    let seen = p.path("seen");
    p.write_settings(json!({"mcpServers": {"e": {
        "command": "sh",
        "args": [
            "-c",
            "echo $PPID > \"$0.parent\"; printf %s \"$LATIN1_VALUE\" > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec \"$1\" --name e --tools echo",
            seen.to_string_lossy(),
            fixture().to_string_lossy(),
        ],
    }}}));
    let value = b"caf\xe9 cr\xe8me";
    let serve = Command::new(cli())
        .arg("serve")
        .args(p.flags())
        .env("XDG_RUNTIME_DIR", rt.path())
        .env("LATIN1_VALUE", std::ffi::OsStr::from_bytes(value))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("serve starts");
    let serve = Group::new(serve);
    let start = Instant::now();
    while !seen.exists() && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(25));
    }
    drop(serve);
    assert_eq!(
        fs::read(&seen).expect("the server ran"),
        value,
        "the value reached the server changed or not at all"
    );
    let parent = fs::read_to_string(p.path("seen.parent")).expect("parent pid");
    assert_eq!(
        parent.trim(),
        daemon.group.id().to_string(),
        "the daemon, not serve itself, started the server"
    );
}
