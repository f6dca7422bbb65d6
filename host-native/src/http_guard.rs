//! What stands in front of `mcp-reconcile serve --http`: the gateway offers every admitted
//! server's tools, so a request must prove it comes from the user who started it.
//!
//! Every request, before rmcp sees it, passes [`check`]:
//! 1. `Host` must be a loopback name with the bound port (`127.0.0.1:PORT`, `localhost:PORT`,
//!    `[::1]:PORT`): a page whose DNS name was rebound to 127.0.0.1 is refused (403);
//! 2. a request with an `Origin` header (a browser) is refused (403) unless that origin was
//!    allowed with `--allow-origin` (exact match) or is the server's own loopback origin;
//!    requests without one pass;
//! 3. `Authorization: Bearer <token>` must carry the run's token, compared in constant time;
//!    otherwise 401 with `WWW-Authenticate: Bearer` (unless `--no-auth` turned this off). A
//!    request that carries it marks its TCP connection [`Authorized`]: when the connection
//!    cap is reached, such a connection is never closed to make room for a new one;
//! 4. a request that would open a new MCP session (a POST without `Mcp-Session-Id`) gets 503
//!    while `--max-sessions` sessions are open.
//!
//! A `DELETE` with an `Mcp-Session-Id` ends that session; [`session_ended`] answers it
//! `200 OK` as MCP clients expect (rmcp says `202 Accepted`, which the Python SDK logs as
//! "Session termination failed: 202" on every close).
//!
//! Before any of this, the connections themselves are bounded ([`ConnectionLimits`]): a
//! request's headers must arrive within `--header-timeout-secs`, an idle keep-alive
//! connection is closed after as long, and at most `--max-connections` are open
//! ([`crate::gateway`]'s `connections` module).
//!
//! Idle sessions are closed by rmcp's own session keep-alive
//! ([`SessionConfig::keep_alive`](rmcp::transport::streamable_http_server::session::local::SessionConfig)),
//! which removes them from the session manager, so their memory is released.
//!
//! The token is 32 bytes from the OS RNG, hex-encoded, written to a `0600` file in the state
//! directory ([`TokenFile`]: locked while the run lives, removed when dropped, and removed by
//! the next run when a killed run left it), or read from a file the user made
//! ([`Token::from_file`]). It never appears in a log or a `Debug` output.

use std::fmt;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

mod token_file;
pub use token_file::TokenFile;

/// The default of `--max-sessions`.
pub const DEFAULT_MAX_SESSIONS: u32 = 64;
/// The default of `--session-idle-secs`.
pub const DEFAULT_SESSION_IDLE_SECS: u64 = 600;
/// The default of `--max-connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 256;
/// The default of `--header-timeout-secs`.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;

/// How many TCP connections `serve --http` keeps open and how long one may take to send a
/// request's headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// At most this many connections at once (`--max-connections`); past it, the oldest
    /// connection that has not carried the token is closed (or the new one, when all have).
    pub max_connections: usize,
    /// A request's headers must be complete this long after the server starts reading them;
    /// an idle keep-alive connection is closed after as long (`--header-timeout-secs`).
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS as usize,
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
        }
    }
}

/// Whether a request carrying the bearer token came over a TCP connection: the connection
/// puts it in each request's extensions, [`check`] sets it.
#[derive(Clone, Debug, Default)]
pub struct Authorized(Arc<AtomicBool>);

impl Authorized {
    /// Marks the connection.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a request on the connection carried the token.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A bearer token. Its `Debug` output is redacted; it is never logged.
#[derive(Clone)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A fresh token: 32 bytes from the OS RNG (`/dev/urandom`), as 64 hex digits.
    ///
    /// # Errors
    /// `/dev/urandom` cannot be read.
    pub fn generate() -> anyhow::Result<Token> {
        let mut bytes = [0_u8; 32];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading 32 random bytes from /dev/urandom for the HTTP bearer token")?;
        let mut hex = String::with_capacity(64);
        for byte in bytes {
            hex.push_str(&format!("{byte:02x}"));
        }
        Ok(Token(hex))
    }

