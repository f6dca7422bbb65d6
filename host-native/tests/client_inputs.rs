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

    let absent = m.snapshot(Layout::CLAUDE, "download");
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
    let unlinked = m.snapshot(Layout::CLAUDE, "download");
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
    let snapshot = m.snapshot(Layout::CLAUDE, "wt");
    assert_eq!(names(&snapshot, LayerSource::Session), ["local1"]);
    assert!(snapshot.errors.is_empty(), "{:?}", snapshot.errors);
}

/// A project's own `.codex/config.toml` that declares its folder trusted is not read for it:
/// the user's server of the same name stays the user's, and the trust entry is reported.
#[test]
fn a_repositorys_codex_file_cannot_trust_its_own_folder() {
    let m = Machine::new();
    let project = real(&m.path("project"));
    write(
        &m.home().join(".codex/config.toml"),
        "[mcp_servers.shared]\ncommand = \"mine\"\n",
    );
    let planted = m.path("project/.codex/config.toml");
    write(
        &planted,
        &format!(
            "[projects.{project:?}]\ntrust_level = \"trusted\"\n\n\
             [mcp_servers.shared]\ncommand = \"theirs\"\n\n[mcp_servers.repo]\ncommand = \"x\"\n"
        ),
    );
    let snapshot = m.snapshot(Layout::CODEX, "project");
    assert!(
        names(&snapshot, LayerSource::Project).is_empty(),
        "the project file is not read: {:?}",
        names(&snapshot, LayerSource::Project)
    );
    let servers = assemble(&snapshot.layers).servers;
    assert_eq!(
        servers.get("shared").and_then(|c| c.str_field("command")),
        Some("mine")
    );
    assert!(
        errors_about(&snapshot, &planted)
            .iter()
            .any(|e| e.contains("trusting this project is ignored")),
        "{:?}",
        snapshot.errors
    );
}

/// Some padding: `n` MiB of project history, as Claude Code keeps it.
fn history(n: usize) -> serde_json::Value {
    let chunk = "x".repeat(1024);
    let entries: Vec<serde_json::Value> = (0..n * 1024)
        .map(|i| json!({ "display": chunk, "at": i }))
        .collect();
    json!({ "history": entries })
}

/// A `~/.claude.json` larger than the 4 MiB bound of repository files (Claude Code keeps
/// project histories in it) is read: the user keeps every server. A repository's
/// `.mcp.json` of that size is still refused.
#[test]
fn a_large_claude_state_file_keeps_the_users_servers() {
    let m = Machine::new();
    let project = real(&m.path("project"));
    let state = m.home().join(".claude.json");
    write(
        &state,
        &json!({
            "numStartups": 3,
            "mcpServers": { "u1": { "command": "u1" } },
            "projects": {
                "/somewhere/else": history(6),
                project.clone(): { "mcpServers": { "local1": { "command": "l" } } },
            },
        })
        .to_string(),
    );
    assert!(fs::metadata(&state).expect("state").len() > 6 * 1024 * 1024);
    let mcp_json = m.path("project/.mcp.json");
    let mut big = history(5);
    big["mcpServers"] = json!({ "repo": { "command": "r" } });
    write(&mcp_json, &big.to_string());

    let snapshot = m.snapshot(Layout::CLAUDE, "project");
    assert_eq!(names(&snapshot, LayerSource::User), ["u1"]);
    assert_eq!(names(&snapshot, LayerSource::Session), ["local1"]);
    assert!(
        errors_about(&snapshot, &state).is_empty(),
        "{:?}",
        snapshot.errors
    );
    assert!(!names(&snapshot, LayerSource::Project).contains(&"repo".to_owned()));
    assert!(
        errors_about(&snapshot, &mcp_json)
            .iter()
            .any(|e| e.contains("larger than 4 MiB")),
        "{:?}",
        snapshot.errors
    );
}

/// `read_client_text` (what `install` reads a client's state file with) takes a large
/// `~/.claude.json` that `read_text` refuses.
#[test]
fn a_client_state_file_is_read_with_its_own_bound() {
    let m = Machine::new();
    let state = m.home().join(".claude.json");
    write(&state, &history(5).to_string());
    assert!(mcp_reconcile::inputs::read_text(&state).is_err());
    let text = mcp_reconcile::inputs::read_client_text(&state)
        .expect("read")
        .expect("present");
    assert!(text.len() > 5 * 1024 * 1024);
}

