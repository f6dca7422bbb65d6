//! End-to-end: `mcp-reconcile serve --http` is not an open door. A real `serve` (child
//! process, own process group, killed on drop) on 127.0.0.1, driven with raw HTTP requests
//! (reqwest) and with rmcp's client: bearer token, Origin / Host checks, session cap, idle
//! expiry, the token file's mode and lifetime, `--token-file`, and the TCP connections
//! themselves (header-read timeout, idle keep-alive, connection cap: slowloris).

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

/// A running `serve --http`; its process group is killed on drop.
struct HttpServed {
    child: tokio::process::Child,
    group: KillGroup,
    url: String,
    port: u16,
    token_file: PathBuf,
    log: PathBuf,
}

impl HttpServed {
    /// Starts `serve --http 127.0.0.1:0` with `extra` flags; reads the URL and the token
    /// file's path from stdout.
    async fn start(p: &Project, extra: &[&str]) -> HttpServed {
        HttpServed::start_with(p.flags(), p.path("serve.log"), extra).await
    }

    /// [`HttpServed::start`] for the project directory `project` (another session over the same
    /// state dir), logging to `<project>.log`.
    async fn start_in(p: &Project, project: &str, extra: &[&str]) -> HttpServed {
        HttpServed::start_with(
            p.flags_in(project),
            p.path(&format!("{project}.log")),
            extra,
        )
        .await
    }

    async fn start_with(flags: Vec<String>, log: PathBuf, extra: &[&str]) -> HttpServed {
        let err = fs::File::create(&log).expect("log file");
        let mut command = std::process::Command::new(cli());
        command
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(flags)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .process_group(0);
        let mut child = tokio::process::Command::from(command)
            .spawn()
            .expect("serve starts");
        // From here on a failed assertion still kills serve.
        let group = KillGroup(child.id().expect("a pid"));
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut lines = Vec::new();
        // The URL, then the token file's path (none with `--no-auth`).
        let printed = if extra.contains(&"--no-auth") { 1 } else { 2 };
        for _ in 0..printed {
            let line = tokio::time::timeout(PATIENCE, stdout.next_line())
                .await
                .expect("serve prints in time")
                .expect("stdout");
            let Some(line) = line else {
                panic!(
                    "serve did not print its URL and token file; log:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            };
            lines.push(line);
        }
        let token_file = if printed == 2 {
            PathBuf::from(lines.pop().unwrap_or_default())
        } else {
            PathBuf::new()
        };
        let url = lines.pop().unwrap_or_default();
        let port = url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("unexpected URL {url}"));
        HttpServed {
            child,
            group,
            url,
            port,
            token_file,
            log,
        }
    }

    fn token(&self) -> String {
        let text = fs::read_to_string(&self.token_file).expect("the token file");
        text.lines().next().unwrap_or_default().trim().to_owned()
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, then waits for the exit: nothing of serve's own clean-up runs.
    async fn kill(self) {
        let HttpServed {
            mut child, group, ..
        } = self;
        group.kill();
        tokio::time::timeout(PATIENCE, child.wait())
            .await
            .expect("serve dies on SIGKILL")
            .expect("wait");
        // Reaped: its pid may be reused, so the guard must not signal it any more.
        group.disarm();
    }

    /// SIGTERM, then waits for the exit.
    async fn stop(self) -> std::process::ExitStatus {
        let HttpServed {
            mut child, group, ..
        } = self;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(group.0 as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = tokio::time::timeout(PATIENCE, child.wait())
            .await
            .expect("serve exits on SIGTERM")
            .expect("wait");
        // Reaped: its pid may be reused, so the guard must not signal it any more.
        group.disarm();
        status
    }

    /// A POST of `body` to /mcp with the MCP headers and `headers`.
    async fn post(&self, body: &Value, headers: &[(&str, &str)]) -> Reply {
        let mut request = http()
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        send(request).await
    }

    /// An `initialize` POST; on success the reply has the new session's id.
    async fn initialize(&self, headers: &[(&str, &str)]) -> Reply {
        self.post(&initialize_body(), headers).await
    }

    /// A complete handshake (initialize + initialized) with the token; the session id.
    async fn open_session(&self) -> String {
        let auth = self.bearer();
        let reply = self.initialize(&[("authorization", &auth)]).await;
        assert_eq!(reply.status, 200, "initialize: {reply:?}");
        let session = reply.session.clone().expect("an Mcp-Session-Id");
        let done = self
            .post(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                &[("authorization", &auth), ("mcp-session-id", &session)],
            )
            .await;
        assert_eq!(done.status, 202, "initialized: {done:?}");
        session
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token())
    }
}

/// What came back from one request.
#[derive(Debug)]
struct Reply {
    status: u16,
    www_authenticate: Option<String>,
    session: Option<String>,
    body: String,
}

fn http() -> reqwest::Client {
    mcp_reconcile::tls::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client")
}

async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = tokio::time::timeout(PATIENCE, request.send())
        .await
        .expect("an answer in time")
        .expect("an HTTP answer");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let status = response.status().as_u16();
    let www_authenticate = header("www-authenticate");
    let session = header("mcp-session-id");
    let body = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the body in time")
        .unwrap_or_default();
    Reply {
        status,
        www_authenticate,
        session,
        body,
    }
}

fn initialize_body() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "security-test", "version": "0"},
        },
    })
}

