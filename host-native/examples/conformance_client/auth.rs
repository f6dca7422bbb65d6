//! The `auth/*` scenarios: the host's own OAuth path, end to end, as a user meets it.
//!
//! 1. The server is configured as a user would (`httpUrl`, an `oauth` block; a pre-registered
//!    client from the scenario's context), and the host connects it: without tokens that must
//!    end in `needs_auth`, not in a crash loop.
//! 2. `mcp-reconcile auth NAME`'s login runs ([`mcp_reconcile::auth::login`]): discovery,
//!    registration, PKCE, the loopback redirect listener. The "browser" here fetches the
//!    authorization URL and follows its redirect to the listener, as a person clicking
//!    "allow" would.
//! 3. The host connects again with the stored tokens, lists the tools and calls each one; a
//!    call refused for want of a scope (`403 insufficient_scope`) is a step-up: log in again
//!    (the login asks for the challenged scopes) and call once more.
//!
//! The token file lives in `$XDG_CONFIG_HOME`, which the test points at a fresh directory.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use mcp_reconcile::auth::{login, OAuthEntry};
use mcp_reconcile::transport::{connect, ConnectErrorKind, Connection};
use mcp_reconcile_kernel::ServerConfig;
use tokio::sync::mpsc;

const LOGIN_WAIT: Duration = Duration::from_secs(30);

pub async fn run(url: &str, scenario: &str) -> anyhow::Result<()> {
    let context = super::scenario_context();
    // The client ID metadata document URL the suite's authorization servers expect (a user
    // who hosts one configures it the same way); servers that do not support such documents
    // get a dynamically registered client instead.
    let mut oauth = serde_json::json!({
        "enabled": true,
        "clientMetadataUrl": "https://conformance-test.local/client-metadata.json",
    });
    for (from, to) in [
        ("client_id", "clientId"),
        ("client_secret", "clientSecret"),
        ("signing_algorithm", "signingAlgorithm"),
    ] {
        if let Some(value) = context.get(from) {
            oauth[to] = value.clone();
        }
    }
    // A machine client (`auth/client-credentials-*`): the key goes into a file, as a user
    // keeps one; the host fetches its tokens itself when it connects.
    let key_dir = tempfile::tempdir()?;
    if scenario.starts_with("auth/client-credentials") {
        oauth["grantType"] = "client_credentials".into();
        if let Some(pem) = context.get("private_key_pem").and_then(|p| p.as_str()) {
            let file = key_dir.path().join("client.pem");
            std::fs::write(&file, pem)?;
            oauth["privateKeyFile"] = file.display().to_string().into();
        }
    }
    let config =
        ServerConfig::from_json(&serde_json::json!({ "httpUrl": url, "oauth": oauth }).to_string())
            .map_err(|e| anyhow::anyhow!("cannot build the server config: {e:?}"))?;
    let entry = OAuthEntry::of(&config);

    if entry.client_credentials {
        let conn = connect_once(&config)
            .await
            .map_err(|kind| anyhow::anyhow!("the connection failed as {kind:?}"))?;
        return use_tools(conn, &config, url, &entry).await;
    }

    // 1. No tokens yet: the host must say `needs_auth`.
    match connect_once(&config).await {
        Err(ConnectErrorKind::NeedsAuth) => {}
        Err(kind) => bail!("{scenario}: without tokens the connection failed as {kind:?}"),
        Ok(conn) => {
            conn.close().await;
            bail!("{scenario}: the server let the host in without authorization");
        }
    }

    // 2. `auth NAME`.
    authorize(url, &entry).await?;

    // 3. Connect with the stored tokens and use every tool; a step-up logs in once more. A
    //    server that wants authorization again at once (its authorization server changed,
    //    SEP-2352) gets one more `auth NAME`, as the user told "needs_auth" would run it.
    let conn = match connect_once(&config).await {
        Err(ConnectErrorKind::NeedsAuth) => {
            authorize(url, &entry).await?;
            connect_once(&config).await
        }
        other => other,
    }
    .map_err(|kind| anyhow::anyhow!("after login the connection failed as {kind:?}"))?;
    use_tools(conn, &config, url, &entry).await
}

/// Lists the tools and calls each one; a call refused for want of a scope logs in again.
async fn use_tools(
    conn: Connection,
    config: &ServerConfig,
    url: &str,
    entry: &OAuthEntry,
) -> anyhow::Result<()> {
    let tools: Vec<String> = conn
        .catalog()
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    eprintln!("authorized; tools: {tools:?}");
    let mut conn = conn;
    for tool in &tools {
        match conn.call_tool(tool, Some(Default::default())).await {
            Ok(result) => eprintln!("{tool} → {:?}", result.content),
            Err(e) => {
                // What a user's client sees: the host names the fix.
                if !e.message.contains("needs more access") {
                    bail!("{tool} failed, but not as a step-up: {}", e.message);
                }
                eprintln!("{tool} refused ({e}); authorizing again for the scopes it needs");
                conn.close().await;
                authorize(url, entry).await?;
                conn = connect_once(config).await.map_err(|kind| {
                    anyhow::anyhow!("after the step-up the connection failed as {kind:?}")
                })?;
                let result = conn.call_tool(tool, Some(Default::default())).await?;
                eprintln!("{tool} → {:?}", result.content);
            }
        }
    }
    conn.close().await;
    Ok(())
}

async fn connect_once(config: &ServerConfig) -> Result<Connection, ConnectErrorKind> {
    let (events, _rx) = mpsc::unbounded_channel();
    connect("conformance", config, super::options(events, None))
        .await
        .map_err(|e| {
            eprintln!("connect: {}", e.message);
            e.kind
        })
}

/// The login of `mcp-reconcile auth NAME`, with a browser that says yes.
async fn authorize(url: &str, entry: &OAuthEntry) -> anyhow::Result<()> {
    let browser = Arc::new(std::sync::Mutex::new(None));
    let slot = browser.clone();
    let store = mcp_reconcile::auth::token_store(None, "conformance", url, entry)?;
    let login = login(store, url, entry, None, move |auth_url: &str| {
        let task = tokio::spawn(browse(auth_url.to_owned()));
        *slot.lock().expect("browser slot") = Some(task);
    });
    let outcome = tokio::time::timeout(LOGIN_WAIT, login).await;
    let task = browser.lock().expect("browser slot").take();
    match outcome {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(anyhow::anyhow!("login failed: {e}")),
        Err(_) => {
            let why = match task {
                Some(task) if task.is_finished() => match task.await {
                    Ok(Err(e)) => format!("{e:#}"),
                    _ => "the redirect never reached the listener".to_owned(),
                },
                _ => "no authorization URL was shown".to_owned(),
            };
            bail!("login did not finish: {why}")
        }
    }
}

/// Fetches the authorization URL, then follows its redirect (to the loopback listener).
async fn browse(auth_url: String) -> anyhow::Result<()> {
    mcp_reconcile::tls::install_crypto_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()?;
    let answer = http.get(&auth_url).send().await?;
    let location = answer
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .with_context(|| format!("the authorization endpoint answered {}", answer.status()))?;
    http.get(&location).send().await?;
    Ok(())
}
