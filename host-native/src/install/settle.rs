//! Running install or uninstall to the end against clients that may write the same files at
//! the same time: each round takes Claude Code's lock (when the client has one), computes the
//! changes from the files as they are now, and writes them one by one, each only if its file
//! still holds what the round read (`write`); a file that changed meanwhile starts a new
//! round from the new bytes. The run ends with a round that finds nothing left to change, so a
//! write that replaced install's own (a client that saved without the lock) is noticed and
//! done again.

use std::path::Path;

use anyhow::bail;

use super::lock::FileLock;
use super::write::{self, Written};
use super::Change;

/// Rounds before giving up on files that never stop changing.
const ROUNDS: usize = 10;

/// Plans and writes until a plan changes nothing; returns, per file written, its text before
/// the first write and after the last one. `lock` is the file whose client locks it (its lock
/// is held for each round); `before_rename` runs before each file is replaced.
///
/// # Errors
/// A plan or a write fails, or the files kept changing for [`ROUNDS`] rounds.
pub(super) fn settle(
    lock: Option<&Path>,
    mut plan: impl FnMut() -> anyhow::Result<Vec<Change>>,
    mut before_rename: impl FnMut(&Change) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Change>> {
    let mut done: Vec<Change> = Vec::new();
    let mut last = Vec::new();
    for _ in 0..ROUNDS {
        let _held = lock.map(FileLock::acquire).transpose()?;
        let changes: Vec<Change> = plan()?.into_iter().filter(Change::changes).collect();
        if changes.is_empty() {
            return Ok(done);
        }
        for change in &changes {
            if write::write(change, || before_rename(change))? == Written::Stale {
                break;
            }
            match done.iter_mut().find(|d| d.path == change.path) {
                Some(earlier) => earlier.after.clone_from(&change.after),
                None => done.push(change.clone()),
            }
        }
        last = changes;
    }
    let files: Vec<String> = last
        .iter()
        .map(|c| crate::display::safe(&c.path.display().to_string()).into_owned())
        .collect();
    bail!(
        "{} kept changing while mcp-reconcile wrote it ({ROUNDS} tries); close the client \
         that keeps saving it and run the command again",
        files.join(", ")
    )
}
