//! Keeps secrets out of output and logs (SPEC §9, §11): env and header
//! values of a server's config are shown as keys only, and any text that
//! leaves the host (stderr tails, HTTP errors, status) is scrubbed of them.
//!
//! URLs carry secrets too: the userinfo of `https://user:pass@host/` and the
//! values of query parameters whose name looks like a credential
//! (`?api_key=…`, `token`, `sig`, …, see [`is_secret_param`]). Those of a
//! config's `url` / `httpUrl` are [`secrets`] like header values, and a URL
//! printed as such goes through [`mask_url`].

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;

/// What replaces a secret value in text.
pub const MASK: &str = "***";

/// The secret values of `config`: every string value of `env` and `headers`,
/// the `oauth.clientSecret`, and the URL secrets of `url` and `httpUrl` (see
/// [`url_secrets`]). Values shorter than 3 characters are left
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
    for field in ["url", "httpUrl"] {
        if let Some(url) = config.get(field).and_then(Value::as_str) {
            out.extend(url_secrets(url));
        }
    }
    out.retain(|s| s.chars().count() >= 3);
    // Longest first, so a secret that contains another is masked whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// The shortest value of an inherited variable that [`env_secrets`] masks for its name alone:
/// a real token is longer, and masking every `true` or `1` would make a message unreadable.
pub const MIN_ENV_SECRET: usize = 8;

/// Whether an environment variable named `name` holds a credential, by its name (ASCII case
/// ignored): one that contains `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL`,
/// `API_KEY`, `APIKEY`, `ACCESS_KEY`, `PRIVATE_KEY` or `AUTH`, or ends in `KEY`, `_PAT`,
/// `_PASS`, `_PWD` or `_SIG` (`GITHUB_TOKEN`, `OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`,
/// `PGPASSWORD`, `NPM_AUTH`, `GH_PAT`).
pub fn is_secret_var(name: &str) -> bool {
    const PARTS: [&str; 10] = [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "AUTH",
    ];
    const SUFFIXES: [&str; 5] = ["KEY", "_PAT", "_PASS", "_PWD", "_SIG"];
    let name = name.to_ascii_uppercase();
    PARTS.iter().any(|p| name.contains(p)) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// The secret values of an environment `vars` — what a server inherits, not only what its
/// entry configures: the value of every variable whose name looks like a credential
/// ([`is_secret_var`]) and is at least [`MIN_ENV_SECRET`] characters long, and the
/// credentials of every value that is a URL ([`url_secrets`]: `DATABASE_URL` with a
/// password). Longest first, like [`secrets`].
pub fn env_secrets<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, value) in vars {
        if is_secret_var(name) && value.chars().count() >= MIN_ENV_SECRET {
            out.push(value.to_owned());
        }
        if value.contains("://") {
            out.extend(
                url_secrets(value)
                    .into_iter()
                    .filter(|s| s.chars().count() >= 3),
            );
        }
    }
    merged(out, Vec::new())
}

/// `a` and `b` as one list of secrets: longest first, each once.
pub fn merged(mut a: Vec<String>, b: Vec<String>) -> Vec<String> {
    a.extend(b);
    a.sort_by_key(|s| std::cmp::Reverse(s.len()));
    a.dedup();
    a
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

/// Whether a query parameter named `name` carries a credential: `token`,
/// `access_token`, `key`, `api_key`, `apikey`, `secret`, `client_secret`,
/// `password`, `passwd`, `auth`, `sig`, `signature`, `code` (an OAuth
/// authorization code), or any name ending in
/// `_key`, `-key`, `_token`, `-token`, `_secret`, `-secret` (ASCII case
/// ignored, after percent-decoding).
pub fn is_secret_param(name: &str) -> bool {
    const NAMES: [&str; 13] = [
        "token",
        "access_token",
        "key",
        "api_key",
        "apikey",
        "secret",
        "client_secret",
        "password",
        "passwd",
        "auth",
        "sig",
        "signature",
        "code",
    ];
    const SUFFIXES: [&str; 6] = ["_key", "-key", "_token", "-token", "_secret", "-secret"];
    let name = percent_decode(name).to_ascii_lowercase();
    NAMES.contains(&name.as_str()) || SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// The parts of `url` (as written, not normalized) a URL masks: the
/// userinfo (the text before the last `@` of the authority) and the
/// `(name, value)` query pairs, each with its byte range in `url`.
struct UrlParts<'a> {
    userinfo: Option<(usize, &'a str)>,
    query: Vec<(&'a str, usize, &'a str)>,
}

fn url_parts(url: &str) -> UrlParts<'_> {
    let mut parts = UrlParts {
        userinfo: None,
        query: Vec::new(),
    };
    let authority_start = url.find("://").map(|i| i + 3);
    if let Some(start) = authority_start {
        let rest = &url[start..];
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            parts.userinfo = Some((start, &rest[..at]));
        }
    }
    let after_authority = authority_start.unwrap_or(0);
    let Some(q) = url[after_authority..]
        .find('?')
        .map(|i| i + after_authority + 1)
    else {
        return parts;
    };
    let query_end = url[q..].find('#').map_or(url.len(), |i| i + q);
    let mut offset = q;
    for pair in url[q..query_end].split('&') {
        if let Some((name, value)) = pair.split_once('=') {
            parts.query.push((name, offset + name.len() + 1, value));
        }
        offset += pair.len() + 1;
    }
    parts
}