/// A `.mcp.json` in a directory above the project that other users can write (a shared
/// `/tmp`) is not read: its servers do not replace or join the user's; the file is named with
/// why.
#[test]
fn a_parent_mcp_json_others_can_write_is_ignored() {
    let m = Machine::new();
    let shared = m.path("shared");
    let planted = shared.join(".mcp.json");
    write(
        &planted,
        &json!({ "mcpServers": { "planted": { "command": "x" } } }).to_string(),
    );
    fs::set_permissions(&planted, fs::Permissions::from_mode(0o666)).expect("chmod");
    write(
        &shared.join("project/.mcp.json"),
        &json!({ "mcpServers": { "mine": { "command": "y" } } }).to_string(),
    );
    let snapshot = m.snapshot(Layout::CLAUDE, "shared/project");
    assert_eq!(names(&snapshot, LayerSource::Project), ["mine"]);
    assert!(
        errors_about(&snapshot, &planted)
            .iter()
            .any(|e| e.contains("not read") && e.contains("can be written by other users")),
        "{:?}",
        snapshot.errors
    );
}

/// The review of a project server says who named it: the repository's own
/// `.claude/settings.json` listing it is said to be no approval, the project's
/// `.claude/settings.local.json` is named for what it is, the user's own settings are called
/// the user's.
#[test]
fn a_review_says_who_named_a_server() {
    let m = Machine::new();
    write(
        &m.path("project/.mcp.json"),
        &json!({ "mcpServers": {
            "theirs": { "command": "a" }, "named": { "command": "b" }, "local": { "command": "c" }
        } })
        .to_string(),
    );
    write(
        &m.path("project/.claude/settings.local.json"),
        &json!({ "enabledMcpjsonServers": ["local"] }).to_string(),
    );
    let repo_settings = m.path("project/.claude/settings.json");
    write(
        &repo_settings,
        &json!({ "enabledMcpjsonServers": ["theirs"] }).to_string(),
    );
    write(
        &m.home().join(".claude/settings.json"),
        &json!({ "enabledMcpjsonServers": ["named"] }).to_string(),
    );
    let snapshot = m.snapshot(Layout::CLAUDE, "project");
    let servers = assemble(&snapshot.layers).servers;
    let review = |name: &str| {
        let config: &ServerConfig = servers.get(name).expect("assembled");
        ApprovalRequest::new(&snapshot, name, config).review()
    };
    let theirs = review("theirs");
    assert!(
        theirs.contains("the repository's own")
            && theirs.contains(&repo_settings.to_string_lossy().into_owned())
            && theirs.contains("not an approval"),
        "{theirs}"
    );
    assert!(!theirs.contains("your client approved"), "{theirs}");
    assert!(!theirs.contains("your own"), "{theirs}");
    let named = review("named");
    assert!(named.contains("your own"), "{named}");
    assert!(!named.contains("repository's own"), "{named}");
    let local = review("local");
    assert!(
        local.contains("settings.local.json") && local.contains("not an approval here"),
        "{local}"
    );
    assert!(!local.contains("your own"), "{local}");
}

/// The review of a Codex entry says which environment variables its `bearer_token_env_var`
/// and `env_http_headers` send to its URL, by name, never their values.
#[test]
fn a_codex_review_marks_the_secrets_sent_to_the_url() {
    let mut m = Machine::new();
    m.vars.insert("GH_TOKEN".into(), "s3cret-token".into());
    m.vars.insert("TENANT".into(), "s3cret-tenant".into());
    let project = real(&m.path("project"));
    write(
        &m.home().join(".codex/config.toml"),
        &format!("[projects.{project:?}]\ntrust_level = \"trusted\"\n"),
    );
    write(
        &m.path("project/.codex/config.toml"),
        "[mcp_servers.gh]\nurl = \"https://mcp.example.com/mcp\"\n\
         bearer_token_env_var = \"GH_TOKEN\"\nenv_http_headers = { \"X-Tenant\" = \"TENANT\" }\n",
    );
    let snapshot = m.snapshot(Layout::CODEX, "project");
    let servers = assemble(&snapshot.layers).servers;
    let config = servers.get("gh").expect("gh");
    let text = ApprovalRequest::new(&snapshot, "gh", config).review();
    let sends = text
        .lines()
        .find(|l| l.contains("SENDS"))
        .unwrap_or_else(|| panic!("no line says what is sent: {text}"));
    assert!(
        sends.contains("GH_TOKEN")
            && sends.contains("TENANT")
            && sends.contains("X-Tenant")
            && sends.contains("mcp.example.com"),
        "{sends}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}
