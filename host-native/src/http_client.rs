//! The HTTP client every outbound request uses (remote MCP servers, OAuth discovery and
//! token requests): no proxy, redirects only within the origin, HTTPS verified against the
//! platform's roots plus the `SSL_CERT_FILE` / `SSL_CERT_DIR` of the session that makes the
//! request ([`crate::tls::Trust`]).

use crate::tls::Trust;

/// How many redirects (all within the origin) one request may follow.
pub const MAX_REDIRECTS: usize = 10;

/// [`http_client_trusting`] this process's roots ([`Trust::of_process`]).
pub fn http_client() -> Result<reqwest::Client, String> {
    http_client_trusting(&Trust::of_process())
}

/// An HTTP client that never goes through a proxy (servers are reached as configured),
/// follows redirects only within the origin ([`redirect_policy`]) and verifies HTTPS against
/// the platform's roots plus the custom ones of `trust`.
pub fn http_client_trusting(trust: &Trust) -> Result<reqwest::Client, String> {
    let tls = trust
        .client_config()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
    reqwest::Client::builder()
        .no_proxy()
        .redirect(redirect_policy())
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// [`http_client`] off the async loop.
pub async fn build_http_client() -> Result<reqwest::Client, String> {
    build_http_client_trusting(Trust::of_process()).await
}

/// [`http_client_trusting`] off the async loop: building one reads the trusted roots from
/// disk (tens of milliseconds).
pub async fn build_http_client_trusting(trust: Trust) -> Result<reqwest::Client, String> {
    tokio::task::spawn_blocking(move || http_client_trusting(&trust))
        .await
        .map_err(|e| format!("cannot build the HTTP client: {e}"))?
}

/// Follows a redirect only to the origin (scheme, host and port) of the request's first URL,
/// at most [`MAX_REDIRECTS`] times; a redirect to another origin fails the request.
///
/// reqwest keeps every header on a redirect except `Authorization`, `Cookie` and the like,
/// which it drops only when the host changes; the configured headers (an `X-Api-Key`, say)
/// would reach whatever host the server redirects to. Stopping at the origin boundary means
/// they never leave the origin the user configured.
pub fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let next = attempt.url();
        let first = attempt.previous().first();
        if first.is_some_and(|first| first.origin() != next.origin()) {
            let message = cross_origin_message(next.as_str());
            return attempt.error(message);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!(
                "stopped after {MAX_REDIRECTS} redirects; use the final URL in the config"
            ));
        }
        attempt.follow()
    })
}

/// Why a cross-origin redirect was not followed (the target URL with its credentials
/// masked).
pub fn cross_origin_message(target: &str) -> String {
    format!(
        "redirected to another origin ({}); headers are not sent there — use the final URL \
         in the config",
        crate::redact::mask_url(target)
    )
}
