//! `--oauth`: the MCP endpoint wants a bearer token, and a minimal OAuth 2.1 authorization
//! server on the same loopback origin issues them — enough for a client's whole flow:
//!
//! * `GET /.well-known/oauth-protected-resource[/mcp]`: protected-resource metadata naming
//!   this origin as the authorization server;
//! * `GET /.well-known/oauth-authorization-server`: its metadata (PKCE S256, public clients);
//! * `POST /register`: dynamic client registration (every client is accepted);
//! * `GET /authorize`: no login page — redirects at once to `redirect_uri` with a code;
//! * `POST /token`: `authorization_code` and `refresh_token` grants; access tokens live
//!   `--oauth-token-ttl` seconds, every refresh rotates the refresh token;
//! * `POST /oauth/revoke-all`: the test switch — every token issued so far stops working.
//!
//! `/mcp` without a current access token answers `401` with a `WWW-Authenticate` challenge
//! that points at the protected-resource metadata. The fixture does not check the PKCE
//! verifier (the client's side of PKCE is what the tests exercise).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;

/// The authorization server's state: issued codes and tokens.
pub struct AuthServer {
    base: String,
    ttl: Duration,
    inner: Mutex<Issued>,
}

#[derive(Default)]
struct Issued {
    counter: u64,
    codes: HashMap<String, ()>,
    /// Access token → when it stops working.
    access: HashMap<String, Instant>,
    refresh: HashMap<String, ()>,
}

impl AuthServer {
    /// An authorization server at `base` (`http://127.0.0.1:PORT`) whose access tokens live
    /// `ttl`.
    pub fn new(base: String, ttl: Duration) -> Arc<Self> {
        Arc::new(AuthServer {
            base,
            ttl,
            inner: Mutex::new(Issued::default()),
        })
    }

    /// The OAuth routes, and `mcp` behind the bearer check.
    pub fn router(self: &Arc<Self>, mcp: Router) -> Router {
        let guarded = mcp.layer(axum::middleware::from_fn_with_state(
            self.clone(),
            require_bearer,
        ));
        Router::new()
            .route(
                "/.well-known/oauth-protected-resource",
                get(protected_resource),
            )
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(protected_resource),
            )
            .route(
                "/.well-known/oauth-authorization-server",
                get(authorization_server),
            )
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/oauth/revoke-all", post(revoke_all))
            .with_state(self.clone())
            .merge(guarded)
    }

    fn issue(&self, issued: &mut Issued, prefix: &str) -> String {
        issued.counter += 1;
        // Distinct, unguessable-looking values the tests search every output for.
        format!(
            "{prefix}-{}-{:x}",
            issued.counter,
            u64::from(std::process::id()) * 7919 + issued.counter * 104_729
        )
    }

    fn tokens(&self, issued: &mut Issued) -> serde_json::Value {
        let access = self.issue(issued, "fixture-access");
        let refresh = self.issue(issued, "fixture-refresh");
        issued
            .access
            .insert(access.clone(), Instant::now() + self.ttl);
        issued.refresh.insert(refresh.clone(), ());
        json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.ttl.as_secs(),
            "refresh_token": refresh,
        })
    }
}

async fn require_bearer(
    State(server): State<Arc<AuthServer>>,
    request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let valid = token.is_some_and(|t| {
        let issued = server.inner.lock().expect("state");
        issued
            .access
            .get(&t)
            .is_some_and(|until| Instant::now() < *until)
    });
    if valid {
        return next.run(request).await;
    }
    let challenge = format!(
        "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
        server.base
    );
    let mut response = (StatusCode::UNAUTHORIZED, "unauthorized\n").into_response();
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

async fn protected_resource(State(server): State<Arc<AuthServer>>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "resource": format!("{}/mcp", server.base),
            "authorization_servers": [server.base],
        }),
    )
}

async fn authorization_server(State(server): State<Arc<AuthServer>>) -> Response {
    let base = &server.base;
    json_response(
        StatusCode::OK,
        &json!({
            "issuer": base,
            "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"),
            "registration_endpoint": format!("{base}/register"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }),
    )
}

async fn register(State(server): State<Arc<AuthServer>>, body: String) -> Response {
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let client_id = {
        let mut issued = server.inner.lock().expect("state");
        server.issue(&mut issued, "fixture-client")
    };
    json_response(
        StatusCode::CREATED,
        &json!({
            "client_id": client_id,
            "redirect_uris": request.get("redirect_uris").cloned().unwrap_or_default(),
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }),
    )
}

async fn authorize(State(server): State<Arc<AuthServer>>, RawQuery(query): RawQuery) -> Response {
    let params = form(query.as_deref().unwrap_or(""));
    let (Some(redirect), Some(state)) = (params.get("redirect_uri"), params.get("state")) else {
        return (
            StatusCode::BAD_REQUEST,
            "redirect_uri and state are required\n",
        )
            .into_response();
    };
    if !redirect.starts_with("http://127.0.0.1:") {
        return (StatusCode::BAD_REQUEST, "redirects go to 127.0.0.1 only\n").into_response();
    }
    let code = {
        let mut issued = server.inner.lock().expect("state");
        let code = server.issue(&mut issued, "fixture-code");
        issued.codes.insert(code.clone(), ());
        code
    };
    let location = format!("{redirect}?code={code}&state={}", encode(state));
    Response::builder()
        .status(StatusCode::FOUND)
        .header(header::LOCATION, location)
        .body(Body::empty())
        .unwrap_or_default()
}

async fn token(State(server): State<Arc<AuthServer>>, body: String) -> Response {
    let params = form(&body);
    let mut issued = server.inner.lock().expect("state");
    let granted = match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => params
            .get("code")
            .is_some_and(|code| issued.codes.remove(code).is_some()),
        Some("refresh_token") => params
            .get("refresh_token")
            .is_some_and(|token| issued.refresh.remove(token).is_some()),
        _ => false,
    };
    if !granted {
        return json_response(StatusCode::BAD_REQUEST, &json!({"error": "invalid_grant"}));
    }
    let tokens = server.tokens(&mut issued);
    json_response(StatusCode::OK, &tokens)
}

async fn revoke_all(State(server): State<Arc<AuthServer>>) -> Response {
    let mut issued = server.inner.lock().expect("state");
    issued.access.clear();
    issued.refresh.clear();
    (StatusCode::OK, "revoked\n").into_response()
}

fn json_response(status: StatusCode, value: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `application/x-www-form-urlencoded` pairs.
fn form(text: &str) -> HashMap<String, String> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, other) => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
