//! OpenCode's variables (`ConfigVariable.substitute`), expanded before the approval hash
//! (SPEC §3): `{env:NAME}` is the variable's value (unset or empty: nothing), then
//! `{file:PATH}` is that file's text, trimmed (`~/` is the home directory, a relative path is
//! relative to the file that says it).
//!
//! A `{file:}` read is bounded as every input is (`inputs::read_text`: regular files only,
//! opened without waiting, at most 4 MiB): a FIFO, device or directory in its place is that
//! entry's error and never blocks. A project entry may name any file — nothing it says runs
//! before the user approved exactly that entry, and what the file held is part of the entry
//! the approval covers, so a changed file is a changed entry. What was read stays in the entry
//! as used; reviews and `status` show the entry as written (`{file:PATH}`), never the text.
//! The file is read when its config file is; an edit of the file alone is seen at the next
//! change of that config file.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{Object, Value};

use super::super::expand::Context;

/// Where an entry's variables resolve: the session's environment and home, and the directory
/// of the file that holds it.
pub(super) struct At<'a> {
    pub(super) ctx: &'a Context<'a>,
    pub(super) dir: &'a Path,
}

impl At<'_> {
    /// `entry` with every string expanded, or why one cannot be (a `{file:}` that cannot be
    /// read, named by its path only).
    pub(super) fn expand(&self, entry: &Object) -> Result<Object, String> {
        entry
            .iter()
            .map(|(key, value)| Ok((key.clone(), self.value(value)?)))
            .collect()
    }

    fn value(&self, value: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(text) => Value::String(self.text(text)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.value(item))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(self.expand(map)?),
            other => other.clone(),
        })
    }

    /// One string: `{env:}` first, then `{file:}` (so a variable may name the file), as
    /// OpenCode substitutes them.
    fn text(&self, text: &str) -> Result<String, String> {
        let env = replace(text, "{env:", |name| {
            Ok(self.ctx.vars.get(name).cloned().unwrap_or_default())
        })?;
        replace(&env, "{file:", |path| self.file(path))
    }

    /// The trimmed text of the file `{file:PATH}` names.
    fn file(&self, written: &str) -> Result<String, String> {
        let path = self.path(written);
        let shown = crate::display::safe(&path.to_string_lossy()).into_owned();
        match crate::inputs::read_text(&path) {
            Ok(Some(text)) => Ok(text.trim().to_owned()),
            Ok(None) => Err(format!(
                "{{file:{}}} names {shown}, which does not exist",
                crate::display::safe(written)
            )),
            Err(why) => Err(format!(
                "{{file:{}}} cannot be used: {shown}: {why}",
                crate::display::safe(written)
            )),
        }
    }

    /// `~/…` under the home directory; a relative path from the config file's directory.
    fn path(&self, written: &str) -> PathBuf {
        match (written.strip_prefix("~/"), self.ctx.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => self.dir.join(written),
        }
    }
}

/// `text` with each `OPEN…}` (non-empty inside, no `}`) replaced by `value` of its inside.
fn replace(
    text: &str,
    open: &str,
    mut value: impl FnMut(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let after = &rest[at + open.len()..];
        match after.find('}') {
            Some(end) if end > 0 => {
                out.push_str(&rest[..at]);
                out.push_str(&value(&after[..end])?);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..at + open.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}
