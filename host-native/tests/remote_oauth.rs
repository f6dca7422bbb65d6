//! End-to-end: an OAuth-protected streamable-HTTP server. The fixture runs with `--oauth`
//! (its `/mcp` wants a bearer token; a minimal authorization server on the same 127.0.0.1
//! origin issues short-lived ones), beside a stdio server. A real `watch` shows the protected
//! server as `needs_auth`; `mcp-reconcile auth NAME`, driven by following the printed URL to
//! its loopback listener, stores tokens and the running `watch` connects that server alone;
//! expiring access tokens are refreshed on the live connection; revoked tokens turn it into
//! `needs_auth` again. No token the fixture issued appears in any output or log
//! (`MCP_RECONCILE_LOG=debug`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// How long the fixture's access tokens live.
const TOKEN_TTL_SECS: u64 = 4;

/// The fixture with `--oauth`; its process group is killed on drop.
struct Guarded(HttpFixture);

impl Guarded {
    fn start() -> Self {
        let ttl = TOKEN_TTL_SECS.to_string();
        let server = HttpFixture::start(&[
            "--http",
            "127.0.0.1:0",
            "--oauth",
            "--name",
            "guarded",
            "--tools",
            "echo,add",
            "--oauth-token-ttl",
            &ttl,
        ]);
        assert!(
            server.url.starts_with("http://127.0.0.1:"),
            "fixture printed {:?}",
            server.url
        );
        Guarded(server)
    }

    fn base(&self) -> &str {
        self.0.url.trim_end_matches("/mcp")
    }
}

impl std::ops::Deref for Guarded {
    type Target = HttpFixture;
    fn deref(&self) -> &HttpFixture {
        &self.0
    }
}

fn needs_auth(status: &[Value], name: &str) -> bool {
    state_of(status, name) == "failed" && field(status, name, "reason") == "needs_auth"
}

/// The access token the token file holds for the fixture (to see a refresh happen).
fn stored_access_token(tokens: &PathBuf) -> Option<String> {
    let text = std::fs::read_to_string(tokens).ok()?;
    let file: Value = serde_json::from_str(&text).ok()?;
    let servers = file["servers"].as_object()?;
    let (_, clients) = servers.iter().next()?;
    clients["dynamic"]["token_response"]["access_token"]
        .as_str()
        .map(str::to_owned)
}

/// Runs `auth guarded` with `flags` and `envs`, follows the printed URL like a browser would
/// (the redirect lands on the command's loopback listener) and returns what it printed and
/// its stderr.
fn authorize(
    p: &Project,
    server: &Guarded,
    flags: &[&str],
    envs: &[(&str, &str)],
) -> (String, String) {
    authorize_after(p, server, "guarded", flags, envs, |_| {})
}

/// [`authorize`] of the server `name`, calling `before` with the authorization URL before
/// following it.
fn authorize_after(
    p: &Project,
    server: &Guarded,
    name: &str,
    flags: &[&str],
    envs: &[(&str, &str)],
    before: impl FnOnce(&str),
) -> (String, String) {
    let mut auth = Command::new(cli())
        .arg("auth")
        .arg(name)
        .args(p.flags())
        .args(flags)
        .envs(envs.iter().copied())
        .env("MCP_RECONCILE_LOG", "debug")
        .env_remove("BROWSER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("auth starts");
    let mut stdout = BufReader::new(auth.stdout.take().expect("stdout"));
    let mut printed = String::new();
    let authorize_url = loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).expect("auth output");
        assert!(n > 0, "auth ended before printing a URL: {printed}");
        printed.push_str(&line);
        if line.starts_with(server.base()) {
            break line.trim().to_owned();
        }
    };
    assert!(authorize_url.contains("/authorize?"), "{printed}");
    before(&authorize_url);
    let landed = runtime().block_on(async {
        reqwest::get(&authorize_url)
            .await
            .expect("the authorization URL answers")
    });
    assert!(landed.status().is_success(), "{landed:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).expect("auth output");
    printed.push_str(&rest);
    let auth_out = auth.wait_with_output().expect("auth ends");
    let auth_err = String::from_utf8_lossy(&auth_out.stderr).into_owned();
    assert!(auth_out.status.success(), "{printed}\n{auth_err}");
    (printed, auth_err)
}

