//! Shared helpers: start the real `mcp-fixture-server` in its own process group, talk to it
//! with rmcp's client side, and kill the whole group when the test ends (pass or panic).

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use rmcp::model::{CallToolRequestParams, JsonObject, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_mcp-fixture-server");

/// Long enough for a loaded 2-core machine, short enough that a hang fails fast.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// A client handler that records what the server sends on its own.
#[derive(Clone, Default)]
pub struct Recorder {
    pub tools_changed: Arc<tokio::sync::Notify>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().expect("progress lock").push(params);
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// Kills a whole process group with SIGKILL when dropped, so a failing test never leaves a
/// fixture (or its grandchild) behind.
#[derive(Debug)]
pub struct GroupGuard {
    pub pgid: u32,
}

impl GroupGuard {
    pub fn kill_now(&self) {
        // The group may already be gone; that is the goal, not an error.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.pgid)])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Everything the fixture wrote to stderr so far, collected in the background.
#[derive(Clone, Default)]
pub struct StderrLog(Arc<Mutex<String>>);

impl StderrLog {
    pub fn collect(stream: impl AsyncRead + Unpin + Send + 'static) -> Self {
        let log = Self::default();
        let sink = log.0.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut text = sink.lock().expect("stderr lock");
                text.push_str(&line);
                text.push('\n');
            }
        });
        log
    }

    pub fn text(&self) -> String {
        self.0.lock().expect("stderr lock").clone()
    }

    /// Waits until stderr contains `needle`.
    pub async fn wait_for(&self, needle: &str) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !self.text().contains(needle) {
            if tokio::time::Instant::now() > deadline {
                bail!("stderr never said {needle:?}; it said:\n{}", self.text());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// The fixture command, as the leader of a new process group, with no inherited `FIXTURE_*`
/// settings.
pub fn fixture_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).process_group(0).kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FIXTURE_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A fixture connected over stdio through rmcp's child-process transport.
pub struct StdioFixture {
    pub client: Client,
    pub recorder: Recorder,
    pub stderr: StderrLog,
    pub pid: u32,
    pub group: GroupGuard,
}

pub async fn connect_stdio(args: &[&str]) -> anyhow::Result<StdioFixture> {
    connect_stdio_cmd(fixture_command(args)).await
}

pub async fn connect_stdio_cmd(cmd: Command) -> anyhow::Result<StdioFixture> {
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning the fixture")?;
    let pid = transport.id().context("the fixture has no pid")?;
    let group = GroupGuard { pgid: pid };
    let stderr = StderrLog::collect(stderr.context("stderr was not piped")?);
    let recorder = Recorder::default();
    let client = tokio::time::timeout(PATIENCE, recorder.clone().serve(transport))
        .await
        .context("the handshake timed out")?
        .context("the handshake failed")?;
    Ok(StdioFixture {
        client,
        recorder,
        stderr,
        pid,
        group,
    })
}

/// A fixture started directly (no MCP client), with every pipe open.
pub struct RawFixture {
    pub child: Child,
    pub stdout: Lines<BufReader<ChildStdout>>,
    pub stderr: StderrLog,
    pub group: GroupGuard,
}

pub fn spawn_raw(args: &[&str]) -> anyhow::Result<RawFixture> {
    spawn_raw_cmd(fixture_command(args))
}

pub fn spawn_raw_cmd(mut cmd: Command) -> anyhow::Result<RawFixture> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning the fixture")?;
    let group = GroupGuard {
        pgid: child.id().context("the fixture has no pid")?,
    };
    let stderr = StderrLog::collect(child.stderr.take().context("stderr was not piped")?);
    let stdout = BufReader::new(child.stdout.take().context("stdout was not piped")?).lines();
    Ok(RawFixture {
        child,
        stdout,
        stderr,
        group,
    })
}

impl RawFixture {
    pub fn pid(&self) -> u32 {
        self.group.pgid
    }

    /// Writes one line to the fixture's stdin.
    pub async fn send_line(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.child.stdin.as_mut().context("stdin is closed")?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Reads one line from the fixture's stdout.
    pub async fn read_line(&mut self) -> anyhow::Result<String> {
        tokio::time::timeout(PATIENCE, self.stdout.next_line())
            .await
            .context("no line on stdout")??
            .with_context(|| format!("stdout closed; stderr:\n{}", self.stderr.text()))
    }

    /// Sends a raw `initialize` request and returns the parsed reply.
    pub async fn initialize(&mut self) -> anyhow::Result<serde_json::Value> {
        self.send_line(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":"#,
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"#,
            r#""clientInfo":{"name":"raw-test","version":"0"}}}"#
        ))
        .await?;
        let line = self.read_line().await?;
        serde_json::from_str(&line).with_context(|| format!("reply is not JSON: {line}"))
    }

    /// Sends `signal` (e.g. "TERM") to the fixture process only, not its group.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill -{signal} failed");
        Ok(())
    }

    /// Waits for the process to exit and returns its exit code. Stdin stays open meanwhile
    /// (tokio's `wait` would close it, which the fixture takes as a request to exit).
    pub async fn exit_code(&mut self) -> anyhow::Result<Option<i32>> {
        let _stdin = self.child.stdin.take();
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .context("the fixture did not exit")??;
        Ok(status.code())
    }
}

/// A fixture serving streamable HTTP on 127.0.0.1 with an OS-chosen port.
pub struct HttpFixture {
    pub url: String,
    pub raw: RawFixture,
}

pub async fn start_http(args: &[&str]) -> anyhow::Result<HttpFixture> {
    let mut all = vec!["--http", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let mut raw = spawn_raw(&all)?;
    let url = raw
        .read_line()
        .await
        .context("the fixture never printed its URL")?;
    if !url.starts_with("http://127.0.0.1:") || !url.ends_with("/mcp") {
        bail!("unexpected URL line {url:?}");
    }
    Ok(HttpFixture { url, raw })
}

impl HttpFixture {
    /// Connects an rmcp client over streamable HTTP (no proxy: loopback only).
    pub async fn connect(&self) -> anyhow::Result<(Client, Recorder)> {
        // The workspace's reqwest has rustls without a default crypto provider (as the host
        // does); a second install in the same process is refused, which is fine.
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()),
        );
        let recorder = Recorder::default();
        let client = tokio::time::timeout(PATIENCE, recorder.clone().serve(transport))
            .await
            .context("the HTTP handshake timed out")?
            .context("the HTTP handshake failed")?;
        Ok((client, recorder))
    }
}

