//! `mcp-reconcile install CLIENT` / `uninstall CLIENT`: puts `serve` in front of a client's
//! servers in one command, and takes it out again.
//!
//! What install does, per client (the details and their sources: docs/CLIENTS.md):
//! * it adds one server, `reconcile`, to the client's user-scope file: this binary's
//!   `serve --layout CLIENT --tool-names short`, marked with
//!   [`INSTALLED_MARK`] so the layout knows it for the gateway
//!   and never reads it as a server;
//! * it makes the client start only that server, with the client's own switch: Claude Code's
//!   `allowedMcpServers` (user settings), Gemini CLI's and qwen-code's `mcp.allowed`, Codex's
//!   per-server `enabled = false` (marked, so the layout still runs those servers); the editors
//!   (Cursor, VS Code, Copilot CLI, Zed, Crush) have no such switch, so their servers move to a
//!   file beside theirs that the layout reads (`editors`); so do Goose's (`goose`: YAML);
//! * the user's servers stay where the client's own `mcp add` writes them; `serve` reads them
//!   there live (`--layout CLIENT`).
//!
//! Every file is changed only where install changes it ([`jsonc`], `toml_edit`); the bytes each
//! run replaces are kept in a private directory with a record of what was written (`record`).
//! `uninstall` puts back the original bytes only when nothing but install touched the file
//! since they were taken, and otherwise takes out only what install added. Running install
//! twice changes nothing the second time.
//!
//! Files are written as the clients expect (`settle`, `write`): under Claude Code's own lock
//! on `~/.claude.json` (`lock`), each re-read right before its rename and computed again if
//! another program changed it meanwhile, through a symbolic link to its target, new
//! directories 0700.

pub mod claude_mcp;
pub mod claude_permissions;
mod codex;
mod diff;
mod editors;
pub mod exe;
mod goose;
pub mod jsonc;
mod lock;
mod opencode;
mod record;
mod settle;
mod write;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

pub(crate) use crate::inputs::How;
pub use crate::inputs::Install;
use crate::inputs::{self, read_client_text, HostEnv, Layout, INSTALLED_MARK};
pub use diff::diff;
pub use record::Record;

/// The name of the gateway's entry in the client's files.
pub const GATEWAY: &str = "reconcile";

/// The layouts `install` knows, in `--help` order.
pub fn installable() -> impl Iterator<Item = Layout> {
    Layout::all().filter(|l| l.spec().install.is_some())
}

/// How install treats `client`.
///
/// # Errors
/// The layout is not a client install knows.
pub fn how(client: Layout) -> anyhow::Result<&'static Install> {
    client
        .spec()
        .install
        .as_ref()
        .with_context(|| format!("install does not know the layout {}", client.as_str()))
}

/// Whether `client` is an editor: its servers move to the sidecar (see `editors`).
fn is_editor(client: Layout) -> bool {
    matches!(how(client).map(|i| &i.how), Ok(How::Editor | How::OpenCode))
}

/// Whether `client` is Claude Code (its lock, its permission rules).
pub fn is_claude(client: Layout) -> bool {
    matches!(how(client).map(|i| &i.how), Ok(How::Claude))
}

/// One file install or uninstall changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The file.
    pub path: PathBuf,
    /// Its text now (`None`: it does not exist).
    pub before: Option<String>,
    /// Its text after the change (`None`: it is removed, as it did not exist before install).
    pub after: Option<String>,
}

impl Change {
    /// Whether the change changes anything.
    pub fn changes(&self) -> bool {
        self.before != self.after
    }
}

/// The gateway's entry for `client`, running `exe`.
/// `env` is the installing process's: a `CODEX_HOME` there goes into Codex's entry, since Codex
/// passes its servers only a short list of variables.
pub fn gateway_entry(client: Layout, exe: &Path, env: &HostEnv) -> anyhow::Result<Value> {
    let install = how(client)?;
    let mut entry = json!({
        "command": exe.to_string_lossy(),
        "args": ["serve", "--layout", client.as_str(), "--tool-names", "short"],
        "env": { INSTALLED_MARK: client.as_str() },
    });
    for var in install.pass_env {
        if let Some(value) = env.vars.get(*var).filter(|h| !h.is_empty()) {
            entry["env"][*var] = json!(value);
        }
    }
    if install.stdio_type {
        // What these clients' own `add` writes for a stdio server.
        entry["type"] = json!("stdio");
    }
    if install.lists_tools_once {
        // These list the gateway's tools once per session and never again on `list_changed`:
        // a server slower than the default start grace (a cold `npx` server) would be missing
        // for the whole session, so their first listing waits longer for slow servers.
        entry["env"][crate::host::START_GRACE_VAR] = json!(LISTS_ONCE_GRACE_MS.to_string());
    }
    Ok(entry)
}

