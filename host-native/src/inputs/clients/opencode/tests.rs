use std::collections::BTreeMap;

use super::*;

fn top(text: &str) -> Object {
    mcp_reconcile_kernel::json::parse_jsonc(text)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .expect("object")
}

fn parsed(text: &str, vars: &[(&str, &str)], dir: &Path) -> ClientContent {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let ctx = Context::at_p(&vars);
    parse(
        &top(text),
        &dir.join("opencode.json"),
        LayerSource::Project,
        &ctx,
    )
}

fn json(content: &ClientContent, name: &str, written: bool) -> String {
    let (_, used, as_written) = &content.layers[0];
    let servers = if written { as_written } else { used };
    Value::Object(servers.get(name).expect(name).object().clone()).to_json()
}

/// V1 and V2 entries become this host's keys: `command` split into program and arguments,
/// `environment` as `env`, a remote server streamable HTTP with the SSE fallback, both
/// switches, and a V1 entry winning a name V2 also defines.
#[test]
fn v1_and_v2_entries_map_onto_this_hosts_keys() {
    let content = parsed(
        r#"{"mcp": {
            "fs": {"type": "local", "command": ["npx", "-y", "fs"], "environment": {"A": "1"},
                   "timeout": 9000},
            "off": {"type": "local", "command": ["x"], "enabled": false},
            "toggle": {"enabled": false},
            "both": {"type": "local", "command": ["v1"]},
            "servers": {
                "web": {"type": "remote", "url": "https://e.x/mcp", "headers": {"H": "v"},
                        "oauth": {"client_id": "c", "scope": "a b"}},
                "quiet": {"type": "local", "command": ["q"], "disabled": true},
                "both": {"type": "local", "command": ["v2"]}
            }
        }}"#,
        &[],
        Path::new("/p"),
    );
    assert!(
        content.entry_errors.is_empty(),
        "{:?}",
        content.entry_errors
    );
    assert_eq!(
        json(&content, "fs", false),
        r#"{"command":"npx","args":["-y","fs"],"env":{"A":"1"},"timeout":9000}"#
    );
    assert_eq!(
        json(&content, "web", false),
        r#"{"httpUrl":"https://e.x/mcp","sseFallback":true,"headers":{"H":"v"},"oauth":{"enabled":true,"clientId":"c","scopes":["a","b"]}}"#
    );
    assert_eq!(json(&content, "both", false), r#"{"command":"v1"}"#);
    let mut off = content.disabled.clone();
    off.sort();
    assert_eq!(off, ["off", "quiet", "toggle"]);
    assert!(!content.layers[0].1.contains_key("toggle"));
}

/// A missing or unknown `type`, and a `command` that is not an argv array, are that entry's
/// error; the other entries load.
#[test]
fn an_entry_without_its_type_is_its_own_error() {
    let content = parsed(
        r#"{"mcp": {
            "untyped": {"command": ["x"]},
            "ws": {"type": "websocket", "url": "ws://x"},
            "string": {"type": "local", "command": "npx -y fs"},
            "good": {"type": "local", "command": ["ok"]}
        }}"#,
        &[],
        Path::new("/p"),
    );
    let errors = content.entry_errors.join("\n");
    assert_eq!(content.entry_errors.len(), 3, "{errors}");
    assert!(errors.contains("\"untyped\"") && errors.contains("requires \"local\" or \"remote\""));
    assert!(errors.contains("\"ws\"") && errors.contains("\"string\""));
    assert_eq!(content.layers[0].1.keys().collect::<Vec<_>>(), ["good"]);
}

/// `{env:}` and `{file:}` are expanded in what runs (the file relative to the config file,
/// trimmed) and kept as written in what a review shows; a `{file:}` that is not a regular
/// file is that entry's error, without waiting on it.
#[test]
fn variables_expand_into_what_runs_and_stay_as_written_for_review() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("token"), "s3cret\n").expect("write");
    nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
    let content = parsed(
        r#"{"mcp": {
            "a": {"type": "local", "command": ["x", "{env:ARG}{env:NONE}"],
                  "environment": {"T": "{file:token}"}},
            "b": {"type": "local", "command": ["x"], "environment": {"T": "{file:fifo}"}}
        }}"#,
        &[("ARG", "v")],
        dir.path(),
    );
    assert_eq!(
        json(&content, "a", false),
        r#"{"command":"x","args":["v"],"env":{"T":"s3cret"}}"#
    );
    assert_eq!(
        json(&content, "a", true),
        r#"{"command":"x","args":["{env:ARG}{env:NONE}"],"env":{"T":"{file:token}"}}"#
    );
    let errors = content.entry_errors.join("\n");
    assert!(
        errors.contains("\"b\"") && errors.contains("not a regular file"),
        "{errors}"
    );
}
