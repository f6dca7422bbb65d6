//! Lifecycle and deliberate faults: the spawn marker, the grandchild, crashes, hung
//! handshakes, garbage, early exits, and clean exits on stdin close and SIGTERM.

mod common;

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use common::{
    connect_stdio, connect_stdio_cmd, fixture_command, is_running, marker_lines, process_group_of,
    spawn_raw, spawn_raw_cmd, tool_names, wait_until_gone, GroupGuard, Recorder, TempDir,
};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;

#[tokio::test]
async fn crash_after_serves_then_exits_1_saying_so() -> anyhow::Result<()> {
    let f = connect_stdio(&["--crash-after", "1500"]).await?;
    assert_eq!(tool_names(&f.client).await?, ["echo"]);
    f.stderr.wait_for("fixture: crashing as asked").await?;

    let mut raw = spawn_raw(&["--crash-after", "50"])?;
    assert_eq!(raw.exit_code().await?, Some(1));
    raw.stderr.wait_for("fixture: crashing as asked").await?;
    Ok(())
}

#[tokio::test]
async fn hang_handshake_makes_the_client_time_out() -> anyhow::Result<()> {
    let dir = TempDir::new("hang");
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_str().context("temp path is not UTF-8")?;
    let cmd = fixture_command(&["--hang-handshake", "--marker", marker_arg]);
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()?;
    let _group = GroupGuard {
        pgid: transport.id().context("no pid")?,
    };
    let handshake = tokio::time::timeout(
        Duration::from_millis(300),
        Recorder::default().serve(transport),
    )
    .await;
    assert!(handshake.is_err(), "the handshake should not complete");
    assert_eq!(marker_lines(&marker).len(), 1, "it was spawned");
    Ok(())
}

#[tokio::test]
async fn exit_immediately_uses_the_given_code() -> anyhow::Result<()> {
    for (args, code) in [
        (&["--exit-immediately", "7"][..], 7),
        (&["--exit-immediately"][..], 1),
        (&["--exit-immediately", "0"][..], 0),
    ] {
        let mut raw = spawn_raw(args)?;
        assert_eq!(raw.exit_code().await?, Some(code), "{args:?}");
    }
    let mut cmd = fixture_command(&[]);
    cmd.env("FIXTURE_EXIT_IMMEDIATELY", "3");
    let status = tokio::time::timeout(common::PATIENCE, cmd.status()).await??;
    assert_eq!(status.code(), Some(3));

    let handshake = connect_stdio(&["--exit-immediately"]).await;
    assert!(handshake.is_err(), "no handshake with a server that exited");
    Ok(())
}