    /// The token in the first line of `path` (trimmed). The file must be readable by its
    /// owner only, and the token must not be empty.
    ///
    /// # Errors
    /// The file cannot be read, is accessible by group or others, or its first line is empty.
    pub fn from_file(path: &Path) -> anyhow::Result<Token> {
        let meta = fs::metadata(path).with_context(|| {
            format!(
                "--token-file {}: cannot read it; create it with the token on its first line \
                 and `chmod 600` it",
                path.display()
            )
        })?;
        if !meta.is_file() {
            bail!("--token-file {}: not a regular file", path.display());
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "--token-file {}: the file is accessible by group or others (mode {mode:04o}); \
                 anyone who can read it can call every tool. Run `chmod 600 {}` and start again",
                path.display(),
                path.display()
            );
        }
        let text = fs::read_to_string(path)
            .with_context(|| format!("--token-file {}: cannot read it", path.display()))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            bail!(
                "--token-file {}: the first line is empty; put the bearer token on it",
                path.display()
            );
        }
        if token.chars().any(|c| c.is_control() || c == ' ') {
            bail!(
                "--token-file {}: the token contains spaces or control characters; an HTTP \
                 header cannot carry it",
                path.display()
            );
        }
        Ok(Token(token.to_owned()))
    }

    /// The token itself, for a client's `Authorization: Bearer` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token. Takes the same time wherever they differ.
    fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), presented)
    }
}

/// `expected == presented`, in a time that depends only on `expected`'s length.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut diff = expected.len() ^ presented.len();
    for (i, byte) in expected.iter().enumerate() {
        let other = presented.get(i).copied().unwrap_or(!*byte);
        diff |= usize::from(byte ^ other);
    }
    std::hint::black_box(diff) == 0
}

/// What `serve --http` lets through.
#[derive(Clone, Debug)]
pub struct GuardOptions {
    /// The bearer token every request must carry; `None` (`--no-auth`): none is asked for.
    pub token: Option<Token>,
    /// Browser origins allowed to call (`--allow-origin`, exact match).
    pub allowed_origins: Vec<String>,
    /// At most this many MCP sessions at once (`--max-sessions`).
    pub max_sessions: usize,
    /// A session without a request for this long is closed (`--session-idle-secs`).
    pub session_idle: Duration,
    /// The cap on TCP connections and the header-read timeout.
    pub connections: ConnectionLimits,
}

impl GuardOptions {
    /// `token` with the default limits and no allowed origin.
    pub fn new(token: Token) -> GuardOptions {
        GuardOptions {
            token: Some(token),
            allowed_origins: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS as usize,
            session_idle: Duration::from_secs(DEFAULT_SESSION_IDLE_SECS),
            connections: ConnectionLimits::default(),
        }
    }
}

/// The state of [`check`]: the options, the bound port and the session manager to count.
#[derive(Debug)]
pub struct Guard {
    options: GuardOptions,
    hosts: [String; 3],
    sessions: Arc<LocalSessionManager>,
    /// New-session requests admitted but not answered yet (their session may not be in
    /// the manager's map yet).
    admitting: AtomicUsize,
    admit: tokio::sync::Mutex<()>,
}

impl Guard {
    /// A guard for a server bound to `port` whose sessions live in `sessions`.
    pub fn new(options: GuardOptions, port: u16, sessions: Arc<LocalSessionManager>) -> Guard {
        Guard {
            options,
            hosts: Guard::loopback_hosts(port),
            sessions,
            admitting: AtomicUsize::new(0),
            admit: tokio::sync::Mutex::new(()),
        }
    }

    /// The `Host` values accepted for `port`.
    pub fn loopback_hosts(port: u16) -> [String; 3] {
        [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ]
    }

    fn host_allowed(&self, host: Option<&HeaderValue>) -> bool {
        let Some(host) = host.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// An allowed origin (`--allow-origin`), or this server's own loopback origin
    /// (`http://127.0.0.1:PORT` and the like: it serves no pages, so nothing else can be
    /// there).
    fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        let own = self.hosts.iter().any(|host| {
            origin
                .as_bytes()
                .strip_prefix(b"http://")
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host.as_bytes()))
        });
        own || self
            .options
            .allowed_origins
            .iter()
            .any(|allowed| allowed.as_bytes() == origin.as_bytes())
    }

    fn authorized(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(token) = &self.options.token else {
            return true;
        };
        let Some(value) = authorization else {
            return false;
        };
        let value = value.as_bytes();
        let Some((scheme, rest)) = value.split_at_checked(7) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        token.matches(rest.trim_ascii())
    }
}

