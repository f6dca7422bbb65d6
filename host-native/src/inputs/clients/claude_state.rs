//! Claude Code's `~/.claude.json`, which grows with every project's history (users report
//! 15–65 MB), read for the two parts a session needs without building the whole document:
//! the user-scope `mcpServers` and the entries of `projects` this session could be keyed by.
//! The rest is skipped unparsed (`serde_json`'s `RawValue`); the parts kept are parsed as
//! every input is ([`json::parse`]: JavaScript semantics).

use std::borrow::Cow;
use std::collections::BTreeMap;

use mcp_reconcile_kernel::json::{self, Object, Value};
use serde_json::value::RawValue;

use super::expand::Context;

/// The top level, as far as it is read.
#[derive(serde::Deserialize)]
struct Top<'a> {
    #[serde(rename = "mcpServers", borrow, default)]
    mcp_servers: Option<&'a RawValue>,
    #[serde(borrow, default)]
    projects: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
}

/// The file reduced to what `claude::state` reads: `mcpServers`, and `projects` holding only
/// the keys of this project (its git root, real path, path as given). `None` when the text is
/// not plain JSON in that shape (comments, a duplicate key, `projects` not an object): the
/// caller then parses it whole, and says what is wrong as it does for every file.
pub(super) fn parts(text: &str, ctx: &Context<'_>) -> Option<Object> {
    let top: Top<'_> = serde_json::from_str(text).ok()?;
    let mut out = Object::new();
    if let Some(raw) = top.mcp_servers {
        out.insert("mcpServers".into(), json::parse(raw.get()).ok()?);
    }
    if let Some(projects) = top.projects {
        let mut kept = Object::new();
        for dir in ctx
            .git_root
            .into_iter()
            .chain([ctx.project, ctx.project_given])
        {
            let key = dir.to_string_lossy();
            if let Some(raw) = projects.get(key.as_ref()) {
                kept.insert(key.into_owned(), json::parse(raw.get()).ok()?);
            }
        }
        out.insert("projects".into(), Value::Object(kept));
    }
    Some(out)
}

/// Whether the text parses as the file would be read (settle detection): plain JSON checked
/// without building it, else as a whole (comments allowed).
pub(super) fn complete(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() || json::parse_jsonc(text).is_ok()
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn only_the_servers_and_this_projects_entry_are_kept() {
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        let text = r#"{"history":[1,2,{"x":"\u0041"}],"mcpServers":{"u":{"command":"u"}},
            "projects":{"/other":{"big":[1,2,3]},"/p":{"mcpServers":{"l":{"command":"l"}}}}}"#;
        let top = parts(text, &ctx).expect("plain JSON");
        assert_eq!(
            Value::Object(top).to_json(),
            r#"{"mcpServers":{"u":{"command":"u"}},"projects":{"/p":{"mcpServers":{"l":{"command":"l"}}}}}"#
        );
        assert!(
            parts(r#"{"mcpServers":{},"mcpServers":{}}"#, &ctx).is_none(),
            "a duplicate key is left to the whole parse (the last one wins there)"
        );
        assert!(parts("// a comment\n{}", &ctx).is_none());
        assert!(complete(text) && complete("// a comment\n{}"));
        assert!(
            !complete(r#"{"mcpServers":{"#),
            "a half-written file is not complete"
        );
    }
}
