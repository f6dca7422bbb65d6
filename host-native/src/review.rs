//! What a person is shown before a project-controlled server may start.
//!
//! An approval binds to the hash of the entry as it would run (`$VAR`s
//! expanded from the user's environment, SPEC §3.2). The review shows the
//! entry **as the repository wrote it**: every field that decides what runs
//! (command, args, cwd, URLs, env and header values), `${GITHUB_TOKEN}`
//! unexpanded with a note that it expands from the user's environment —
//! never the expanded secret — and, loudly, when the entry replaces one of the
//! user's own servers of the same name. Every byte is escaped for the
//! terminal ([`display::safe`](crate::display::safe)).

use std::fmt::Write as _;
use std::path::PathBuf;

use mcp_reconcile_kernel::identity::approval_hash;
use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::lsp::lsp_approval_hash;
use mcp_reconcile_kernel::{LayerSource, ServerConfig};

use crate::display::{decide_command, safe};
use crate::inputs::{ApprovalWriter, ClientApproval, Snapshot};

/// One gated server waiting for a decision, with everything its review shows.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ApprovalRequest {
    /// The server name.
    pub name: String,
    /// The entry as it would run: what a decision is bound to.
    pub config: ServerConfig,
    /// `approvalHash(config)`: the 64-hex hash the decision records.
    pub hash: String,
    /// The entry as its file wrote it (`$VAR`s unexpanded).
    pub written: ServerConfig,
    /// The file it comes from.
    pub file: PathBuf,
    /// A server of the user's (or the administrator's) with the same name
    /// that this entry replaces.
    pub replaces: Option<(LayerSource, ServerConfig)>,
    /// A language server from `.lsp.json` (SPEC §14.3): its own approvals file and hash.
    pub lsp: bool,
    /// What the entry would do with a stored OAuth login for its URL
    /// ([`crate::auth::review::review_line`]).
    pub oauth_login: Option<String>,
    /// The client files that approve it by name only (SPEC §15), each with who wrote it: said
    /// in the review, never an approval here.
    pub approved_by_name: Vec<ClientApproval>,
}

impl ApprovalRequest {
    /// The request for `name`, whose effective entry is `config`, from the
    /// snapshot the entry was assembled from.
    pub fn new(snapshot: &Snapshot, name: &str, config: &ServerConfig) -> Self {
        let origin = snapshot.origin(name);
        let source = origin.map(|o| o.source);
        let written = origin.map_or_else(|| config.clone(), |o| o.written.clone());
        let file = origin.map(|o| o.place()).unwrap_or_default();
        let replaces = snapshot
            .layers
            .iter()
            .filter(|layer| {
                !matches!(layer.source, LayerSource::Project | LayerSource::Workspace)
                    && Some(layer.source) != source
                    && !(layer.source == LayerSource::ServerCommand && layer.from_workspace)
            })
            .filter_map(|layer| layer.servers.get(name).map(|c| (layer.source, c.clone())))
            .max_by_key(|(source, _)| *source);
        ApprovalRequest {
            name: name.to_owned(),
            config: config.clone(),
            hash: approval_hash(config).0,
            written,
            file,
            replaces,
            lsp: false,
            oauth_login: crate::auth::review::review_line(&snapshot.oauth_tokens, name, config),
            approved_by_name: snapshot
                .client_approved
                .iter()
                .filter(|approved| approved.name == name || approved.name == "*")
                .cloned()
                .collect(),
        }
    }

    /// The request for the project language server `name` of `snapshot` (its `.lsp.json`
    /// entry), bound to `lspApprovalHash` of the entry as it would run.
    pub fn language_server(snapshot: &Snapshot, name: &str) -> Option<Self> {
        let entry = snapshot.lsp.get(name)?;
        let mut config = entry.config.clone();
        config.remove("scope");
        let mut written = snapshot
            .lsp_written
            .get(name)
            .map_or_else(|| config.clone(), |w| w.config.clone());
        written.remove("scope");
        Some(ApprovalRequest {
            name: name.to_owned(),
            hash: lsp_approval_hash(&entry.config).0,
            config: ServerConfig::new(config),
            written: ServerConfig::new(written),
            file: snapshot.lsp_json.clone(),
            replaces: None,
            lsp: true,
            oauth_login: None,
            approved_by_name: Vec::new(),
        })
    }

