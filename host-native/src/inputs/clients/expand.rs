//! Each client's variable syntax, expanded as that client expands it, before the approval
//! hash is taken (SPEC §3, §15): a changed variable is a changed entry.

use std::collections::BTreeMap;
use std::path::Path;

use mcp_reconcile_kernel::{Object, Value};

/// What variables resolve from: the session's environment, home and project.
#[derive(Clone, Copy, Debug)]
pub(in crate::inputs) struct Context<'a> {
    pub(in crate::inputs) vars: &'a BTreeMap<String, String>,
    pub(in crate::inputs) home: Option<&'a Path>,
    /// The canonical project root.
    pub(in crate::inputs) project: &'a Path,
    /// The project directory as given (before symlinks were resolved): Claude Code keys its
    /// local scope by the directory it was started in.
    pub(in crate::inputs) project_given: &'a Path,
}

/// A variable syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Syntax {
    /// Claude Code: `${NAME}` and `${NAME:-default}`; an unset variable without a default is
    /// an error for the entry.
    Claude,
    /// Cursor and VS Code: `${env:NAME}` (unset: empty), `${userHome}`, `${workspaceFolder}`,
    /// `${workspaceFolderBasename}`, `${pathSeparator}` / `${/}`; `${input:ID}` (VS Code's
    /// prompt) cannot be answered inside a gateway and fails the entry; anything else stays
    /// as written.
    Editor,
}

/// Why an entry cannot be expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Unexpandable {
    /// `${NAME}` without a default, and `NAME` is not set.
    Unset(String),
    /// `${input:ID}`: a value VS Code asks the user for.
    Input(String),
}

impl Context<'_> {
    /// `text` with `syntax`'s variables replaced.
    pub(super) fn expand(&self, syntax: Syntax, text: &str) -> Result<String, Unexpandable> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("${") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[at..]);
                return Ok(out);
            };
            let inner = &after[..end];
            match self.resolve(syntax, inner)? {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[at..at + 2 + end + 1]),
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    fn resolve(&self, syntax: Syntax, inner: &str) -> Result<Option<String>, Unexpandable> {
        match syntax {
            Syntax::Claude => {
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inner, None),
                };
                if name.is_empty() {
                    return Ok(None);
                }
                match (self.vars.get(name), default) {
                    (Some(value), _) => Ok(Some(value.clone())),
                    (None, Some(default)) => Ok(Some(default.to_owned())),
                    (None, None) => Err(Unexpandable::Unset(name.to_owned())),
                }
            }
            Syntax::Editor => {
                if let Some(name) = inner.strip_prefix("env:") {
                    return Ok(Some(self.vars.get(name).cloned().unwrap_or_default()));
                }
                if let Some(id) = inner.strip_prefix("input:") {
                    return Err(Unexpandable::Input(id.to_owned()));
                }
                Ok(match inner {
                    "userHome" => self.home.map(|h| h.display().to_string()),
                    "workspaceFolder" => Some(self.project.display().to_string()),
                    "workspaceFolderBasename" => self
                        .project
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned()),
                    "pathSeparator" | "/" => Some("/".to_owned()),
                    _ => None,
                })
            }
        }
    }

    /// Every string inside `value`, expanded.
    pub(super) fn expand_value(
        &self,
        syntax: Syntax,
        value: &Value,
    ) -> Result<Value, Unexpandable> {
        Ok(match value {
            Value::String(s) => Value::String(self.expand(syntax, s)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.expand_value(syntax, item))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand_value(syntax, v)?)))
                    .collect::<Result<Object, _>>()?,
            ),
            other => other.clone(),
        })
    }

    /// `entry` with the string values of `fields` (every field when `None`) expanded; the
    /// message names the field that could not be.
    pub(super) fn expand_entry(
        &self,
        syntax: Syntax,
        entry: &Object,
        fields: Option<&[&str]>,
    ) -> Result<Object, String> {
        let mut out = Object::new();
        for (key, value) in entry {
            let wanted = fields.is_none_or(|f| f.contains(&key.as_str()));
            let value = if wanted {
                self.expand_value(syntax, value).map_err(|e| match e {
                    Unexpandable::Unset(name) => format!(
                        "its \"{key}\" uses ${{{name}}}, which is not set and has no default \
                         (write ${{{name}:-default}}, or set {name} before the session starts)"
                    ),
                    Unexpandable::Input(id) => format!(
                        "its \"{key}\" uses ${{input:{id}}}, a value VS Code asks you for; \
                         nobody can be asked inside mcp-reconcile — put the value in \"env\" \
                         (or ${{env:NAME}}) instead"
                    ),
                })?
            } else {
                value.clone()
            };
            out.insert(key.clone(), value);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<T>(vars: &[(&str, &str)], f: impl FnOnce(&Context<'_>) -> T) -> T {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let ctx = Context {
            vars: &vars,
            home: Some(Path::new("/home/u")),
            project: Path::new("/work/proj"),
            project_given: Path::new("/work/proj"),
        };
        f(&ctx)
    }

    #[test]
    fn claude_takes_braces_and_defaults_only() {
        with(&[("TOKEN", "t"), ("EMPTY", "")], |ctx| {
            let claude = |s| ctx.expand(Syntax::Claude, s);
            assert_eq!(claude("a ${TOKEN} b").as_deref(), Ok("a t b"));
            assert_eq!(claude("$TOKEN").as_deref(), Ok("$TOKEN"));
            assert_eq!(claude("${NOPE:-x:y}").as_deref(), Ok("x:y"));
            assert_eq!(
                claude("${EMPTY:-d}").as_deref(),
                Ok(""),
                "set but empty is set"
            );
            assert_eq!(
                claude("${}${unterminated").as_deref(),
                Ok("${}${unterminated")
            );
            assert_eq!(claude("${NOPE}"), Err(Unexpandable::Unset("NOPE".into())));
        });
    }

    #[test]
    fn editors_take_their_named_variables() {
        with(&[("KEY", "k")], |ctx| {
            let editor = |s| ctx.expand(Syntax::Editor, s);
            assert_eq!(editor("${env:KEY}/${env:NONE}").as_deref(), Ok("k/"));
            assert_eq!(editor("${userHome}${/}x").as_deref(), Ok("/home/u/x"));
            assert_eq!(
                editor("${workspaceFolder}:${workspaceFolderBasename}").as_deref(),
                Ok("/work/proj:proj")
            );
            assert_eq!(
                editor("${KEY} ${config:x}").as_deref(),
                Ok("${KEY} ${config:x}")
            );
            assert_eq!(
                editor("${input:pat}"),
                Err(Unexpandable::Input("pat".into()))
            );
        });
    }

    #[test]
    fn a_field_that_cannot_be_expanded_is_named() {
        with(&[], |ctx| {
            let entry: Object = [
                ("command".to_owned(), Value::from("x")),
                (
                    "env".to_owned(),
                    Value::Object(
                        [("T".to_owned(), Value::from("${input:t}"))]
                            .into_iter()
                            .collect(),
                    ),
                ),
            ]
            .into_iter()
            .collect();
            let err = ctx
                .expand_entry(Syntax::Editor, &entry, None)
                .expect_err("an error");
            assert!(
                err.contains("\"env\"") && err.contains("${input:t}"),
                "{err}"
            );
            let kept = ctx
                .expand_entry(Syntax::Editor, &entry, Some(&["command"]))
                .expect("env not expanded");
            assert_eq!(kept, entry);
        });
    }
}
