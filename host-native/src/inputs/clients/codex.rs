//! Codex's `config.toml`: `[mcp_servers.NAME]` tables, and which projects the user trusts.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::entries;
use super::spec::ClientSpec;
use super::strategy::{How, Install};
use super::{ClientContent, ClientFile, Format};
use crate::inputs::host_env::{codex_home, HostEnv};

/// Codex's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "codex",
    title: "Codex",
    about: "Codex's config.toml files",
    help: "\
$CODEX_HOME/config.toml (~/.codex/), <project>/.codex/config.toml (only while the user's
config trusts the project), /etc/codex/config.toml, managed_config.toml and requirements.toml
(--system-settings FILE moves them beside FILE)",
    project_servers: ".codex/config.toml",
    files,
    install: Some(Install {
        how: How::Codex,
        stdio_type: false,
        lists_tools_once: true,
        // Codex passes its servers only a short list of variables.
        pass_env: &["CODEX_HOME"],
        afterwards: "Codex now starts only `reconcile`; your other servers carry `enabled = \
                     false` with a comment saying the gateway runs them, and it applies edits \
                     to them live. Tools appear as mcp__reconcile__SERVER__TOOL. A server added \
                     later with `codex mcp add` runs in Codex directly until you run \
                     `mcp-reconcile install codex` again.",
    }),
    ..ClientSpec::CLIENT
};

/// Codex's files, in merge order: each file's entries merge over the earlier ones'.
fn files(
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    // Codex merges its files field by field: each entry over the same name in the files
    // before it (the administrator's `config.toml`, then the user's). A merged project entry
    // is the project's — gated, approved as a whole; the managed file's entries merge over the
    // administrator's and the user's, never a project's.
    let file = |format, scope, path| {
        let mut file = ClientFile::new(format, scope, path);
        file.kind.merges_over = match (format, scope) {
            (Format::Codex, LayerSource::User) => &[LayerSource::SystemDefaults],
            (Format::Codex, LayerSource::Project | LayerSource::System) => {
                &[LayerSource::SystemDefaults, LayerSource::User]
            }
            _ => &[],
        };
        file
    };
    let codex_home = codex_home(env, "Codex's config.toml")?;
    let mut project_file = file(
        Format::Codex,
        LayerSource::Project,
        project.join(".codex/config.toml"),
    );
    project_file.kind.needs_trust = true;
    // The administrator's files: `/etc/codex` (`--system-settings FILE` moves them beside
    // FILE).
    let etc = managed_settings
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("/etc/codex"), Path::to_path_buf);
    Ok(vec![
        file(
            Format::Codex,
            LayerSource::SystemDefaults,
            etc.join("config.toml"),
        ),
        file(
            Format::Codex,
            LayerSource::User,
            codex_home.join("config.toml"),
        ),
        project_file,
        file(
            Format::Codex,
            LayerSource::System,
            etc.join("managed_config.toml"),
        ),
        file(
            Format::CodexRequirements,
            LayerSource::System,
            etc.join("requirements.toml"),
        ),
    ])
}

/// The comment `install codex` puts after the `enabled = false` it writes on every server the
/// gateway reaches: Codex leaves the server to the gateway, and this layout still runs it.
pub const CODEX_MARK: &str = "mcp-reconcile: reached through the gateway";

/// The servers whose `enabled = false` carries [`CODEX_MARK`].
fn marked_off(text: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let Some(servers) = doc
        .get("mcp_servers")
        .and_then(toml_edit::Item::as_table_like)
    else {
        return Vec::new();
    };
    servers
        .iter()
        .filter(|(_, item)| {
            item.as_table_like()
                .and_then(|t| t.get("enabled"))
                .and_then(toml_edit::Item::as_value)
                .and_then(|v| v.decor().suffix())
                .and_then(|s| s.as_str())
                .is_some_and(|s| s.contains(CODEX_MARK))
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// TOML as JSON: integers become doubles (SPEC §2), dates their text.
fn json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        #[allow(clippy::cast_precision_loss)]
        toml::Value::Integer(i) => Value::Number(*i as f64),
        toml::Value::Float(f) => Value::Number(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.iter().map(|(k, v)| (k.clone(), json(v))).collect())
        }
    }
}