    /// The line after the review that says how to decide: the command that approves exactly
    /// this entry.
    pub fn hint_line(&self) -> String {
        format!(
            "! {} needs approval (from a project file): run `{}` with the same flags to approve exactly this entry\n",
            quoted(&self.name),
            self.approve_command()
        )
    }

    /// The multi-line review: what will run, from which file, whether it
    /// replaces a server of the user's, and the hash a decision binds to.
    pub fn review(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "? {}{} (from {}) wants to start:",
            if self.lsp { "language server " } else { "" },
            quoted(&self.name),
            safe(&self.file.to_string_lossy())
        );
        let written = &self.written;
        let expanded = &self.config;
        for key in ["command", "args", "cwd", "httpUrl", "url", "tcp", "type"] {
            if let Some(value) = written.get(key) {
                let note = expansion_note(value, expanded.get(key));
                let _ = writeln!(out, "    {key:<8} {}{note}", shown(value));
            }
        }
        for key in ["env", "headers"] {
            let Some(value) = written.get(key) else {
                continue;
            };
            let Value::Object(map) = value else {
                let _ = writeln!(out, "    {key:<8} {}", shown(value));
                continue;
            };
            let theirs = expanded.get(key).and_then(Value::as_object);
            for (i, (k, v)) in map.iter().enumerate() {
                let label = if i == 0 { key } else { "" };
                let note = expansion_note(v, theirs.and_then(|m| m.get(k)));
                let _ = writeln!(out, "    {label:<8} {}={}{note}", safe(k), shown(v));
            }
        }
        let shown_keys = [
            "command", "args", "cwd", "httpUrl", "url", "tcp", "type", "env", "headers", "scope",
        ];
        for (key, value) in written.object().iter() {
            if !shown_keys.contains(&key.as_str()) {
                let note = expansion_note(value, expanded.get(key));
                let _ = writeln!(out, "    {:<8} {}{note}", safe(key), shown(value));
            }
        }
        if let Some((source, replaced)) = &self.replaces {
            let _ = writeln!(
                out,
                "  !! it REPLACES your {} server of the same name ({}) — approving runs the project's entry instead of yours",
                source_label(*source),
                brief(replaced)
            );
        }
        if let Some(login) = &self.oauth_login {
            let _ = writeln!(out, "    login    {login}");
        }
        for line in secrets_sent(written, expanded) {
            let _ = writeln!(out, "  !! {line}");
        }
        for approval in &self.approved_by_name {
            let _ = writeln!(out, "    note     {}", by_name_note(approval));
        }
        let _ = writeln!(out, "    approval hash {}", self.hash);
        out
    }

    /// The command that approves exactly this entry, quoted for the shell.
    pub fn approve_command(&self) -> String {
        format!(
            "{} --hash {}",
            decide_command(
                if self.lsp { "approve --lsp" } else { "approve" },
                &self.name
            ),
            self.hash
        )
    }
}

/// What a review says of a by-name approval: who wrote it, and why it does not approve.
fn by_name_note(approval: &ClientApproval) -> String {
    let what = if approval.name == "*" {
        "sets enableAllProjectMcpServers (every project server)".to_owned()
    } else {
        format!("lists it in {}", safe(&approval.key))
    };
    let file = safe(&approval.file.to_string_lossy()).into_owned();
    match approval.written_by {
        ApprovalWriter::Repository => format!(
            "the repository's own {file} {what} — that is not an approval: the repository wrote \
             it, not you"
        ),
        ApprovalWriter::ProjectLocal => format!(
            "the project's {file} {what} — Claude Code writes that file when you approve there, \
             but it lies in the project and a download can bring one: not an approval here"
        ),
        ApprovalWriter::User => format!(
            "your own {file} {what}; that approval is not bound to the entry's content, so \
             mcp-reconcile asks for this exact entry"
        ),
    }
}