fn mode_of(path: &std::path::Path) -> u32 {
    std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(path).expect("token file").permissions(),
    ) & 0o777
}

fn runtime() -> tokio::runtime::Runtime {
    mcp_reconcile::tls::install_crypto_provider();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn auth_connects_a_protected_server_in_a_running_watch_refreshes_and_parks_when_revoked() {
    let server = Guarded::start();
    let p = Project::new();
    let xdg = p.path("xdg");
    let tokens = xdg.join("mcp-reconcile/oauth-tokens.json");
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
        "local": p.server("local", "echo"),
    }}));
    let xdg_text = xdg.to_string_lossy().into_owned();
    let watch = p.watch_env(
        &[],
        &[
            ("XDG_CONFIG_HOME", xdg_text.as_str()),
            ("MCP_RECONCILE_LOG", "debug"),
        ],
    );

    // 1. No tokens: needs_auth, with what to do, and no retry timer.
    let status = p.wait_for("guarded needs auth, local connected", |s| {
        needs_auth(s, "guarded") && all_connected(s, &["local"])
    });
    let last_error = field(&status, "guarded", "lastError").to_string();
    assert!(
        last_error.contains("run `mcp-reconcile auth guarded`"),
        "{status:#?}"
    );
    assert_eq!(field(&status, "guarded", "retryInMs"), &Value::Null);
    let local_pid = pid_of(&status, "local").expect("local runs");
    let plan = p.run(&["plan", "--json"]);
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.contains(r#""name":"guarded","reason":"needs_auth""#),
        "a plan skips it as needs_auth: {plan}"
    );

    // 2. `auth guarded`: follow the printed URL like a browser would; the redirect lands on
    //    the command's loopback listener.
    let (printed, auth_err) = authorize(&p, &server, &[], &[("XDG_CONFIG_HOME", &xdg_text)]);
    assert!(
        printed.contains("authorized server \"guarded\" until ")
            && printed.contains("reconnecting"),
        "{printed}"
    );
    assert_eq!(mode_of(&tokens), 0o600);

    // 3. The running watch connects it; the stdio server is not touched.
    let status = p.wait_for("guarded connected", |s| {
        all_connected(s, &["guarded", "local"]) && field(s, "guarded", "tools") == 2
    });
    assert_eq!(pid_of(&status, "local"), Some(local_pid), "{status:#?}");
    let first_token = stored_access_token(&tokens).expect("an access token");

    // 4. Access tokens expire every few seconds: the live connection refreshes them (the
    //    keepalive pings keep using it) without a failure or a new pass.
    let passes = watch.passes();
    let start = Instant::now();
    while stored_access_token(&tokens).as_deref() == Some(first_token.as_str())
        || start.elapsed() < Duration::from_secs(3 * TOKEN_TTL_SECS)
    {
        assert!(start.elapsed() < PATIENCE, "no refresh happened");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = p.status();
    assert!(all_connected(&status, &["guarded", "local"]), "{status:#?}");
    assert_eq!(field(&status, "guarded", "attempts"), 0, "{status:#?}");
    // `status` says until when (read from the token file), never what.
    let xdg_env = [("XDG_CONFIG_HOME", xdg_text.as_str())];
    let json = p.run_env(&["status", "--json"], &xdg_env);
    let with_tokens: Vec<Value> = serde_json::from_slice(&json.stdout).expect("status --json");
    let until = field(&with_tokens, "guarded", "authorizedUntil").to_string();
    assert!(
        until.contains('T') && until.ends_with("Z\""),
        "{with_tokens:#?}"
    );
    assert_eq!(
        field(&with_tokens, "local", "authorizedUntil"),
        &Value::Null
    );
    let text = p.run_env(&["status"], &xdg_env);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("authorized until 20"), "{text}");
    assert_eq!(watch.passes(), passes, "{}", watch.output());

    // 5. Every token revoked: the refresh is rejected and it waits for `auth` again.
    let revoked = runtime().block_on(async {
        reqwest::Client::new()
            .post(format!("{}/oauth/revoke-all", server.base()))
            .send()
            .await
            .expect("revoke")
    });
    assert!(revoked.status().is_success());
    let status = p.wait_for("guarded needs auth again", |s| {
        needs_auth(s, "guarded") && all_connected(s, &["local"])
    });
    assert_eq!(pid_of(&status, "local"), Some(local_pid), "{status:#?}");

    // 6. Nothing the authorization server issued was ever printed or logged.
    let log = watch.stop();
    assert!(
        log.contains("DEBUG") && auth_err.contains("DEBUG"),
        "debug logs were on:\n{log}\n{auth_err}"
    );
    let status_text = serde_json::to_string(&status).expect("json");
    for (what, text) in [
        ("watch log", log.as_str()),
        ("auth output", printed.as_str()),
        ("auth stderr", auth_err.as_str()),
        ("status", status_text.as_str()),
        ("status text", text.as_str()),
    ] {
        for secret in ["fixture-access-", "fixture-refresh-", "fixture-code-"] {
            assert!(
                !text.contains(secret),
                "{what} shows a {secret} token:\n{text}"
            );
        }
    }
}

