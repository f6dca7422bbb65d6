//! The gateway-tax driver (issue 41, `bench/tax.sh`): times MCP `tools/call` round trips
//! against one system — a stdio server it spawns itself, or a streamable HTTP endpoint — and
//! prints one JSON line of results.
//!
//! It is a client that adds as little of its own as it can: blocking std IO, raw JSON-RPC lines
//! (stdio) or hand-written HTTP/1.1 on a kept-alive `TcpStream`, no async runtime, no typed
//! decode (an answer is found by its `"id":N`). Whatever it measures above a direct server is
//! the system's.
//!
//! ```text
//! mcp-tax-bench stdio [OPTIONS] -- COMMAND [ARGS...]
//! mcp-tax-bench http  [OPTIONS] --url http://127.0.0.1:PORT/mcp [--token TOKEN]
//! options: --calls N (sequential, timed; 2000) --warmup N (300) --pipelined N (calls with
//!          16 in flight; 4000) --inflight K (16)
//! ```
//!
//! The tool called is the first listed whose name ends with `echo` (`echo`, `mcp__fx__echo`,
//! `fx/echo`, ...), with `{"text": "hello"}`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

/// What one run measures.
struct Plan {
    calls: usize,
    warmup: usize,
    pipelined: usize,
    inflight: usize,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_default();
    let mut plan = Plan {
        calls: 2000,
        warmup: 300,
        pipelined: 4000,
        inflight: 16,
    };
    let (mut url, mut token, mut command) = (None, None, Vec::new());
    let mut tag = None;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .ok_or_else(|| anyhow!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--calls" => plan.calls = value()?.parse()?,
            "--warmup" => plan.warmup = value()?.parse()?,
            "--pipelined" => plan.pipelined = value()?.parse()?,
            "--inflight" => plan.inflight = value()?.parse::<usize>()?.max(1),
            "--url" => url = Some(value()?),
            "--token" => token = Some(value()?),
            "--cpu-tag" => tag = Some(value()?),
            "--" => {
                command = rest.by_ref().cloned().collect();
                break;
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let result = match mode.as_str() {
        "stdio" => stdio(&plan, &command, tag.as_deref())?,
        "http" => http(
            &plan,
            &url.context("--url")?,
            token.as_deref(),
            tag.as_deref(),
        )?,
        _ => bail!("usage: mcp-tax-bench stdio|http ..."),
    };
    println!("{result}");
    Ok(())
}

/// p50, p99, mean and max of round trips, in µs.
fn summary(mut times: Vec<Duration>) -> Value {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let at = |q: f64| us(times[((times.len() as f64 - 1.0) * q).round() as usize]);
    let mean = times.iter().map(|d| us(*d)).sum::<f64>() / times.len() as f64;
    json!({"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "mean": mean,
           "max": us(*times.last().expect("some calls"))})
}

fn initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "mcp-tax-bench", "version": "1"}}})
    .to_string()
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": {"text": "hello"}}})
    .to_string()
}

/// The echo tool, listed again until it is there (a hub may list before its servers are up),
/// at most a minute.
fn wait_for_echo(mut list: impl FnMut(u64) -> Result<String>) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut id = 1;
    loop {
        let answer = list(id)?;
        match echo_tool(&answer) {
            Ok(tool) => return Ok(tool),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
        id += 1;
    }
}

fn list(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}).to_string()
}

/// The echo tool in a `tools/list` answer.
fn echo_tool(answer: &str) -> Result<String> {
    let answer: Value = serde_json::from_str(answer).context("tools/list answer")?;
    answer
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|tool| tool.get("name").and_then(Value::as_str))
        .find(|name| name.ends_with("echo"))
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no echo tool in {answer}"))
}

