//! Keeps secrets out of output and logs (SPEC §9, §11): env and header
//! values of a server's config are shown as keys only, and any text that
//! leaves the host (stderr tails, HTTP errors, status) is scrubbed of them.

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;

/// What replaces a secret value in text.
pub const MASK: &str = "***";

/// The secret values of `config`: every string value of `env` and `headers`,
/// plus the `oauth.clientSecret`. Values shorter than 3 characters are left
/// out (masking every "1" in a message would make it unreadable and hides
/// nothing worth hiding).
pub fn secrets(config: &ServerConfig) -> Vec<String> {
    let mut out = Vec::new();
    for field in ["env", "headers"] {
        if let Some(Value::Object(map)) = config.get(field) {
            out.extend(map.values().filter_map(Value::as_str).map(str::to_owned));
        }
    }
    if let Some(Value::Object(oauth)) = config.get("oauth") {
        if let Some(secret) = oauth.get("clientSecret").and_then(Value::as_str) {
            out.push(secret.to_owned());
        }
    }
    out.retain(|s| s.chars().count() >= 3);
    // Longest first, so a secret that contains another is masked whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// `text` with every secret of `config` replaced by [`MASK`].
pub fn redact(text: &str, config: &ServerConfig) -> String {
    redact_all(text, &secrets(config))
}

/// `text` with each of `secrets` (longest first) replaced by [`MASK`].
pub fn redact_all(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), MASK);
        }
    }
    out
}

/// The keys of a map field (`env`, `headers`), for display without values.
pub fn keys_of(config: &ServerConfig, field: &str) -> Vec<String> {
    match config.get(field) {
        Some(Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn env_header_and_oauth_secret_values_are_masked() {
        let c = cfg(
            r#"{"command":"x","env":{"TOKEN":"tok-123","N":"1"},"headers":{"Authorization":"Bearer abc"},"oauth":{"clientSecret":"cs-9"}}"#,
        );
        let text = "failed: TOKEN=tok-123 sent Bearer abc with cs-9 and 1 retry";
        assert_eq!(
            redact(text, &c),
            "failed: TOKEN=*** sent *** with *** and 1 retry"
        );
        assert_eq!(keys_of(&c, "env"), ["TOKEN", "N"]);
    }
}
