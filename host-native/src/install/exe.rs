//! Which path `install` writes into a client's files: one that still runs tomorrow.
//!
//! The binary that runs `install` may live anywhere: an `npx` cache or a `node_modules` folder
//! (gone with the next cache clean), a `target/` folder of a clone (gone with `cargo clean`), a
//! download folder. A client that starts a path which vanished loses every server. So:
//! * when this very file is what `mcp-reconcile` means on the user's `PATH` (`cargo install`,
//!   a package manager, a copy into `~/.local/bin`), that path is written — an upgrade in place
//!   is then picked up by every client without another install;
//! * otherwise the binary is put at a per-user, versioned path,
//!   `$XDG_DATA_HOME/mcp-reconcile/bin/<version>/mcp-reconcile` (`~/.local/share/…`), by a hard
//!   link where the file system allows (instant, the same file) or a copy, always through a
//!   temporary file renamed into place (a daemon running the old file keeps running it), and
//!   that path is written. Installing a newer version writes its own directory; the older one
//!   stays for the sessions still running it.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::inputs::HostEnv;

/// The program name clients start.
const NAME: &str = "mcp-reconcile";

/// Where the binary runs from for the clients `install` sets up, and whether it is put there
/// (`Placed`) or already there (`OnPath`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StableExe {
    /// `exe` is the user's `mcp-reconcile` command: written as it is.
    OnPath(PathBuf),
    /// `exe` is not a command of the user's: the versioned per-user path it goes to.
    Placed(PathBuf),
}

impl StableExe {
    /// The path to write into the client's files.
    pub fn path(&self) -> &Path {
        match self {
            StableExe::OnPath(path) | StableExe::Placed(path) => path,
        }
    }
}

/// Decides where `exe` (this binary, its real path) runs from for the clients, without
/// touching anything.
///
/// # Errors
/// `exe` is not a command on `PATH` and the home directory is unknown.
pub fn stable_exe(env: &HostEnv, exe: &Path, version: &str) -> anyhow::Result<StableExe> {
    let path = env.vars.get("PATH").map(std::ffi::OsString::from);
    let on_path = crate::transport::process::lookup(NAME, &path)
        .and_then(|found| std::fs::canonicalize(found).ok())
        .is_some_and(|found| found == exe);
    if on_path {
        return Ok(StableExe::OnPath(exe.to_path_buf()));
    }
    let data = match env.vars.get("XDG_DATA_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => env
            .home
            .clone()
            .context("cannot find your home directory for the binary's per-user copy: set HOME")?
            .join(".local/share"),
    };
    let version = sanitize(version);
    Ok(StableExe::Placed(
        data.join("mcp-reconcile/bin").join(version).join(NAME),
    ))
}

/// A version as one path component: anything but `[0-9A-Za-z.+-]` becomes `_`, and a name of
/// dots only cannot climb.
fn sanitize(version: &str) -> String {
    let clean: String = version
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() || clean.chars().all(|c| c == '.') {
        "unknown".to_owned()
    } else {
        clean
    }
}

/// Puts `exe` at `stable`'s path when it is [`StableExe::Placed`]: a hard link, else a copy,
/// through a temporary file renamed into place; the directories are created private (0700).
/// Nothing is done when the path already is this file.
///
/// # Errors
/// The directory cannot be created or the file cannot be linked, copied or renamed.
pub fn place(stable: &StableExe, exe: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let StableExe::Placed(target) = stable else {
        return Ok(());
    };
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    };
    if same(target, exe) {
        return Ok(());
    }
    let dir = target
        .parent()
        .context("the binary's per-user path has no folder")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let temporary = dir.join(format!(".{NAME}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    if std::fs::hard_link(exe, &temporary).is_err() {
        std::fs::copy(exe, &temporary)
            .with_context(|| format!("copying {} to {}", exe.display(), temporary.display()))?;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", temporary.display()))?;
    }
    std::fs::rename(&temporary, target).with_context(|| {
        let _ = std::fs::remove_file(&temporary);
        format!("putting the binary at {}", target.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(home: &Path, path: &str) -> HostEnv {
        let mut env = HostEnv {
            home: Some(home.to_path_buf()),
            ..HostEnv::default()
        };
        env.vars.insert("PATH".into(), path.into());
        env
    }

    #[test]
    fn a_binary_that_is_the_users_command_is_written_as_it_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let exe = bin.join(NAME);
        std::fs::write(&exe, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let exe = std::fs::canonicalize(exe).expect("real path");
        let found =
            stable_exe(&env(dir.path(), &bin.to_string_lossy()), &exe, "1.2.3").expect("decided");
        assert_eq!(found, StableExe::OnPath(exe));
    }

    #[test]
    fn any_other_binary_goes_to_a_versioned_per_user_path_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = dir.path().join("_npx/abc/node_modules/pkg/bin");
        std::fs::create_dir_all(&cache).expect("mkdir");
        let exe = cache.join(NAME);
        std::fs::write(&exe, "#!/bin/sh\necho hi\n").expect("write");
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let home = dir.path().join("home");
        let stable = stable_exe(&env(&home, "/usr/bin:/bin"), &exe, "1.2.3/../x").expect("decided");
        assert_eq!(
            stable.path(),
            home.join(".local/share/mcp-reconcile/bin/1.2.3_.._x/mcp-reconcile")
        );
        place(&stable, &exe).expect("placed");
        place(&stable, &exe).expect("placed again: nothing to do");
        assert_eq!(
            std::fs::read(stable.path()).expect("read"),
            std::fs::read(&exe).expect("read")
        );
        let leftovers: Vec<_> = std::fs::read_dir(stable.path().parent().expect("dir"))
            .expect("list")
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left");
    }

    #[test]
    fn a_version_is_one_harmless_path_component() {
        assert_eq!(sanitize("0.1.0-rc.1+abc"), "0.1.0-rc.1+abc");
        assert_eq!(sanitize(".."), "unknown");
        assert_eq!(sanitize(""), "unknown");
        assert_eq!(sanitize("a/b"), "a_b");
    }
}