#[test]
fn the_qwen_layout_shares_the_typescript_cli_s_token_file() {
    let server = Guarded::start();
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
    }}));
    let (qwen, xdg) = (p.path("qwen"), p.path("xdg"));
    let (qwen_text, xdg_text) = (qwen.to_string_lossy(), xdg.to_string_lossy());
    let envs = [
        ("QWEN_HOME", qwen_text.as_ref()),
        ("XDG_CONFIG_HOME", xdg_text.as_ref()),
    ];
    let (printed, _) = authorize(&p, &server, &["--layout", "qwen"], &envs);

    // The login landed in the TypeScript CLI's file, in its shape, and not in ours.
    let file = qwen.join("mcp-oauth-tokens.json");
    assert!(printed.contains("mcp-oauth-tokens.json"), "{printed}");
    assert_eq!(mode_of(&file), 0o600);
    let entries: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("qwen token file"))
            .expect("JSON");
    let entry = &entries.as_array().expect("an array of credentials")[0];
    assert_eq!(entry["serverName"], "guarded");
    assert_eq!(entry["mcpServerUrl"], server.url.as_str());
    assert_eq!(entry["token"]["tokenType"], "Bearer");
    assert!(entry["token"]["accessToken"].is_string(), "{entry}");
    assert!(entry["token"]["expiresAt"].as_u64().unwrap_or(0) > 1_700_000_000_000);
    let own =
        std::fs::read_to_string(xdg.join("mcp-reconcile/oauth-tokens.json")).unwrap_or_default();
    assert!(!own.contains("access_token"), "{own}");

    // A watch in the same layout reads it and connects.
    let watch = p.watch_env(&["--layout", "qwen"], &envs);
    let start = Instant::now();
    loop {
        let out = p.run_env(&["status", "--json", "--layout", "qwen"], &envs);
        let status: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if all_connected(&status, &["guarded"]) {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "guarded never connected from the qwen token file: {status:#?}\n{}",
            watch.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = watch.stop();
    let token = entry["token"]["accessToken"].as_str().unwrap_or("none");
    assert!(!log.contains(token), "{log}");
}

/// A token endpoint of the repository's own: it records every request it receives and
/// refuses each with `invalid_grant`, as an attacker's would (to take the refresh token, and
/// to have the user's login cleared). Its thread ends with the test process.
struct Recorder {
    base: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    fn start() -> Self {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head, then as much body as it announces.
                loop {
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if body.len() >= length {
                            break;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                log.lock()
                    .expect("log")
                    .push(String::from_utf8_lossy(&request).into_owned());
                let body = r#"{"error":"invalid_grant"}"#;
                let _ = write!(
                    stream,
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Recorder { base, seen }
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().expect("log").clone()
    }
}

/// The audit's finding: a project entry with the user's server URL and token endpoints of
/// its own must never receive the user's refresh token, nor clear the user's login with its
/// `invalid_grant`; it asks for its own `auth`, saying why, and its review says so.
#[test]
fn a_project_entry_with_the_user_s_url_never_gets_or_clears_the_user_s_login() {
    let server = Guarded::start();
    let theirs = Recorder::start();
    let p = Project::new();
    let xdg = p.path("xdg");
    let tokens = xdg.join("mcp-reconcile/oauth-tokens.json");
    let xdg_text = xdg.to_string_lossy().into_owned();
    let env = [("XDG_CONFIG_HOME", xdg_text.as_str())];
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
    }}));
    authorize(&p, &server, &[], &env);
    assert!(stored_access_token(&tokens).is_some());

    // The repository's entry: the same URL, its own authorization and token endpoints.
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"repo": {"httpUrl": server.url, "oauth": {
            "enabled": true,
            "authorizationUrl": format!("{}/authorize", theirs.base),
            "tokenUrl": format!("{}/token", theirs.base),
        }}}}),
    );
    let approved = p.run_env(&["approve", "repo"], &env);
    let review = String::from_utf8_lossy(&approved.stdout).into_owned();
    assert!(approved.status.success(), "{review}");
    assert!(
        review.contains("login    does not use your own stored OAuth login for"),
        "the review says which login the entry would use:\n{review}"
    );

    let watch = p.watch_env(&[], &[("XDG_CONFIG_HOME", xdg_text.as_str())]);
    let status = p.wait_for("guarded connected, repo needs auth", |s| {
        all_connected(s, &["guarded"]) && needs_auth(s, "repo")
    });
    let why = field(&status, "repo", "lastError").to_string();
    assert!(
        why.contains("run `mcp-reconcile auth repo`")
            && why.contains("belongs to your own server entry"),
        "{status:#?}"
    );

    // Several token lifetimes: the user's session refreshes at its own authorization server.
    let first = stored_access_token(&tokens).expect("an access token");
    let start = Instant::now();
    while stored_access_token(&tokens).as_deref() == Some(first.as_str())
        || start.elapsed() < Duration::from_secs(3 * TOKEN_TTL_SECS)
    {
        assert!(start.elapsed() < PATIENCE, "no refresh happened");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = p.status();
    assert!(all_connected(&status, &["guarded"]), "{status:#?}");
    assert!(needs_auth(&status, "repo"), "{status:#?}");
    let seen = theirs.requests();
    assert!(
        seen.iter().all(|r| !r.contains("fixture-")),
        "the repository's endpoint received the user's tokens: {seen:#?}"
    );
    assert!(seen.is_empty(), "nothing was sent to it: {seen:#?}");
    assert!(
        stored_access_token(&tokens).is_some(),
        "the user's login survives"
    );

    // The user's own entry pointed at other endpoints: the login stays with the server
    // that issued it, and the entry asks for a login of its own.
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {
            "enabled": true,
            "authorizationUrl": format!("{}/authorize", theirs.base),
            "tokenUrl": format!("{}/token", theirs.base),
        }},
    }}));
    let status = p.wait_for("guarded needs auth at other endpoints", |s| {
        needs_auth(s, "guarded")
    });
    let why = field(&status, "guarded", "lastError").to_string();
    assert!(
        why.contains(&format!("issued by token endpoint {}/token", server.base()))
            && why.contains(&format!(
                "this entry's token endpoint is {}/token",
                theirs.base
            )),
        "{status:#?}"
    );
    let seen = theirs.requests();
    assert!(seen.is_empty(), "nothing was sent to it: {seen:#?}");
    assert!(stored_access_token(&tokens).is_some());
    drop(watch);
}