/// The lines that say which of the user's environment variables the entry sends to its URL,
/// by name, never their values: Codex's `bearer_token_env_var` (as the bearer token) and
/// `env_http_headers` (a header from each variable), and any header or URL whose written value
/// expands from the environment.
fn secrets_sent(written: &ServerConfig, expanded: &ServerConfig) -> Vec<String> {
    let Some((key, url)) = ["httpUrl", "url"]
        .iter()
        .find_map(|key| Some((*key, written.get(key).and_then(Value::as_str)?)))
    else {
        return Vec::new();
    };
    let mut sent = Vec::new();
    let mut in_url = Vec::new();
    changed_vars(&Value::from(url), expanded.get(key), &mut in_url);
    for var in in_url {
        sent.push(format!("{} (in the URL)", safe(&var)));
    }
    if let Some(Value::String(var)) = written.get("bearer_token_env_var") {
        sent.push(format!("{} (as its bearer token)", safe(var)));
    }
    if let Some(Value::Object(headers)) = written.get("env_http_headers") {
        for (header, var) in headers {
            if let Value::String(var) = var {
                sent.push(format!("{} (as header {})", safe(var), safe(header)));
            }
        }
    }
    if let Some(Value::Object(headers)) = written.get("headers") {
        let theirs = expanded.get("headers").and_then(Value::as_object);
        for (header, value) in headers {
            let mut names = Vec::new();
            changed_vars(value, theirs.and_then(|h| h.get(header)), &mut names);
            let names: Vec<String> = names.iter().map(|n| safe(n).into_owned()).collect();
            if !names.is_empty() {
                sent.push(format!("{} (in header {})", names.join(", "), safe(header)));
            }
        }
    }
    if sent.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "it SENDS the values of your environment variables {} to {} — approve only if that \
         server may have them",
        sent.join(", "),
        safe(&crate::redact::mask_url(url))
    )]
}

/// A name in double quotes, escaped.
pub fn quoted(name: &str) -> String {
    format!("\"{}\"", safe(name))
}

/// A JSON value as written, escaped for the terminal; strings in quotes,
/// arrays of strings as space-separated quoted words.
fn shown(value: &Value) -> String {
    match value {
        Value::Array(items) if items.iter().all(|v| matches!(v, Value::String(_))) => items
            .iter()
            .map(|v| safe(&v.to_json()).into_owned())
            .collect::<Vec<_>>()
            .join(" "),
        other => safe(&other.to_json()).into_owned(),
    }
}

/// `  ← expands from your environment: GITHUB_TOKEN` when the written value
/// differs from the one that runs (a `$VAR` was expanded).
fn expansion_note(written: &Value, expanded: Option<&Value>) -> String {
    if expanded.is_none_or(|e| e == written) {
        return String::new();
    }
    let mut names = Vec::new();
    changed_vars(written, expanded, &mut names);
    if names.is_empty() {
        return "  ← expands from your environment".to_owned();
    }
    let names: Vec<String> = names.iter().map(|n| safe(n).into_owned()).collect();
    format!("  ← expands from your environment: {}", names.join(", "))
}

/// The `$NAME` / `${NAME}` references in the parts of `written` that differ
/// from what runs (a `$1` left for a shell is not one of them).
fn changed_vars(written: &Value, expanded: Option<&Value>, out: &mut Vec<String>) {
    match (written, expanded) {
        (w, Some(e)) if w == e => {}
        (Value::Array(ws), Some(Value::Array(es))) if ws.len() == es.len() => ws
            .iter()
            .zip(es)
            .for_each(|(w, e)| changed_vars(w, Some(e), out)),
        (Value::Object(ws), Some(Value::Object(es))) => {
            ws.iter().for_each(|(k, w)| changed_vars(w, es.get(k), out))
        }
        (w, _) => collect_vars(w, out),
    }
}

/// The `$NAME` / `${NAME}` references in the strings of `value`.
fn collect_vars(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(at) = rest.find('$') {
                rest = &rest[at + 1..];
                let name = if let Some(braced) = rest.strip_prefix('{') {
                    braced.find('}').map(|end| &braced[..end])
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    Some(&rest[..end])
                };
                if let Some(name) = name.filter(|n| !n.is_empty()) {
                    if !out.iter().any(|n| n == name) {
                        out.push(name.to_owned());
                    }
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_vars(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_vars(v, out)),
        _ => {}
    }
}

fn source_label(source: LayerSource) -> &'static str {
    match source {
        LayerSource::User => "user",
        LayerSource::SystemDefaults => "system-defaults",
        LayerSource::System => "system",
        LayerSource::Extension => "extension",
        LayerSource::CliConfig => "--mcp-config",
        LayerSource::ServerCommand => "mcp.serverCommand",
        _ => "own",
    }
}