/// Whether `line` is the answer to request `id` (an answer has no `method`): a substring test,
/// exact (parsed) only when the line names a method (a request or notification of the
/// system's could carry the same id).
fn answers(line: &str, id: u64) -> bool {
    let tag = format!("\"id\":{id}");
    let Some(at) = line.find(&tag) else {
        return false;
    };
    if !line[at + tag.len()..].starts_with([',', '}']) {
        return false;
    }
    !line.contains(r#""method""#)
        || serde_json::from_str::<Value>(line).is_ok_and(|m| {
            m.get("method").is_none() && m.get("id").and_then(Value::as_u64) == Some(id)
        })
}

/// CPU time (ns, from `/proc/PID/task/*/schedstat`) of every process but this one whose environment
/// holds `tag` (`NAME=VALUE`, set on everything a benchmark run starts): the system under test
/// with its servers, and a daemon it attached to.
fn cpu_ns(tag: Option<&str>) -> Option<(u64, u64)> {
    let tag = tag?.as_bytes();
    let me = std::process::id().to_string();
    let (mut total, mut switches) = (0, 0);
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = entry.file_name();
        let Some(pid) = pid
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|var| var == tag) {
            continue;
        }
        // Every thread's (tokio's workers and blocking threads too), not the leader's alone.
        let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for thread in threads.flatten() {
            let stat = std::fs::read_to_string(thread.path().join("schedstat")).unwrap_or_default();
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
            let status = std::fs::read_to_string(thread.path().join("status")).unwrap_or_default();
            switches += status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    Some((total, switches))
}

/// CPU µs and context switches (every thread's, voluntary and not) per call between two
/// [`cpu_ns`] readings.
fn per_call(before: Option<(u64, u64)>, after: Option<(u64, u64)>, calls: usize) -> (Value, Value) {
    match (before, after) {
        (Some(b), Some(a)) if calls > 0 => (
            json!(a.0.saturating_sub(b.0) as f64 / 1e3 / calls as f64),
            json!(a.1.saturating_sub(b.1) as f64 / calls as f64),
        ),
        _ => (Value::Null, Value::Null),
    }
}

/// A stdio system: the child's stdin and stdout, one JSON-RPC message per line.
struct Stdio_ {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Stdio_ {
    fn start(command: &[String]) -> Result<Self> {
        use std::os::unix::process::CommandExt;
        let (program, args) = command.split_first().context("-- COMMAND")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        let input = child.stdin.take().context("stdin")?;
        let output = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Stdio_ {
            child,
            input,
            output,
        })
    }

    fn send(&mut self, line: &str) -> Result<()> {
        self.input.write_all(format!("{line}\n").as_bytes())?;
        Ok(self.input.flush()?)
    }

    /// Reads lines until the answer to `id`.
    fn answer(&mut self, id: u64) -> Result<String> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.output.read_line(&mut line)? == 0 {
                bail!("the system closed its stdout");
            }
            if answers(line.trim_end(), id) {
                return Ok(line);
            }
        }
    }

    fn ask(&mut self, id: u64, line: &str) -> Result<String> {
        self.send(line)?;
        self.answer(id)
    }
}

impl Drop for Stdio_ {
    /// The whole process group goes (a gateway's servers with it).
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

fn stdio(plan: &Plan, command: &[String], tag: Option<&str>) -> Result<Value> {
    let mut system = Stdio_::start(command)?;
    let started = Instant::now();
    system.ask(0, &initialize(0))?;
    system.send(INITIALIZED)?;
    let tool = wait_for_echo(|id| system.ask(id, &list(id)))?;
    let ready_us = started.elapsed().as_secs_f64() * 1e6;
    let mut id = 1000;
    for _ in 0..plan.warmup {
        id += 1;
        let answer = system.ask(id, &call(id, &tool))?;
        if !answer.contains("hello") || answer.contains(r#""isError":true"#) {
            bail!("the call failed: {answer}");
        }
    }
    let mut times = Vec::with_capacity(plan.calls);
    let cpu0 = cpu_ns(tag);
    for _ in 0..plan.calls {
        id += 1;
        let line = call(id, &tool);
        let t = Instant::now();
        system.ask(id, &line)?;
        times.push(t.elapsed());
    }
    let cpu1 = cpu_ns(tag);
    // Pipelined: a writer keeps `inflight` calls outstanding, a reader frees a slot per answer.
    let (slot_tx, slot_rx) = mpsc::channel::<()>();
    for _ in 0..plan.inflight {
        slot_tx.send(())?;
    }
    let total = plan.pipelined;
    let first = id + 1;
    // The same pipe on a second descriptor, for the writer thread.
    let mut input = {
        use std::os::fd::AsFd;
        std::fs::File::from(system.input.as_fd().try_clone_to_owned()?)
    };
    let t = Instant::now();
    let writer = std::thread::spawn(move || -> Result<()> {
        let mut buf = Vec::new();
        for n in 0..total as u64 {
            slot_rx.recv()?;
            buf.clear();
            writeln!(buf, "{}", call(first + n, &tool))?;
            input.write_all(&buf)?;
        }
        Ok(())
    });
    let mut answered = 0;
    let mut line = String::new();
    while answered < total {
        line.clear();
        if system.output.read_line(&mut line)? == 0 {
            bail!("the system closed its stdout while pipelining");
        }
        // An answer (a notification of the system's has a method, an answer none).
        if !line.contains(r#""method""#) {
            answered += 1;
            let _ = slot_tx.send(());
        }
    }
    let pipelined = t.elapsed();
    writer.join().map_err(|_| anyhow!("writer panicked"))??;
    Ok(json!({
        "transport": "stdio",
        "ready_us": ready_us,
        "sequential": summary(times),
        "cpu_us_per_call": per_call(cpu0, cpu1, plan.calls).0,
        "switches_per_call": per_call(cpu0, cpu1, plan.calls).1,
        "calls": plan.calls,
        "inflight": plan.inflight,
        "pipelined_calls": total,
        "throughput_per_s": total as f64 / pipelined.as_secs_f64(),
    }))
}

/// One kept-alive HTTP/1.1 connection to a streamable HTTP endpoint.
struct HttpConn {
    stream: BufReader<TcpStream>,
    host: String,
    path: String,
    token: Option<String>,
    session: Option<String>,
}

impl HttpConn {
    fn open(url: &str, token: Option<&str>, session: Option<String>) -> Result<Self> {
        let rest = url.strip_prefix("http://").context("http:// URL")?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let stream = TcpStream::connect(host).with_context(|| format!("connecting {host}"))?;
        stream.set_nodelay(true)?;
        Ok(HttpConn {
            stream: BufReader::new(stream),
            host: host.to_owned(),
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            token: token.map(str::to_owned),
            session,
        })
    }