/// One server table in this host's spelling: `url` is streamable HTTP (`httpUrl`), the bearer
/// token and header variables (`bearer_token_env_var`, `env_http_headers`) are read from the
/// session's environment into `headers` with `http_headers`, `enabled_tools` /
/// `disabled_tools` become `includeTools` / `excludeTools`, `enabled` is the layout's to
/// decide; every other field (`env_vars`, `startup_timeout_sec`, `required`, and the ones
/// Codex adds) stays as written and counts for identity — Codex 0.171 accepts unknown fields.
fn entry(ctx: &Context<'_>, table: &Object) -> Result<(Object, Object), String> {
    if table.contains_key("command") && table.contains_key("url") {
        return Err(
            "it has both \"command\" and \"url\" (Codex refuses the whole file then) \
                    — keep one"
                .into(),
        );
    }
    let mut written = table.clone();
    if let Some(url) = written.remove("url") {
        written.insert("httpUrl".into(), url);
    }
    let mut used = written.clone();
    let var = |name: &str| ctx.vars.get(name).filter(|v| !v.is_empty()).cloned();
    let mut headers = match used.remove("http_headers") {
        Some(Value::Object(h)) => h,
        None => Object::new(),
        Some(other) => {
            return Err(format!(
                "its \"http_headers\" must be a table, found {}",
                other.preview(40)
            ))
        }
    };
    if let Some(Value::Object(from_env)) = used.remove("env_http_headers") {
        for (header, name) in &from_env {
            if let Some(value) = name.as_str().and_then(var) {
                headers.insert(header.clone(), Value::String(value));
            }
        }
    }
    if let Some(name) = used.remove("bearer_token_env_var") {
        let Some(name) = name.as_str() else {
            return Err("its \"bearer_token_env_var\" must be a variable name".into());
        };
        let Some(token) = var(name) else {
            return Err(format!(
                "its \"bearer_token_env_var\" names {name}, which is not set — set it before \
                 the session starts"
            ));
        };
        headers.insert(
            "Authorization".into(),
            Value::String(format!("Bearer {token}")),
        );
    }
    if !headers.is_empty() {
        used.insert("headers".into(), Value::Object(headers));
    }
    for (from, to) in [
        ("enabled_tools", "includeTools"),
        ("disabled_tools", "excludeTools"),
    ] {
        if let Some(list) = used.remove(from) {
            used.insert(to.into(), list);
        }
    }
    used.remove("enabled");
    Ok((used, written))
}

/// A `config.toml`: its servers as a layer of kind `scope`, those switched off with
/// `enabled = false`, and whether it trusts the project (`[projects."<root>"] trust_level`).
pub(super) fn parse(
    text: &str,
    scope: LayerSource,
    ctx: &Context<'_>,
) -> Result<ClientContent, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let message = e.message().to_owned();
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("not valid TOML (line {line}): {message}")
            }
            None => format!("not valid TOML: {message}"),
        }
    })?;
    let Value::Object(top) = json(&toml::Value::Table(table)) else {
        unreachable!("a table is an object")
    };
    let mut out = ClientContent::default();
    match top.get("mcp_servers") {
        None => {}
        Some(Value::Object(map)) => {
            let left_to_the_gateway = marked_off(text);
            out.gateway_installed = map.values().any(installed_gateway);
            out.left_to_gateway.clone_from(&left_to_the_gateway);
            out.disabled = map
                .iter()
                .filter(|(_, t)| {
                    t.as_object().and_then(|t| t.get("enabled")) == Some(&Value::Bool(false))
                })
                .map(|(name, _)| name.clone())
                .filter(|name| !left_to_the_gateway.contains(name))
                .collect();
            let (used, written) = entries(map, "[mcp_servers]", &mut out.entry_errors, |t| {
                entry(ctx, t)
            });
            out.layers.push((scope, used, written));
        }
        Some(_) => out
            .entry_errors
            .push("mcp_servers must be a table of server tables — no servers are loaded".into()),
    }
    let trusted = top
        .get("projects")
        .and_then(Value::as_object)
        .and_then(|projects| {
            [ctx.project, ctx.project_given]
                .iter()
                .find_map(|dir| projects.get(&dir.to_string_lossy()))
        })
        .and_then(Value::as_object)
        .and_then(|p| p.get("trust_level"))
        .and_then(Value::as_str)
        == Some("trusted");
    out.trusts_project = trusted;
    Ok(out)
}