fn tools_list_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
}

/// A 401 as the guard sends it.
fn assert_unauthorized(reply: &Reply, what: &str) {
    assert_eq!(reply.status, 401, "{what}: {reply:?}");
    assert!(
        reply
            .www_authenticate
            .as_deref()
            .is_some_and(|v| v.starts_with("Bearer")),
        "{what}: no `WWW-Authenticate: Bearer`: {reply:?}"
    );
    assert!(reply.session.is_none(), "{what}: a session was opened");
    assert!(!reply.body.contains("mcp__"), "{what}: tools leaked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_token_nothing_is_listed_and_with_it_tools_work() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let served = HttpServed::start(&p, &[]).await;

    // The token file: in the state dir, named after the session, owner-only, 64 hex digits.
    assert!(
        served.token_file.starts_with(p.path("state")),
        "{}",
        served.token_file.display()
    );
    let name = served
        .token_file
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        name.starts_with("serve-") && name.ends_with(".token"),
        "{name}"
    );
    let mode = fs::metadata(&served.token_file)
        .expect("token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "token file mode {mode:o}");
    let token = served.token();
    assert_eq!(token.len(), 64, "{token:?}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token:?}");

    // No token, a wrong token of the same length, a short one, another scheme: 401.
    assert_unauthorized(&served.initialize(&[]).await, "no token");
    let wrong = format!("Bearer {}", "0".repeat(64));
    assert_unauthorized(
        &served.initialize(&[("authorization", &wrong)]).await,
        "wrong token",
    );
    let short = format!("Bearer {}", &token[..10]);
    assert_unauthorized(
        &served.initialize(&[("authorization", &short)]).await,
        "a prefix of the token",
    );
    let basic = format!("Basic {token}");
    assert_unauthorized(
        &served.initialize(&[("authorization", &basic)]).await,
        "another scheme",
    );

    // A real session, then tools/list on it without the token: 401, nothing listed.
    let session = served.open_session().await;
    let listed = served
        .post(&tools_list_body(), &[("mcp-session-id", &session)])
        .await;
    assert_unauthorized(&listed, "tools/list on a session without the token");
    let auth = served.bearer();
    let listed = served
        .post(
            &tools_list_body(),
            &[("mcp-session-id", &session), ("authorization", &auth)],
        )
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains("mcp__a__echo"), "{listed:?}");

    // rmcp's client without the token cannot even shake hands.
    let transport = StreamableHttpClientTransport::with_client(
        http(),
        StreamableHttpClientTransportConfig::with_uri(served.url.clone()),
    );
    let refused = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("an answer in time");
    assert!(refused.is_err(), "handshake without a token succeeded");

    // With it: tools listed, a call is forwarded.
    let transport = StreamableHttpClientTransport::with_client(
        http(),
        StreamableHttpClientTransportConfig::with_uri(served.url.clone())
            .auth_header(token.clone()),
    );
    let client = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("handshake with the token");
    assert_eq!(tool_names(&client).await, ["mcp__a__echo"]);
    let result = call(
        &client,
        "mcp__a__echo",
        json!({"text": "through the guard"}),
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(result.content.len(), 1, "{result:?}");
    assert_eq!(text(&result), "through the guard");
    let _ = client.cancel().await;

    // The token never reaches the log; the file is gone once serve stopped.
    let token_file = served.token_file.clone();
    let log = served.log();
    assert!(!log.contains(&token), "the token was logged:\n{log}");
    assert!(log.contains(&token_file.display().to_string()), "{log}");
    let status = served.stop().await;
    assert!(status.success(), "{status}");
    assert!(
        !token_file.exists(),
        "the token file outlived serve: {}",
        token_file.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_origins_and_foreign_hosts_are_refused() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &["--allow-origin", "http://localhost:5173"]).await;
    let auth = served.bearer();

    let evil = served
        .initialize(&[("authorization", &auth), ("origin", "http://evil.example")])
        .await;
    assert_eq!(
        evil.status, 403,
        "a foreign origin, with the token: {evil:?}"
    );
    assert!(evil.session.is_none());
    assert!(evil.body.contains("--allow-origin"), "{evil:?}");
    // Exact match only: another port of an allowed host is another origin.
    let near = served
        .initialize(&[
            ("authorization", &auth),
            ("origin", "http://localhost:5174"),
        ])
        .await;
    assert_eq!(near.status, 403, "{near:?}");
    // The server's own loopback origin is not a foreign page (it serves none).
    let own_origin = format!("http://127.0.0.1:{}", served.port);
    let own = served
        .initialize(&[("authorization", &auth), ("origin", &own_origin)])
        .await;
    assert_eq!(own.status, 200, "its own origin: {own:?}");
    // A foreign origin without the token is refused too (and does not learn more).
    let evil = served
        .initialize(&[("origin", "http://evil.example")])
        .await;
    assert_eq!(evil.status, 403, "{evil:?}");

    let allowed = served
        .initialize(&[
            ("authorization", &auth),
            ("origin", "http://localhost:5173"),
        ])
        .await;
    assert_eq!(allowed.status, 200, "the allowed origin: {allowed:?}");
    assert!(allowed.session.is_some(), "{allowed:?}");
    // The allowed origin still needs the token.
    let allowed_no_token = served
        .initialize(&[("origin", "http://localhost:5173")])
        .await;
    assert_unauthorized(&allowed_no_token, "allowed origin without the token");

    // DNS rebinding: a page at evil.example resolving to 127.0.0.1 sends its own Host.
    let port = served.port;
    for host in [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_owned(),
    ] {
        let reply = served
            .initialize(&[("authorization", &auth), ("host", &host)])
            .await;
        assert_eq!(reply.status, 403, "Host {host}: {reply:?}");
        assert!(reply.session.is_none(), "Host {host}: {reply:?}");
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let reply = served
            .initialize(&[("authorization", &auth), ("host", &host)])
            .await;
        assert_eq!(reply.status, 200, "Host {host}: {reply:?}");
    }
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_drops_only_the_token_and_says_so() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &["--no-auth"]).await;
    let open = served.initialize(&[]).await;
    assert_eq!(open.status, 200, "no token needed: {open:?}");
    assert!(open.session.is_some(), "{open:?}");
    // Everything else still holds: a foreign origin or a rebound Host is refused.
    let evil = served
        .initialize(&[("origin", "http://evil.example")])
        .await;
    assert_eq!(evil.status, 403, "{evil:?}");
    let rebound = served.initialize(&[("host", "evil.example")]).await;
    assert_eq!(rebound.status, 403, "{rebound:?}");
    let log = served.log();
    assert!(log.contains("WITHOUT authentication (--no-auth)"), "{log}");
    let status = served.stop().await;
    assert!(status.success(), "{status}");
    // A token file cannot be combined with it.
    let refused = refused_start(&p, &["--no-auth", "--token-file", "/nonexistent"]).await;
    assert!(
        refused.contains("--no-auth") || refused.contains("cannot be used"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_max_sessions_get_503_until_one_closes() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &["--max-sessions", "2"]).await;
    let auth = served.bearer();

    let first = served.open_session().await;
    let _second = served.open_session().await;
    let third = served.initialize(&[("authorization", &auth)]).await;
    assert_eq!(
        third.status, 503,
        "a third session while two are open: {third:?}"
    );
    assert!(third.session.is_none(), "{third:?}");
    assert!(third.body.contains("--max-sessions 2"), "{third:?}");
    // Requests on an open session still work.
    let listed = served
        .post(
            &tools_list_body(),
            &[("mcp-session-id", &first), ("authorization", &auth)],
        )
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");

    // Closing one (DELETE) makes room.
    let closed = send(
        http()
            .delete(&served.url)
            .header("authorization", &auth)
            .header("mcp-session-id", &first),
    )
    .await;
    assert!(
        (200..300).contains(&closed.status),
        "DELETE of a session: {closed:?}"
    );
    let third = served.initialize(&[("authorization", &auth)]).await;
    assert_eq!(third.status, 200, "after a DELETE: {third:?}");
    assert!(third.session.is_some(), "{third:?}");
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_closed_and_makes_room() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &["--max-sessions", "1", "--session-idle-secs", "1"]).await;
    let auth = served.bearer();

    let session = served.open_session().await;
    let opened = Instant::now();
    let second = served.initialize(&[("authorization", &auth)]).await;
    assert_eq!(second.status, 503, "{second:?}");
    // After a second without a request the first is closed and a new one is admitted.
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let next = served.initialize(&[("authorization", &auth)]).await;
        if next.status == 200 {
            break;
        }
        assert_eq!(next.status, 503, "{next:?}");
        assert!(
            opened.elapsed() < PATIENCE,
            "the idle session was never closed"
        );
    }
    assert!(opened.elapsed() >= Duration::from_millis(900));
    // The closed session is gone.
    let stale = served
        .post(
            &tools_list_body(),
            &[("mcp-session-id", &session), ("authorization", &auth)],
        )
        .await;
    assert_eq!(
        stale.status, 404,
        "a request on the expired session: {stale:?}"
    );
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

