//! The OAuth token file: one JSON file, mode 0600, written atomically under a directory lock
//! (the approvals store's disk helpers), holding rmcp's [`StoredCredentials`] per server URL
//! and client.
//!
//! ```json
//! {"version": 1, "servers": {"https://mcp.example/mcp": {"<client>": {...credentials...}}},
//!  "challenges": {"https://mcp.example/mcp": "Bearer scope=\"...\", resource_metadata=\"...\""}}
//! ```
//!
//! `challenges` keeps the `WWW-Authenticate` header a server last answered a connection with
//! (it names no secret): the next login starts its discovery and scope choice from it.
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

/// Which token file a session uses, and in which format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenFile {
    /// The credentials.
    pub path: PathBuf,
    pub format: TokenFormat,
    /// Where the servers' last challenges are kept (this host's own file: the TypeScript
    /// CLI's has no place for them).
    pub challenges: PathBuf,
}

/// The layout of a [`TokenFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenFormat {
    /// This host's: credentials per server URL and client (the module docs).
    Native,
    /// The TypeScript (qwen-code) CLI's `mcp-oauth-tokens.json`: an array of credentials per
    /// server name ([`super::qwen`]).
    Qwen,
}

impl TokenFile {
    /// This host's own file at `path`.
    pub fn native(path: PathBuf) -> Self {
        TokenFile {
            challenges: path.clone(),
            path,
            format: TokenFormat::Native,
        }
    }
}

/// One server's credentials in the token file: a [`CredentialStore`] for rmcp's
/// `AuthorizationManager`.
#[derive(Clone, Debug)]
pub struct TokenStore {
    file: TokenFile,
    name: String,
    url: String,
    client: String,
}

impl TokenStore {
    /// The credentials of the server `name` at `url` for `client` (a configured client id,
    /// or [`DYNAMIC_CLIENT`]) in `file`.
    pub fn new(file: TokenFile, name: &str, url: &str, client: &str) -> Self {
        TokenStore {
            file,
            name: name.to_owned(),
            url: url.to_owned(),
            client: client.to_owned(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.file.path
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
        let file = read_file(&self.file.path)?;
        if self.file.format == TokenFormat::Qwen {
            return Ok(super::qwen::find(&file, &self.name, &self.url, now_secs()));
        }
        let Some(entry) = file
            .get("servers")
            .and_then(|s| s.get(&self.url))
            .and_then(|s| s.get(&self.client))
        else {
            return Ok(None);
        };
        serde_json::from_value(entry.clone())
            .map(Some)
            .map_err(|e| {
                store_error(
                    &self.file.path,
                    &format!("an entry is not credentials ({e})"),
                )
            })
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
            store.update_object(&store.file.challenges, |root| {
                object_at(root, "challenges").insert(store.url.clone(), Value::String(challenge));
            })
        })
        .await
    }

    /// Replaces (or with `None` removes) this server's credentials; storing new ones also
    /// forgets the challenge they answered.
    fn put(&self, credentials: Option<StoredCredentials>) -> Result<(), AuthError> {
        let (url, client) = (self.url.as_str(), self.client.as_str());
        if self.file.format == TokenFormat::Qwen {
            update(&self.file.path, |file| {
                super::qwen::put(file, &self.name, url, credentials.as_ref());
            })?;
        } else {
            let value = credentials
                .as_ref()
                .map(serde_json::to_value)
                .transpose()
                .map_err(|e| store_error(&self.file.path, &e.to_string()))?;
            self.update_object(&self.file.path, |root| {
                let servers = object_at(root, "servers");
                match value {
                    Some(value) => {
                        object_at(servers, url).insert(client.to_owned(), value);
                    }
                    None => {
                        if let Some(clients) = servers.get_mut(url).and_then(Value::as_object_mut) {
                            clients.remove(client);
                            if clients.is_empty() {
                                servers.remove(url);
                            }
                        }
                    }
                }
            })?;
        }
        if credentials.is_some() && self.challenge()?.is_some() {
            self.update_object(&self.file.challenges, |root| {
                if let Some(challenges) = root.get_mut("challenges").and_then(Value::as_object_mut)
                {
                    challenges.remove(url);
                }
            })?;
        }
        Ok(())
    }

    /// [`update`] of one of this host's own files (a JSON object with `"version": 1`).
    fn update_object(
        &self,
        path: &Path,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> Result<(), AuthError> {
        update(path, |file| {
            if !file.is_object() {
                *file = Value::Object(Map::new());
            }
            let root = file.as_object_mut().expect("an object");
            root.insert("version".into(), 1.into());
            change(root);
        })
    }
}

/// Read the file at `path` (`null` when missing), change it, write it back atomically (mode
/// 0600), all under the directory lock so two processes never lose each other's writes.
fn update(path: &Path, change: impl FnOnce(&mut Value)) -> Result<(), AuthError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // 0700 whatever the umask; a directory another user can write is refused.
    crate::private::create_dir(dir)
        .map_err(|e| store_error(path, &format!("cannot use its directory: {e:#}")))?;
    let _lock = lock_dir(dir).map_err(|e| store_error(path, &format!("{e:#}")))?;
    let mut file = read_file(path)?;
    change(&mut file);
    let text =
        serde_json::to_string_pretty(&file).map_err(|e| store_error(path, &e.to_string()))?;
    write_atomic(path, text.as_bytes())
        .map_err(|e| store_error(path, &format!("cannot write it: {e}")))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The object under `key` in `parent`, made one if it is missing or something else.
fn object_at<'a>(parent: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = parent
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("an object")
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
        let file = TokenFile::native(path.clone());
        let a = TokenStore::new(file.clone(), "a", "http://127.0.0.1:1/mcp", DYNAMIC_CLIENT);
        let b = TokenStore::new(file, "b", "http://127.0.0.1:2/mcp", DYNAMIC_CLIENT);
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
        let a = TokenStore::new(file.clone(), "a", "http://127.0.0.1:1/mcp", DYNAMIC_CLIENT);
        let b = TokenStore::new(file, "b", "http://127.0.0.1:2/mcp", DYNAMIC_CLIENT);
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
}