/// `url` with its userinfo replaced by `***` (`https://***@host/`) and the
/// value of every secret query parameter ([`is_secret_param`]) by `***`;
/// everything else as written. For any text that prints a URL itself.
pub fn mask_url(url: &str) -> String {
    let parts = url_parts(url);
    // (start, end) byte ranges to replace, in order.
    let mut ranges = Vec::new();
    if let Some((start, userinfo)) = parts.userinfo {
        ranges.push((start, start + userinfo.len()));
    }
    for (name, start, value) in parts.query {
        if is_secret_param(name) && !value.is_empty() {
            ranges.push((start, start + value.len()));
        }
    }
    let mut out = String::with_capacity(url.len());
    let mut at = 0;
    for (start, end) in ranges {
        out.push_str(&url[at..start]);
        out.push_str(MASK);
        at = end;
    }
    out.push_str(&url[at..]);
    out
}

/// The secrets of one configured URL: the whole userinfo, its user and
/// password parts, and the value of every secret query parameter, each as
/// written and percent-decoded (an error message may show either form).
pub fn url_secrets(url: &str) -> Vec<String> {
    let parts = url_parts(url);
    let mut raw = Vec::new();
    if let Some((_, userinfo)) = parts.userinfo {
        raw.push(userinfo);
        if let Some((user, password)) = userinfo.split_once(':') {
            raw.extend([user, password]);
        }
    }
    raw.extend(
        parts
            .query
            .iter()
            .filter(|(name, _, _)| is_secret_param(name))
            .map(|(_, _, value)| *value),
    );
    let mut out = Vec::new();
    for secret in raw.into_iter().filter(|s| !s.is_empty()) {
        out.push(secret.to_owned());
        let decoded = percent_decode(&secret.replace('+', " "));
        if decoded != secret {
            out.push(decoded);
        }
        let decoded = percent_decode(secret);
        if decoded != secret {
            out.push(decoded);
        }
    }
    out
}

/// `text` with `%XX` escapes decoded (invalid ones and non-UTF-8 results
/// kept as they are).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
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

    #[test]
    fn inherited_credentials_are_secrets_by_name_and_url() {
        let vars = [
            ("GITHUB_TOKEN", "ghp_0123456789abcdef"),
            ("aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG"),
            ("OPENAI_API_KEY", "sk-proj-abcdefgh"),
            ("DATABASE_URL", "postgres://app:hunter22@db.internal/app"),
            ("NO_AUTH", "true"),
            ("HOME", "/home/someone-with-a-long-name"),
            ("SOME_TOKEN", "short"),
            ("TERM", "xterm-256color"),
        ];
        let s = env_secrets(vars);
        for expected in [
            "ghp_0123456789abcdef",
            "wJalrXUtnFEMI/K7MDENG",
            "sk-proj-abcdefgh",
            "hunter22",
        ] {
            assert!(s.iter().any(|x| x == expected), "{expected} in {s:?}");
        }
        for kept in [
            "true",
            "short",
            "xterm-256color",
            "/home/someone-with-a-long-name",
        ] {
            assert!(!s.iter().any(|x| x == kept), "{kept} not in {s:?}");
        }
        assert!(is_secret_var("PGPASSWORD") && is_secret_var("gh_pat"));
        assert!(!is_secret_var("PATH") && !is_secret_var("KEYBOARD_LAYOUT"));
        let text = "auth failed for ghp_0123456789abcdef at postgres://app:hunter22@db.internal";
        let redacted = redact_all(text, &s);
        assert!(
            !redacted.contains("ghp_") && !redacted.contains("hunter22"),
            "{redacted}"
        );
    }

    #[test]
    fn url_userinfo_and_secret_query_values_are_masked() {
        assert_eq!(
            mask_url("https://alice:s3cr%40t@example.com:8443/mcp?api_key=K1&x=1&Token=T2#f"),
            "https://***@example.com:8443/mcp?api_key=***&x=1&Token=***#f"
        );
        assert_eq!(
            mask_url("http://h/p?access_token=a&client_secret=b&X-Api-Key=c&my_token=d&sig=e&page=2"),
            "http://h/p?access_token=***&client_secret=***&X-Api-Key=***&my_token=***&sig=***&page=2"
        );
        assert_eq!(
            mask_url("http://h/a@b?q=1"),
            "http://h/a@b?q=1",
            "@ in the path is no userinfo"
        );
        assert_eq!(mask_url("http://h/?key="), "http://h/?key=");
        assert_eq!(mask_url("not a url"), "not a url");
    }

    #[test]
    fn url_credentials_of_the_config_are_secrets() {
        let c = cfg(
            r#"{"httpUrl":"https://bob:pa%24%24word@mcp.example.com/x?api_key=KEY-123&page=7","url":"http://h/s?signature=abc%2Fdef"}"#,
        );
        let s = secrets(&c);
        for expected in [
            "bob:pa%24%24word",
            "pa%24%24word",
            "pa$$word",
            "bob",
            "KEY-123",
            "abc%2Fdef",
            "abc/def",
        ] {
            assert!(s.iter().any(|x| x == expected), "{expected} in {s:?}");
        }
        assert!(!s.iter().any(|x| x == "7" || x == "page"));
        let text = "at https://bob:pa%24%24word@mcp.example.com/x?api_key=KEY-123&page=7 failed";
        let redacted = redact(text, &c);
        assert!(
            !redacted.contains("KEY-123") && !redacted.contains("word"),
            "{redacted}"
        );
        assert!(redacted.contains("page=7"), "{redacted}");
    }
}
