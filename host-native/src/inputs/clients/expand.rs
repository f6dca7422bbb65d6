//! Each client's variable syntax, expanded as that client expands it, before the approval
//! hash is taken (SPEC §3, §15): a changed variable is a changed entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{Object, Value};

/// What variables resolve from: the session's environment, home and project.
#[derive(Clone, Copy, Debug)]
pub(in crate::inputs) struct Context<'a> {
    pub(in crate::inputs) vars: &'a BTreeMap<String, String>,
    pub(in crate::inputs) home: Option<&'a Path>,
    /// The canonical project root.
    pub(in crate::inputs) project: &'a Path,
    /// The project directory as given (before symlinks were resolved).
    pub(in crate::inputs) project_given: &'a Path,
    /// The git repository the project is in (a linked worktree's main repository), real
    /// path: Claude Code keys a project's local scope by it.
    pub(in crate::inputs) git_root: Option<&'a Path>,
}

#[cfg(test)]
impl<'a> Context<'a> {
    /// The context unit tests parse in: project `/p` (as given), no home, no git root.
    pub(in crate::inputs) fn at_p(vars: &'a BTreeMap<String, String>) -> Self {
        Context {
            vars,
            home: None,
            project: Path::new("/p"),
            project_given: Path::new("/p"),
            git_root: None,
        }
    }
}

/// The root of the git repository `dir` is in, as Claude Code finds it: the nearest ancestor
/// with a `.git` directory or file; for a linked worktree, the main repository's root — but
/// only a worktree as git itself resolves one (see [`linked_main`]). A `.git` file that names
/// another repository's worktree without being that worktree leaves the directory its own
/// root, with a problem to report (`.git` file, why): a downloaded directory never takes
/// another project's local-scope servers. Bounded reads of small files only.
pub(in crate::inputs) fn git_root(dir: &Path) -> Option<(PathBuf, Option<(PathBuf, String)>)> {
    let found = dir.ancestors().find(|d| d.join(".git").exists())?;
    let dot_git = found.join(".git");
    let own = found.canonicalize().ok()?;
    if !dot_git.is_file() {
        return Some((own, None));
    }
    match linked_main(found, &dot_git) {
        Ok(Some(main)) => Some((main, None)),
        Ok(None) => Some((own, None)),
        Err(why) => Some((own, Some((dot_git, why)))),
    }
}

/// Claude Code's key for `dir`'s local scope in `~/.claude.json` (`projects`): the git root as
/// [`git_root`] finds it, else the real path of `dir`.
pub(crate) fn claude_project_key(dir: &Path) -> PathBuf {
    git_root(dir)
        .map(|(root, _)| root)
        .unwrap_or_else(|| dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
}

/// The main repository's root of the linked worktree whose `.git` file is `dot_git` in `dir`,
/// checked as git checks it: the file says `gitdir: <common>/worktrees/<id>`, that directory
/// exists, its `commondir` leads back to `<common>`, and its `gitdir` back-link names this very
/// `.git` file (Claude Code checks the same). `None` when the file names a git directory that
/// is not a linked worktree's (`git init --separate-git-dir`): `dir` is its own root. An error
/// says why a claimed worktree is not one.
fn linked_main(dir: &Path, dot_git: &Path) -> Result<Option<PathBuf>, String> {
    let text = crate::inputs::read_text(dot_git)
        .map_err(|e| format!("its .git file cannot be read ({e})"))?
        .unwrap_or_default();
    let Some(gitdir) = text.trim().strip_prefix("gitdir:").map(str::trim) else {
        return Err("its .git file is not a gitfile (\"gitdir: <path>\")".into());
    };
    let gitdir = dir.join(gitdir);
    let Ok(real_gitdir) = gitdir.canonicalize() else {
        let claims_worktree =
            gitdir.parent().and_then(Path::file_name) == Some("worktrees".as_ref());
        return if claims_worktree {
            Err(format!(
                "its .git file names {}, which does not exist",
                crate::display::safe(&gitdir.to_string_lossy())
            ))
        } else {
            Ok(None)
        };
    };
    let small = |name: &str| {
        crate::inputs::read_text(&real_gitdir.join(name))
            .ok()
            .flatten()
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty())
    };
    let Some(commondir) = small("commondir") else {
        if real_gitdir.parent().and_then(Path::file_name) == Some("worktrees".as_ref()) {
            return Err(format!(
                "its .git file names {}, which has no commondir: not a worktree of that repository",
                crate::display::safe(&gitdir.to_string_lossy())
            ));
        }
        return Ok(None);
    };
    let common = real_gitdir.join(commondir).canonicalize().map_err(|_| {
        format!(
            "the commondir of {} does not exist",
            crate::display::safe(&gitdir.to_string_lossy())
        )
    })?;
    if real_gitdir.parent() != Some(common.join("worktrees").as_path()) {
        return Err(format!(
            "{} is not under the worktrees of the repository its commondir names",
            crate::display::safe(&gitdir.to_string_lossy())
        ));
    }
    let links_back = small("gitdir")
        .and_then(|link| real_gitdir.join(link).canonicalize().ok())
        .zip(dot_git.canonicalize().ok())
        .is_some_and(|(link, this)| link == this);
    if !links_back {
        return Err(format!(
            "{} does not link back to this directory (its gitdir file names another \
             worktree): not a worktree of that repository",
            crate::display::safe(&gitdir.to_string_lossy())
        ));
    }
    // `<main>/.git` → `<main>`; a bare repository is its own root.
    Ok(Some(if common.file_name() == Some(".git".as_ref()) {
        common.parent().map_or(common.clone(), Path::to_path_buf)
    } else {
        common
    }))
}

