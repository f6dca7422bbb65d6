//! The `mcpServers` family: clients whose file is `{"mcpServers": {NAME: entry}}` in the
//! Claude Desktop shape, each with its own spellings (Kiro, Cline, Windsurf, Junie, Roo Code).
//! One parser ([`parse`]) reads them all from a small description per client ([`Family`]): the
//! top key, the per-server off switch, the disabled-tools key (this host's `excludeTools`),
//! URL key aliases, what a bare `url` means, the `type` spellings it takes, its variable
//! syntax, and the keys that are the client's own (tool-call prompts, timeouts) and change
//! nothing about what runs, so an edit of them neither restarts a server nor asks again.

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::{entries, transport, BareUrl};
use super::ClientContent;

/// What a `url` without a `type` means in a family client's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Url {
    /// Streamable HTTP (Kiro, Windsurf, Junie).
    Http,
    /// Legacy SSE (Cline: `type ?? "sse"`).
    Sse,
    /// An error: the client asks for the `type` (Roo Code).
    Required,
}

/// An entry's strings expanded as the client expands them (the message says why an entry
/// cannot be): what runs, and what the approval hash is taken of.
pub(super) type Expand = fn(&Context<'_>, &Object) -> Result<Object, String>;

/// One client of the family: how its file spells what this host reads.
pub(super) struct Family {
    /// The client's name, in messages.
    pub(super) client: &'static str,
    /// The key its servers are under.
    pub(super) key: &'static str,
    /// A server's own off switch: `true` under this key keeps it off (`None`: the client has
    /// none).
    pub(super) off: Option<&'static str>,
    /// The key listing tools the client hides (this host's `excludeTools`).
    pub(super) disabled_tools: Option<&'static str>,
    /// Other spellings of `url` (Windsurf's `serverUrl`), taken when `url` is absent.
    pub(super) url_aliases: &'static [&'static str],
    /// What a bare `url` means.
    pub(super) bare_url: Url,
    /// Other spellings of `type` (Cline's legacy `transportType`, where `http` means
    /// streamable HTTP), taken when `type` is absent.
    pub(super) type_aliases: &'static [&'static str],
    /// The `type` values the client starts (`None`: every spelling this host knows).
    pub(super) types: Option<&'static [&'static str]>,
    /// A key whose object holds the transport (Cline's `{"transport": {"type": …}}` form),
    /// flattened into the entry.
    pub(super) nested: Option<&'static str>,
    /// Its variable syntax (`None`: values are passed as written).
    pub(super) expand: Option<Expand>,
    /// Keys that are the client's own and change nothing here (left out of what runs).
    pub(super) own_keys: &'static [&'static str],
}

/// A family client's file: its servers as one layer of kind `scope`, those switched off
/// listed in `disabled`.
pub(super) fn parse(
    family: &Family,
    top: &Object,
    scope: LayerSource,
    ctx: &Context<'_>,
) -> ClientContent {
    let key = family.key;
    let mut out = ClientContent::default();
    match top.get(key) {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            if let Some(off) = family.off {
                out.disabled = map
                    .iter()
                    .filter(|(_, e)| {
                        e.as_object().and_then(|e| e.get(off)) == Some(&Value::Bool(true))
                    })
                    .map(|(name, _)| name.clone())
                    .collect();
            }
            let (used, written) = entries(map, key, &mut out.entry_errors, |object| {
                entry(family, ctx, object)
            });
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "{key} must be an object of server entries, found {} — no servers are loaded from it",
            other.preview(60)
        )),
    }
    out
}

/// One entry, as used and as written: the transport normalized (both), variables expanded
/// and the client's own keys left out (what runs).
fn entry(family: &Family, ctx: &Context<'_>, object: &Object) -> Result<(Object, Object), String> {
    let spelled = spelling(family, object.clone())?;
    let written = transport(spelled.clone(), BareUrl::Http)?;
    let expanded = match family.expand {
        Some(expand) => expand(ctx, &spelled)?,
        None => spelled,
    };
    let mut used = transport(expanded, BareUrl::Http)?;
    for key in family.own_keys.iter().chain(&family.off) {
        used.remove(key);
    }
    if let Some(tools) = family.disabled_tools.and_then(|key| used.remove(key)) {
        used.insert("excludeTools".into(), tools);
    }
    Ok((used, written))
}

