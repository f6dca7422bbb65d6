//! Directories and sockets only this user can use: the state directory, the daemon's runtime
//! directory, the config directory `auth` and `approve` write into.
//!
//! Another local user must never be able to stand in for them. Every check looks at the path
//! itself, never through it:
//! * a directory is `lstat`ed (a symlink is refused, not followed), must be ours, must not be
//!   a shared sticky directory, and is tightened to 0700 through a descriptor opened with
//!   `O_NOFOLLOW` (`fchmod`), after checking that the descriptor is the directory we looked at
//!   — so a swapped path can never make us change the mode of something else;
//! * every ancestor must be owned by us or root and not writable by others (unless sticky, as
//!   `/tmp` is: there nobody else can rename what is ours), or whoever can write there could
//!   replace the directory;
//! * a socket is `lstat`ed (ours, a socket) before it is connected to, and the process that
//!   accepted the connection must run as our uid (`SO_PEERCRED`) before a byte is sent.
//!
//! A directory that does not pass is an error naming it and what to do; nothing is sent, and
//! nothing is changed outside it.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::Path;

use anyhow::{bail, Context};
use nix::fcntl::{open, OFlag};
use nix::sys::stat::{fchmod, Mode};
use tokio::net::UnixStream;

/// Our effective uid.
pub fn uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Creates `dir` (and missing parents) with mode 0700 whatever the umask, or checks an existing
/// one ([`check_dir`]), tightening its mode to 0700.
///
/// # Errors
/// `dir` cannot be created, or [`check_dir`] refuses it.
pub fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    // `mode` is filtered by the umask, which can only take bits away from 0700.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the directory {}", dir.display()))?;
    check_dir(dir)
}

/// Checks that `dir` is a directory only we can use (see the module docs) and sets its mode to
/// 0700 if group or other bits are set.
///
/// # Errors
/// `dir` is missing, a symlink, not a directory, owned by another user, a shared sticky
/// directory, lies below a directory others can write, or its mode cannot be tightened.
pub fn check_dir(dir: &Path) -> anyhow::Result<()> {
    let shown = dir.display();
    let meta = fs::symlink_metadata(dir).with_context(|| format!("reading {shown}"))?;
    if meta.file_type().is_symlink() {
        bail!(
            "{shown} is a symbolic link; a private directory must be a real directory (someone \
             who can plant a link could redirect it): remove the link"
        );
    }
    if !meta.is_dir() {
        bail!("{shown} is not a directory; remove it or choose another location");
    }
    let ours = uid();
    if meta.uid() != ours {
        bail!(
            "{shown} belongs to uid {}, not to you (uid {ours}): its owner could read or replace \
             what is kept there; remove it or choose another location",
            meta.uid()
        );
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o1000 != 0 {
        bail!(
            "{shown} is a shared sticky directory (mode {mode:o}); choose a directory only you \
             can use, e.g. a new directory inside it"
        );
    }
    check_ancestors(dir)?;
    if mode & 0o077 != 0 {
        tighten(dir, &meta).with_context(|| {
            format!("{shown} is open to other users (mode {mode:o}) and cannot be set to 0700")
        })?;
        tracing::warn!(
            dir = %shown,
            "the directory was open to other users (mode {mode:o}); set it to 0700"
        );
    }
    Ok(())
}

/// Whether the group `gid` is ours alone: a user-private group — our primary group, named as we
/// are, with no other members listed. A shared primary group (`users`, `staff`) is not: its
/// other members could write what it may write.
fn group_is_private(gid: u32) -> bool {
    use nix::unistd::{getegid, geteuid, Gid, Group, User};
    if gid != getegid().as_raw() {
        return false;
    }
    let user = User::from_uid(geteuid()).ok().flatten();
    let group = Group::from_gid(Gid::from_raw(gid)).ok().flatten();
    match (user, group) {
        (Some(user), Some(group)) => {
            group.name == user.name && group.mem.iter().all(|member| *member == user.name)
        }
        _ => false,
    }
}

/// `fchmod(0700)` through a descriptor opened without following a symlink, after checking that
/// it is the directory `seen` describes (same device and inode, still ours).
fn tighten(dir: &Path, seen: &fs::Metadata) -> anyhow::Result<()> {
    let fd = open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // Through std's metadata: its `dev()` is `u64` everywhere (`st_dev` is `i32` on Apple).
    let fd = std::fs::File::from(fd);
    let now = fd.metadata()?;
    if now.dev() != seen.dev() || now.ino() != seen.ino() || now.uid() != uid() {
        bail!("it was replaced while being checked");
    }
    fchmod(&fd, Mode::from_bits_truncate(0o700))?;
    Ok(())
}

/// Every ancestor of `dir` (its real path) must be owned by us or root and writable by no one
/// else, unless it is sticky (then no one else can rename or remove our entry in it).
fn check_ancestors(dir: &Path) -> anyhow::Result<()> {
    let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    let real =
        fs::canonicalize(parent).with_context(|| format!("resolving {}", parent.display()))?;
    let ours = uid();
    for ancestor in real.ancestors() {
        let meta =
            fs::metadata(ancestor).with_context(|| format!("reading {}", ancestor.display()))?;
        let mode = meta.mode();
        let sticky = mode & 0o1000 != 0;
        let owner_ok = meta.uid() == ours || meta.uid() == 0;
        // Group-writable is fine only when the group is ours alone (a user-private group).
        let group_writes = mode & 0o020 != 0 && !group_is_private(meta.gid());
        let other_writes = mode & 0o002 != 0;
        if !owner_ok || ((group_writes || other_writes) && !sticky) {
            bail!(
                "{} lies below {}, which {}: another user could replace it; choose a location \
                 below directories only you (or root) can change",
                dir.display(),
                ancestor.display(),
                if owner_ok {
                    format!("others can write (mode {:o})", mode & 0o7777)
                } else {
                    format!("belongs to uid {}", meta.uid())
                }
            );
        }
    }
    Ok(())
}

/// Connects to the socket `name` in the private directory `dir`, trusting neither before it is
/// checked: the directory must pass [`check_dir`] and the socket must be ours; the process that
/// accepts must run as our uid. `Ok(None)` when the directory or socket does not exist or
/// nothing listens — the only cases in which a caller may start its own.
///
/// # Errors
/// The directory or the socket is not ours, or another user's process answered.
pub async fn connect(dir: &Path, name: &str) -> anyhow::Result<Option<UnixStream>> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        _ => check_dir(dir)?,
    }
    let path = dir.join(name);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if !meta.file_type().is_socket() || meta.uid() != uid() {
        bail!(
            "{} is not a socket of yours (owner uid {}); not connecting — remove it",
            path.display(),
            meta.uid()
        );
    }
    let Ok(stream) = UnixStream::connect(&path).await else {
        return Ok(None);
    };
    check_peer(&stream, &path)?;
    Ok(Some(stream))
}

