//! OAuth for streamable-HTTP servers, through rmcp's `auth` support: the entry's `oauth`
//! fields ([`OAuthEntry`]), the token file ([`store`]), the authorization manager a
//! connection authorizes its requests with ([`manager`]), and the interactive login that
//! `mcp-reconcile auth NAME` runs ([`login`]).
//!
//! Parts: `callback` (the login's loopback listener: only the exact callback path with the
//! `state` it sent), `grant` (the client-credentials grant: a secret or `private_key_jwt`),
//! [`binding`] (which stored login an entry may use: the layer that logged in and the
//! authorization server that issued it), [`store`] (the 0600 token file as rmcp's
//! `CredentialStore`), [`file`](mod@file) (re-exported from `crate::token_store_file`, which sits below
//! `launch` and `tls`: where the token file is, its locked read-change-write), `qwen` (the
//! TypeScript CLI's `mcp-oauth-tokens.json`, for `--layout qwen`), [`review`] (what a review
//! says about a login).
//!
//! Every OAuth request goes through the host's own HTTP client
//! ([`crate::http_client`]): no proxy, the same TLS roots, redirects only within
//! the origin. Tokens live only in the token file and in memory; no message, status or log
//! line the host writes contains one.

pub mod binding;
mod callback;
pub use crate::token_store_file as file;
mod grant;
mod qwen;
pub mod review;
pub mod store;

use std::time::SystemTime;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession,
};
use tokio::net::TcpListener;

pub use binding::{LoginLayer, Refusal, TokenIssuer};
pub use grant::client_credentials;
pub use store::{StoredLogin, TokenFile, TokenFormat, TokenStore, DYNAMIC_CLIENT};

/// The `oauth` fields of an entry that the host uses (SPEC §2 names them all; the whole
/// `oauth` object takes part in the server's identity, so an edit to any field reconnects
/// only that server).
#[derive(Clone, Debug)]
pub struct OAuthEntry {
    /// The layer the entry comes from: which stored logins it may use ([`binding`]).
    pub layer: LoginLayer,
    /// `oauth.enabled`: authorize even before the server asks.
    pub enabled: bool,
    /// `oauth.clientId`: a pre-registered client (else a metadata document, else dynamic
    /// registration).
    pub client_id: Option<String>,
    /// `oauth.clientSecret`, for a pre-registered confidential client.
    pub client_secret: Option<String>,
    /// `oauth.scopes`; empty: what the server's challenge or metadata asks for.
    pub scopes: Vec<String>,
    /// `oauth.redirectUri`: where the authorization server sends the browser back; must be a
    /// loopback `http` URL (the login listens there). Default: a free port on 127.0.0.1.
    pub redirect_uri: Option<String>,
    /// `oauth.authorizationUrl` and `oauth.tokenUrl`: the authorization server's endpoints,
    /// for one that publishes no metadata (both needed; discovery is skipped).
    pub authorization_url: Option<String>,
    pub token_url: Option<String>,
    /// `oauth.registrationUrl`: its dynamic client registration endpoint, with the above.
    pub registration_url: Option<String>,
    /// `oauth.clientMetadataUrl` (this host's own field): the `https` URL of a client ID
    /// metadata document you host, used as the client id where the authorization server
    /// supports that.
    pub client_metadata_url: Option<String>,
    /// `oauth.grantType: "client_credentials"` (this host's own field): a machine client —
    /// the host fetches tokens itself with `clientId` and `clientSecret` or `privateKeyFile`,
    /// no browser.
    pub client_credentials: bool,
    /// `oauth.privateKeyFile`: a PEM key (absolute, or relative to the project root) that
    /// signs a `private_key_jwt` client assertion, with `oauth.signingAlgorithm` (default
    /// `ES256`).
    pub private_key_file: Option<String>,
    pub signing_algorithm: Option<String>,
}

