//! The token files on disk: where they are ([`TokenFile`]); read, changed and written back
//! atomically under the directory lock (the approvals store's helpers: a new 0600 file renamed
//! over the old one, so a reader sees the old file or the new one, never a part, and a symlink
//! is replaced, not followed); the refresh lock (`lock_file`).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{AuthError, CredentialRefreshGuard};
use serde_json::{Map, Value};

use crate::approvals_store::{lock_dir, write_atomic};

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
    /// This host's own file: where the servers' last challenges and the logins of project
    /// entries are kept (the TypeScript CLI's file has no place for them).
    pub challenges: PathBuf,
}

/// The layout of a [`TokenFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenFormat {
    /// This host's: credentials per server URL and client (the module docs).
    Native,
    /// The TypeScript (qwen-code) CLI's `mcp-oauth-tokens.json`: an array of credentials per
    /// server name (the auth module's `qwen` format).
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

/// [`update`] of one of this host's own files (a JSON object with `"version": 1`).
pub(super) fn update_object(
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

/// Read the file at `path` (`null` when missing), change it, write it back atomically (a
/// new 0600 file renamed over it, so a reader sees the old file or the new one, never a
/// part), all under the directory lock so two processes never lose each other's writes.
pub(super) fn update(path: &Path, change: impl FnOnce(&mut Value)) -> Result<(), AuthError> {
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

/// Takes the exclusive lock on `path` (created 0600, never through a symlink), waiting at
/// most `wait` for another holder.
pub(super) fn lock_file(path: &Path, wait: Duration) -> Result<CredentialRefreshGuard, AuthError> {
    use nix::fcntl::{Flock, FlockArg, OFlag};
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private::create_dir(dir)
            .map_err(|e| store_error(path, &format!("cannot use its directory: {e:#}")))?;
    }
    let start = std::time::Instant::now();
    let mut handle = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(path)
        .map_err(|e| store_error(path, &format!("cannot open it to lock a refresh: {e}")))?;
    loop {
        match Flock::lock(handle, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(CredentialRefreshGuard::new(lock)),
            Err((back, nix::errno::Errno::EWOULDBLOCK)) if start.elapsed() < wait => {
                handle = back;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((_, errno)) => {
                return Err(store_error(
                    path,
                    &format!("cannot take the refresh lock (another refresh holds it?): {errno}"),
                ))
            }
        }
    }
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The object under `key` in `parent`, made one if it is missing or something else.
pub(super) fn object_at<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    let slot = parent
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("an object")
}

pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AuthError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
}

pub(super) fn read_file(path: &Path) -> Result<Value, AuthError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| store_error(path, &format!("it is not valid JSON ({e})"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Null),
        Err(e) => Err(store_error(path, &format!("cannot read it: {e}"))),
    }
}

pub(super) fn store_error(path: &Path, what: &str) -> AuthError {
    AuthError::CredentialStoreError(format!("token file {}: {what}", path.display()))
}
