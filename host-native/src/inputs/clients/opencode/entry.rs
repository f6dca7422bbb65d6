//! OpenCode's server entries in this host's keys. V1 (`mcp.NAME`, `McpLocalConfig` /
//! `McpRemoteConfig`): `type` `local` (`command`: one argv array, `cwd`, `environment`) or
//! `remote` (`url`, `headers`, `oauth`), `enabled`, `timeout` (ms, for connecting and for each
//! request); V2 (`mcp.servers.NAME`, `ConfigV2.MCP.Local` / `Remote`): the same with
//! `disabled` for `enabled` and `timeout: {startup, request}`. A remote server is streamable
//! HTTP falling back to SSE, as OpenCode tries them.

use mcp_reconcile_kernel::{Object, Servers, Value};

use super::super::normalize::entries;
use super::super::ClientContent;
use super::vars::At;

/// This host's keys an OpenCode entry may carry (OpenCode ignores keys it does not know).
const OWN_KEYS: [&str; 2] = ["share", "lazy"];

/// Where V1 keeps OpenCode's V2 servers.
const V2_KEY: &str = "servers";

/// The servers of an `mcp` object, as used and as written; switched-off names go to
/// `out.disabled`, refused entries to `out.entry_errors`.
pub(super) fn all(map: &Object, at: &At<'_>, out: &mut ClientContent) -> (Servers, Servers) {
    let v2 = match map.get(V2_KEY) {
        Some(Value::Object(servers)) if !v1_like(servers) => Some(servers),
        _ => None,
    };
    let mut v1 = Object::new();
    for (name, value) in map {
        if v2.is_some() && name == V2_KEY {
            continue;
        }
        // `mcp.timeout: {startup, request, …}` is V2's default for every server, not a server.
        if name == "timeout" && value.as_object().is_some_and(|t| !t.contains_key("type")) {
            continue;
        }
        match value.as_object() {
            Some(entry) if switch_only(entry) => {
                if entry.get("enabled") == Some(&Value::Bool(false)) {
                    out.disabled.push(name.clone());
                }
            }
            _ => {
                v1.insert(name.clone(), value.clone());
            }
        }
    }
    let fresh: Object = v2
        .into_iter()
        .flatten()
        .filter(|(name, _)| !v1.contains_key(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let mut used = Servers::new();
    let mut written = Servers::new();
    for (map, where_) in [(&v1, "mcp"), (&fresh, "mcp.servers")] {
        let (u, w) = entries(map, where_, &mut out.entry_errors, |entry| one(entry, at));
        out.disabled.extend(switched_off(map));
        used.extend(u);
        written.extend(w);
    }
    (used, written)
}

/// The names whose entry is switched off (V1 `enabled: false`, V2 `disabled: true`).
fn switched_off(map: &Object) -> Vec<String> {
    map.iter()
        .filter(|(_, value)| value.as_object().is_some_and(is_off))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Whether an entry is switched off.
fn is_off(entry: &Object) -> bool {
    entry.get("enabled") == Some(&Value::Bool(false))
        || entry.get("disabled") == Some(&Value::Bool(true))
}

/// OpenCode's test whether `mcp.servers` is a V1 server named `servers` (its `type` or
/// `enabled` is a scalar) rather than V2's map of servers.
fn v1_like(servers: &Object) -> bool {
    ["type", "enabled"].iter().any(|key| {
        servers
            .get(key)
            .is_some_and(|v| !matches!(v, Value::Object(_)))
    })
}

/// V1's switch-only entry (`{"enabled": false}`, no `type`): it turns off a server another
/// file defines.
fn switch_only(entry: &Object) -> bool {
    !entry.contains_key("type") && entry.keys().all(|key| key == "enabled")
}

/// One entry, as used (variables expanded) and as written, both in this host's keys.
fn one(entry: &Object, at: &At<'_>) -> Result<(Object, Object), String> {
    let written = convert(entry, at.ctx.project)?;
    let used = convert(&at.expand(entry)?, at.ctx.project)?;
    Ok((used, written))
}

/// An entry in this host's keys, or why it cannot be started.
fn convert(entry: &Object, project: &std::path::Path) -> Result<Object, String> {
    let mut out = Object::new();
    match entry.get("type") {
        Some(Value::String(kind)) if kind == "local" => local(entry, project, &mut out)?,
        Some(Value::String(kind)) if kind == "remote" => remote(entry, &mut out)?,
        None | Some(Value::Null) => {
            return Err("it has no \"type\" — OpenCode requires \"local\" or \"remote\"".into())
        }
        Some(other) => {
            return Err(format!(
                "its \"type\" is {}, not \"local\" or \"remote\"",
                other.preview(40)
            ))
        }
    }
    if let Some(ms) = timeout(entry.get("timeout")) {
        out.insert("timeout".into(), Value::Number(ms));
    }
    // This host's own keys, which OpenCode's schema ignores: who shares the server's process
    // and whether it starts only when called (DAEMON.md).
    for key in OWN_KEYS {
        if let Some(value) = entry.get(key) {
            out.insert(key.into(), value.clone());
        }
    }
    Ok(out)
}

/// A local server: `command` is the program and its arguments in one array; `cwd` relative
/// to the project (OpenCode resolves it from the workspace directory).
fn local(entry: &Object, project: &std::path::Path, out: &mut Object) -> Result<(), String> {
    let argv = match entry.get("command") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>(),
        _ => None,
    };
    let Some((program, args)) = argv.as_deref().and_then(<[String]>::split_first) else {
        return Err(
            "its \"command\" must be an array of strings, the program first (OpenCode runs \
             [\"npx\", \"-y\", \"server\"])"
                .into(),
        );
    };
    if program.is_empty() {
        return Err("its \"command\" starts with an empty program".into());
    }
    out.insert("command".into(), Value::from(program.as_str()));
    if !args.is_empty() {
        let args = args.iter().map(|a| Value::from(a.as_str())).collect();
        out.insert("args".into(), Value::Array(args));
    }
    if let Some(env) = entry.get("environment") {
        out.insert("env".into(), strings(env, "environment")?);
    }
    match entry.get("cwd") {
        None | Some(Value::Null) => {}
        Some(Value::String(cwd)) => {
            let cwd = project.join(cwd).to_string_lossy().into_owned();
            out.insert("cwd".into(), Value::from(cwd));
        }
        Some(other) => {
            return Err(format!(
                "its \"cwd\" must be a string, found {}",
                other.preview(40)
            ))
        }
    }
    Ok(())
}

/// A remote server: streamable HTTP with OpenCode's fallback to SSE; `headers`; `oauth` in
/// this host's keys (`false`: none).
fn remote(entry: &Object, out: &mut Object) -> Result<(), String> {
    let Some(Value::String(url)) = entry.get("url") else {
        return Err("its \"type\" is remote but it has no \"url\"".into());
    };
    out.insert("httpUrl".into(), Value::from(url.as_str()));
    out.insert(crate::transport::SSE_FALLBACK.into(), Value::Bool(true));
    if let Some(headers) = entry.get("headers") {
        out.insert("headers".into(), strings(headers, "headers")?);
    }
    if let Some(Value::Object(oauth)) = entry.get("oauth") {
        out.insert("oauth".into(), Value::Object(oauth_keys(oauth)));
    }
    Ok(())
}

/// OpenCode's `oauth` (V1 camelCase or V2 snake_case) as this host's.
fn oauth_keys(oauth: &Object) -> Object {
    let text = |v1: &str, v2: &str| {
        oauth
            .get(v1)
            .or_else(|| oauth.get(v2))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mut out = Object::new();
    out.insert("enabled".into(), Value::Bool(true));
    for (key, v1, v2) in [
        ("clientId", "clientId", "client_id"),
        ("clientSecret", "clientSecret", "client_secret"),
        ("redirectUri", "redirectUri", "redirect_uri"),
    ] {
        if let Some(value) = text(v1, v2) {
            out.insert(key.into(), Value::from(value.as_str()));
        }
    }
    let port = oauth
        .get("callbackPort")
        .or_else(|| oauth.get("callback_port"));
    if let (false, Some(Value::Number(port))) = (out.contains_key("redirectUri"), port) {
        let uri = format!("http://127.0.0.1:{port}/mcp/oauth/callback");
        out.insert("redirectUri".into(), Value::from(uri.as_str()));
    }
    if let Some(scope) = text("scope", "scope") {
        let scopes = scope.split_whitespace().map(Value::from).collect();
        out.insert("scopes".into(), Value::Array(scopes));
    }
    out
}

/// OpenCode's per-server timeout in ms: V1's number, or V2's `timeout.request`.
fn timeout(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(ms) if *ms > 0.0 => Some(*ms),
        Value::Object(t) => match t.get("request") {
            Some(Value::Number(ms)) if *ms > 0.0 => Some(*ms),
            _ => None,
        },
        _ => None,
    }
}

/// An object of string values (`environment`, `headers`), or why not.
fn strings(value: &Value, key: &str) -> Result<Value, String> {
    match value {
        Value::Object(map) if map.values().all(|v| matches!(v, Value::String(_))) => {
            Ok(value.clone())
        }
        other => Err(format!(
            "its \"{key}\" must be an object of strings, found {}",
            other.preview(40)
        )),
    }
}