impl OAuthEntry {
    /// Reads `config.oauth` (absent or not an object: all defaults) and the layer its
    /// assembly stamped.
    pub fn of(config: &ServerConfig) -> Self {
        let layer = LoginLayer::of(config);
        let Some(Value::Object(oauth)) = config.get("oauth") else {
            return OAuthEntry::none(layer);
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
            layer,
            enabled: matches!(oauth.get("enabled"), Some(Value::Bool(true))),
            client_id: text("clientId"),
            client_secret: text("clientSecret"),
            scopes,
            redirect_uri: text("redirectUri"),
            authorization_url: text("authorizationUrl"),
            token_url: text("tokenUrl"),
            registration_url: text("registrationUrl"),
            client_metadata_url: text("clientMetadataUrl"),
            client_credentials: text("grantType").as_deref() == Some("client_credentials"),
            private_key_file: text("privateKeyFile"),
            signing_algorithm: text("signingAlgorithm"),
        }
    }

    /// An entry of `layer` without `oauth` fields.
    fn none(layer: LoginLayer) -> Self {
        OAuthEntry {
            layer,
            enabled: false,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
            redirect_uri: None,
            authorization_url: None,
            token_url: None,
            registration_url: None,
            client_metadata_url: None,
            client_credentials: false,
            private_key_file: None,
            signing_algorithm: None,
        }
    }

    /// The token file's client key for this entry.
    pub fn client_key(&self) -> &str {
        self.client_id.as_deref().unwrap_or(DYNAMIC_CLIENT)
    }

    /// The authorization server metadata the entry configures (`authorizationUrl` and
    /// `tokenUrl`), if it does.
    pub(crate) fn configured_metadata(&self) -> Option<AuthorizationMetadata> {
        let mut metadata = AuthorizationMetadata::default();
        metadata.authorization_endpoint = self.authorization_url.clone()?;
        metadata.token_endpoint = self.token_url.clone()?;
        metadata.registration_endpoint = self.registration_url.clone();
        metadata.code_challenge_methods_supported = Some(vec!["S256".to_owned()]);
        Some(metadata)
    }
}

/// The loopback address and path the login listens on for `redirect`.
fn loopback_redirect(redirect: &str) -> Result<(std::net::SocketAddr, String), AuthError> {
    let bad = || {
        AuthError::InternalError(format!(
            "oauth.redirectUri {} must be a loopback http URL with a port \
             (http://127.0.0.1:PORT/PATH or http://localhost:PORT/PATH): \
             `mcp-reconcile auth` receives the redirect itself",
            crate::display::safe(redirect)
        ))
    };
    let url = reqwest::Url::parse(redirect).map_err(|_| bad())?;
    let host = url.host_str().unwrap_or_default();
    let ip = if host.eq_ignore_ascii_case("localhost") {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .ok()
            .filter(std::net::IpAddr::is_loopback)
            .ok_or_else(bad)?
    };
    let port = url
        .port()
        .filter(|_| url.scheme() == "http")
        .ok_or_else(bad)?;
    Ok(((ip, port).into(), url.path().to_owned()))
}

/// The token store of the server `name` at `url` configured as `entry`, in `file` (`None`:
/// this host's default token file).
///
/// # Errors
/// No file is given and neither `XDG_CONFIG_HOME` nor `HOME` is set.
pub fn token_store(
    file: Option<&TokenFile>,
    name: &str,
    url: &str,
    entry: &OAuthEntry,
) -> Result<TokenStore, AuthError> {
    let file = match file {
        Some(file) => file.clone(),
        None => TokenFile::native(store::default_path().ok_or_else(|| {
            AuthError::CredentialStoreError(
                "cannot place the token file: set XDG_CONFIG_HOME or HOME".into(),
            )
        })?),
    };
    Ok(TokenStore::new(
        file,
        name,
        url,
        entry.client_key(),
        entry.layer,
    ))
}