    /// POSTs `body`; the JSON-RPC answer to `id` (from a JSON or an SSE body), or `None` for
    /// a notification's 202.
    fn post(&mut self, body: &str, id: Option<u64>) -> Result<Option<String>> {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if let Some(session) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\n"
            ));
        }
        head.push_str("\r\n");
        head.push_str(body);
        self.stream.get_mut().write_all(head.as_bytes())?;
        let (status, headers) = self.read_head()?;
        let body = self.read_body(&headers)?;
        if !(200..300).contains(&status) {
            bail!("HTTP {status}: {}", String::from_utf8_lossy(&body));
        }
        if let Some(session) = header(&headers, "mcp-session-id") {
            self.session = Some(session.to_owned());
        }
        let Some(id) = id else { return Ok(None) };
        let text = String::from_utf8(body)?;
        let sse = header(&headers, "content-type").is_some_and(|t| t.contains("event-stream"));
        let message = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .find(|data| answers(data, id))
                .map(str::to_owned)
        } else {
            Some(text.trim().to_owned()).filter(|t| answers(t, id))
        };
        message
            .map(Some)
            .ok_or_else(|| anyhow!("no answer to {id} in {text}"))
    }

    fn read_head(&mut self) -> Result<(u16, Vec<(String, String)>)> {
        let mut line = String::new();
        self.stream.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .context("HTTP status line")?
            .parse()?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if self.stream.read_line(&mut line)? == 0 {
                bail!("connection closed in the headers");
            }
            let l = line.trim_end();
            if l.is_empty() {
                return Ok((status, headers));
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
    }

    fn read_body(&mut self, headers: &[(String, String)]) -> Result<Vec<u8>> {
        let mut body = Vec::new();
        if header(headers, "transfer-encoding").is_some_and(|t| t.contains("chunked")) {
            let mut line = String::new();
            loop {
                line.clear();
                self.stream.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .with_context(|| format!("chunk size {line:?}"))?;
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk)?;
                if size == 0 {
                    return Ok(body);
                }
                body.extend_from_slice(&chunk[..size]);
            }
        }
        let length: usize = header(headers, "content-length").map_or(Ok(0), str::parse)?;
        body.resize(length, 0);
        self.stream.read_exact(&mut body)?;
        Ok(body)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn http(plan: &Plan, url: &str, token: Option<&str>, tag: Option<&str>) -> Result<Value> {
    let mut conn = HttpConn::open(url, token, None)?;
    conn.post(&initialize(0), Some(0))?;
    conn.post(INITIALIZED, None)?;
    let tool = wait_for_echo(|id| conn.post(&list(id), Some(id))?.context("tools/list"))?;
    let mut id = 1000;
    for _ in 0..plan.warmup {
        id += 1;
        let answer = conn.post(&call(id, &tool), Some(id))?.unwrap_or_default();
        if !answer.contains("hello") || answer.contains(r#""isError":true"#) {
            bail!("the call failed: {answer}");
        }
    }
    let mut times = Vec::with_capacity(plan.calls);
    let cpu0 = cpu_ns(tag);
    for _ in 0..plan.calls {
        id += 1;
        let line = call(id, &tool);
        let t = Instant::now();
        conn.post(&line, Some(id))?;
        times.push(t.elapsed());
    }
    let cpu1 = cpu_ns(tag);
    // In flight: `inflight` connections of the same session, each one call at a time.
    let per = plan.pipelined / plan.inflight;
    let session = conn.session.clone();
    let mut conns = (0..plan.inflight)
        .map(|_| HttpConn::open(url, token, session.clone()))
        .collect::<Result<Vec<_>>>()?;
    let t = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = conns
            .iter_mut()
            .enumerate()
            .map(|(k, conn)| {
                let tool = &tool;
                scope.spawn(move || -> Result<()> {
                    for n in 0..per as u64 {
                        let id = 1_000_000 * (k as u64 + 1) + n;
                        conn.post(&call(id, tool), Some(id))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    let pipelined = t.elapsed();
    Ok(json!({
        "transport": "http",
        "sequential": summary(times),
        "cpu_us_per_call": per_call(cpu0, cpu1, plan.calls).0,
        "switches_per_call": per_call(cpu0, cpu1, plan.calls).1,
        "calls": plan.calls,
        "inflight": plan.inflight,
        "pipelined_calls": per * plan.inflight,
        "throughput_per_s": (per * plan.inflight) as f64 / pipelined.as_secs_f64(),
    }))
}