/// Runs `serve --http` expecting it to refuse to start; its stderr.
async fn refused_start(p: &Project, extra: &[&str]) -> String {
    refused_start_with(p.flags(), extra).await
}

async fn refused_start_with(flags: Vec<String>, extra: &[&str]) -> String {
    let mut command = std::process::Command::new(cli());
    command
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(flags)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .expect("serve starts");
    let group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("serve refuses to start in time (the guard kills it otherwise)")
        .expect("output");
    // It exited by itself and was reaped: its pid may be reused.
    group.disarm();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "serve started: {stdout}\n{stderr}"
    );
    assert!(!stdout.contains("http://"), "serve listened: {stdout}");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_file_must_be_private_and_non_empty() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let file = p.path("my.token");
    let token = "a-token-the-user-chose-0123456789";
    fs::write(&file, format!("{token}\nsecond line is ignored\n")).expect("write");
    let path = file.to_string_lossy().into_owned();

    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).expect("chmod");
    let stderr = refused_start(&p, &["--token-file", &path]).await;
    assert!(
        stderr.contains("chmod 600") && stderr.contains(&path),
        "{stderr}"
    );
    assert!(!stderr.contains(token), "the token was printed: {stderr}");

    let empty = p.path("empty.token");
    fs::write(&empty, "  \n").expect("write");
    fs::set_permissions(&empty, fs::Permissions::from_mode(0o600)).expect("chmod");
    let stderr = refused_start(&p, &["--token-file", &empty.to_string_lossy()]).await;
    assert!(stderr.contains("empty"), "{stderr}");

    // A private file: its first line is the token; no other token file is written.
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).expect("chmod");
    let served = HttpServed::start(&p, &["--token-file", &path]).await;
    assert_eq!(served.token_file, file);
    assert_eq!(served.token(), token);
    let ok = served
        .initialize(&[("authorization", &format!("Bearer {token}"))])
        .await;
    assert_eq!(ok.status, 200, "{ok:?}");
    let generated: Vec<_> = fs::read_dir(p.path("state"))
        .expect("state dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".token"))
        .collect();
    assert!(generated.is_empty(), "{generated:?}");
    let log = served.log();
    assert!(!log.contains(token), "the token was logged:\n{log}");
    let status = served.stop().await;
    assert!(status.success(), "{status}");
    assert!(file.exists(), "the user's token file must be kept");
}