/// An authorization manager for the server at `url` on the host's HTTP client, with `store`
/// as its credentials (and the endpoints `entry` configures, if it does).
///
/// # Errors
/// The URL is invalid or the HTTP client cannot be built.
pub async fn manager(
    url: &str,
    entry: &OAuthEntry,
    store: TokenStore,
) -> Result<AuthorizationManager, AuthError> {
    let client = crate::http_client::build_http_client()
        .await
        .map_err(AuthError::InternalError)?;
    let mut manager = AuthorizationManager::new(url).await?;
    manager.with_client(client)?;
    manager.set_credential_store(store);
    if let Some(metadata) = entry.configured_metadata() {
        manager.set_metadata(metadata);
    }
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

/// Runs the interactive authorization for the server at `url` (its tokens in `store`): discovers its authorization
/// server, registers a client (unless `entry` names one), listens for the redirect on
/// 127.0.0.1, hands the authorization URL to `show`, exchanges the code (PKCE) and stores the
/// tokens. A client-credentials entry fetches its tokens at once (no browser; `base_dir`
/// resolves a relative `privateKeyFile`).
///
/// # Errors
/// Discovery, registration, the redirect or the token exchange failed (the message says
/// which); never contains a token.
pub async fn login(
    store: TokenStore,
    url: &str,
    entry: &OAuthEntry,
    base_dir: Option<&std::path::Path>,
    show: impl FnOnce(&str),
) -> Result<LoggedIn, AuthError> {
    let path = store.path().to_path_buf();
    if entry.client_credentials {
        let manager = manager(url, entry, store.clone()).await?;
        client_credentials(manager, &store, url, entry, base_dir).await?;
        return Ok(LoggedIn {
            path,
            expires: store.expiry()?,
        });
    }
    let kept = store.challenge()?;
    let granted = store
        .login()
        .ok()
        .flatten()
        .map(|stored| stored.credentials.granted_scopes)
        .unwrap_or_default();
    let mut manager = manager(url, entry, store.clone()).await?;
    // The login is bound to the authorization server that issues it.
    store.bind(discover(&mut manager, url, entry, kept.clone()).await?);

    let (address, redirect_path) = match &entry.redirect_uri {
        Some(redirect) => loopback_redirect(redirect)?,
        None => (
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            "/callback".to_owned(),
        ),
    };
    let listener = TcpListener::bind(address).await.map_err(|e| {
        AuthError::InternalError(format!("cannot listen on {address} for the redirect: {e}"))
    })?;
    let port = listener
        .local_addr()
        .map_err(|e| AuthError::InternalError(e.to_string()))?
        .port();
    let redirect_uri = match &entry.redirect_uri {
        Some(redirect) => redirect.clone(),
        None => format!("http://127.0.0.1:{port}{redirect_path}"),
    };

    let mut request = AuthorizationRequest::new(&redirect_uri).with_client_name("mcp-reconcile");
    let stepped_up = kept.as_deref().and_then(challenged_scopes);
    if !entry.scopes.is_empty() {
        request = request.with_scopes(entry.scopes.iter().cloned());
    } else if let Some(more) = stepped_up.filter(|_| !granted.is_empty()) {
        // A step-up: what was granted plus what the server asked for (never fewer).
        let mut scopes = granted;
        for scope in more {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        request = request.with_scopes(scopes);
    } else {
        // A first login: the challenge's scopes, else the resource's; none if neither says.
        request = request.with_initial_scope_selection();
    }
    if let Some(document) = &entry.client_metadata_url {
        request = request.with_client_metadata_url(document);
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

    let state = callback::state_of(session.get_authorization_url())?;
    let callback = callback::accept_redirect(
        &listener,
        &redirect_uri,
        &redirect_path,
        &state,
        callback::LOGIN_WAIT,
    )
    .await?;
    session.handle_callback_url(&callback).await?;
    Ok(LoggedIn {
        path,
        expires: store.expiry()?,
    })
}

/// Finds the authorization server of the server at `url` (unless `entry` configures its
/// endpoints) for a login. Reactive discovery: from `kept`, the challenge a connection met,
/// else from the one the server answers an unauthorized `initialize` with, else from the
/// well-known locations.
async fn discover(
    manager: &mut AuthorizationManager,
    url: &str,
    entry: &OAuthEntry,
    kept: Option<String>,
) -> Result<TokenIssuer, AuthError> {
    if let Some(metadata) = entry.configured_metadata() {
        return Ok(TokenIssuer::of(&metadata));
    }
    let challenge = match kept {
        Some(challenge) => Some(challenge),
        None => probe_challenge(url).await,
    };
    let metadata = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await?
        .metadata;
    let server = TokenIssuer::of(&metadata);
    manager.set_metadata(metadata);
    Ok(server)
}

/// The authorization server a connection of `entry` to the server at `url` uses (set on
/// `manager`): the one its `oauth` fields configure, else the one discovery finds the way a
/// login finds it (from the challenge the server last answered with, else from the one it
/// answers an unauthorized `initialize` with, else from the well-known locations) — so a
/// login's binding and its use compare like with like.
///
/// # Errors
/// Discovery failed.
pub async fn authorization_server(
    manager: &mut AuthorizationManager,
    url: &str,
    entry: &OAuthEntry,
    kept: Option<String>,
) -> Result<TokenIssuer, AuthError> {
    discover(manager, url, entry, kept).await
}

/// The scopes a `WWW-Authenticate` challenge asks for (`scope="a b"`).
fn challenged_scopes(challenge: &str) -> Option<Vec<String>> {
    let base = reqwest::Url::parse("http://localhost/").ok()?;
    let params = rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base);
    params
        .scope
        .map(|scope| scope.split_whitespace().map(str::to_owned).collect())
}

/// Sends the server an unauthorized `initialize`, as a connection's first request is, and
/// returns the `WWW-Authenticate` challenge of its `401`. Anything else: `None` (discovery
/// then probes the well-known locations).
async fn probe_challenge(url: &str) -> Option<String> {
    let client = crate::http_client::build_http_client().await.ok()?;
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST,
            "capabilities": {},
            "clientInfo": {"name": "mcp-reconcile", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let answer = client
        .post(url)
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .json(&initialize)
        .send()
        .await
        .ok()?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    answer
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
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

/// The `WWW-Authenticate` challenge of a `401` or `403` that `error` (or a cause of it) is.
pub fn challenge_of(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(e) = cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            if let Some(challenge) = e.auth_challenge() {
                return Some(challenge.to_owned());
            }
        }
        next = cause.source();
    }
    None
}

/// When `error` is a `403 insufficient_scope`: the scope the server asks for, if it said.
#[allow(clippy::option_option)]
pub fn step_up_scope(error: &(dyn std::error::Error + 'static)) -> Option<Option<String>> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(StreamableHttpError::InsufficientScope(e)) =
            cause.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            return Some(e.get_required_scope().map(str::to_owned));
        }
        next = cause.source();
    }
    None
}

/// The sentence a request refused for want of scope answers with.
pub fn step_up_message(name: &str, scope: Option<&str>) -> String {
    let scope = scope
        .map(|s| format!(" (scope \"{}\")", crate::display::safe(s)))
        .unwrap_or_default();
    format!(
        "needs more access{scope}: run `mcp-reconcile auth {}` to grant it",
        crate::display::shell_arg(name)
    )
}

/// The sentence a server that needs authorization shows (its `lastError`).
pub fn needs_auth_message(name: &str) -> String {
    format!(
        "needs authorization: run `mcp-reconcile auth {}`",
        crate::display::shell_arg(name)
    )
}

/// [`needs_auth_message`] with why a stored login was not used, if one was not.
pub fn needs_auth_because(name: &str, refusal: Option<&Refusal>) -> String {
    match refusal {
        Some(refusal) => format!("{} ({})", needs_auth_message(name), refusal.sentence()),
        None => needs_auth_message(name),
    }
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