/// The audit's finding: sessions refreshing one rotating refresh token at once. Each refresh
/// is one real authorization manager on the real token file (as a connection sets one up),
/// all at the same moment on several threads against the fixture, whose every refresh
/// rotates the refresh token. The file lock serializes them: each one after the first reads
/// the token the one before stored, so every refresh succeeds and the login still works.
#[test]
fn concurrent_refreshes_of_a_rotating_refresh_token_keep_the_login() {
    use mcp_reconcile::auth::{self, OAuthEntry, TokenFile};
    const SESSIONS: usize = 4;
    let server = Guarded::start();
    let p = Project::new();
    let xdg = p.path("xdg");
    let tokens = xdg.join("mcp-reconcile/oauth-tokens.json");
    let xdg_text = xdg.to_string_lossy().into_owned();
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
    }}));
    authorize(&p, &server, &[], &[("XDG_CONFIG_HOME", &xdg_text)]);

    let config = mcp_reconcile_kernel::ServerConfig::from_json(
        &json!({"httpUrl": server.url, "oauth": {"enabled": true}}).to_string(),
    )
    .expect("config");
    let entry = OAuthEntry::of(&config);
    let url = server.url.clone();
    let file = TokenFile::native(tokens.clone());
    mcp_reconcile::tls::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SESSIONS)
        .enable_all()
        .build()
        .expect("runtime");
    let session = |file: TokenFile, url: String, entry: OAuthEntry| async move {
        let store = auth::token_store(Some(&file), "guarded", &url, &entry).expect("store");
        let mut manager = auth::manager(&url, &entry, store.clone())
            .await
            .expect("manager");
        let server = auth::authorization_server(&mut manager, &url, &entry, None)
            .await
            .expect("discovery");
        store.bind(server);
        assert!(manager.initialize_from_store().await.expect("stored login"));
        manager
    };
    let outcomes = rt.block_on(async {
        let mut managers = Vec::new();
        for _ in 0..SESSIONS {
            managers.push(session(file.clone(), url.clone(), entry.clone()).await);
        }
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(SESSIONS));
        let refreshes: Vec<_> = managers
            .into_iter()
            .map(|manager| {
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    manager.refresh_token().await.map(|_| ())
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for refresh in refreshes {
            outcomes.push(refresh.await.expect("task").map_err(|e| e.to_string()));
        }
        outcomes
    });
    assert!(
        outcomes.iter().all(Result::is_ok),
        "every refresh succeeds: {outcomes:?}"
    );
    let text = std::fs::read_to_string(&tokens).expect("token file");
    assert!(
        stored_access_token(&tokens).is_some(),
        "the login is still stored: {}",
        text.len()
    );
    // And it still works: one more session refreshes with what is stored.
    let again = rt.block_on(async {
        let manager = session(file.clone(), url.clone(), entry.clone()).await;
        manager.refresh_token().await.map(|_| ())
    });
    assert!(again.is_ok(), "{again:?}");
}