/// Whether a server table is the gateway entry `install` wrote (its `env` carries the mark).
fn installed_gateway(table: &Value) -> bool {
    table
        .as_object()
        .and_then(|t| t.get("env"))
        .and_then(Value::as_object)
        .is_some_and(|env| env.contains_key(crate::inputs::INSTALLED_MARK))
}

/// The servers Codex runs itself although the gateway is installed in it: added after
/// `install codex` (with `codex mcp add`, or by hand), so not switched off and marked. The
/// gateway leaves them to Codex — run by both, each would run twice and offer its tools
/// twice — until `install codex` hands them over. Each with the file that names it.
pub(super) fn run_by_codex(read: &[(PathBuf, ClientContent)]) -> Vec<(PathBuf, String)> {
    if !read.iter().any(|(_, c)| c.gateway_installed) {
        return Vec::new();
    }
    let off = |name: &str| {
        read.iter().any(|(_, c)| {
            c.disabled.iter().any(|n| n == name) || c.left_to_gateway.iter().any(|n| n == name)
        })
    };
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for (path, content) in read {
        for (_, used, _) in &content.layers {
            for (name, config) in used.iter() {
                let gateway = installed_gateway(&Value::Object(config.object().clone()));
                if !gateway && !off(name) && !out.iter().any(|(_, n)| n == name) {
                    out.push((path.clone(), name.clone()));
                }
            }
        }
    }
    out
}

/// What `requirements.toml` binds a server's name to (`identity`): its stdio `command`, or
/// its streamable HTTP `url`, compared exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Identity {
    Command(String),
    Url(String),
}

/// `/etc/codex/requirements.toml`: its `[mcp_servers.NAME.identity]` allow list (`None` when
/// the file sets none). A listed server whose requirement this layout cannot read is left off
/// the list, which keeps it off, and reported.
pub(super) fn requirements(text: &str) -> Result<ClientContent, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message()))?;
    let mut out = ClientContent::default();
    let Some(servers) = table.get("mcp_servers") else {
        return Ok(out);
    };
    let Some(servers) = servers.as_table() else {
        return Err("mcp_servers must be a table of server requirements".into());
    };
    let mut required = Vec::new();
    for (name, requirement) in servers {
        let identity = requirement
            .get("identity")
            .and_then(toml::Value::as_table)
            .and_then(|identity| {
                match (
                    identity.get("command").and_then(toml::Value::as_str),
                    identity.get("url").and_then(toml::Value::as_str),
                ) {
                    (Some(command), None) => Some(Identity::Command(command.to_owned())),
                    (None, Some(url)) => Some(Identity::Url(url.to_owned())),
                    _ => None,
                }
            });
        match identity {
            Some(identity) => required.push((name.clone(), identity)),
            None => out.entry_errors.push(format!(
                "[mcp_servers.{name}] has no identity this layout reads (identity = {{ command \
                 = \"…\" }} or {{ url = \"…\" }}): \"{name}\" stays off"
            )),
        }
    }
    out.required = Some(required);
    Ok(out)
}

