//! Reading an input file: [`read_text`], the one bounded, non-blocking, regular-files-only
//! way an input file is read, its bounds, the missing-file grace, and the messages a file
//! that does not load gets.

use std::path::Path;

use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::{Millis, ServerConfig, Servers};

/// How long a settings file or `.mcp.json` that had content and went missing keeps its last
/// good content before its servers stop: an editor or tool that deletes a file and writes it
/// again a moment later must not restart every server in it. The host owns the timer
/// ([`Inputs::expire_missing`](super::Inputs::expire_missing)).
pub const MISSING_GRACE: Millis = Millis(3_000);

/// A file that had content and is missing now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Missing {
    /// Present, or missing with nothing to keep.
    #[default]
    No,
    /// Missing since a reload: its last good content stays in use for [`MISSING_GRACE`].
    Held,
    /// Still missing after the grace: read as empty until it comes back.
    Expired,
}

/// The error a held missing file shows.
pub(super) fn held_note() -> String {
    format!(
        "file missing — its servers stay as they are for {} s in case it comes back; after \
         that they stop",
        MISSING_GRACE.0 / 1000
    )
}

/// The note appended to a load error: what stays in use meanwhile.
pub(super) fn kept_note(has_last_good: bool) -> &'static str {
    if has_last_good {
        "its last good content stays in use until it loads again"
    } else {
        "nothing from it is used until it loads"
    }
}

/// `text`'s parse (`parsed`), or why not as the user should read it: empty, or not valid
/// JSON, and what stays in use meanwhile.
pub(super) fn explain(
    parsed: Result<Value, json::ParseError>,
    text: &str,
    has_last_good: bool,
) -> Result<Value, String> {
    parsed.map_err(|e| {
        let what = if text.trim().is_empty() {
            "it is empty".to_owned()
        } else {
            format!("not valid JSON: {e}")
        };
        format!("{what} — fix it; {}", kept_note(has_last_good))
    })
}

/// The largest input file read (settings, `.mcp.json`, `--mcp-config`,
/// approvals): a repository's file is hostile input, and no real
/// configuration comes near this.
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// The largest client state file read ([`read_client_text`]): Claude Code's `~/.claude.json`
/// keeps every project's history beside the servers, and users report 15–65 MB of it. Four
/// times the largest report, and still a bound: only the user's own client files, never a
/// repository's, are read with it.
pub const MAX_CLIENT_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a file as text; `None` when it does not exist.
///
/// Bounded and never waiting: the file is opened non-blocking (a FIFO does
/// not wait for a writer), must be a regular file after symlinks are followed
/// (a FIFO, socket, device such as `/dev/zero`, or directory is refused), and
/// at most [`MAX_INPUT_BYTES`] are read (a larger file is an error).
pub fn read_text(path: &Path) -> Result<Option<String>, String> {
    read_text_within(path, MAX_INPUT_BYTES)
}

/// Reads a client file that is large by nature (Claude Code's `~/.claude.json`) as
/// [`read_text`] does, with the bound that fits it, [`MAX_CLIENT_STATE_BYTES`]. For the user's
/// own client state only: a repository's file keeps [`MAX_INPUT_BYTES`].
///
/// # Errors
/// Unreadable, not a regular file, larger than the bound, or not UTF-8, as a clause.
pub fn read_client_text(path: &Path) -> Result<Option<String>, String> {
    read_text_within(path, MAX_CLIENT_STATE_BYTES)
}

/// [`read_text`] with at most `limit` bytes.
fn read_text_within(path: &Path, limit: u64) -> Result<Option<String>, String> {
    match open_input(path)? {
        Some(file) => read_opened_within(file, limit).map(Some),
        None => Ok(None),
    }
}

/// Opens an input file for reading without waiting (non-blocking: a FIFO does not wait for a
/// writer); `None` when it does not exist.
pub(super) fn open_input(path: &Path) -> Result<Option<std::fs::File>, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
    match opened {
        Ok(file) => Ok(Some(file)),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.kind() == std::io::ErrorKind::NotADirectory =>
        {
            Ok(None)
        }
        Err(e) => Err(format!("cannot read it: {e}")),
    }
}

/// Reads an open file as [`read_text`] does: a regular file of at most
/// [`MAX_INPUT_BYTES`] of UTF-8 text (for callers that check what was opened
/// before reading it).
///
/// # Errors
/// Not a regular file, too large, unreadable, or not UTF-8, as a clause.
pub fn read_opened(file: std::fs::File) -> Result<String, String> {
    read_opened_within(file, MAX_INPUT_BYTES)
}

/// [`read_opened`] with at most `limit` bytes.
pub(super) fn read_opened_within(file: std::fs::File, limit: u64) -> Result<String, String> {
    use std::io::Read as _;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "it is not a regular file (it is {}); only regular files are read — replace it with a file",
            file_kind(&meta.file_type())
        ));
    }
    let too_large = || {
        format!(
            "it is larger than {} MiB; a configuration file is never that large — check what wrote it",
            limit / (1024 * 1024)
        )
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
}

pub(super) fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// The object entries of a server map; every other entry becomes an error
/// naming it.
pub(super) fn object_entries(map: &Object, where_: &str) -> (Servers, Vec<String>) {
    let mut servers = Servers::new();
    let mut errors = Vec::new();
    for (name, entry) in map {
        match entry {
            Value::Object(o) => servers.insert(name.clone(), ServerConfig::new(o.clone())),
            other => errors.push(format!(
                "server \"{name}\" in {where_} must be an object, found {} — skipped; fix or \
                 remove that entry",
                other.preview(60)
            )),
        }
    }
    (servers, errors)
}
