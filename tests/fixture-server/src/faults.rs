//! Start-up side effects and deliberate misbehaviour for tests: the spawn marker, the orphaned
//! grandchild, stderr noise, crashes, hung handshakes and garbage output.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Appends `line` to the marker file in one `write`, so concurrent spawns never interleave.
pub fn append_marker(marker: &Path, line: &str) -> anyhow::Result<()> {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(marker)
        .with_context(|| format!("cannot open marker file {}", marker.display()))?;
    file.write_all(format!("{line}\n").as_bytes())
        .with_context(|| format!("cannot write marker file {}", marker.display()))
}

/// Starts `sleep 1000` in this process's group with its stdio detached, and returns its pid.
/// The child handle is dropped on purpose: the grandchild must outlive us unless the host
/// kills the whole group.
pub fn spawn_grandchild() -> anyhow::Result<u32> {
    let child = Command::new("sleep")
        .arg("1000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start the grandchild `sleep 1000`")?;
    Ok(child.id())
}

pub fn write_stderr_lines(count: u32) {
    let mut stderr = std::io::stderr().lock();
    for i in 1..=count {
        // Nothing sensible to do if stderr is gone.
        let _ = writeln!(stderr, "fixture: stderr line {i} of {count}");
    }
}

/// Exits with status 1 after `delay`, saying so on stderr.
pub fn crash_after(delay: Duration) {
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        eprintln!("fixture: crashing as asked");
        std::process::exit(1);
    });
}

/// `--wait-for FILE`: returns once FILE exists (polled; a test creates it when it is done
/// checking what happens while the server is held back).
pub async fn wait_for(gate: &Path) {
    while !gate.exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `--hang-handshake` on stdio: reads and drops input until stdin closes.
pub async fn swallow_stdin() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while lines.next_line().await.context("reading stdin")?.is_some() {}
    Ok(())
}

/// What `--garbage` writes instead of a JSON-RPC message.
pub const GARBAGE: &str = "fixture garbage: this is not JSON-RPC";

/// `--garbage` on stdio: answers every input line with a garbage line, until stdin closes.
pub async fn answer_with_garbage() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    while lines.next_line().await.context("reading stdin")?.is_some() {
        stdout
            .write_all(format!("{GARBAGE}\n").as_bytes())
            .await
            .context("writing stdout")?;
        stdout.flush().await.context("writing stdout")?;
    }
    Ok(())
}