/// The start grace of the gateway entry of a client that lists tools once per session (ms):
/// long enough for a cold `npx` server, short of Codex's own 10 s start-up timeout.
pub const LISTS_ONCE_GRACE_MS: u64 = 5_000;

/// The client's files install edits.
fn files(client: Layout, env: &HostEnv) -> anyhow::Result<Vec<PathBuf>> {
    // The layout's own path rules, so install writes exactly the files `serve --layout` reads.
    Ok(match how(client)?.how {
        How::Claude => {
            let (config_dir, state) = inputs::claude_home(env, "Claude Code's files")?;
            vec![state, config_dir.join("settings.json")]
        }
        How::Settings(file) => vec![file(env)?],
        How::Codex => vec![inputs::codex_home(env, "Codex's config.toml")?.join("config.toml")],
        How::Editor | How::OpenCode => {
            let (user, _) = editor_file(client, env)?;
            vec![user.clone(), inputs::sidecar(&user)]
        }
    })
}

/// An editor's user file and the key its servers are under.
fn editor_file(client: Layout, env: &HostEnv) -> anyhow::Result<(PathBuf, &'static str)> {
    inputs::editor_user_file(client, env)?
        .with_context(|| format!("{} keeps no servers file", client.as_str()))
}

/// The text of a client's file (`None`: it does not exist), with the bound of a client's own
/// state file: `~/.claude.json` holds every project's history and may be tens of MiB.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    read_client_text(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// What `install client` would change.
///
/// # Errors
/// A file cannot be read or is not valid in its format, or the client already limits its
/// servers in a way install would have to override (the message says what to do).
pub fn install(client: Layout, env: &HostEnv, exe: &Path) -> anyhow::Result<Vec<Change>> {
    let entry = gateway_entry(client, exe, env)?;
    let install = how(client)?;
    if is_editor(client) {
        let entry = match install.how {
            How::OpenCode => opencode::entry(&entry),
            _ => entry,
        };
        let (user, key) = editor_file(client, env)?;
        let side = inputs::sidecar(&user);
        let (editor_before, sidecar_before) = (read(&user)?, read(&side)?);
        let (editor_text, sidecar_text) = (
            editor_before.as_deref().unwrap_or_default(),
            sidecar_before.as_deref().unwrap_or_default(),
        );
        let (editor_after, sidecar_after) = if goose::is_yaml(&user) {
            goose::install(editor_text, sidecar_text, &entry)
        } else {
            editors::install(editor_text, sidecar_text, key, &entry)
        }
        .with_context(|| format!("{} cannot be edited", user.display()))?;
        // Nothing moved into a sidecar that was not there: none is made (an empty file
        // would not be valid JSON for the layout or for uninstall).
        let sidecar_after = match (&sidecar_before, sidecar_after) {
            (None, after) if after.trim().is_empty() => None,
            (_, after) => Some(after),
        };
        // The sidecar first: until the editor's file is written too, a moved server is in
        // both files, never in neither.
        return Ok(vec![
            Change {
                path: side,
                before: sidecar_before,
                after: sidecar_after,
            },
            Change {
                path: user,
                before: editor_before,
                after: Some(editor_after),
            },
        ]);
    }
    let mut changes = Vec::new();
    for (i, path) in files(client, env)?.into_iter().enumerate() {
        let before = read(&path)?;
        let text = before.clone().unwrap_or_default();
        let after = match (&install.how, i) {
            (How::Codex, _) => codex::install(&text, &entry)?,
            (How::Claude, 1) => {
                let only = json!([{ "serverName": GATEWAY }]);
                refuse_other_list(&text, &path, &[], "allowedMcpServers", &only)?;
                jsonc::set(&text, &[], "allowedMcpServers", &only)?
            }
            (_, _) => {
                let with_entry = jsonc::set(&text, &["mcpServers"], GATEWAY, &entry)?;
                if matches!(install.how, How::Claude) {
                    with_entry
                } else {
                    let only = json!([GATEWAY]);
                    refuse_other_list(&text, &path, &["mcp"], "allowed", &only)?;
                    jsonc::set(&with_entry, &["mcp"], "allowed", &only)?
                }
            }
        };
        changes.push(Change {
            path,
            before,
            after: Some(after),
        });
    }
    Ok(changes)
}