/// The process on the other end of `stream` must run as our uid.
///
/// # Errors
/// Its uid cannot be read or is another user's.
pub fn check_peer(stream: &UnixStream, path: &Path) -> anyhow::Result<()> {
    let peer = stream
        .peer_cred()
        .with_context(|| format!("reading who listens on {}", path.display()))?
        .uid();
    if peer != uid() {
        bail!(
            "{} is served by uid {peer}, not by you (uid {}); nothing was sent to it — remove \
             the socket and its directory",
            path.display(),
            uid()
        );
    }
    Ok(())
}

/// Creates `dir` and its missing parents with mode 0700 whatever the umask, leaving existing
/// ones as they are (a config directory another program shares), then refuses it when another
/// user can write it ([`foreign_writer`]).
///
/// # Errors
/// `dir` cannot be created, or another user can write it.
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the directory {}", dir.display()))?;
    match foreign_writer(dir) {
        Some(why) => Err(anyhow::anyhow!(why)),
        None => Ok(()),
    }
}

/// Why another user could change the file or directory `path` (after symlinks) or replace it
/// in its directory: it (or its directory) belongs to a user other than us and root, or is
/// writable by others — by the group unless it is ours alone (`group_is_private`), and for the
/// directory only when it is not sticky. `None` when only we (or root) can. A path that
/// cannot be read is `None`: the caller's own read reports it.
pub fn foreign_writer(path: &Path) -> Option<String> {
    let ours = uid();
    let real = fs::canonicalize(path).ok()?;
    let mut places = vec![real.clone()];
    places.extend(real.parent().map(Path::to_path_buf));
    for (at, place) in places.iter().enumerate() {
        let meta = fs::metadata(place).ok()?;
        let mode = meta.mode() & 0o7777;
        let shared_dir = at > 0 && mode & 0o1000 != 0;
        let what = if at == 0 { "it" } else { "its directory" };
        if meta.uid() != ours && meta.uid() != 0 {
            return Some(format!(
                "{} cannot be trusted: {what} ({}) belongs to uid {}, not to you (uid {ours}); \
                 remove it or take it over (chown)",
                path.display(),
                place.display(),
                meta.uid()
            ));
        }
        let group_writes = mode & 0o020 != 0 && !group_is_private(meta.gid());
        if (mode & 0o002 != 0 || group_writes) && !shared_dir {
            return Some(format!(
                "{} cannot be trusted: {what} ({}) can be written by other users (mode {mode:o}); \
                 check its contents, then `chmod go-w {}`",
                path.display(),
                place.display(),
                place.display()
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_group_writable_file_is_trusted_only_when_the_group_is_ours_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("approvals.json");
        fs::write(&file, "{}").expect("write");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o660)).expect("chmod");
        let ours = nix::unistd::getegid().as_raw();
        // Our own primary group: trusted exactly when it is a user-private group.
        assert_eq!(foreign_writer(&file).is_none(), group_is_private(ours));
        if nix::unistd::geteuid().is_root() {
            // Another group (`users`, say): its members could write the file.
            nix::unistd::chown(&file, None, Some(nix::unistd::Gid::from_raw(100))).expect("chgrp");
            let why = foreign_writer(&file).expect("refused");
            assert!(why.contains("can be written by other users"), "{why}");
        }
        assert!(!group_is_private(ours.wrapping_add(1)));
    }
}