/// The servers of `read` the administrator's allow list keeps off: not listed, or listed with
/// another identity than the entry that wins the name (the highest layer; the last file among
/// equals) — as Codex turns them off.
pub(super) fn not_required(
    read: &[(std::path::PathBuf, ClientContent)],
    required: &[(String, Identity)],
) -> Vec<String> {
    let mut winners: std::collections::BTreeMap<&str, (LayerSource, &Object)> =
        std::collections::BTreeMap::new();
    for (_, content) in read {
        for (source, used, _) in &content.layers {
            for (name, config) in used.iter() {
                let wins = winners.get(name.as_str()).is_none_or(|(s, _)| source >= s);
                if wins {
                    winners.insert(name, (*source, config.object()));
                }
            }
        }
    }
    winners
        .into_iter()
        .filter(|(name, (_, entry))| {
            let matches = |identity: &Identity| match identity {
                Identity::Command(command) => {
                    entry.get("command").and_then(Value::as_str) == Some(command.as_str())
                }
                Identity::Url(url) => {
                    entry.get("httpUrl").and_then(Value::as_str) == Some(url.as_str())
                }
            };
            !required
                .iter()
                .any(|(allowed, identity)| allowed == name && matches(identity))
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A server added to Codex after `install codex` is Codex's own until install hands it
    /// over: the gateway does not run it a second time. Without the gateway nothing changes.
    #[test]
    fn a_server_added_after_install_is_left_to_codex() {
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        let text = format!(
            r#"
            [mcp_servers.reconcile]
            command = "/bin/mcp-reconcile"
            args = ["serve", "--layout", "codex"]
            env = {{ MCP_RECONCILE_INSTALLED = "codex" }}

            [mcp_servers.handed]
            command = "handed"
            enabled = false # {CODEX_MARK}

            [mcp_servers.own_switch]
            command = "off"
            enabled = false

            [mcp_servers.added_later]
            command = "later"
            "#
        );
        let content = parse(&text, LayerSource::User, &ctx).expect("toml");
        let read = vec![(PathBuf::from("/home/u/.codex/config.toml"), content)];
        let run = run_by_codex(&read);
        assert_eq!(
            run,
            [(
                PathBuf::from("/home/u/.codex/config.toml"),
                "added_later".to_owned()
            )]
        );
        let without = text.replace("MCP_RECONCILE_INSTALLED", "OTHER");
        let content = parse(&without, LayerSource::User, &ctx).expect("toml");
        assert!(run_by_codex(&[(PathBuf::from("/c"), content)]).is_empty());
    }

    #[test]
    fn server_tables_map_onto_this_hosts_fields() {
        let vars = BTreeMap::from([
            ("GH_TOKEN".to_owned(), "secret".to_owned()),
            ("TENANT".to_owned(), "acme".to_owned()),
        ]);
        let ctx = Context::at_p(&vars);
        let text = r#"
            [mcp_servers.fs]
            command = "npx"
            args = ["-y", "server-fs"]
            startup_timeout_sec = 20
            enabled_tools = ["read"]

            [mcp_servers.gh]
            url = "https://api.example.com/mcp"
            bearer_token_env_var = "GH_TOKEN"
            env_http_headers = { "X-Tenant" = "TENANT", "X-None" = "UNSET" }

            [mcp_servers.off]
            command = "off"
            enabled = false

            [mcp_servers.both]
            command = "x"
            url = "https://x/mcp"

            [projects."/p"]
            trust_level = "trusted"
        "#;
        let content = parse(text, LayerSource::User, &ctx).expect("toml");
        let (_, used, written) = &content.layers[0];
        assert_eq!(used.keys().collect::<Vec<_>>(), ["fs", "gh", "off"]);
        assert_eq!(
            Value::Object(used.get("fs").expect("fs").object().clone()).to_json(),
            r#"{"command":"npx","args":["-y","server-fs"],"startup_timeout_sec":20,"includeTools":["read"]}"#
        );
        assert_eq!(
            Value::Object(used.get("gh").expect("gh").object().clone()).to_json(),
            r#"{"httpUrl":"https://api.example.com/mcp","headers":{"X-Tenant":"acme","Authorization":"Bearer secret"}}"#
        );
        assert!(
            !Value::Object(written.get("gh").expect("gh").object().clone())
                .to_json()
                .contains("secret"),
            "the review shows the variable's name, not the token"
        );
        assert_eq!(content.disabled, ["off"]);
        assert!(content.entry_errors[0].contains("\"both\""));
        assert!(content.trusts_project);
    }

    #[test]
    fn invalid_toml_names_the_line() {
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        let err =
            parse("[mcp_servers.a]\ncommand = \n", LayerSource::User, &ctx).expect_err("an error");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn requirements_bind_names_to_identities_and_say_what_they_cannot_read() {
        let content = requirements(
            "[mcp_servers.a.identity]\ncommand = \"x\"\n[mcp_servers.b.identity]\nurl = \"https://b\"\n[mcp_servers.c]\nmatch = \"?\"\n",
        )
        .expect("parses");
        assert_eq!(
            content.required,
            Some(vec![
                ("a".to_owned(), Identity::Command("x".into())),
                ("b".to_owned(), Identity::Url("https://b".into())),
            ])
        );
        assert!(content.entry_errors[0].contains("\"c\" stays off"));
        assert_eq!(
            requirements("allowed_sandbox_modes = []\n")
                .expect("parses")
                .required,
            None
        );
    }
}
