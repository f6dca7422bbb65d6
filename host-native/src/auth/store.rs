//! The OAuth token file: one JSON file, mode 0600, written atomically under a directory lock
//! (the approvals store's disk helpers), holding rmcp's [`StoredCredentials`] per server URL
//! and client, each with what it is bound to ([`super::binding`]).
//!
//! ```json
//! {"version": 1,
//!  "servers": {"https://mcp.example/mcp": {"<client>": {...credentials..., "login": {...}}}},
//!  "projectServers": {"https://mcp.example/mcp": {"<client>": {...}}},
//!  "challenges": {"https://mcp.example/mcp": "Bearer scope=\"...\", resource_metadata=\"...\""}}
//! ```
//!
//! `servers` holds the logins of the user's own entries; `projectServers` those made for
//! entries from a project file, kept apart so that logging one in never replaces (and its
//! refresh never clears) the user's login for the same URL. An entry reads only the logins of
//! its own layer, and uses one only at the authorization server that issued it.
//!
//! `challenges` keeps the `WWW-Authenticate` header a server last answered a connection with
//! (it names no secret): the next login starts its discovery and scope choice from it.
//!
//! `<client>` is the entry's `oauth.clientId`, or `dynamic` for a client the authorization
//! server registered on the fly (its id is inside the credentials). Token values never leave
//! this file: [`StoredCredentials`]' `Debug` hides them, and the host shows at most when the
//! access token expires ([`TokenStore::expiry`]).
//!
//! Refreshes are serialized across processes by an exclusive lock on `<file>.lock` beside the
//! file the login lives in, held from reading the stored refresh token to saving the new one
//! (rmcp's refresh guard): a session that waited reads the token the other one stored and
//! refreshes with that, never with the one a rotating authorization server already replaced.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde_json::Value;

use super::binding::{Binding, LoginLayer, TokenIssuer};
use super::file::{
    blocking, lock_file, now_secs, object_at, read_file, store_error, update, update_object,
};
pub use super::file::{default_path, TokenFile, TokenFormat};

/// The client key of a server whose client the authorization server registered.
pub const DYNAMIC_CLIENT: &str = "dynamic";

/// How long a refresh waits for another session's refresh of the same token file to finish.
pub const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(60);

/// A login in the token file, with what it is bound to.
#[derive(Clone, Debug)]
pub struct StoredLogin {
    pub credentials: StoredCredentials,
    pub binding: Binding,
}

/// One server's credentials in the token file: a [`CredentialStore`] for rmcp's
/// `AuthorizationManager`. It loads a login only once it knows the entry's authorization
/// server ([`TokenStore::bind`]), and only a login bound to that server and to a layer no
/// more trusted than the entry's; what it saves is bound to both.
#[derive(Clone, Debug)]
pub struct TokenStore {
    file: TokenFile,
    name: String,
    url: String,
    client: String,
    layer: LoginLayer,
    server: Arc<Mutex<Option<TokenIssuer>>>,
    lock_wait: Duration,
}

/// Where a layer's logins live.
enum Slot<'a> {
    /// `key` (`servers` or `projectServers`) of this host's file at the path.
    Native(&'a Path, &'static str),
    /// The TypeScript CLI's file.
    Qwen(&'a Path),
}

