//! A client's administrator policy over MCP servers (SPEC §15 admission): allow and deny rules
//! that match a server by its name, its command line or its URL — Claude Code's
//! `allowedMcpServers` / `deniedMcpServers`. The host reads the rules from the client's files;
//! the kernel decides which servers they turn off, and those names become
//! [`Gating::blocked`](crate::Gating::blocked).
//!
//! Meaning (as the client defines it):
//! * a rule is exactly one of `{"serverName": NAME}` (exact name), `{"serverCommand": [CMD,
//!   ARG…]}` (the stdio command and its arguments, exactly and in order) or `{"serverUrl":
//!   PATTERN}` (a remote server's URL; `*` matches any run of characters, nothing else is
//!   special);
//! * the deny list wins: a server matching any deny rule is blocked;
//! * the allow list not set allows every server; set to `[]` it allows none; otherwise a
//!   server passes when a rule admits it — a stdio server must match a `serverCommand` rule
//!   when the list has any, a remote server a `serverUrl` rule when the list has any, and
//!   otherwise a `serverName` rule.

use crate::config::{ServerConfig, Servers, Transport};
use crate::json::Value;

/// One policy rule.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub enum PolicyRule {
    /// `{"serverName": …}`: the server's name, exactly.
    #[cfg_attr(feature = "ts", ts(rename = "serverName"))]
    Name(String),
    /// `{"serverCommand": [...]}`: the stdio command followed by its arguments, exactly.
    #[cfg_attr(feature = "ts", ts(rename = "serverCommand"))]
    Command(Vec<String>),
    /// `{"serverUrl": …}`: a URL pattern (`*` = any run of characters).
    #[cfg_attr(feature = "ts", ts(rename = "serverUrl"))]
    Url(String),
}

/// The allow and deny lists of a client's policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// `None`: every server allowed; `Some([])`: none.
    pub allowed: Option<Vec<PolicyRule>>,
    /// A server matching any of these is blocked, whatever `allowed` says.
    pub denied: Vec<PolicyRule>,
}

/// Reads a rule list; entries that are not a rule are left out, each with a message.
pub fn parse_rules(value: &Value) -> (Vec<PolicyRule>, Vec<String>) {
    let Value::Array(items) = value else {
        return (
            Vec::new(),
            vec![format!(
                "must be an array of rules, found {}",
                value.preview(60)
            )],
        );
    };
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match rule(item) {
            Some(rule) => rules.push(rule),
            None => errors.push(format!(
                "rule {index} must be exactly one of {{\"serverName\": string}}, \
                 {{\"serverCommand\": [strings]}} or {{\"serverUrl\": string}}, found {} — \
                 it is ignored",
                item.preview(60)
            )),
        }
    }
    (rules, errors)
}

fn rule(item: &Value) -> Option<PolicyRule> {
    let object = item.as_object()?;
    if object.len() != 1 {
        return None;
    }
    let (key, value) = object.iter().next()?;
    match key.as_str() {
        "serverName" => Some(PolicyRule::Name(value.as_str()?.to_owned())),
        "serverUrl" => Some(PolicyRule::Url(value.as_str()?.to_owned())),
        "serverCommand" => {
            let Value::Array(parts) = value else {
                return None;
            };
            let parts: Option<Vec<String>> = parts
                .iter()
                .map(|p| p.as_str().map(str::to_owned))
                .collect();
            parts.filter(|p| !p.is_empty()).map(PolicyRule::Command)
        }
        _ => None,
    }
}

impl Policy {
    /// Whether the policy lets `name` with `config` run.
    pub fn admits(&self, name: &str, config: &ServerConfig) -> bool {
        let server = Subject::of(name, config);
        if self.denied.iter().any(|rule| server.matches(rule)) {
            return false;
        }
        let Some(allowed) = &self.allowed else {
            return true;
        };
        let has = |kind: fn(&PolicyRule) -> bool| allowed.iter().any(kind);
        match &server.line {
            Line::Command(_) if has(|r| matches!(r, PolicyRule::Command(_))) => allowed
                .iter()
                .any(|r| matches!(r, PolicyRule::Command(_)) && server.matches(r)),
            Line::Url(_) if has(|r| matches!(r, PolicyRule::Url(_))) => allowed
                .iter()
                .any(|r| matches!(r, PolicyRule::Url(_)) && server.matches(r)),
            _ => allowed
                .iter()
                .any(|r| matches!(r, PolicyRule::Name(_)) && server.matches(r)),
        }
    }

    /// The names of `servers` the policy turns off, in map order.
    pub fn blocked(&self, servers: &Servers) -> Vec<String> {
        servers
            .iter()
            .filter(|(name, config)| !self.admits(name, config))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// What a rule is matched against.
struct Subject<'a> {
    name: &'a str,
    line: Line,
}

enum Line {
    Command(Vec<String>),
    Url(String),
    Neither,
}

impl<'a> Subject<'a> {
    fn of(name: &'a str, config: &ServerConfig) -> Self {
        let line = match config.transport() {
            Transport::Stdio => {
                let mut line = vec![config.str_field("command").unwrap_or_default().to_owned()];
                if let Some(Value::Array(args)) = config.get("args") {
                    line.extend(args.iter().map(|a| match a {
                        Value::String(s) => s.clone(),
                        other => other.to_json(),
                    }));
                }
                Line::Command(line)
            }
            Transport::Http => Line::Url(config.str_field("httpUrl").unwrap_or_default().into()),
            Transport::Sse => Line::Url(config.str_field("url").unwrap_or_default().into()),
            Transport::Websocket => Line::Url(config.str_field("tcp").unwrap_or_default().into()),
            _ => Line::Neither,
        };
        Subject { name, line }
    }

