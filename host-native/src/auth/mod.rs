//! OAuth for streamable-HTTP servers, through rmcp's `auth` support: the entry's `oauth`
//! fields ([`OAuthEntry`]), the token file ([`store`]), the authorization manager a
//! connection authorizes its requests with ([`manager`]), and the interactive login that
//! `mcp-reconcile auth NAME` runs ([`login`]).
//!
//! Every OAuth request goes through the host's own HTTP client
//! ([`crate::transport::http_client`]): no proxy, the same TLS roots, redirects only within
//! the origin. Tokens live only in the token file and in memory; no message, status or log
//! line the host writes contains one.

pub mod store;

use std::time::SystemTime;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub use store::{TokenStore, DYNAMIC_CLIENT};

/// The `oauth` fields of an entry that the host uses (SPEC §2 names them all).
#[derive(Clone, Debug, Default)]
pub struct OAuthEntry {
    /// `oauth.enabled`: authorize even before the server asks.
    pub enabled: bool,
    /// `oauth.clientId`: a pre-registered client (else dynamic registration).
    pub client_id: Option<String>,
    /// `oauth.clientSecret`, for a pre-registered confidential client.
    pub client_secret: Option<String>,
    /// `oauth.scopes`; empty: the scopes the server advertises.
    pub scopes: Vec<String>,
}

impl OAuthEntry {
    /// Reads `config.oauth` (absent or not an object: all defaults).
    pub fn of(config: &ServerConfig) -> Self {
        let Some(Value::Object(oauth)) = config.get("oauth") else {
            return OAuthEntry::default();
        };
        let text = |key: &str| match oauth.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        let scopes = match oauth.get("scopes") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        OAuthEntry {
            enabled: matches!(oauth.get("enabled"), Some(Value::Bool(true))),
            client_id: text("clientId"),
            client_secret: text("clientSecret"),
            scopes,
        }
    }

    /// The token file's client key for this entry.
    pub fn client_key(&self) -> &str {
        self.client_id.as_deref().unwrap_or(DYNAMIC_CLIENT)
    }
}

/// The token store of the server at `url` configured as `entry`, in the default token file.
///
/// # Errors
/// Neither `XDG_CONFIG_HOME` nor `HOME` is set.
pub fn token_store(url: &str, entry: &OAuthEntry) -> Result<TokenStore, AuthError> {
    let path = store::default_path().ok_or_else(|| {
        AuthError::CredentialStoreError(
            "cannot place the token file: set XDG_CONFIG_HOME or HOME".into(),
        )
    })?;
    Ok(TokenStore::new(path, url, entry.client_key()))
}

/// An authorization manager for the server at `url` on the host's HTTP client, with `store`
/// as its credentials.
///
/// # Errors
/// The URL is invalid or the HTTP client cannot be built.
pub async fn manager(url: &str, store: TokenStore) -> Result<AuthorizationManager, AuthError> {
    let client = crate::transport::build_http_client()
        .await
        .map_err(AuthError::InternalError)?;
    let mut manager = AuthorizationManager::new(url).await?;
    manager.with_client(client)?;
    manager.set_credential_store(store);
    Ok(manager)
}

/// What a finished [`login`] stored.
#[derive(Debug)]
pub struct LoggedIn {
    /// The token file.
    pub path: std::path::PathBuf,
    /// When the access token expires, if the server said.
    pub expires: Option<SystemTime>,
}

