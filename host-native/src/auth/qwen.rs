//! The TypeScript (qwen-code) CLI's token file, `~/.qwen/mcp-oauth-tokens.json`, so both tools
//! share one login (`--layout qwen`). What was verified against the CLI's source
//! (`packages/core/src/mcp/oauth-token-storage.ts`): the file is a JSON array, mode 0600, of
//!
//! ```json
//! {"serverName": "api", "token": {"accessToken": "…", "refreshToken": "…",
//!   "expiresAt": 1764756000000, "tokenType": "Bearer", "scope": "a b"},
//!  "clientId": "…", "tokenUrl": "…", "mcpServerUrl": "https://…/mcp", "updatedAt": 1764752400000}
//! ```
//!
//! keyed by `serverName`; `expiresAt` and `updatedAt` are milliseconds since the epoch. (Its
//! encrypted-file and keychain modes are not read.)
//!
//! An entry is used only when its `mcpServerUrl` is the server's URL: a token the user got
//! for one URL never goes to another server that took the same name. Its `tokenUrl` is the
//! token endpoint that issued it, which binds it ([`super::binding`]); an entry without one is
//! not used. Writing keeps every other entry, and the fields of this one that the host does
//! not know. Every entry of this file counts as a login of the user's own configuration: the
//! logins of project entries are kept in this host's own file.

use std::time::Duration;

use oauth2::basic::BasicTokenType;
use oauth2::{AccessToken, RefreshToken, Scope, TokenResponse};
use rmcp::transport::auth::{OAuthTokenResponse, StoredCredentials, VendorExtraTokenFields};
use serde_json::{json, Map, Value};

/// The credentials of `name` at `url` in the parsed file, as rmcp keeps them; `now` in seconds
/// since the epoch turns the absolute expiry into a lifetime.
pub(super) fn find(file: &Value, name: &str, url: &str, now: u64) -> Option<StoredCredentials> {
    let entry = entries(file).find(|e| is_for(e, name, url))?;
    let token = entry.get("token")?;
    let access = token.get("accessToken")?.as_str()?;
    let mut response = OAuthTokenResponse::new(
        AccessToken::new(access.to_owned()),
        BasicTokenType::Bearer,
        VendorExtraTokenFields::default(),
    );
    if let Some(refresh) = token.get("refreshToken").and_then(Value::as_str) {
        response.set_refresh_token(Some(RefreshToken::new(refresh.to_owned())));
    }
    if let Some(expires_ms) = token.get("expiresAt").and_then(Value::as_u64) {
        let lifetime = (expires_ms / 1000).saturating_sub(now);
        response.set_expires_in(Some(&Duration::from_secs(lifetime)));
    }
    let scopes: Vec<String> = token
        .get("scope")
        .and_then(Value::as_str)
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    if !scopes.is_empty() {
        response.set_scopes(Some(scopes.iter().cloned().map(Scope::new).collect()));
    }
    let client_id = entry
        .get("clientId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(StoredCredentials::new(
        client_id,
        Some(response),
        scopes,
        Some(now),
    ))
}

/// The `tokenUrl` of the entry of `name` at `url` in the parsed file.
pub(super) fn token_url(file: &Value, name: &str, url: &str) -> Option<String> {
    entries(file)
        .find(|e| is_for(e, name, url))?
        .get("tokenUrl")?
        .as_str()
        .map(str::to_owned)
}