/// Refuses when the client already keeps a list at `key` other than `only`: install would
/// have to replace the user's own admission list.
fn refuse_other_list(
    text: &str,
    path: &Path,
    at: &[&str],
    key: &str,
    only: &Value,
) -> anyhow::Result<()> {
    match jsonc::get(text, at, key) {
        Some(list) if &list != only => bail!(
            "{} already has {}{key} — install would replace your own list; move those names \
             (or use mcp.excluded / deniedMcpServers, which mcp-reconcile honours too) and run \
             install again",
            path.display(),
            at.iter().map(|p| format!("{p}.")).collect::<String>()
        ),
        _ => Ok(()),
    }
}

/// Runs `install client`: writes what [`install`] computes, again from the new bytes whenever
/// a file changed meanwhile (under Claude Code's own lock on `~/.claude.json`), each file's
/// current bytes backed up in the record under `state_dir` before it is replaced. Returns
/// what changed (nothing: it was installed already) and the record.
///
/// # Errors
/// As [`install`], or a file or the record cannot be written.
pub fn install_and_record(
    client: Layout,
    env: &HostEnv,
    exe: &Path,
    state_dir: &Path,
) -> anyhow::Result<(Vec<Change>, Record)> {
    let mut record = Record::continue_or_start(state_dir, client, Record::load(state_dir, client)?);
    let files = files(client, env)?;
    let changes = settle::settle(
        lock_of(client, &files),
        || install(client, env, exe),
        |change| record.note(change),
    )?;
    record.note_found(&files)?;
    Ok((changes, record))
}

/// Runs `uninstall client` from its install `record`, as [`install_and_record`] writes (the
/// client's lock, a file that changed meanwhile computed again). Returns what changed; the
/// record is left to the caller to remove.
///
/// # Errors
/// As [`uninstall`], or a file cannot be written.
pub fn uninstall_and_restore(client: Layout, record: &Record) -> anyhow::Result<Vec<Change>> {
    let files: Vec<PathBuf> = record.files.iter().map(|f| f.path.clone()).collect();
    settle::settle(
        lock_of(client, &files),
        || uninstall(client, record),
        |_| Ok(()),
    )
}

/// The file among `files` whose client locks it while saving: Claude Code's `.claude.json`.
fn lock_of(client: Layout, files: &[PathBuf]) -> Option<&Path> {
    is_claude(client)
        .then(|| {
            files
                .iter()
                .find(|f| f.file_name().is_some_and(|n| n == ".claude.json"))
        })
        .flatten()
        .map(PathBuf::as_path)
}

/// What `uninstall client` would change, from its install `record` and the files as they are:
/// a file only install changed since its original was taken gets its original bytes back; one
/// changed otherwise (by the client, by the user, between two installs) loses only what
/// install added.
///
/// # Errors
/// A file cannot be read or is no longer valid in its format.
pub fn uninstall(client: Layout, record: &Record) -> anyhow::Result<Vec<Change>> {
    if is_editor(client) {
        return uninstall_editor(client, record);
    }
    let mut changes = Vec::new();
    for file in &record.files {
        let before = read(&file.path)?;
        let after = match &before {
            _ if file.untouched_since_install(before.as_deref()) => record.original(file)?,
            None => None,
            Some(text) => Some(take_out(client, text)?),
        };
        changes.push(Change {
            path: file.path.clone(),
            before,
            after,
        });
    }
    Ok(changes)
}

/// `text` without what install adds to a file of `client`'s.
fn take_out(client: Layout, text: &str) -> anyhow::Result<String> {
    if matches!(how(client)?.how, How::Codex) {
        return codex::uninstall(text);
    }
    let mut text = jsonc::remove(text, &["mcpServers"], GATEWAY)?;
    if jsonc::get(&text, &[], "allowedMcpServers") == Some(json!([{ "serverName": GATEWAY }])) {
        text = jsonc::remove(&text, &[], "allowedMcpServers")?;
        // Rules `install claude --permissions` moved under the gateway's names go back.
        text = claude_permissions::rewrite(&text, false)?;
    }
    if jsonc::get(&text, &["mcp"], "allowed") == Some(json!([GATEWAY])) {
        text = jsonc::remove(&text, &["mcp"], "allowed")?;
    }
    Ok(text)
}

