//! Reading a document for a language server, confined to the project (SPEC §14.5).
//!
//! A repository can commit a symbolic link (`leak.py -> ../../.aws/credentials`,
//! `env.json -> /proc/self/environ`, or a linked directory on the way), and whatever the host
//! reads is handed to the server and comes back through diagnostics, hover or symbols. So the
//! check is made on what was actually opened, not on the path as written:
//! 1. the file is opened non-blocking (a FIFO does not wait for a writer), following links;
//! 2. the kernel says which file that descriptor is (`/proc/self/fd/N`): it must lie inside
//!    the project root with every link of the root resolved too, and never under `/proc`,
//!    `/sys` or `/dev`;
//! 3. the text is read from that same descriptor, bounded, regular files only
//!    ([`crate::inputs::read_opened`]).
//!
//! A link swapped between the check and the read changes nothing: the descriptor is fixed at
//! step 1. The resolved path is what the server is told (`didOpen`'s URI).

use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

/// Trees no project file may lead into: the kernel's views of processes (the host's own
/// environment among them), devices and itself.
const SYSTEM_TREES: [&str; 3] = ["/proc", "/sys", "/dev"];

/// The text of the file at `path` and where it really is (every link resolved), if that is
/// inside `project_root`.
///
/// # Errors
/// A sentence naming the file: it does not exist, it leads outside the project or into a
/// system tree (saying where), or it cannot be read as [`crate::inputs::read_opened`] says.
pub(crate) fn read_in_project(
    project_root: &Path,
    path: &Path,
) -> Result<(PathBuf, String), String> {
    let shown = || crate::display::safe(&path.to_string_lossy()).into_owned();
    let root = std::fs::canonicalize(project_root).map_err(|e| {
        format!(
            "cannot read {}: the project root {} cannot be resolved ({e})",
            shown(),
            project_root.display()
        )
    })?;
    let file = open_nonblocking(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
            format!("{} does not exist", shown())
        }
        _ => format!("cannot read {}: {e}", shown()),
    })?;
    let opened = opened_path(&file, path).map_err(|e| {
        format!(
            "{} is refused: where it leads cannot be checked ({e})",
            shown()
        )
    })?;
    if SYSTEM_TREES.iter().any(|tree| opened.starts_with(tree)) || !opened.starts_with(&root) {
        return Err(format!(
            "{} is refused: it leads to {}, outside the project {} (through a symbolic link); \
             only files inside the project are read",
            shown(),
            crate::display::safe(&opened.to_string_lossy()),
            root.display()
        ));
    }
    let text =
        crate::inputs::read_opened(file).map_err(|e| format!("cannot read {}: {e}", shown()))?;
    Ok((opened, text))
}

/// Whether the workspace folder, every link resolved, still lies inside the project: the
/// server runs there and reads what it finds, so a committed `src -> ~` must not move it out.
///
/// # Errors
/// A clause saying where the folder leads, or why that cannot be told.
pub(crate) fn folder_in_project(project_root: &Path, folder: &Path) -> Result<(), String> {
    let resolve = |path: &Path| {
        std::fs::canonicalize(path)
            .map_err(|e| format!("{} cannot be resolved ({e})", path.display()))
    };
    let root = resolve(project_root)?;
    let real = resolve(folder)?;
    if SYSTEM_TREES.iter().any(|tree| real.starts_with(tree)) || !real.starts_with(&root) {
        return Err(format!(
            "its workspace folder {} leads to {}, outside the project {} (through a symbolic              link); use a folder inside the project",
            crate::display::safe(&folder.to_string_lossy()),
            crate::display::safe(&real.to_string_lossy()),
            root.display()
        ));
    }
    Ok(())
}

/// Opens `path` for reading without waiting (`O_NONBLOCK`: a FIFO with no writer opens at
/// once and is then refused as not a regular file) and without taking a terminal.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
}

/// The path of the file `file` (opened from `path`) is, as the kernel resolved it when it was
/// opened: `/proc/self/fd/N` on Linux, else [`path_by_identity`].
fn opened_path(file: &std::fs::File, path: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    // Removed since it was opened: no path leads to it any more.
    if file.metadata()?.nlink() == 0 {
        return Err(std::io::Error::other("the file was removed"));
    }
    match std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(opened) if opened.is_absolute() => Ok(opened),
        _ => path_by_identity(file, path),
    }
}

/// Without `/proc` (macOS, a container that has none): where `path` leads now, accepted only
/// if it is the very file that was opened (same device and inode) — a link re-pointed since
/// the open is refused, never followed to its new target.
fn path_by_identity(file: &std::fs::File, path: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let opened = file.metadata()?;
    let real = std::fs::canonicalize(path)?;
    let now = std::fs::metadata(&real)?;
    if (now.dev(), now.ino()) != (opened.dev(), opened.ino()) {
        return Err(std::io::Error::other(
            "it was changed while it was being opened",
        ));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_that_really_lie_inside_the_project_are_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let project = dir.path().join("project");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(project.join("src")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(project.join("src/a.json"), "{}").expect("write");
        std::fs::write(outside.join("secret.json"), "SECRET").expect("write");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, project.join(name)).expect("symlink");
        };
        link(Path::new("src/a.json"), "alias.json");
        link(&outside.join("secret.json"), "leak.json");
        link(Path::new("../outside"), "linked");
        link(Path::new("/proc/self/environ"), "env.json");

        let (real, text) = read_in_project(&project, &project.join("alias.json")).expect("inside");
        assert_eq!(text, "{}");
        let canonical = std::fs::canonicalize(project.join("src/a.json")).expect("canonical");
        assert_eq!(
            real, canonical,
            "the resolved path is what the server is told"
        );

        for name in ["leak.json", "linked/secret.json", "env.json"] {
            let error = read_in_project(&project, &project.join(name)).expect_err(name);
            assert!(
                error.contains(name) && error.contains("outside the project"),
                "{error}"
            );
            assert!(!error.contains("SECRET"), "{error}");
        }
        let missing = read_in_project(&project, &project.join("none.json")).expect_err("missing");
        assert!(missing.contains("does not exist"), "{missing}");

        assert_eq!(folder_in_project(&project, &project.join("src")), Ok(()));
        let error = folder_in_project(&project, &project.join("linked")).expect_err("out");
        assert!(error.contains("outside the project"), "{error}");
    }

    #[test]
    fn a_fifo_inside_the_project_is_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("pipe.json");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let error = read_in_project(dir.path(), &fifo).expect_err("a FIFO");
        assert!(error.contains("not a regular file"), "{error}");
    }

    #[test]
    fn without_proc_the_path_must_still_be_the_file_that_was_opened() {
        let dir = tempfile::tempdir().expect("temp dir");
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        std::fs::write(&a, "A").expect("write");
        std::fs::write(&b, "B").expect("write");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&a, &link).expect("symlink");
        let file = open_nonblocking(&link).expect("open");
        let real_a = std::fs::canonicalize(&a).expect("canonical");
        assert_eq!(path_by_identity(&file, &link).expect("same file"), real_a);
        // Re-pointed after the open: the new target is not what was opened.
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink(&b, &link).expect("symlink");
        let err = path_by_identity(&file, &link).expect_err("swapped");
        assert!(err.to_string().contains("changed"), "{err}");
    }
}
