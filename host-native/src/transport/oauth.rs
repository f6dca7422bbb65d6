//! OAuth on a streamable-HTTP connection: the authorization manager it authorizes with (the
//! stored login it may use, or a client-credentials token fetched now) and its token store
//! (where [`Watched`](super::remote::Watched) keeps the challenges the server answers with).

use mcp_reconcile_kernel::ServerConfig;

use super::{ConnectOptions, Ctx};
use crate::auth::{LoginLayer, Refusal, TokenStore};

/// The OAuth a streamable-HTTP connection uses.
pub(super) struct OAuth {
    /// The authorization manager and its token store, when the connection authorizes.
    pub manager: Option<(rmcp::transport::auth::AuthorizationManager, TokenStore)>,
    /// Why a login stored for the server's URL is not used, for its `needs_auth` message.
    pub refusal: Option<Refusal>,
}

/// The OAuth a streamable-HTTP connection authorizes with: a manager when the entry has
/// `oauth.enabled` or the token file holds a login for its URL of its own layer. A stored
/// login is used only at the authorization server that issued it ([`crate::auth::binding`]):
/// the entry's own, configured or discovered, is compared with it first. Stored token values
/// join the connection's secrets, so no message can show them. The manager's requests
/// (discovery, tokens) go through `client`, the connection's own, so they trust the same roots
/// as the connection (its session's).
pub(super) async fn oauth_manager(
    ctx: &mut Ctx,
    config: &ServerConfig,
    url: &str,
    opts: &ConnectOptions,
    client: &reqwest::Client,
) -> Result<OAuth, String> {
    let entry = crate::auth::OAuthEntry::of(config);
    let base_dir = opts.base_dir.as_deref();
    let Ok(store) = crate::auth::token_store(opts.tokens.as_ref(), &ctx.name, url, &entry) else {
        return Ok(OAuth {
            manager: None,
            refusal: None,
        });
    };
    if entry.client_credentials {
        // A machine client: fetch a token now (there is no refresh token to keep).
        let mut manager = crate::auth::manager(url, &entry, store.clone())
            .await
            .map_err(|e| format!("cannot set up OAuth: {e}"))?;
        manager
            .with_client(client.clone())
            .map_err(|e| format!("cannot set up OAuth: {e}"))?;
        let manager = crate::auth::client_credentials(manager, &store, url, &entry, base_dir)
            .await
            .map_err(|e| format!("could not get a token (client credentials): {e}"))?;
        if let Ok(Some(tokens)) = store
            .login()
            .map(|l| l.and_then(|l| l.credentials.token_response))
        {
            use oauth2::TokenResponse;
            ctx.secrets.push(tokens.access_token().secret().clone());
        }
        return Ok(OAuth {
            manager: Some((manager, store)),
            refusal: None,
        });
    }
    let login = match store.login() {
        Ok(login) => login,
        Err(e) if entry.enabled => return Err(e.to_string()),
        // A damaged token file must not break servers that never used OAuth.
        Err(e) => {
            tracing::warn!(server = %ctx.name, error = %e, "ignoring the OAuth token file");
            None
        }
    };
    // The user's own login for this URL, which a project entry never uses: its message says so.
    let mut refusal = None;
    if login.is_none() && entry.layer < LoginLayer::User {
        if let Ok(Some(theirs)) = store.login_in(LoginLayer::User) {
            refusal = Some(Refusal::Layer(theirs.binding.layer));
        }
    }
    if !entry.enabled && login.is_none() {
        return Ok(OAuth {
            manager: None,
            refusal,
        });
    }
    let mut manager = crate::auth::manager(url, &entry, store.clone())
        .await
        .map_err(|e| format!("cannot set up OAuth: {e}"))?;
    manager
        .with_client(client.clone())
        .map_err(|e| format!("cannot set up OAuth: {e}"))?;
    if let Some(login) = login {
        // The stored login's tokens go only to the authorization server that issued it.
        let kept = store.challenge().ok().flatten();
        let server = crate::auth::authorization_server(&mut manager, url, &entry, kept)
            .await
            .map_err(|e| {
                format!("cannot reach its authorization server to use the stored OAuth login: {e}")
            })?;
        match login.binding.refusal(entry.layer, &server) {
            Some(why) => {
                tracing::info!(server = %ctx.name, "not using the stored OAuth login: {}", why.sentence());
                refusal = Some(why);
                if !entry.enabled {
                    return Ok(OAuth {
                        manager: None,
                        refusal,
                    });
                }
                // The store stays unbound: it loads nothing, so the first request asks the
                // server, and its 401 says `needs_auth`.
            }
            None => {
                store.bind(server);
                if let Some(tokens) = login.credentials.token_response.as_ref() {
                    use oauth2::TokenResponse;
                    ctx.secrets.push(tokens.access_token().secret().clone());
                    if let Some(refresh) = tokens.refresh_token() {
                        ctx.secrets.push(refresh.secret().clone());
                    }
                }
                // Configures the stored client; without tokens the first request goes out
                // unauthorized and its 401 says `needs_auth`.
                if let Err(e) = manager.initialize_from_store().await {
                    tracing::debug!(server = %ctx.name, error = %e, "OAuth set-up from the stored login failed");
                }
            }
        }
    }
    Ok(OAuth {
        manager: Some((manager, store)),
        refusal,
    })
}