/// Names of the tools the server lists, in its order.
pub async fn tool_names(client: &Client) -> anyhow::Result<Vec<String>> {
    let tools = client.list_all_tools().await.context("tools/list")?;
    Ok(tools.into_iter().map(|t| t.name.into_owned()).collect())
}

/// Calls `name` and returns the text of its single text block, failing on a tool error.
pub async fn call_text(
    client: &Client,
    name: &str,
    args: serde_json::Value,
) -> anyhow::Result<String> {
    let result = client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(object(args)))
        .await
        .with_context(|| format!("tools/call {name}"))?;
    if result.is_error == Some(true) {
        bail!("{name} returned a tool error: {:?}", result.content);
    }
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .with_context(|| format!("{name} returned no text: {:?}", result.content))?;
    Ok(text.text.clone())
}

pub fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("expected a JSON object, got {other}"),
    }
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "mcp-fixture-test-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The marker file's lines (none if it does not exist).
pub fn marker_lines(marker: &Path) -> Vec<String> {
    std::fs::read_to_string(marker)
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The process group of `pid`, from `/proc`.
pub fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the parenthesised command name: state, ppid, pgrp, ...
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Waits until `pid` is no longer running.
pub async fn wait_until_gone(pid: u32) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while is_running(pid) {
        if tokio::time::Instant::now() > deadline {
            bail!("process {pid} is still running");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Whether `pid` is a live process (a zombie counts as dead).
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z'),
        Err(_) => false,
    }
}