/// Releases an admitted slot when the request is answered (or dropped).
struct Admitted<'a>(&'a AtomicUsize);

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The axum middleware: Host, Origin, bearer token, then the session cap; see the module
/// documentation.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !guard.host_allowed(headers.get(header::HOST)) {
        tracing::warn!("refused an HTTP request with a Host header that is not loopback");
        return refuse(
            StatusCode::FORBIDDEN,
            "forbidden: the Host header must be 127.0.0.1, localhost or [::1] with this \
             server's port (DNS rebinding protection)",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        if !guard.origin_allowed(origin) {
            tracing::warn!(origin = ?origin, "refused an HTTP request from a browser origin");
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden: requests from this Origin are not allowed; start `serve --http` \
                 with --allow-origin ORIGIN to allow a web client",
            );
        }
    }
    if !guard.authorized(headers.get(header::AUTHORIZATION)) {
        tracing::warn!("refused an HTTP request without the right bearer token");
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized: send `Authorization: Bearer <token>` with the token from the file \
             `mcp-reconcile serve --http` printed (or the one given with --token-file)",
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mcp-reconcile\""),
        );
        return response;
    }
    if let Some(connection) = request.extensions().get::<Authorized>() {
        connection.set();
    }
    let opens_session =
        request.method() == axum::http::Method::POST && !headers.contains_key("mcp-session-id");
    if !opens_session {
        return next.run(request).await;
    }
    let admitted = {
        let _admit = guard.admit.lock().await;
        let open = guard.sessions.sessions.read().await.len();
        let pending = guard.admitting.load(Ordering::SeqCst);
        if open + pending >= guard.options.max_sessions {
            None
        } else {
            guard.admitting.fetch_add(1, Ordering::SeqCst);
            Some(Admitted(&guard.admitting))
        }
    };
    let Some(_admitted) = admitted else {
        tracing::warn!(
            max = guard.options.max_sessions,
            "refused a new MCP session: too many open"
        );
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "too many MCP sessions: {max} are open (--max-sessions {max}); close one \
                 (HTTP DELETE with its Mcp-Session-Id) or wait until an idle one is closed \
                 after {idle} s",
                max = guard.options.max_sessions,
                idle = guard.options.session_idle.as_secs()
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    };
    next.run(request).await
}

/// The axum middleware that answers a `DELETE` which ended its session `200 OK` (rmcp
/// answers `202 Accepted`); the streamable HTTP transport of MCP expects 200, or 405 from a
/// server that does not let clients end sessions.
pub async fn session_ended(request: Request, next: Next) -> Response {
    let delete = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// A JSON-RPC error body (id `null`) with `status`.
fn refuse(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": message},
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"abc", b""));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn generated_tokens_are_64_hex_digits_and_differ() {
        let a = Token::generate().expect("token");
        let b = Token::generate().expect("token");
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.expose(), b.expose());
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn bearer_header_parsing() {
        let token = Token("s3cret".to_owned());
        let guard = Guard::new(
            GuardOptions::new(token),
            1,
            Arc::new(LocalSessionManager::default()),
        );
        let ok = |v: &str| guard.authorized(Some(&HeaderValue::from_str(v).expect("value")));
        assert!(ok("Bearer s3cret"));
        assert!(ok("bearer s3cret"));
        assert!(!ok("Bearer s3cre"));
        assert!(!ok("Basic s3cret"));
        assert!(!ok("Bearer"));
        assert!(!guard.authorized(None));
        assert!(guard.host_allowed(Some(&HeaderValue::from_static("localhost:1"))));
        assert!(guard.host_allowed(Some(&HeaderValue::from_static("[::1]:1"))));
        assert!(!guard.host_allowed(Some(&HeaderValue::from_static("localhost:2"))));
        assert!(!guard.host_allowed(Some(&HeaderValue::from_static("evil.example:1"))));
        assert!(!guard.host_allowed(None));
    }
}