    fn matches(&self, rule: &PolicyRule) -> bool {
        match (rule, &self.line) {
            (PolicyRule::Name(name), _) => name == self.name,
            (PolicyRule::Command(want), Line::Command(have)) => want == have,
            (PolicyRule::Url(pattern), Line::Url(url)) => url_matches(pattern, url),
            _ => false,
        }
    }
}

/// `*` matches any run of characters (including none); everything else literally; anchored.
fn url_matches(pattern: &str, url: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = url.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn servers(text: &str) -> Servers {
        crate::config::servers_from_value(&parse(text).expect("json")).expect("servers")
    }

    fn policy(allowed: Option<&str>, denied: &str) -> Policy {
        Policy {
            allowed: allowed.map(|a| parse_rules(&parse(a).expect("json")).0),
            denied: parse_rules(&parse(denied).expect("json")).0,
        }
    }

    const MAP: &str = r#"{
        "gh": {"command": "npx", "args": ["-y", "github"]},
        "fs": {"command": "npx", "args": ["-y", "fs"]},
        "api": {"httpUrl": "https://mcp.example.com/api"},
        "old": {"url": "https://legacy.example.org/sse"}
    }"#;

    #[test]
    fn unset_allows_all_and_empty_allows_none() {
        let map = servers(MAP);
        assert!(policy(None, "[]").blocked(&map).is_empty());
        assert_eq!(
            policy(Some("[]"), "[]").blocked(&map),
            ["gh", "fs", "api", "old"]
        );
    }

    #[test]
    fn deny_wins_over_allow() {
        let map = servers(MAP);
        let p = policy(
            Some(r#"[{"serverName":"gh"},{"serverName":"api"}]"#),
            r#"[{"serverName":"gh"}]"#,
        );
        assert_eq!(p.blocked(&map), ["gh", "fs", "old"]);
    }

    #[test]
    fn a_command_rule_binds_every_stdio_server_to_a_command() {
        let map = servers(MAP);
        // With a command rule present, the name "fs" no longer admits a stdio server.
        let p = policy(
            Some(
                r#"[{"serverCommand":["npx","-y","github"]},{"serverName":"fs"},{"serverName":"api"}]"#,
            ),
            "[]",
        );
        assert_eq!(p.blocked(&map), ["fs", "old"]);
        // Order and every argument count.
        let p = policy(Some(r#"[{"serverCommand":["npx","github","-y"]}]"#), "[]");
        assert!(p.blocked(&map).contains(&"gh".to_owned()));
    }

    #[test]
    fn url_rules_take_wildcards_and_bind_remote_servers() {
        let map = servers(MAP);
        let p = policy(
            Some(
                r#"[{"serverUrl":"https://*.example.com/*"},{"serverName":"old"},{"serverName":"gh"}]"#,
            ),
            "[]",
        );
        assert_eq!(p.blocked(&map), ["fs", "old"]);
        let deny = policy(None, r#"[{"serverUrl":"https://legacy.example.org/*"}]"#);
        assert_eq!(deny.blocked(&map), ["old"]);
        let deny = policy(None, r#"[{"serverCommand":["npx","-y","fs"]}]"#);
        assert_eq!(deny.blocked(&map), ["fs"]);
    }

    #[test]
    fn url_patterns_are_anchored_and_only_star_is_special() {
        assert!(url_matches("https://a/*", "https://a/"));
        assert!(url_matches("https://a/*", "https://a/b/c"));
        assert!(!url_matches("https://a/*", "https://ab/"));
        assert!(url_matches("*", ""));
        assert!(url_matches("a*b*c", "abc"));
        assert!(url_matches("a*b*c", "axxbyyc"));
        assert!(!url_matches("a*b*c", "axxbyycd"));
        assert!(!url_matches("a?c", "abc"));
        assert!(url_matches("a?c", "a?c"));
        assert!(!url_matches("ab*ba", "aba"), "the ends may not overlap");
    }

    #[test]
    fn malformed_rules_are_named_and_left_out() {
        let (rules, errors) = parse_rules(
            &parse(r#"[{"serverName":"a"},{"serverName":"b","serverUrl":"x"},{"serverCommand":[]},{"serverCommand":"npx"},3,{"other":1}]"#)
                .expect("json"),
        );
        assert_eq!(rules, [PolicyRule::Name("a".into())]);
        assert_eq!(errors.len(), 5);
        assert!(errors[0].starts_with("rule 1 "));
        let (rules, errors) = parse_rules(&parse(r#"{"serverName":"a"}"#).expect("json"));
        assert!(rules.is_empty());
        assert_eq!(errors.len(), 1);
    }
}
