//! OAuth on a streamable-HTTP connection: the authorization manager it authorizes with (the
//! stored tokens, or a client-credentials token fetched now) and its token store (where
//! [`Watched`](super::remote::Watched) keeps the challenges the server answers with).

use mcp_reconcile_kernel::ServerConfig;

use super::{ConnectOptions, Ctx};

/// The OAuth manager a streamable-HTTP connection authorizes with, and its token store: when
/// the entry has `oauth.enabled` or the token file holds credentials for its URL. Stored token
/// values join the connection's secrets, so no message can show them. The manager's
/// requests (discovery, tokens) go through `client`, the connection's own, so they trust
/// the same roots as the connection (its session's).
pub(super) async fn oauth_manager(
    ctx: &mut Ctx,
    config: &ServerConfig,
    url: &str,
    opts: &ConnectOptions,
    client: &reqwest::Client,
) -> Result<
    Option<(
        rmcp::transport::auth::AuthorizationManager,
        crate::auth::TokenStore,
    )>,
    String,
> {
    use rmcp::transport::auth::CredentialStore;
    let entry = crate::auth::OAuthEntry::of(config);
    let base_dir = opts.base_dir.as_deref();
    let Ok(store) = crate::auth::token_store(opts.tokens.as_ref(), &ctx.name, url, &entry) else {
        return Ok(None);
    };
    if entry.client_credentials {
        // A machine client: fetch a token now (there is no refresh token to keep).
        let mut manager = crate::auth::manager(url, &entry, store.clone())
            .await
            .map_err(|e| format!("cannot set up OAuth: {e}"))?;
        manager
            .with_client(client.clone())
            .map_err(|e| format!("cannot set up OAuth: {e}"))?;
        let manager = crate::auth::client_credentials(manager, url, &entry, base_dir)
            .await
            .map_err(|e| format!("could not get a token (client credentials): {e}"))?;
        if let Ok(Some(tokens)) = store.load().await.map(|s| s.and_then(|s| s.token_response)) {
            use oauth2::TokenResponse;
            ctx.secrets.push(tokens.access_token().secret().clone());
        }
        return Ok(Some((manager, store)));
    }
    let stored = match store.load().await {
        Ok(stored) => stored,
        Err(e) if entry.enabled => return Err(e.to_string()),
        // A damaged token file must not break servers that never used OAuth.
        Err(e) => {
            tracing::warn!(server = %ctx.name, error = %e, "ignoring the OAuth token file");
            None
        }
    };
    if !entry.enabled && stored.is_none() {
        return Ok(None);
    }
    if let Some(tokens) = stored.as_ref().and_then(|s| s.token_response.as_ref()) {
        use oauth2::TokenResponse;
        ctx.secrets.push(tokens.access_token().secret().clone());
        if let Some(refresh) = tokens.refresh_token() {
            ctx.secrets.push(refresh.secret().clone());
        }
    }
    let mut manager = crate::auth::manager(url, &entry, store.clone())
        .await
        .map_err(|e| format!("cannot set up OAuth: {e}"))?;
    manager
        .with_client(client.clone())
        .map_err(|e| format!("cannot set up OAuth: {e}"))?;
    if stored.is_some() {
        // Discovers the authorization server and configures the stored client; without
        // tokens the first request goes out unauthorized and its 401 says `needs_auth`.
        if let Err(e) = manager.initialize_from_store().await {
            tracing::debug!(server = %ctx.name, error = %e, "OAuth discovery failed");
        }
    }
    Ok(Some((manager, store)))
}