/// Runs the interactive authorization for the server at `url`: discovers its authorization
/// server, registers a client (unless `entry` names one), listens for the redirect on
/// 127.0.0.1, hands the authorization URL to `show`, exchanges the code (PKCE) and stores the
/// tokens.
///
/// # Errors
/// Discovery, registration, the redirect or the token exchange failed (the message says
/// which); never contains a token.
pub async fn login(
    url: &str,
    entry: &OAuthEntry,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, AuthError> {
    let store = token_store(url, entry)?;
    let path = store.path().to_path_buf();
    let mut manager = manager(url, store.clone()).await?;
    let metadata = manager.resolve_metadata().await?;
    manager.set_metadata(metadata.metadata);

    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| AuthError::InternalError(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| AuthError::InternalError(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name("mcp-reconcile");
    if !entry.scopes.is_empty() {
        request = request.with_scopes(entry.scopes.iter().cloned());
    }
    if let Some(id) = &entry.client_id {
        request = request.with_preregistered_client(id);
        if let Some(secret) = &entry.client_secret {
            request = request.with_client_secret(secret);
        }
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| e)?;
    show(session.get_authorization_url());

    let callback = accept_redirect(&listener, port).await?;
    session.handle_callback_url(&callback).await?;
    Ok(LoggedIn {
        path,
        expires: store.expiry()?,
    })
}

/// Forgets the stored tokens of the server at `url`.
///
/// # Errors
/// The token file cannot be read or written.
pub async fn logout(url: &str, entry: &OAuthEntry) -> Result<(), AuthError> {
    use rmcp::transport::auth::CredentialStore;
    token_store(url, entry)?.clear().await
}

/// Waits for the browser's redirect to `/callback` and answers it; returns the full redirect
/// URL (with `code` and `state`). Other requests (a favicon) get a 404 and are not counted.
async fn accept_redirect(listener: &TcpListener, port: u16) -> Result<String, AuthError> {
    loop {
        let (mut socket, _) = listener
            .accept()
            .await
            .map_err(|e| AuthError::InternalError(format!("redirect listener: {e}")))?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        let head = String::from_utf8_lossy(&head);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or("");
        let found = target.starts_with("/callback?");
        let body = if found {
            "mcp-reconcile: authorized; you can close this page.\n"
        } else {
            "not found\n"
        };
        let status = if found { "200 OK" } else { "404 Not Found" };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(response.as_bytes()).await;
        let _ = socket.shutdown().await;
        if found {
            return Ok(format!("http://127.0.0.1:{port}{target}"));
        }
    }
}

/// Whether `error` (or a cause of it) says the server wants an authorization the host does
/// not have: a `401` challenge, or no token / a rejected refresh token.
pub fn is_auth_required(error: &(dyn std::error::Error + 'static)) -> bool {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(e) = cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            if matches!(
                e,
                StreamableHttpError::AuthRequired(_)
                    | StreamableHttpError::Auth(
                        AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)
                    )
            ) {
                return true;
            }
        }
        if matches!(
            cause.downcast_ref::<AuthError>(),
            Some(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_))
        ) {
            return true;
        }
        next = cause.source();
    }
    false
}

/// The sentence a server that needs authorization shows (its `lastError`).
pub fn needs_auth_message(name: &str) -> String {
    format!(
        "needs authorization: run `mcp-reconcile auth {}`",
        crate::display::shell_arg(name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oauth_fields_are_read_as_the_typescript_cli_writes_them() {
        let config = ServerConfig::from_json(
            r#"{"httpUrl":"http://127.0.0.1:1/mcp","oauth":{"enabled":true,"clientId":"c1","clientSecret":"s","scopes":["a",7,"b"]}}"#,
        )
        .expect("config");
        let entry = OAuthEntry::of(&config);
        assert!(entry.enabled);
        assert_eq!(entry.client_key(), "c1");
        assert_eq!(entry.client_secret.as_deref(), Some("s"));
        assert_eq!(entry.scopes, ["a", "b"]);

        let plain = ServerConfig::from_json(r#"{"httpUrl":"x","oauth":{"enabled":"yes"}}"#)
            .expect("config");
        let entry = OAuthEntry::of(&plain);
        assert!(!entry.enabled, "only a JSON true enables it");
        assert_eq!(entry.client_key(), DYNAMIC_CLIENT);
    }

    #[test]
    fn a_401_and_a_rejected_refresh_need_auth_other_failures_do_not() {
        use rmcp::transport::streamable_http_client::{AuthRequiredError, StreamableHttpError};
        let challenge: StreamableHttpError<reqwest::Error> =
            StreamableHttpError::AuthRequired(AuthRequiredError::new("Bearer".into()));
        assert!(is_auth_required(&challenge));
        let rejected: StreamableHttpError<reqwest::Error> =
            StreamableHttpError::Auth(AuthError::TokenRefreshRejected("invalid_grant".into()));
        assert!(is_auth_required(&rejected));
        let other: StreamableHttpError<reqwest::Error> = StreamableHttpError::SessionExpired;
        assert!(!is_auth_required(&other));
        assert!(needs_auth_message("my api").contains("run `mcp-reconcile auth 'my api'`"));
    }
}
