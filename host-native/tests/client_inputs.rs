//! What the client layouts read, with real files in temp dirs (and real `git` for worktrees):
//! a repository's files never reach the user's servers, another project's local scope, or a
//! review's claim of who approved what; the user's own large client state is read whole.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use mcp_reconcile::inputs::{HostEnv, Inputs, Layout, Options, Snapshot};
use mcp_reconcile::review::ApprovalRequest;
use mcp_reconcile_kernel::{assemble, LayerSource, ServerConfig};
use serde_json::json;
use tempfile::TempDir;

/// A temp machine: a home directory, an /etc stand-in, and any project directories.
struct Machine {
    tmp: TempDir,
    vars: BTreeMap<String, String>,
}

impl Machine {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in ["home", "etc", "project"] {
            fs::create_dir_all(tmp.path().join(dir)).expect("mkdir");
        }
        let home = tmp.path().join("home").to_string_lossy().into_owned();
        Machine {
            tmp,
            vars: BTreeMap::from([("HOME".to_owned(), home)]),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// Loads the inputs of `layout` for the project directory `project` (relative).
    fn snapshot(&self, layout: Layout, project: &str) -> Snapshot {
        let flags = Options {
            layout,
            project: Some(self.path(project)),
            system_settings: Some(self.path("etc/managed-settings.json")),
            approvals: Some(self.path("approvals.json")),
            state_dir: Some(self.path("state")),
            ..Options::default()
        };
        let env = HostEnv {
            vars: self.vars.clone(),
            cwd: self.tmp.path().to_path_buf(),
            home: Some(self.home()),
            raw: Vec::new(),
        };
        Inputs::with_env(&flags, env).expect("inputs").load(None)
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn real(path: &Path) -> String {
    path.canonicalize()
        .expect("exists")
        .to_string_lossy()
        .into_owned()
}

/// Every server name in the snapshot's layers of kind `source`.
fn names(snapshot: &Snapshot, source: LayerSource) -> Vec<String> {
    snapshot
        .layers
        .iter()
        .filter(|layer| layer.source == source)
        .flat_map(|layer| layer.servers.keys().cloned())
        .collect()
}

/// Every server name in the snapshot, whatever its layer.
fn all_names(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .layers
        .iter()
        .flat_map(|layer| layer.servers.keys().cloned())
        .collect()
}

fn errors_about(snapshot: &Snapshot, file: &Path) -> Vec<String> {
    snapshot
        .errors
        .iter()
        .filter(|e| e.file == file)
        .map(|e| e.message.clone())
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `~/.claude.json` giving the project at `key` one local-scope server, `local1`.
fn local_scope(m: &Machine, key: &str) {
    write(
        &m.home().join(".claude.json"),
        &json!({ "projects": { key: { "mcpServers": { "local1": { "command": "./run.sh" } } } } })
            .to_string(),
    );
}

/// A downloaded directory whose `.git` file names a worktree of another repository — one that
/// does not exist, or one that exists but is not linked to this directory — is not in that
/// repository: none of that repository's local-scope servers is read, and the `.git` file is
/// reported.
#[test]
fn a_git_file_pointing_elsewhere_is_not_a_git_root() {
    let m = Machine::new();
    fs::create_dir_all(m.path("main/.git/worktrees")).expect("main repo");
    let main = real(&m.path("main"));
    local_scope(&m, &main);
    let download = m.path("download");
    write(
        &download.join(".git"),
        &format!("gitdir: {main}/.git/worktrees/x\n"),
    );

    let absent = m.snapshot(Layout::Claude, "download");
    assert!(!all_names(&absent).contains(&"local1".to_owned()));
    let reported = errors_about(&absent, &download.join(".git"));
    assert!(
        reported
            .iter()
            .any(|e| e.contains("not taken as part of that repository")),
        "{:?}",
        absent.errors
    );

    // The worktree directory exists and points back to main, but its back-link names
    // another checkout: still not this directory's repository.
    let x = m.path("main/.git/worktrees/x");
    write(&x.join("commondir"), "../..\n");
    write(&x.join("HEAD"), "ref: refs/heads/main\n");
    write(&x.join("gitdir"), &format!("{main}/elsewhere/.git\n"));
    let unlinked = m.snapshot(Layout::Claude, "download");
    assert!(!all_names(&unlinked).contains(&"local1".to_owned()));
    assert!(!errors_about(&unlinked, &download.join(".git")).is_empty());
}

/// A worktree made by `git worktree add` still gets its main repository's local scope, as
/// in Claude Code.
#[test]
fn a_real_git_worktree_maps_to_its_main_repository() {
    let m = Machine::new();
    let main = m.path("main");
    fs::create_dir_all(&main).expect("mkdir");
    git(&main, &["init", "-q"]);
    git(&main, &["commit", "-q", "--allow-empty", "-m", "init"]);
    git(&main, &["worktree", "add", "-q", "../wt"]);
    local_scope(&m, &real(&main));
    let snapshot = m.snapshot(Layout::Claude, "wt");
    assert_eq!(names(&snapshot, LayerSource::Session), ["local1"]);
    assert!(snapshot.errors.is_empty(), "{:?}", snapshot.errors);
}