/// A variable syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Syntax {
    /// Claude Code: `${NAME}` and `${NAME:-default}` (`NAME` = `[A-Za-z_][A-Za-z0-9_]*`); an
    /// unset variable without a default stays as written (and is reported).
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
    /// `${input:ID}`: a value VS Code asks the user for.
    Input(String),
}

/// Whether `name` is a variable name as Claude Code takes it.
fn claude_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Context<'_> {
    /// `text` with `syntax`'s variables replaced; the unset ones left as written are added to
    /// `unset`.
    pub(super) fn expand(
        &self,
        syntax: Syntax,
        text: &str,
        unset: &mut Vec<String>,
    ) -> Result<String, Unexpandable> {
        replace_braced(text, |inner| self.resolve(syntax, inner, unset))
    }

    fn resolve(
        &self,
        syntax: Syntax,
        inner: &str,
        unset: &mut Vec<String>,
    ) -> Result<Option<String>, Unexpandable> {
        match syntax {
            Syntax::Claude => {
                let (name, default) = match inner.split_once(":-") {
                    Some((name, default)) => (name, Some(default)),
                    None => (inner, None),
                };
                if !claude_name(name) {
                    return Ok(None);
                }
                match (self.vars.get(name), default) {
                    (Some(value), _) => Ok(Some(value.clone())),
                    (None, Some(default)) => Ok(Some(default.to_owned())),
                    (None, None) => {
                        if !unset.iter().any(|u| u == name) {
                            unset.push(name.to_owned());
                        }
                        Ok(None)
                    }
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
    fn expand_value(
        &self,
        syntax: Syntax,
        value: &Value,
        unset: &mut Vec<String>,
    ) -> Result<Value, Unexpandable> {
        Ok(match value {
            Value::String(s) => Value::String(self.expand(syntax, s, unset)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.expand_value(syntax, item, unset))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.expand_value(syntax, v, unset)?)))
                    .collect::<Result<Object, _>>()?,
            ),
            other => other.clone(),
        })
    }

    /// `entry` with the string values of `fields` (every field when `None`) expanded, and the
    /// unset variables left as written; the message names the field that could not be.
    pub(super) fn expand_entry(
        &self,
        syntax: Syntax,
        entry: &Object,
        fields: Option<&[&str]>,
    ) -> Result<(Object, Vec<String>), String> {
        let mut out = Object::new();
        let mut unset = Vec::new();
        for (key, value) in entry {
            let wanted = fields.is_none_or(|f| f.contains(&key.as_str()));
            let value = if wanted {
                self.expand_value(syntax, value, &mut unset)
                    .map_err(|e| match e {
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
        Ok((out, unset))
    }
}

/// `value` with every string in it passed through `text` (object keys too when `keys`): a
/// client whose variables may stand anywhere in an entry's values.
pub(super) fn map_strings(
    value: &Value,
    keys: bool,
    text: &impl Fn(&str) -> Result<String, String>,
) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => Value::String(text(s)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| map_strings(item, keys, text))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let k = if keys { text(k)? } else { k.clone() };
                    Ok((k, map_strings(v, keys, text)?))
                })
                .collect::<Result<Object, String>>()?,
        ),
        other => other.clone(),
    })
}

/// `text` with each `${INNER}` replaced by what `resolve` answers for `INNER` (`None`: left as
/// written); an unclosed `${` and what follows it stay as written.
pub(super) fn replace_braced<E>(
    text: &str,
    mut resolve: impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<String, E> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[at..]);
            return Ok(out);
        };
        match resolve(&after[..end])? {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[at..at + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The directories from the project's git work tree's root (the project itself outside one)
/// down to the project, root first: where Crush and Copilot CLI look for project files.
pub(super) fn down_from_git_root(project: &Path) -> Vec<&Path> {
    let root = git_root(project)
        .map(|(root, _)| root)
        .filter(|root| project.starts_with(root))
        .unwrap_or_else(|| project.to_path_buf());
    let mut dirs: Vec<&Path> = project
        .ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .collect();
    dirs.reverse();
    dirs
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
            git_root: None,
        };
        f(&ctx)
    }

    #[test]
    fn claude_takes_braces_and_defaults_only() {
        with(&[("TOKEN", "t"), ("EMPTY", "")], |ctx| {
            let claude = |s| {
                let mut unset = Vec::new();
                let out = ctx.expand(Syntax::Claude, s, &mut unset).expect("expands");
                (out, unset)
            };
            assert_eq!(claude("a ${TOKEN} b").0, "a t b");
            assert_eq!(claude("$TOKEN").0, "$TOKEN");
            assert_eq!(claude("${NOPE:-x:y}").0, "x:y");
            assert_eq!(claude("${EMPTY:-d}").0, "", "set but empty is set");
            assert_eq!(claude("${}${unterminated").0, "${}${unterminated");
            assert_eq!(
                claude("${1A} ${A-B}").0,
                "${1A} ${A-B}",
                "not a name: as written"
            );
            assert_eq!(
                claude("${NOPE}/${NOPE}"),
                ("${NOPE}/${NOPE}".to_owned(), vec!["NOPE".to_owned()])
            );
        });
    }

    #[test]
    fn editors_take_their_named_variables() {
        with(&[("KEY", "k")], |ctx| {
            let editor = |s| ctx.expand(Syntax::Editor, s, &mut Vec::new());
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
            let (kept, _) = ctx
                .expand_entry(Syntax::Editor, &entry, Some(&["command"]))
                .expect("env not expanded");
            assert_eq!(kept, entry);
        });
    }
}
