//! `mcp-reconcile mcp add / remove` for Claude Code: what `claude mcp add / remove` do, for a
//! user whose Claude Code runs behind the installed gateway. Once `install claude` limits Claude
//! Code to the gateway (`allowedMcpServers`), Claude Code refuses to add any other server ("not
//! allowed by enterprise policy") — its add check and its start check are the same function,
//! so there is no list that lets it add a server without also starting it, which would run the
//! server twice. These commands write the entry where Claude Code would (same files, same
//! shape, same scopes, under Claude Code's own lock) and the gateway applies it live.
//!
//! Scopes, as Claude Code's: `local` (the default: `~/.claude.json`, under this project's key
//! in `projects`), `user` (`~/.claude.json`'s `mcpServers`), `project` (the project's
//! `.mcp.json`, shared with everyone who clones it — approved before it runs, like every
//! project entry).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde_json::Value;

use super::{jsonc, read, settle, Change};
use crate::inputs::{claude_home, claude_project_key, HostEnv};

/// Where an entry goes, as Claude Code's `--scope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This project, for this user only (`~/.claude.json`, `projects.<key>.mcpServers`).
    Local,
    /// Every project of this user (`~/.claude.json`, `mcpServers`).
    User,
    /// The project's `.mcp.json` (checked in; gated).
    Project,
}

impl Scope {
    /// The scope's name, as Claude Code spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// The file and the object path of `scope`'s servers for a session in `project`.
fn place(env: &HostEnv, project: &Path, scope: Scope) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let (_, state) = claude_home(env, "Claude Code's ~/.claude.json")?;
    Ok(match scope {
        Scope::User => (state, vec!["mcpServers".into()]),
        Scope::Local => {
            let key = claude_project_key(project).to_string_lossy().into_owned();
            (state, vec!["projects".into(), key, "mcpServers".into()])
        }
        Scope::Project => (
            claude_project_key(project).join(".mcp.json"),
            vec!["mcpServers".into()],
        ),
    })
}

/// Whether Claude Code's lock applies to `path` (its state file).
fn locked(path: &Path) -> Option<&Path> {
    (path.file_name().is_some_and(|n| n == ".claude.json")).then_some(path)
}

/// Adds (or replaces) `name` with `entry` in `scope`; the file written.
///
/// # Errors
/// The name is not one Claude Code accepts, or the file cannot be read, parsed or written.
pub fn add(
    env: &HostEnv,
    project: &Path,
    scope: Scope,
    name: &str,
    entry: &Value,
) -> anyhow::Result<PathBuf> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        bail!("a server name may contain only letters, numbers, hyphens and underscores");
    }
    if name == super::GATEWAY {
        bail!("`{}` is the gateway's own name", super::GATEWAY);
    }
    let (path, at) = place(env, project, scope)?;
    let at: Vec<&str> = at.iter().map(String::as_str).collect();
    edit(&path, |text| {
        jsonc::set(text.unwrap_or_default(), &at, name, entry)
            .map(Some)
            .with_context(|| format!("{} cannot be edited", path.display()))
    })?;
    Ok(path)
}

/// Writes `change`'s result for `path`'s current text (`None`: the file does not exist) until
/// it sticks, under Claude Code's lock when `path` is its state file ([`settle::settle`]).
fn edit(
    path: &Path,
    change: impl Fn(Option<&str>) -> anyhow::Result<Option<String>>,
) -> anyhow::Result<()> {
    settle::settle(
        locked(path),
        || {
            let before = read(path)?;
            let after = change(before.as_deref())?;
            Ok(vec![Change {
                path: path.to_path_buf(),
                before,
                after,
            }])
        },
        |_| Ok(()),
    )?;
    Ok(())
}

/// Removes `name` from `scope`, or from the one scope that has it when `scope` is `None`;
/// the scope and file it was removed from.
///
/// # Errors
/// No scope has it, more than one has it and none was given, or a file cannot be edited.
pub fn remove(
    env: &HostEnv,
    project: &Path,
    scope: Option<Scope>,
    name: &str,
) -> anyhow::Result<(Scope, PathBuf)> {
    let scopes = match scope {
        Some(scope) => vec![scope],
        None => vec![Scope::Local, Scope::Project, Scope::User],
    };
    let mut found = Vec::new();
    for scope in scopes {
        let (path, at) = place(env, project, scope)?;
        let text = read(&path)?.unwrap_or_default();
        let at_ref: Vec<&str> = at.iter().map(String::as_str).collect();
        if jsonc::get(&text, &at_ref, name).is_some() {
            found.push((scope, path, at));
        }
    }
    let (scope, path, at) = match found.len() {
        0 => bail!(
            "no server named \"{}\" in {}",
            crate::display::safe(name),
            scope.map_or("any scope".to_owned(), |s| format!(
                "the {} scope",
                s.as_str()
            ))
        ),
        1 => found.remove(0),
        _ => bail!(
            "\"{}\" is in more than one scope ({}): say which with --scope",
            crate::display::safe(name),
            found
                .iter()
                .map(|(s, _, _)| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let at: Vec<&str> = at.iter().map(String::as_str).collect();
    edit(&path, |text| match text {
        Some(text) if jsonc::get(text, &at, name).is_some() => {
            Ok(Some(jsonc::remove(text, &at, name)?))
        }
        // Gone meanwhile (or the file is): nothing to write.
        other => Ok(other.map(str::to_owned)),
    })?;
    Ok((scope, path))
}