/// The audit's finding: the login's loopback listener took the first request to its path,
/// so another local user could inject a code of theirs (login CSRF) or abort the login. It
/// now answers every request that is not the redirect with the `state` it sent with a 400,
/// and keeps waiting for the real one.
#[test]
fn the_login_callback_ignores_requests_without_the_state_it_sent() {
    let server = Guarded::start();
    let p = Project::new();
    let xdg = p.path("xdg");
    let xdg_text = xdg.to_string_lossy().into_owned();
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
    }}));
    let mut answers = Vec::new();
    let mut idle = None;
    let (printed, _) = authorize_after(
        &p,
        &server,
        "guarded",
        &[],
        &[("XDG_CONFIG_HOME", &xdg_text)],
        |authorize_url| {
            let url = reqwest::Url::parse(authorize_url).expect("authorization URL");
            let callback = url
                .query_pairs()
                .find(|(k, _)| k == "redirect_uri")
                .map(|(_, v)| v.into_owned())
                .expect("a redirect_uri");
            let origin = callback.trim_end_matches("/callback");
            // A connection that sends nothing, held open through the rest of the login.
            let address = origin.trim_start_matches("http://");
            idle = Some(std::net::TcpStream::connect(address).expect("connect"));
            runtime().block_on(async {
                let http = reqwest::Client::builder()
                    .no_proxy()
                    .build()
                    .expect("client");
                for injected in [
                    format!("{callback}?code=fixture-code-evil&state=wrong"),
                    format!("{callback}?code=fixture-code-evil"),
                    format!("{callback}?error=access_denied&state=wrong"),
                    format!("{origin}/elsewhere?code=fixture-code-evil&state=wrong"),
                ] {
                    let answer = http
                        .get(&injected)
                        .send()
                        .await
                        .expect("the listener answers");
                    answers.push((injected, answer.status().as_u16()));
                }
            });
        },
    );
    drop(idle);
    assert!(
        answers.iter().all(|(_, status)| *status == 400),
        "{answers:?}"
    );
    assert!(
        printed.contains("authorized server \"guarded\" until "),
        "the real redirect still logs in: {printed}"
    );
    let tokens = xdg.join("mcp-reconcile/oauth-tokens.json");
    assert!(stored_access_token(&tokens).is_some());
}

