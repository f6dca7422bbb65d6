//! The client-credentials grant (OAuth 2.1 §4.2, MCP SEP-1046): a machine client that needs no
//! browser. The entry says `"grantType": "client_credentials"` with `clientId` and either
//! `clientSecret` (sent as HTTP Basic when that is all the authorization server takes, else in
//! the body) or `privateKeyFile` (a signed `private_key_jwt` assertion, RFC 7523). The host
//! fetches tokens when it connects; there is no refresh token, so an expired one is replaced
//! by connecting again.

use std::path::{Path, PathBuf};

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm,
};

use super::{OAuthEntry, TokenStore};

/// The largest key file read (a PEM key is a few KiB).
const KEY_FILE_LIMIT: u64 = 64 * 1024;

/// Fetches tokens for the server at `url` with the client-credentials grant of `entry` into
/// `manager`'s token store (`store`, bound to the authorization server discovery finds
/// first); gives the manager back. `base_dir` resolves a relative `privateKeyFile`.
///
/// # Errors
/// The entry is incomplete, the key file cannot be read, discovery failed, or the
/// authorization server refused (its message, never a secret).
pub async fn client_credentials(
    mut manager: AuthorizationManager,
    store: &TokenStore,
    url: &str,
    entry: &OAuthEntry,
    base_dir: Option<&Path>,
) -> Result<AuthorizationManager, AuthError> {
    let config = config(url, entry, base_dir).await?;
    store.bind(super::discover(&mut manager, url, entry, None).await?);
    manager.configure_client_credentials(&config)?;
    // rmcp's `private_key_jwt` exchange future is not `Send` (it holds a form serializer
    // across an await), so it runs to completion on a blocking thread of this runtime.
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        runtime.block_on(async move {
            manager.exchange_client_credentials(&config).await?;
            Ok(manager)
        })
    })
    .await
    .map_err(|e| AuthError::InternalError(e.to_string()))?
}

async fn config(
    url: &str,
    entry: &OAuthEntry,
    base_dir: Option<&Path>,
) -> Result<ClientCredentialsConfig, AuthError> {
    let missing = |what: &str| {
        AuthError::ClientCredentialsError(format!(
            "`oauth.grantType: \"client_credentials\"` needs {what}"
        ))
    };
    let client_id = entry
        .client_id
        .clone()
        .ok_or_else(|| missing("`clientId`"))?;
    // RFC 8707: the token is for this server and no other.
    let resource = Some(url.to_owned());
    let scopes = entry.scopes.clone();
    if let Some(file) = &entry.private_key_file {
        let signing_key = read_key(&resolve(file, base_dir)).await?;
        let signing_algorithm = algorithm(entry.signing_algorithm.as_deref())?;
        return Ok(ClientCredentialsConfig::PrivateKeyJwt {
            client_id,
            signing_key,
            signing_algorithm,
            token_endpoint_audience: None,
            scopes,
            resource,
        });
    }
    let client_secret = entry
        .client_secret
        .clone()
        .ok_or_else(|| missing("`clientSecret` or `privateKeyFile`"))?;
    Ok(ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes,
        resource,
    })
}

fn resolve(file: &str, base_dir: Option<&Path>) -> PathBuf {
    let path = PathBuf::from(file);
    match base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

/// Reads the key file, bounded and off the runtime's threads.
async fn read_key(path: &Path) -> Result<Vec<u8>, AuthError> {
    let shown = crate::display::safe(&path.display().to_string()).into_owned();
    let path = path.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let file = std::fs::File::open(&path)?;
        let mut key = Vec::new();
        file.take(KEY_FILE_LIMIT + 1).read_to_end(&mut key)?;
        Ok::<_, std::io::Error>(key)
    })
    .await
    .map_err(|e| AuthError::InternalError(e.to_string()))?;
    match read {
        Ok(key) if key.len() as u64 > KEY_FILE_LIMIT => Err(AuthError::ClientCredentialsError(
            format!("oauth.privateKeyFile {shown} is larger than a key file can be"),
        )),
        Ok(key) => Ok(key),
        Err(e) => Err(AuthError::ClientCredentialsError(format!(
            "cannot read oauth.privateKeyFile {shown}: {e}"
        ))),
    }
}

fn algorithm(name: Option<&str>) -> Result<JwtSigningAlgorithm, AuthError> {
    Ok(match name.unwrap_or("ES256") {
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        other => {
            return Err(AuthError::ClientCredentialsError(format!(
                "oauth.signingAlgorithm {} is not one of ES256, ES384, RS256, RS384, RS512",
                crate::display::safe(other)
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_key_file_is_found_in_the_project_and_algorithms_are_checked() {
        let base = Path::new("/work/project");
        assert_eq!(
            resolve("keys/client.pem", Some(base)),
            base.join("keys/client.pem")
        );
        assert_eq!(
            resolve("/etc/key.pem", Some(base)),
            PathBuf::from("/etc/key.pem")
        );
        assert!(matches!(algorithm(None), Ok(JwtSigningAlgorithm::ES256)));
        assert!(algorithm(Some("HS256")).is_err(), "no shared-secret JWTs");
    }
}