/// A `DELETE` with the session id ends the session and says so with 200, as MCP clients
/// expect (the Python SDK logs "Session termination failed: 202" otherwise); the session is
/// gone afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_ends_the_session_with_200() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &[]).await;
    let auth = served.bearer();
    let session = served.open_session().await;
    let closed = send(
        http()
            .delete(&served.url)
            .header("authorization", &auth)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18"),
    )
    .await;
    assert_eq!(closed.status, 200, "DELETE of a session: {closed:?}");
    let after = served
        .post(
            &tools_list_body(),
            &[("mcp-session-id", &session), ("authorization", &auth)],
        )
        .await;
    assert_eq!(
        after.status, 404,
        "a request on the ended session: {after:?}"
    );
    // Without the token a DELETE ends nothing.
    let other = served.open_session().await;
    let refused = send(http().delete(&served.url).header("mcp-session-id", &other)).await;
    assert_unauthorized(&refused, "DELETE without the token");
    let listed = served
        .post(
            &tools_list_body(),
            &[("mcp-session-id", &other), ("authorization", &auth)],
        )
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

// ---------------------------------------------------------------------------------------------
// connections: the header-read timeout and the connection cap (slowloris)

/// A TCP connection that sent the start of a request and never finishes its headers.
fn unfinished_request(port: u16) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .write_all(
            format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            )
            .as_bytes(),
        )
        .expect("send the first headers");
    stream.set_nonblocking(true).expect("non-blocking");
    stream
}