#[tokio::test]
async fn garbage_answers_with_non_json_rpc() -> anyhow::Result<()> {
    let mut from_env = fixture_command(&[]);
    from_env.env("FIXTURE_GARBAGE", "1");
    for mut raw in [spawn_raw(&["--garbage"])?, spawn_raw_cmd(from_env)?] {
        raw.send_line(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .await?;
        let line = raw.read_line().await?;
        assert!(
            serde_json::from_str::<serde_json::Value>(&line).is_err(),
            "{line:?} should not be JSON"
        );
    }

    let client = tokio::time::timeout(Duration::from_secs(1), connect_stdio(&["--garbage"])).await;
    assert!(
        !matches!(client, Ok(Ok(_))),
        "an rmcp client must not complete a handshake with garbage"
    );
    Ok(())
}

#[tokio::test]
async fn stderr_lines_are_written_at_start() -> anyhow::Result<()> {
    let mut raw = spawn_raw(&["--stderr-lines", "3", "--exit-immediately", "0"])?;
    assert_eq!(raw.exit_code().await?, Some(0));
    raw.stderr.wait_for("exiting immediately").await?;
    let text = raw.stderr.text();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "fixture: stderr line 1 of 3",
            "fixture: stderr line 2 of 3",
            "fixture: stderr line 3 of 3"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn the_marker_gets_one_line_per_spawn() -> anyhow::Result<()> {
    let dir = TempDir::new("marker");
    let marker = dir.path().join("spawns");
    let marker_arg = marker.to_str().context("temp path is not UTF-8")?;
    assert!(marker_lines(&marker).is_empty(), "nothing spawned yet");

    let mut expected = Vec::new();
    for _ in 0..2 {
        let f = connect_stdio(&["--marker", marker_arg]).await?;
        expected.push(format!("server {}", f.pid));
    }
    let mut cmd = fixture_command(&[]);
    cmd.env("FIXTURE_MARKER", &marker);
    let f = connect_stdio_cmd(cmd).await?;
    expected.push(format!("server {}", f.pid));

    assert_eq!(marker_lines(&marker), expected);
    Ok(())
}

#[tokio::test]
async fn the_grandchild_outlives_the_server_but_not_its_group() -> anyhow::Result<()> {
    let dir = TempDir::new("child");
    let marker = dir.path().join("spawns");
    let marker_arg = marker.to_str().context("temp path is not UTF-8")?;
    let mut raw = spawn_raw(&["--spawn-child", "--marker", marker_arg])?;
    raw.initialize().await?;

    let lines = marker_lines(&marker);
    let [server, child] = &lines[..] else {
        panic!("expected a server and a child line, got {lines:?}");
    };
    assert_eq!(*server, format!("server {}", raw.pid()));
    let child: u32 = child
        .strip_prefix("child ")
        .context("second line is not `child <pid>`")?
        .parse()?;
    assert!(is_running(child));
    assert_eq!(
        process_group_of(child),
        Some(raw.pid()),
        "same process group"
    );

    raw.signal("TERM")?;
    assert_eq!(raw.exit_code().await?, Some(0));
    assert!(
        is_running(child),
        "the server leaves its grandchild to the host"
    );

    raw.group.kill_now();
    wait_until_gone(child).await?;
    Ok(())
}

#[tokio::test]
async fn stdin_close_and_sigterm_exit_cleanly() -> anyhow::Result<()> {
    let mut before_handshake = spawn_raw(&[])?;
    drop(before_handshake.child.stdin.take());
    assert_eq!(before_handshake.exit_code().await?, Some(0));

    let mut after_handshake = spawn_raw(&[])?;
    let reply = after_handshake.initialize().await?;
    assert_eq!(reply["result"]["serverInfo"]["name"], "mcp-fixture-server");
    drop(after_handshake.child.stdin.take());
    assert_eq!(after_handshake.exit_code().await?, Some(0));

    let mut terminated = spawn_raw(&[])?;
    terminated.initialize().await?;
    terminated.signal("TERM")?;
    assert_eq!(terminated.exit_code().await?, Some(0));
    terminated.stderr.wait_for("fixture: SIGTERM").await?;
    Ok(())
}

#[tokio::test]
async fn bad_options_exit_2_before_any_side_effect() -> anyhow::Result<()> {
    let dir = TempDir::new("bad");
    let marker = dir.path().join("spawns");
    let marker_arg = marker.to_str().context("temp path is not UTF-8")?;
    for bad in [
        &["--http", "0.0.0.0:0"][..],
        &["--http", "10.1.2.3:80"][..],
        &["--tools", "echo,nope"][..],
        &["--prompts", "nope"][..],
    ] {
        let mut args = vec!["--marker", marker_arg];
        args.extend_from_slice(bad);
        let mut raw = spawn_raw(&args)?;
        assert_eq!(raw.exit_code().await?, Some(2), "{bad:?}");
    }
    assert!(
        !marker.exists(),
        "no marker for a server that refused to start"
    );
    Ok(())
}

/// `--start-delay-ms` holds the handshake back at least that long, then serves normally: the
/// slow-starting servers of the start benchmark (`bench/start.mjs`).
#[tokio::test]
async fn start_delay_holds_the_handshake_back_then_serves() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let f = connect_stdio(&["--start-delay-ms", "400"]).await?;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400),
        "answered after {waited:?}"
    );
    assert_eq!(tool_names(&f.client).await?, ["echo"]);
    Ok(())
}