/// A project entry still logs in for itself: `auth NAME` of an approved project entry stores
/// its own login apart from the user's (which it neither replaces nor uses), the review then
/// says it uses that login, and it connects with it.
#[test]
fn a_project_entry_logs_in_apart_from_the_user_s_login() {
    let server = Guarded::start();
    let p = Project::new();
    let xdg = p.path("xdg");
    let tokens = xdg.join("mcp-reconcile/oauth-tokens.json");
    let xdg_text = xdg.to_string_lossy().into_owned();
    let env = [("XDG_CONFIG_HOME", xdg_text.as_str())];
    p.write_settings(json!({"mcpServers": {
        "guarded": {"httpUrl": server.url, "oauth": {"enabled": true}},
    }}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"repo": {"httpUrl": server.url, "oauth": {"enabled": true}}}}),
    );
    authorize(&p, &server, &[], &env);
    let mine = stored_access_token(&tokens).expect("the user's login");
    assert!(p.run_env(&["approve", "repo"], &env).status.success());

    let (printed, _) = authorize_after(&p, &server, "repo", &[], &env, |_| {});
    assert!(printed.contains("authorized server \"repo\""), "{printed}");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&tokens).expect("token file")).expect("JSON");
    assert_eq!(
        stored_access_token(&tokens).as_deref(),
        Some(mine.as_str()),
        "the user's login is not replaced: {}",
        file["servers"].as_object().map_or(0, |s| s.len())
    );
    let theirs = file["projectServers"][server.url.as_str()]["dynamic"].clone();
    assert_eq!(theirs["login"]["layer"], "project", "{}", theirs["login"]);
    assert_eq!(
        theirs["login"]["tokenEndpoint"],
        format!("{}/token", server.base()).as_str()
    );
    let review = p.run_env(&["approve", "repo"], &env);
    let review = String::from_utf8_lossy(&review.stdout).into_owned();
    assert!(
        review.contains(&format!(
            "login    uses your stored OAuth login for {} (issued by {}/token)",
            server.url,
            server.base()
        )),
        "{review}"
    );

    let watch = p.watch_env(&[], &env);
    p.wait_for("both connected, each with its own login", |s| {
        all_connected(s, &["guarded", "repo"])
    });
    drop(watch);
}