/// Whether the server closed `stream` (end of file or reset); reads and drops whatever it
/// sent before.
fn closed_by_server(stream: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

fn count_closed(streams: &mut [std::net::TcpStream]) -> usize {
    streams
        .iter_mut()
        .map(closed_by_server)
        .filter(|closed| *closed)
        .count()
}

/// The sockets process `pid` has open (listener, connections, ...), from /proc.
fn sockets_of(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/PID/fd")
        .filter_map(Result::ok)
        .filter(|entry| {
            fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

/// An rmcp client with the token: initialize, then tools/list.
async fn client_with_token(
    served: &HttpServed,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let transport = StreamableHttpClientTransport::with_client(
        http(),
        StreamableHttpClientTransportConfig::with_uri(served.url.clone())
            .auth_header(served.token()),
    );
    tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("handshake with the token")
}

/// Slowloris: connections that never finish their headers cannot crowd out the user's own
/// client. Past `--max-connections` the oldest connection without the token is closed, so the
/// server never holds more than the cap, and a client with the token is served at once while
/// the flood is still open (the header timeout here is far longer than the test: only the cap
/// closes connections). A connection that has carried the token is never closed for a newer
/// one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unfinished_requests_is_capped_and_the_users_client_is_still_served() {
    const CAP: usize = 8;
    const FLOOD: usize = 40;
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let served = HttpServed::start(
        &p,
        &["--max-connections", "8", "--header-timeout-secs", "3600"],
    )
    .await;
    let pid = served.group.0;
    let before = sockets_of(pid);

    let mut flood: Vec<_> = (0..FLOOD)
        .map(|_| unfinished_request(served.port))
        .collect();
    wait_until_async("all but the newest 8 unfinished connections closed", || {
        count_closed(&mut flood) >= FLOOD - CAP
    })
    .await;
    assert_eq!(count_closed(&mut flood), FLOOD - CAP, "only the cap closes");
    let open = sockets_of(pid);
    assert!(
        open <= before + CAP,
        "serve holds {open} sockets, {before} before the flood, cap {CAP}"
    );

    // The user's client is served while the flood's connections are open.
    let client = client_with_token(&served).await;
    assert_eq!(tool_names(&client).await, ["mcp__a__echo"]);
    let still_open = FLOOD - count_closed(&mut flood);
    assert!(
        still_open >= 1,
        "the flood was gone before the client was served"
    );

    // A second flood closes none of the client's connections: it keeps working.
    let mut second: Vec<_> = (0..FLOOD)
        .map(|_| unfinished_request(served.port))
        .collect();
    wait_until_async("the second flood capped", || {
        count_closed(&mut second) >= FLOOD - CAP
    })
    .await;
    assert_eq!(tool_names(&client).await, ["mcp__a__echo"]);
    let open = sockets_of(pid);
    assert!(
        open <= before + CAP + 1,
        "serve holds {open} sockets, {before} before the floods, cap {CAP}"
    );
    let _ = client.cancel().await;
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

/// Without flags the cap is 256 connections: 300 unfinished requests leave 256 open, and a
/// client with the token is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_at_most_256_connections_are_open() {
    const FLOOD: usize = 300;
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let served = HttpServed::start(&p, &[]).await;
    let pid = served.group.0;
    let before = sockets_of(pid);
    let mut flood: Vec<_> = (0..FLOOD)
        .map(|_| unfinished_request(served.port))
        .collect();
    wait_until_async("all but the newest 256 closed", || {
        count_closed(&mut flood) >= FLOOD - 256
    })
    .await;
    let open = sockets_of(pid);
    assert!(open <= before + 256, "{open} sockets, {before} before");
    let client = client_with_token(&served).await;
    assert_eq!(tool_names(&client).await, ["mcp__a__echo"]);
    let _ = client.cancel().await;
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

/// A connection that does not finish its request's headers within `--header-timeout-secs` is
/// closed, whether it sent part of them or nothing; so is a keep-alive connection that
/// finished a request and then sent nothing more. Afterwards serve holds no more sockets than
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_requests_and_idle_keep_alive_connections_are_closed_after_the_header_timeout() {
    use std::io::{Read, Write};
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let served = HttpServed::start(&p, &["--header-timeout-secs", "2"]).await;
    let pid = served.group.0;
    let before = sockets_of(pid);

    let mut connections: Vec<_> = (0..20).map(|_| unfinished_request(served.port)).collect();
    let silent = std::net::TcpStream::connect(("127.0.0.1", served.port)).expect("connect");
    silent.set_nonblocking(true).expect("non-blocking");
    connections.push(silent);
    // A complete request (refused: no token), answered, then nothing: kept alive, idle.
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", served.port)).expect("connect");
    idle.write_all(
        format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\r\n",
            served.port
        )
        .as_bytes(),
    )
    .expect("send a request");
    idle.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut head = [0_u8; 12];
    idle.read_exact(&mut head).expect("an answer");
    assert_eq!(&head, b"HTTP/1.1 401", "{}", String::from_utf8_lossy(&head));
    idle.set_nonblocking(true).expect("non-blocking");
    connections.push(idle);

    let total = connections.len();
    wait_until_async("every connection closed by the header timeout", || {
        count_closed(&mut connections) == total
    })
    .await;
    wait_until_async("serve's sockets back to where they were", || {
        sockets_of(pid) <= before
    })
    .await;
    let status = served.stop().await;
    assert!(status.success(), "{status}");
}

// ---------------------------------------------------------------------------------------------
// token files of runs that are gone

/// A `serve --http` killed with SIGKILL cannot remove its token file; the next
/// `serve --http` over the same state dir does, whatever its session, while the token file of
/// a running one is kept. A second `serve --http` for the same files as a running one is
/// refused and leaves the running one's token file (and token) alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_serves_token_file_is_removed_by_the_next_start_and_a_running_ones_is_kept() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {}}));
    let killed = HttpServed::start_in(&p, "one", &[]).await;
    let stale = killed.token_file.clone();
    killed.kill().await;
    assert!(stale.exists(), "SIGKILL leaves the token file behind");

    let running = HttpServed::start_in(&p, "two", &[]).await;
    assert_ne!(running.token_file, stale, "another session, another file");
    assert!(
        !stale.exists(),
        "the killed run's token file is still there: {}",
        stale.display()
    );

    let third = HttpServed::start_in(&p, "three", &[]).await;
    assert!(
        running.token_file.exists(),
        "a running serve's token file was removed"
    );
    let token = running.token();

    let refused = refused_start_with(p.flags_in("two"), &[]).await;
    assert!(
        refused.contains("another `mcp-reconcile serve --http` for these files is running"),
        "{refused}"
    );
    assert_eq!(
        running.token(),
        token,
        "the running serve's token file was replaced"
    );
    let ok = running
        .initialize(&[("authorization", &running.bearer())])
        .await;
    assert_eq!(ok.status, 200, "{ok:?}");

    for served in [running, third] {
        let file = served.token_file.clone();
        let status = served.stop().await;
        assert!(status.success(), "{status}");
        assert!(!file.exists(), "{}", file.display());
    }
}