impl TokenStore {
    /// The credentials of the server `name` at `url` for `client` (a configured client id,
    /// or [`DYNAMIC_CLIENT`]) of an entry from `layer`, in `file`.
    pub fn new(file: TokenFile, name: &str, url: &str, client: &str, layer: LoginLayer) -> Self {
        TokenStore {
            file,
            name: name.to_owned(),
            url: url.to_owned(),
            client: client.to_owned(),
            layer,
            server: Arc::default(),
            lock_wait: REFRESH_LOCK_WAIT,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The layer of the entry this store serves.
    pub fn layer(&self) -> LoginLayer {
        self.layer
    }

    /// Sets the authorization server the entry uses (discovered, or its own `oauth`
    /// fields): from now on (in every clone) a login is loaded only if that server issued
    /// it, and a login saved is bound to it.
    pub fn bind(&self, server: TokenIssuer) {
        *self
            .server
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(server);
    }

    fn bound(&self) -> Option<TokenIssuer> {
        self.server
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// How long a refresh waits for another session's refresh of the same file (default
    /// [`REFRESH_LOCK_WAIT`]).
    pub fn set_lock_wait(&mut self, wait: Duration) {
        self.lock_wait = wait;
    }

    /// When the stored access token expires, if the server said.
    ///
    /// # Errors
    /// The file cannot be read or is not a token file.
    pub fn expiry(&self) -> Result<Option<SystemTime>, AuthError> {
        let Some(stored) = self.login()?.map(|l| l.credentials) else {
            return Ok(None);
        };
        let received = stored.token_received_at.map(Duration::from_secs);
        let lifetime = stored
            .token_response
            .as_ref()
            .and_then(TokenResponse::expires_in);
        Ok(received
            .zip(lifetime)
            .map(|(at, lifetime)| UNIX_EPOCH + at + lifetime))
    }

    /// The login stored for this entry's layer, whoever issued it (see
    /// [`Binding::refusal`] for whether the entry may use it).
    ///
    /// # Errors
    /// The file cannot be read or is not a token file.
    pub fn login(&self) -> Result<Option<StoredLogin>, AuthError> {
        self.login_in(self.layer)
    }

    /// The login stored for an entry of `layer` at this URL and client.
    ///
    /// # Errors
    /// The file cannot be read or is not a token file.
    pub fn login_in(&self, layer: LoginLayer) -> Result<Option<StoredLogin>, AuthError> {
        let login = match self.slot(layer) {
            Slot::Qwen(path) => {
                let file = read_file(path)?;
                super::qwen::find(&file, &self.name, &self.url, now_secs()).map(|credentials| {
                    StoredLogin {
                        credentials,
                        binding: Binding {
                            layer: LoginLayer::User,
                            token_endpoint: super::qwen::token_url(&file, &self.name, &self.url),
                            issuer: None,
                        },
                    }
                })
            }
            Slot::Native(path, key) => {
                let file = read_file(path)?;
                let Some(record) = file
                    .get(key)
                    .and_then(|s| s.get(&self.url))
                    .and_then(|s| s.get(&self.client))
                else {
                    return Ok(None);
                };
                let credentials = serde_json::from_value(record.clone()).map_err(|e| {
                    store_error(path, &format!("an entry is not credentials ({e})"))
                })?;
                let mut binding = Binding::read(record);
                // A record is never more trusted than the place it was found in.
                binding.layer = binding.layer.min(layer);
                Some(StoredLogin {
                    credentials,
                    binding,
                })
            }
        };
        Ok(login)
    }

    /// The credentials this entry may use: its layer's login, if the bound authorization
    /// server issued it.
    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(server) = self.bound() else {
            return Ok(None);
        };
        Ok(self
            .login()?
            .filter(|login| login.binding.refusal(self.layer, &server).is_none())
            .map(|login| login.credentials))
    }

    fn slot(&self, layer: LoginLayer) -> Slot<'_> {
        match (layer, self.file.format) {
            (LoginLayer::User, TokenFormat::Native) => Slot::Native(&self.file.path, "servers"),
            (LoginLayer::User, TokenFormat::Qwen) => Slot::Qwen(&self.file.path),
            (LoginLayer::Project, _) => Slot::Native(&self.file.challenges, "projectServers"),
        }
    }

    /// The `WWW-Authenticate` challenge a connection to this server last met (a `401`, or a
    /// `403` asking for more scope), kept until new credentials are stored.
    ///
    /// # Errors
    /// The file cannot be read or is not a token file.
    pub fn challenge(&self) -> Result<Option<String>, AuthError> {
        Ok(read_file(&self.file.challenges)?
            .get("challenges")
            .and_then(|c| c.get(&self.url))
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// Keeps `challenge` as this server's [`challenge`](Self::challenge).
    ///
    /// # Errors
    /// The file cannot be read or written.
    pub async fn record_challenge(&self, challenge: String) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || {
            update_object(&store.file.challenges, |root| {
                object_at(root, "challenges").insert(store.url.clone(), Value::String(challenge));
            })
        })
        .await
    }

    /// Replaces (or with `None` removes) this entry's login; storing new credentials binds
    /// them to the entry's layer and authorization server, and forgets the challenge they
    /// answered.
    fn put(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        let (url, client) = (self.url.as_str(), self.client.as_str());
        let binding = Binding::new(self.layer, self.bound().as_ref());
        match self.slot(self.layer) {
            Slot::Qwen(path) => update(path, |file| {
                let token_url = binding.token_endpoint.as_deref();
                super::qwen::put(file, &self.name, url, credentials.as_ref(), token_url);
            })?,
            Slot::Native(path, key) => {
                let value = credentials
                    .as_ref()
                    .map(|c| {
                        let mut value = serde_json::to_value(c)?;
                        if let Some(record) = value.as_object_mut() {
                            record.insert("login".into(), binding.to_json());
                        }
                        Ok::<_, serde_json::Error>(value)
                    })
                    .transpose()
                    .map_err(|e| store_error(path, &e.to_string()))?;
                update_object(path, |root| {
                    let servers = object_at(root, key);
                    match value {
                        Some(value) => {
                            object_at(servers, url).insert(client.to_owned(), value);
                        }
                        None => {
                            if let Some(clients) =
                                servers.get_mut(url).and_then(Value::as_object_mut)
                            {
                                clients.remove(client);
                                if clients.is_empty() {
                                    servers.remove(url);
                                }
                            }
                        }
                    }
                })?;
            }
        }
        if credentials.is_some() && self.challenge()?.is_some() {
            update_object(&self.file.challenges, |root| {
                if let Some(challenges) = root.get_mut("challenges").and_then(Value::as_object_mut)
                {
                    challenges.remove(url);
                }
            })?;
        }
        Ok(())
    }

    /// The refresh lock of the file this entry's login lives in.
    fn lock_path(&self) -> PathBuf {
        let file = match self.slot(self.layer) {
            Slot::Native(path, _) | Slot::Qwen(path) => path,
        };
        let mut name = file.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        file.with_file_name(name)
    }
}

/// The refresh token of `credentials`, if any.
fn refresh_token(credentials: &StoredCredentials) -> Option<&str> {
    credentials
        .token_response
        .as_ref()?
        .refresh_token()
        .map(|t| t.secret().as_str())
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let store = self.clone();
        blocking(move || store.read()).await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.put(Some(credentials))).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.put(None)).await
    }

    /// A refresh token the server rejected is useless: forget it, so the server shows
    /// `needs_auth` until `mcp-reconcile auth NAME` stores new ones — but only when the
    /// stored login is still the one rejected (not since replaced by another session's
    /// refresh) and was issued by the authorization server that rejected it.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let store = self.clone();
        let rejected = refresh_token(rejected).map(str::to_owned);
        blocking(move || {
            let Some(server) = store.bound() else {
                return Ok(());
            };
            let Some(current) = store.login()? else {
                return Ok(());
            };
            let issued_here = current.binding.refusal(store.layer, &server).is_none();
            let still_stored =
                rejected.is_some() && refresh_token(&current.credentials) == rejected.as_deref();
            if issued_here && still_stored {
                store.put(None)
            } else {
                tracing::info!(
                    server = %store.name,
                    "a refresh was rejected; the stored login was left (replaced since, or not this authorization server's)"
                );
                Ok(())
            }
        })
        .await
    }

    /// Held by rmcp from loading the refresh token to saving the new one.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let (path, wait) = (self.lock_path(), self.lock_wait);
        blocking(move || lock_file(&path, wait).map(Some)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oauth2::basic::BasicTokenType;
    use oauth2::AccessToken;
    use rmcp::transport::auth::{OAuthTokenResponse, VendorExtraTokenFields};
    use std::os::unix::fs::PermissionsExt;

    fn credentials(token: &str) -> StoredCredentials {
        let mut response = OAuthTokenResponse::new(
            AccessToken::new(token.to_owned()),
            BasicTokenType::Bearer,
            VendorExtraTokenFields::default(),
        );
        response.set_expires_in(Some(&Duration::from_secs(60)));
        response.set_refresh_token(Some(oauth2::RefreshToken::new(format!("refresh-{token}"))));
        StoredCredentials::new("client-1".into(), Some(response), vec![], Some(1_000))
    }

    fn server(endpoint: &str) -> TokenIssuer {
        TokenIssuer {
            token_endpoint: endpoint.to_owned(),
            issuer: None,
        }
    }

    /// The store of the user's entry `name` at `url`, which uses the authorization server
    /// at `http://127.0.0.1:9/token`.
    fn user_store(file: &TokenFile, name: &str, url: &str) -> TokenStore {
        let store = TokenStore::new(file.clone(), name, url, DYNAMIC_CLIENT, LoginLayer::User);
        store.bind(server("http://127.0.0.1:9/token"));
        store
    }

    #[tokio::test]
    async fn credentials_are_kept_per_url_and_client_in_a_private_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/oauth-tokens.json");
        let file = TokenFile::native(path.clone());
        let a = user_store(&file, "a", "http://127.0.0.1:1/mcp");
        let b = user_store(&file, "b", "http://127.0.0.1:2/mcp");
        assert!(a.load().await.expect("no file yet").is_none());
        a.save(credentials("tok-a")).await.expect("save a");
        b.save(credentials("tok-b")).await.expect("save b");
        let mode = std::fs::metadata(&path).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let loaded = a.load().await.expect("load").expect("stored");
        assert!(
            !format!("{loaded:?}").contains("tok-a"),
            "Debug hides tokens"
        );
        assert_eq!(
            loaded
                .token_response
                .expect("tokens")
                .access_token()
                .secret(),
            "tok-a"
        );
        assert_eq!(
            a.expiry().expect("expiry"),
            Some(UNIX_EPOCH + Duration::from_secs(1_060))
        );
        a.clear().await.expect("clear");
        assert!(a.load().await.expect("load").is_none());
        assert!(b.load().await.expect("load").is_some(), "b untouched");
    }

    #[tokio::test]
    async fn a_challenge_is_kept_per_url_until_new_credentials_answer_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("oauth-tokens.json");
        let file = TokenFile::native(path.clone());
        let a = user_store(&file, "a", "http://127.0.0.1:1/mcp");
        let b = user_store(&file, "b", "http://127.0.0.1:2/mcp");
        assert_eq!(a.challenge().expect("no file"), None);
        let step_up = r#"Bearer error="insufficient_scope", scope="read write""#;
        a.record_challenge(step_up.to_owned()).await.expect("keep");
        b.record_challenge("Bearer".to_owned()).await.expect("keep");
        assert_eq!(a.challenge().expect("read").as_deref(), Some(step_up));
        a.save(credentials("tok-a")).await.expect("save");
        assert_eq!(a.challenge().expect("read"), None, "answered by the login");
        assert_eq!(b.challenge().expect("read").as_deref(), Some("Bearer"));
        assert!(a.load().await.expect("load").is_some());
    }

    #[tokio::test]
    async fn a_project_entry_never_loads_replaces_or_clears_the_user_s_login() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::native(dir.path().join("oauth-tokens.json"));
        let url = "http://127.0.0.1:1/mcp";
        let mine = user_store(&file, "api", url);
        mine.save(credentials("tok-user")).await.expect("save");

        // The repository's entry: same URL and client, its own token endpoint.
        let theirs = TokenStore::new(
            file.clone(),
            "api",
            url,
            DYNAMIC_CLIENT,
            LoginLayer::Project,
        );
        assert!(theirs.load().await.expect("unbound").is_none());
        theirs.bind(server("http://127.0.0.1:9/token"));
        assert!(
            theirs.load().await.expect("load").is_none(),
            "not even at the user's own authorization server"
        );
        theirs
            .on_refresh_token_rejected(&credentials("tok-user"))
            .await
            .expect("rejected");
        theirs.save(credentials("tok-project")).await.expect("save");
        theirs.clear().await.expect("clear");

        // The same URL at another authorization server: not loaded, and its rejection
        // leaves the login alone.
        let elsewhere = TokenStore::new(file.clone(), "api", url, DYNAMIC_CLIENT, LoginLayer::User);
        elsewhere.bind(server("http://127.0.0.1:10/token"));
        assert!(elsewhere.load().await.expect("load").is_none());
        elsewhere
            .on_refresh_token_rejected(&credentials("tok-user"))
            .await
            .expect("rejected");

        let kept = mine
            .load()
            .await
            .expect("load")
            .expect("the user's login survives");
        let tokens = kept.token_response.expect("tokens");
        assert_eq!(tokens.access_token().secret(), "tok-user");
        let login = mine.login().expect("read").expect("stored");
        assert_eq!(login.binding.layer, LoginLayer::User);
        assert_eq!(
            login.binding.token_endpoint.as_deref(),
            Some("http://127.0.0.1:9/token")
        );
        // The one at its own server rejects it: now it goes.
        mine.on_refresh_token_rejected(&kept_credentials(&mine).await)
            .await
            .expect("rejected");
        assert!(mine.load().await.expect("load").is_none());
    }

    async fn kept_credentials(store: &TokenStore) -> StoredCredentials {
        store.load().await.expect("load").expect("stored")
    }

    #[tokio::test]
    async fn a_rejected_refresh_token_clears_only_while_it_is_the_stored_one() {
        use oauth2::RefreshToken;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::native(dir.path().join("oauth-tokens.json"));
        let store = user_store(&file, "api", "http://127.0.0.1:1/mcp");
        let with_refresh = |access: &str, refresh: &str| {
            let mut stored = credentials(access);
            if let Some(tokens) = stored.token_response.as_mut() {
                tokens.set_refresh_token(Some(RefreshToken::new(refresh.to_owned())));
            }
            stored
        };
        // Another session refreshed first: the stale token's rejection leaves its login.
        store.save(with_refresh("a2", "r2")).await.expect("save");
        store
            .on_refresh_token_rejected(&with_refresh("a1", "r1"))
            .await
            .expect("rejected");
        assert!(store.load().await.expect("load").is_some(), "kept");
        store
            .on_refresh_token_rejected(&with_refresh("a2", "r2"))
            .await
            .expect("rejected");
        assert!(
            store.load().await.expect("load").is_none(),
            "the stored one goes"
        );
    }

    #[tokio::test]
    async fn the_refresh_lock_is_private_exclusive_and_never_a_symlink() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("oauth-tokens.json");
        let mut store = user_store(&TokenFile::native(path.clone()), "api", "http://x/mcp");
        store.set_lock_wait(Duration::from_millis(50));
        let held = store.acquire_refresh_guard().await.expect("lock");
        let lock = dir.path().join("oauth-tokens.json.lock");
        let mode = std::fs::metadata(&lock)
            .expect("lock file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            store.acquire_refresh_guard().await.is_err(),
            "a second refresh waits, bounded"
        );
        drop(held);
        assert!(store.acquire_refresh_guard().await.is_ok());

        std::fs::remove_file(&lock).expect("remove");
        symlink(dir.path().join("elsewhere"), &lock).expect("symlink");
        assert!(store.acquire_refresh_guard().await.is_err());
        assert!(!dir.path().join("elsewhere").exists(), "not followed");
    }
}
