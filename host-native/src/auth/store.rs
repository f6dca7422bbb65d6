//! The OAuth token file: one JSON file, mode 0600, written atomically under a directory lock
//! (the approvals store's disk helpers), holding rmcp's [`StoredCredentials`] per server URL
//! and client.
//!
//! ```json
//! {"version": 1, "servers": {"https://mcp.example/mcp": {"<client>": {...credentials...}}}}
//! ```
//!
//! `<client>` is the entry's `oauth.clientId`, or `dynamic` for a client the authorization
//! server registered on the fly (its id is inside the credentials). Token values never leave
//! this file: [`StoredCredentials`]' `Debug` hides them, and the host shows at most when the
//! access token expires ([`TokenStore::expiry`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::TokenResponse;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde_json::{Map, Value};

use crate::approvals_store::{lock_dir, write_atomic};

/// The client key of a server whose client the authorization server registered.
pub const DYNAMIC_CLIENT: &str = "dynamic";

/// The default token file: `$XDG_CONFIG_HOME/mcp-reconcile/oauth-tokens.json` (or
/// `~/.config/...`); `None` without either variable.
pub fn default_path() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("mcp-reconcile/oauth-tokens.json"))
}

/// One server's credentials in the token file: a [`CredentialStore`] for rmcp's
/// `AuthorizationManager`.
#[derive(Clone, Debug)]
pub struct TokenStore {
    path: PathBuf,
    url: String,
    client: String,
}

impl TokenStore {
    /// The credentials of the server at `url` for `client` (a configured client id, or
    /// [`DYNAMIC_CLIENT`]) in the file at `path`.
    pub fn new(path: PathBuf, url: &str, client: &str) -> Self {
        TokenStore {
            path,
            url: url.to_owned(),
            client: client.to_owned(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the stored access token expires, if the server said.
    ///
    /// # Errors
    /// The file cannot be read or is not a token file.
    pub fn expiry(&self) -> Result<Option<SystemTime>, AuthError> {
        let Some(stored) = self.read()? else {
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

    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let file = read_file(&self.path)?;
        let Some(entry) = file
            .get("servers")
            .and_then(|s| s.get(&self.url))
            .and_then(|s| s.get(&self.client))
        else {
            return Ok(None);
        };
        serde_json::from_value(entry.clone())
            .map(Some)
            .map_err(|e| store_error(&self.path, &format!("an entry is not credentials ({e})")))
    }

    /// Replaces (or with `None` removes) this server's credentials: read, change, write back
    /// atomically, all under the directory lock so two processes never lose each other's
    /// writes.
    fn update(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .map_err(|e| store_error(&self.path, &format!("cannot create its directory: {e}")))?;
        let _lock = lock_dir(dir).map_err(|e| store_error(&self.path, &format!("{e:#}")))?;
        let mut file = read_file(&self.path)?;
        if !file.is_object() {
            file = Value::Object(Map::new());
        }
        let root = file.as_object_mut().expect("an object");
        root.insert("version".into(), 1.into());
        let servers = root
            .entry("servers")
            .or_insert_with(|| Value::Object(Map::new()));
        if !servers.is_object() {
            *servers = Value::Object(Map::new());
        }
        let servers = servers.as_object_mut().expect("an object");
        match credentials {
            Some(credentials) => {
                let value = serde_json::to_value(credentials)
                    .map_err(|e| store_error(&self.path, &e.to_string()))?;
                let clients = servers
                    .entry(self.url.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !clients.is_object() {
                    *clients = Value::Object(Map::new());
                }
                clients
                    .as_object_mut()
                    .expect("an object")
                    .insert(self.client.clone(), value);
            }
            None => {
                if let Some(clients) = servers.get_mut(&self.url).and_then(Value::as_object_mut) {
                    clients.remove(&self.client);
                    if clients.is_empty() {
                        servers.remove(&self.url);
                    }
                }
            }
        }
        let text = serde_json::to_string_pretty(&file)
            .map_err(|e| store_error(&self.path, &e.to_string()))?;
        write_atomic(&self.path, text.as_bytes())
            .map_err(|e| store_error(&self.path, &format!("cannot write it: {e}")))
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let store = self.clone();
        blocking(move || store.read()).await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.update(Some(credentials))).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.update(None)).await
    }

    /// A refresh token the server rejected is useless: forget it, so the server shows
    /// `needs_auth` until `mcp-reconcile auth NAME` stores new ones.
    async fn on_refresh_token_rejected(
        &self,
        _credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        self.clear().await
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AuthError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
}

fn read_file(path: &Path) -> Result<Value, AuthError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| store_error(path, &format!("it is not valid JSON ({e})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Null),
        Err(e) => Err(store_error(path, &format!("cannot read it: {e}"))),
    }
}

fn store_error(path: &Path, what: &str) -> AuthError {
    AuthError::CredentialStoreError(format!("token file {}: {what}", path.display()))
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
        StoredCredentials::new("client-1".into(), Some(response), vec![], Some(1_000))
    }

    #[tokio::test]
    async fn credentials_are_kept_per_url_and_client_in_a_private_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/oauth-tokens.json");
        let a = TokenStore::new(path.clone(), "http://127.0.0.1:1/mcp", DYNAMIC_CLIENT);
        let b = TokenStore::new(path.clone(), "http://127.0.0.1:2/mcp", DYNAMIC_CLIENT);
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
}