/// `command "x"` or `url "…"` of a replaced entry (no env, headers or args:
/// they may hold the user's secrets).
fn brief(config: &ServerConfig) -> String {
    for key in ["command", "httpUrl", "url", "tcp"] {
        if let Some(Value::String(s)) = config.get(key) {
            let shown = if key == "command" {
                s.clone()
            } else {
                crate::redact::mask_url(s)
            };
            return format!("{key} {}", safe(&Value::from(shown.as_str()).to_json()));
        }
    }
    "no transport".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn the_review_shows_what_runs_as_written_and_never_the_secret() {
        let request = ApprovalRequest {
            name: "git\u{1b}[2Jhub".into(),
            config: cfg(
                r#"{"command":"npx","args":["-y","srv","--t=s3cr3t-token"],"env":{"GITHUB_TOKEN":"s3cr3t-token","MODE":"x"},"headers":{"Authorization":"Bearer s3cr3t-token"},"timeout":5,"scope":"project"}"#,
            ),
            hash: "ab".repeat(32),
            written: cfg(
                r#"{"command":"npx","args":["-y","srv","--t=${GITHUB_TOKEN}"],"env":{"GITHUB_TOKEN":"${GITHUB_TOKEN}","MODE":"x"},"headers":{"Authorization":"Bearer $GITHUB_TOKEN"},"timeout":5,"scope":"project"}"#,
            ),
            file: PathBuf::from("/repo/.mcp.json"),
            replaces: Some((
                LayerSource::User,
                cfg(r#"{"command":"gh-mcp","env":{"T":"mine"}}"#),
            )),
            lsp: false,
            oauth_login: None,
            approved_by_name: Vec::new(),
        };
        let text = request.review();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("\"git\\e[2Jhub\""), "{text}");
        assert!(text.contains("\"--t=${GITHUB_TOKEN}\""), "{text}");
        assert!(
            text.contains(
                "GITHUB_TOKEN=\"${GITHUB_TOKEN}\"  ← expands from your environment: GITHUB_TOKEN"
            ),
            "{text}"
        );
        assert!(
            text.contains("Authorization=\"Bearer $GITHUB_TOKEN\"  ← expands"),
            "{text}"
        );
        assert!(text.contains("MODE=\"x\"\n"), "{text}");
        assert!(text.contains("timeout  5"), "{text}");
        assert!(text.contains("REPLACES your user server"), "{text}");
        assert!(text.contains("command \"gh-mcp\""), "{text}");
        assert!(!text.contains("mine"), "{text}");
        assert!(text.contains(&"ab".repeat(32)), "{text}");
        assert_eq!(
            request.approve_command(),
            format!(
                "mcp-reconcile approve $'git\\x1b[2Jhub' --hash {}",
                "ab".repeat(32)
            )
        );
    }

    /// An HTTP entry whose header or URL expands from the environment says so by name.
    #[test]
    fn the_review_names_the_variables_an_entry_sends_to_its_url() {
        let written = cfg(
            r#"{"httpUrl":"https://u:p@h.example/mcp?k=${KEY}","headers":{"Authorization":"Bearer ${TOKEN}","X":"plain"}}"#,
        );
        let expanded = cfg(
            r#"{"httpUrl":"https://u:p@h.example/mcp?k=k3y","headers":{"Authorization":"Bearer t0ken","X":"plain"}}"#,
        );
        let lines = secrets_sent(&written, &expanded);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(
            line.contains("KEY (in the URL)") && line.contains("TOKEN (in header Authorization)"),
            "{line}"
        );
        assert!(
            !line.contains("t0ken") && !line.contains("k3y") && !line.contains("u:p"),
            "{line}"
        );
        assert!(secrets_sent(
            &cfg(r#"{"command":"x","env":{"T":"${T}"}}"#),
            &cfg(r#"{"command":"x","env":{"T":"t"}}"#)
        )
        .is_empty());
    }
}