/// An editor's uninstall: when only install changed both files since their originals were
/// taken, each gets its original bytes back; otherwise the sidecar's servers (edited there
/// since, or handed over by a later install) go back into the editor's file, and the sidecar
/// is put back as it was before install (removed, as a rule).
fn uninstall_editor(client: Layout, record: &Record) -> anyhow::Result<Vec<Change>> {
    let is_sidecar = |f: &&record::FileRecord| inputs::sidecar(&f.path) == f.path;
    let Some(editor) = record.files.iter().find(|f| !is_sidecar(f)) else {
        bail!(
            "the install record of {} does not name the editor's file",
            client.as_str()
        );
    };
    let side_path = inputs::sidecar(&editor.path);
    let side = record.files.iter().find(|f| f.path == side_path);
    let (editor_now, side_now) = (read(&editor.path)?, read(&side_path)?);
    let side_untouched = match side.filter(|side| !side.installed.is_empty()) {
        Some(side) => side.untouched_since_install(side_now.as_deref()),
        // A sidecar install never wrote (nothing moved; the record may only note it as
        // found) is untouched while it is still absent.
        None => side_now.is_none(),
    };
    let untouched = editor.untouched_since_install(editor_now.as_deref()) && side_untouched;
    let editor_after = if untouched {
        record.original(editor)?
    } else if editor_now.is_none() && side_now.is_none() {
        // Both gone (as a first pass of this uninstall leaves a file that did not exist
        // before install): nothing to take out or put back.
        None
    } else {
        let key = client
            .spec()
            .editor
            .as_ref()
            .map_or("mcpServers", |editor| editor.key);
        let (editor_text, side_text) = (
            editor_now.as_deref().unwrap_or_default(),
            side_now.as_deref().unwrap_or_default(),
        );
        let after = if goose::is_yaml(&editor.path) {
            goose::uninstall(editor_text, side_text)?
        } else {
            editors::uninstall(editor_text, side_text, key)?
        };
        // No file is made to hold nothing.
        (editor_now.is_some() || !after.trim().is_empty()).then_some(after)
    };
    let side_after = match side {
        Some(side) => record.original(side)?,
        // Install never got to write it: whatever is there is not install's.
        None => side_now.clone(),
    };
    Ok(vec![
        Change {
            path: editor.path.clone(),
            before: editor_now,
            after: editor_after,
        },
        Change {
            path: side_path,
            before: side_now,
            after: side_after,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HostEnv {
        HostEnv::of(vars, "/work/project", "/home/u")
    }

    /// Install writes the files the layout reads, with the same `~` and relative-path rules.
    #[test]
    fn install_edits_the_files_the_layout_reads() -> anyhow::Result<()> {
        let e = env(&[
            ("QWEN_HOME", "~/q"),
            ("CLAUDE_CONFIG_DIR", "conf/claude"),
            ("CODEX_HOME", "codex"),
            ("GEMINI_CLI_HOME", "g"),
        ]);
        assert_eq!(
            files(Layout::QWEN, &e)?,
            [PathBuf::from("/home/u/q/settings.json")]
        );
        assert_eq!(
            files(Layout::CLAUDE, &e)?,
            [
                PathBuf::from("/work/project/conf/claude/.claude.json"),
                PathBuf::from("/work/project/conf/claude/settings.json")
            ]
        );
        assert_eq!(
            files(Layout::CODEX, &e)?,
            [PathBuf::from("/work/project/codex/config.toml")]
        );
        assert_eq!(
            files(Layout::GEMINI, &e)?,
            [PathBuf::from("/work/project/g/.gemini/settings.json")]
        );
        assert_eq!(
            files(Layout::named("cursor").expect("cursor"), &e)?,
            [
                PathBuf::from("/home/u/.cursor/mcp.json"),
                PathBuf::from("/home/u/.cursor/mcp-reconcile.json")
            ]
        );
        let plain = env(&[]);
        assert_eq!(
            files(Layout::CLAUDE, &plain)?,
            [
                PathBuf::from("/home/u/.claude.json"),
                PathBuf::from("/home/u/.claude/settings.json")
            ]
        );
        Ok(())
    }
}