/// Replaces (or with `None` removes) the entry of `name` in the parsed file; `token_url` is
/// the token endpoint that issued the credentials.
pub(super) fn put(
    file: &mut Value,
    name: &str,
    url: &str,
    credentials: Option<&StoredCredentials>,
    token_url: Option<&str>,
) {
    if !file.is_array() {
        *file = Value::Array(Vec::new());
    }
    let list = file.as_array_mut().expect("an array");
    let old = list
        .iter()
        .position(|e| e.get("serverName").and_then(Value::as_str) == Some(name))
        .map(|at| list.remove(at));
    let Some(stored) = credentials else {
        return;
    };
    let Some(tokens) = stored.token_response.as_ref() else {
        return;
    };
    let now_ms = stored.token_received_at.unwrap_or_default() * 1000;
    let mut token = Map::new();
    token.insert(
        "accessToken".into(),
        tokens.access_token().secret().clone().into(),
    );
    if let Some(refresh) = tokens.refresh_token() {
        token.insert("refreshToken".into(), refresh.secret().clone().into());
    }
    if let Some(lifetime) = tokens.expires_in() {
        let expires = now_ms + u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX / 2);
        token.insert("expiresAt".into(), expires.into());
    }
    token.insert("tokenType".into(), "Bearer".into());
    if !stored.granted_scopes.is_empty() {
        token.insert("scope".into(), stored.granted_scopes.join(" ").into());
    }
    let mut entry = match old {
        Some(Value::Object(old)) => old,
        _ => Map::new(),
    };
    entry.insert("serverName".into(), name.into());
    entry.insert("token".into(), Value::Object(token));
    entry.insert("clientId".into(), stored.client_id.clone().into());
    entry.insert("mcpServerUrl".into(), url.into());
    match token_url {
        Some(token_url) => entry.insert("tokenUrl".into(), token_url.into()),
        None => entry.remove("tokenUrl"),
    };
    entry.insert("updatedAt".into(), json!(now_ms));
    list.push(Value::Object(entry));
}

fn entries(file: &Value) -> impl Iterator<Item = &Value> {
    file.as_array().into_iter().flatten()
}

fn is_for(entry: &Value, name: &str, url: &str) -> bool {
    entry.get("serverName").and_then(Value::as_str) == Some(name)
        && entry.get("mcpServerUrl").and_then(Value::as_str) == Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry as the TypeScript CLI writes it.
    fn written_by_the_cli() -> Value {
        json!([
            {"serverName": "other", "token": {"accessToken": "o", "tokenType": "Bearer"},
             "mcpServerUrl": "https://other.example/mcp", "updatedAt": 1},
            {"serverName": "api",
             "token": {"accessToken": "acc", "refreshToken": "ref",
                       "expiresAt": 1_000_600_000u64, "tokenType": "Bearer", "scope": "a b"},
             "clientId": "client-7", "tokenUrl": "https://auth.example/token",
             "mcpServerUrl": "https://api.example/mcp", "updatedAt": 1_000_000_000u64}
        ])
    }

    #[test]
    fn the_cli_s_entry_is_read_for_its_name_and_url_only() {
        let file = written_by_the_cli();
        let stored = find(&file, "api", "https://api.example/mcp", 1_000_000).expect("found");
        assert_eq!(stored.client_id, "client-7");
        assert_eq!(stored.granted_scopes, ["a", "b"]);
        let tokens = stored.token_response.expect("tokens");
        assert_eq!(tokens.access_token().secret(), "acc");
        assert_eq!(tokens.refresh_token().expect("refresh").secret(), "ref");
        assert_eq!(tokens.expires_in(), Some(Duration::from_secs(600)));
        assert!(
            find(&file, "api", "https://evil.example/mcp", 1_000_000).is_none(),
            "a token never goes to another URL under the same name"
        );
        assert!(find(&json!({"not": "a list"}), "api", "x", 0).is_none());
    }

    #[test]
    fn writing_keeps_other_entries_and_unknown_fields_in_the_cli_s_shape() {
        let mut file = written_by_the_cli();
        let read = find(&file, "api", "https://api.example/mcp", 1_000_000).expect("found");
        let issued_by = token_url(&file, "api", "https://api.example/mcp");
        assert_eq!(issued_by.as_deref(), Some("https://auth.example/token"));
        put(
            &mut file,
            "api",
            "https://api.example/mcp",
            Some(&read),
            issued_by.as_deref(),
        );
        let list = file.as_array().expect("array");
        assert_eq!(list.len(), 2);
        let api = list.iter().find(|e| e["serverName"] == "api").expect("api");
        assert_eq!(api["tokenUrl"], "https://auth.example/token", "kept");
        assert_eq!(api["token"]["expiresAt"], 1_000_600_000u64);
        assert_eq!(api["token"]["scope"], "a b");
        assert_eq!(api["mcpServerUrl"], "https://api.example/mcp");
        put(&mut file, "api", "https://api.example/mcp", None, None);
        assert_eq!(file.as_array().expect("array").len(), 1, "removed");
    }
}