/// `object` in the shared spelling `transport` reads: the nested transport flattened, the
/// aliases of `url` and `type` taken, the client's `type` values checked, and a bare `url`
/// given the type it has in this client.
fn spelling(family: &Family, mut object: Object) -> Result<Object, String> {
    if let Some(nested) = family.nested {
        match object.remove(nested) {
            None => {}
            Some(Value::Object(inner)) => {
                for (key, value) in inner {
                    if !object.contains_key(&key) {
                        object.insert(key, value);
                    }
                }
            }
            Some(other) => {
                return Err(format!(
                    "its \"{nested}\" must be an object, found {}",
                    other.preview(40)
                ))
            }
        }
    }
    // The client's own `type` values; an alias carries its own (Cline's `transportType`
    // also takes `http`).
    if let (Some(types), Some(Value::String(kind))) = (family.types, object.get("type")) {
        if !types.contains(&kind.as_str()) {
            return Err(format!(
                "its \"type\" {} is not one {} starts ({})",
                Value::from(kind.as_str()).to_json(),
                family.client,
                types.join(", ")
            ));
        }
    }
    take_alias(&mut object, "url", family.url_aliases);
    take_alias(&mut object, "type", family.type_aliases);
    let bare_url =
        !object.contains_key("type") && matches!(object.get("url"), Some(Value::String(_)));
    match family.bare_url {
        Url::Sse if bare_url => {
            object.insert("type".into(), Value::from("sse"));
        }
        Url::Required if bare_url => {
            return Err(format!(
                "it has a \"url\" but no \"type\" — {} requires one: add \"type\" ({})",
                family.client,
                family.types.unwrap_or(&["sse"]).join(", ")
            ))
        }
        _ => {}
    }
    Ok(object)
}

/// The first of `aliases` present moves to `key` when `key` is absent (the others stay, and
/// are the client's own business).
fn take_alias(object: &mut Object, key: &str, aliases: &[&str]) {
    if object.contains_key(key) {
        return;
    }
    if let Some(value) = aliases.iter().find_map(|alias| object.remove(alias)) {
        object.insert(key.into(), value);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const PLAIN: Family = Family {
        client: "Test",
        key: "mcpServers",
        off: Some("disabled"),
        disabled_tools: Some("disabledTools"),
        url_aliases: &["serverUrl"],
        bare_url: Url::Sse,
        type_aliases: &["transportType"],
        types: Some(&["stdio", "sse", "streamableHttp"]),
        nested: Some("transport"),
        expand: None,
        own_keys: &["autoApprove"],
    };

    fn parsed(family: &Family, text: &str) -> ClientContent {
        let top = mcp_reconcile_kernel::json::parse_jsonc(text)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .expect("object");
        let vars = BTreeMap::new();
        parse(family, &top, LayerSource::User, &Context::at_p(&vars))
    }

    fn used(content: &ClientContent, name: &str) -> String {
        let (_, used, _) = &content.layers[0];
        Value::Object(used.get(name).expect("entry").object().clone()).to_json()
    }

    /// Every alias a family client spells differently lands on this host's keys: the nested
    /// transport, `serverUrl`, `transportType`, a bare `url` as the client reads it, the off
    /// switch and the client's own keys left out of what runs.
    #[test]
    fn each_spelling_lands_on_this_hosts_keys() {
        let content = parsed(
            &PLAIN,
            r#"{"mcpServers": {
                "nested": {"transport": {"type": "stdio", "command": "x"}, "disabled": false},
                "windsurf": {"serverUrl": "https://w/mcp", "transportType": "http"},
                "bare": {"url": "https://b/sse", "autoApprove": ["t"]},
                "off": {"command": "y", "disabled": true, "disabledTools": ["a"]},
                "ws": {"type": "ws", "url": "ws://x"}
            }}"#,
        );
        assert_eq!(content.disabled, ["off"]);
        assert_eq!(used(&content, "nested"), r#"{"command":"x"}"#);
        assert_eq!(used(&content, "windsurf"), r#"{"httpUrl":"https://w/mcp"}"#);
        assert_eq!(used(&content, "bare"), r#"{"url":"https://b/sse"}"#);
        assert_eq!(
            used(&content, "off"),
            r#"{"command":"y","excludeTools":["a"]}"#
        );
        assert!(
            content.entry_errors[0].contains("\"ws\"") && content.entry_errors[0].contains("Test"),
            "{:?}",
            content.entry_errors
        );
    }

    /// A key that is not an object of entries is reported, and nothing is loaded from it.
    #[test]
    fn a_top_key_of_the_wrong_shape_is_reported() {
        let content = parsed(&PLAIN, r#"{"mcpServers": []}"#);
        assert!(content.layers.is_empty());
        assert!(content.entry_errors[0].contains("mcpServers must be an object"));
    }
}
