//! The local attack surface of a running session: the session socket (who
//! may reach it, how much of a request it reads, how long it waits) and the
//! stdio servers it spawns (they die with the host, even on `kill -9`).

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use mcp_reconcile::ipc;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("exists").permissions().mode() & 0o777
}

/// The session sockets in `dir`.
fn sockets(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn socket_is_0600_and_state_dir_0700_even_under_umask_000() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    // An existing state dir open to everyone is tightened.
    let state = p.path("state");
    fs::create_dir_all(&state).expect("mkdir");
    fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).expect("chmod");

    let log = p.path("watch.log");
    let out = fs::File::create(&log).expect("log");
    let child = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(cli())
        .arg("watch")
        .arg("--no-daemon")
        .args(p.flags())
        .arg("--no-prompt")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("watch starts");
    let watch = Watch { child, log };
    // `status` answers from the files alone until the session is up: wait
    // for the session's socket itself.
    let started = Instant::now();
    while sockets(&state).is_empty() {
        assert!(
            started.elapsed() < PATIENCE,
            "no session socket; log:\n{}",
            watch.output()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    assert_eq!(mode(&state), 0o700, "state dir; log:\n{}", watch.output());
    let socks = sockets(&state);
    assert_eq!(socks.len(), 1, "{socks:?}");
    assert_eq!(mode(&socks[0]), 0o600, "socket; log:\n{}", watch.output());
    // No temporary bind name is left behind.
    let names: Vec<_> = fs::read_dir(&state)
        .expect("ls")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    watch.stop();
}

/// Needs root to make a directory owned by someone else.
#[test]
#[ignore = "needs root: run with --include-ignored as root"]
fn a_state_dir_of_another_user_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    fs::create_dir(&state).expect("mkdir");
    nix::unistd::chown(&state, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    let err = ipc::prepare_state_dir(&state).expect_err("must refuse");
    let text = format!("{err:#}");
    assert!(text.contains("belongs to uid 65534"), "{text}");
    assert!(text.contains("--state-dir"), "{text}");
}

/// A session socket served in-process; the control channel is kept open
/// but never answered (the tests use requests that need no answer from it).
async fn in_process_session() -> (
    tempfile::TempDir,
    PathBuf,
    ipc::SocketGuard,
    tokio::sync::mpsc::UnboundedReceiver<mcp_reconcile::host::Control>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state/test.sock");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let host = mcp_reconcile::host::HostHandle::new(tx);
    let guard = ipc::serve(&path, host).await.expect("serve");
    (dir, path, guard, rx)
}

/// Sends `line` as a client would and returns the `error` of the answer.
async fn raw_request(path: &Path, line: &str) -> String {
    let stream = UnixStream::connect(path).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    write
        .write_all(format!("{line}\n").as_bytes())
        .await
        .expect("send");
    write.shutdown().await.expect("shutdown");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), read.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    answer["error"]
        .as_str()
        .expect("an error answer")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overlong_request_line_gets_an_error_and_is_not_buffered() {
    let (_dir, path, _guard, _rx) = in_process_session().await;
    let stream = UnixStream::connect(&path).await.expect("connect");
    let (mut read, mut write) = stream.into_split();
    // Stream up to 64 MiB without a newline; the session must answer after
    // reading about MAX_REQUEST of it, not buffer it all.
    const TOTAL: usize = 64 * 1024 * 1024;
    let writer = tokio::spawn(async move {
        let chunk = vec![b'x'; 1024 * 1024];
        let mut sent = 0;
        while sent < TOTAL {
            match write.write_all(&chunk).await {
                Ok(()) => sent += chunk.len(),
                Err(_) => break,
            }
        }
        sent
    });
    // The answer line, read before the reset the close of a socket with
    // unread data brings.
    let read_answer = async {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.contains(&b'\n') {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        answer
    };
    let answer = tokio::time::timeout(Duration::from_secs(20), read_answer)
        .await
        .expect("answered in time");
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    let message = answer["error"].as_str().expect("an error");
    assert!(message.contains("longer than 65536 bytes"), "{message}");
    let sent = tokio::time::timeout(Duration::from_secs(20), writer)
        .await
        .expect("the writer stops: the connection was closed")
        .expect("writer");
    assert!(
        sent < 8 * 1024 * 1024,
        "the session kept reading ({sent} bytes sent)"
    );

    // The session still serves the next request.
    let err = raw_request(&path, r#"{"cmd":"nope"}"#).await;
    assert!(err.contains("unknown command"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_neither_blocks_others_nor_stays_connected() {
    let (_dir, path, _guard, _rx) = in_process_session().await;
    let mut silent = UnixStream::connect(&path).await.expect("connect");
    // Others are answered at once.
    let started = Instant::now();
    let err = raw_request(&path, r#"{"cmd":"nope"}"#).await;
    assert!(err.contains("unknown command"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The silent one is closed after the read timeout, unanswered.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        ipc::READ_TIMEOUT + Duration::from_secs(10),
        silent.read_to_end(&mut rest),
    )
    .await
    .expect("closed after the read timeout");
    assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
}

/// The client half of [`another_uid_is_dropped_without_an_answer`], run as another uid: a
/// real process (the system's Python, which every uid may run) that connects to the socket in
/// `argv[1]`, sends an unknown command and prints whatever answer came back between `ANSWER<`
/// and `>`.
const PEER_CLIENT: &str = "\
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:
    s.sendall(b'{\"cmd\":\"nope\"}\\n')
except OSError:
    pass  # a dropped connection may already be closed when this is sent
answer = b''
try:
    while chunk := s.recv(4096):
        answer += chunk
except OSError:
    pass
print('ANSWER<' + answer.decode() + '>')
";

/// Needs root to connect as another uid (the unit test covers the rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: run with --include-ignored as root"]
async fn another_uid_is_dropped_without_an_answer() {
    let (dir, path, _guard, _rx) = in_process_session().await;
    // Open the way to the socket (as an attacker who got past the modes
    // would find it): only the peer-uid check is left.
    for p in [dir.path(), path.parent().expect("state dir")] {
        fs::set_permissions(p, fs::Permissions::from_mode(0o711)).expect("chmod");
    }
    fs::set_permissions(&path, fs::Permissions::from_mode(0o777)).expect("chmod");

    let socket = path.clone();
    let run_as = move |uid: Option<u32>| {
        let mut command = Command::new("python3");
        command.args(["-c", PEER_CLIENT]).arg(&socket);
        if let Some(uid) = uid {
            command.uid(uid).gid(uid);
        }
        let out = command.output().expect("helper runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let start = stdout.find("ANSWER<").expect("the helper ran") + "ANSWER<".len();
        let end = stdout[start..].find(">\n").expect("answer end") + start;
        stdout[start..end].to_owned()
    };
    let ours = tokio::task::spawn_blocking(move || (run_as(None), run_as(Some(65534))))
        .await
        .expect("helpers");
    assert!(ours.0.contains("unknown command"), "same uid: {:?}", ours.0);
    assert_eq!(ours.1, "", "uid 65534 must get no answer");
}

#[test]
fn stdio_servers_die_when_the_host_is_killed() {
    let p = Project::new();
    // A server that does not exit when its stdin closes (many real ones
    // don't): after the fixture ends, the leader becomes `sleep`. Only the
    // parent-death signal stops it when the host is killed with SIGKILL.
    p.write_settings(json!({"mcpServers": {"s": {
        "command": "sh",
        "args": [
            "-c", "\"$0\" \"$@\"; exec sleep 1000",
            fixture().to_string_lossy(), "--name", "s", "--tools", "echo",
        ],
    }}}));
    let mut watch = p.watch();
    let s = p.wait_for("s connected", |s| all_connected(s, &["s"]));
    let pid = pid_of(&s, "s").expect("s has a pid");
    // Whatever happens, do not leave the server behind.
    let _cleanup = KillGroup(u32::try_from(pid).expect("pid"));
    assert!(alive(pid));

    watch.child.kill().expect("kill -9 the host");
    watch.child.wait().expect("reaped");
    let start = Instant::now();
    while alive(pid) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(pid),
        "the server (pid {pid}) outlived its host; log:\n{}",
        watch.output()
    );
}

#[test]
fn a_servers_grandchild_dies_when_the_host_is_killed() {
    let p = Project::new();
    let pidfile = p.path("grandchild.pid");
    p.write_settings(json!({"mcpServers": {"g": server_with_grandchild(&pidfile)}}));
    let mut watch = p.watch();
    let s = p.wait_for("g connected", |s| all_connected(s, &["g"]));
    let leader = pid_of(&s, "g").expect("g has a pid");
    let grandchild = read_pid(&pidfile);
    let _cleanup = KillGroup(u32::try_from(leader).expect("pid"));
    assert!(alive(grandchild));

    watch.child.kill().expect("kill -9 the host");
    watch.child.wait().expect("reaped");
    let start = Instant::now();
    while alive(grandchild) && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(grandchild),
        "the server's child (pid {grandchild}) outlived the killed host; log:\n{}",
        watch.output()
    );
}

/// The `mcp-reconcile reap` watchdog `host` started.
fn watchdog_of(host: u32) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = fs::read_to_string(entry.path().join("stat")).ok()?;
        let ppid: u32 = stat.rsplit(") ").next()?.split(' ').nth(1)?.parse().ok()?;
        let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
        let reaps = cmdline.split(|b| *b == 0).any(|arg| arg == b"reap");
        (ppid == host && reaps).then_some(pid)
    })
}

#[test]
fn a_watchdog_that_died_is_replaced_and_still_covers_the_older_servers() {
    let p = Project::new();
    let first = p.path("first.pid");
    p.write_settings(json!({"mcpServers": {"g": server_with_grandchild(&first)}}));
    let mut watch = p.watch();
    let s = p.wait_for("g connected", |s| all_connected(s, &["g"]));
    let _cleanup = KillGroup(u32::try_from(pid_of(&s, "g").expect("pid")).expect("pid"));
    let grandchild = read_pid(&first);
    let host = watch.child.id();
    let start = Instant::now();
    let watchdog = loop {
        if let Some(pid) = watchdog_of(host) {
            break pid;
        }
        assert!(start.elapsed() < PATIENCE, "no watchdog for the host");
        std::thread::sleep(Duration::from_millis(25));
    };
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(watchdog).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    );
    // The host learns of a dead watchdog when it next writes to it: make sure it is dead by
    // then (a rename save is applied at once, sooner than a SIGKILL may land under load).
    wait_until("the watchdog to die", || !alive(u64::from(watchdog)));
    // The next server's spawn finds the watchdog gone and starts another.
    let second = p.path("second.pid");
    p.write_settings(json!({"mcpServers": {
        "g": server_with_grandchild(&first),
        "h": server_with_grandchild(&second),
    }}));
    let s = p.wait_for("h connected", |s| all_connected(s, &["g", "h"]));
    let _cleanup_h = KillGroup(u32::try_from(pid_of(&s, "h").expect("pid")).expect("pid"));
    let start = Instant::now();
    while watchdog_of(host).is_none_or(|pid| pid == watchdog) {
        assert!(start.elapsed() < PATIENCE, "no new watchdog");
        std::thread::sleep(Duration::from_millis(25));
    }

    watch.child.kill().expect("kill -9 the host");
    watch.child.wait().expect("reaped");
    let start = Instant::now();
    while alive(grandchild) && start.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(grandchild),
        "the first server's child (pid {grandchild}) outlived the host: the new watchdog did \
         not know its group; log:\n{}",
        watch.output()
    );
}
