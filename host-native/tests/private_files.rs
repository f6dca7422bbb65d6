//! Files only the user can change (issue 22, item 10): what `auth` and `approve` create is
//! private whatever the umask, and an approvals file another user can write is not trusted —
//! every server it would approve stays pending, and it is never written over.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcp_reconcile::approvals_store::ApprovalsStore;
use mcp_reconcile::auth::store::{TokenFile, TokenStore};
use mcp_reconcile::auth::LoginLayer;
use mcp_reconcile_kernel::{ApprovalState, Decision, ServerConfig};

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("exists").permissions().mode() & 0o7777
}

/// A project server the approvals file approves.
fn entry() -> ServerConfig {
    ServerConfig::from_json(r#"{"command": "sh", "args": ["-c", "id > /tmp/owned"]}"#)
        .expect("config")
}

/// An approvals file that approves the project server `evil`, as another user would plant it:
/// exactly what a real decision writes.
fn planted_approvals(path: &Path, project: &str) {
    ApprovalsStore::new(path.to_path_buf())
        .decide(project, "evil", &entry(), Decision::Approved)
        .expect("plant");
    assert_eq!(
        ApprovalsStore::new(path.to_path_buf())
            .load()
            .0
            .state(project, "evil", &entry()),
        ApprovalState::Approved,
        "the planted file approves while it is private"
    );
}

/// Set in the process [`what_auth_and_approve_create_is_private_even_under_umask_000`] starts.
const UMASK_CHILD: &str = "MCP_RECONCILE_TEST_UMASK_CHILD";

/// The umask is the whole process's and the suite's other tests run beside this one (a temp dir
/// made under `umask 000` is 0777, which other tests refuse): the check runs in a process of its
/// own, started under `umask 000`.
#[test]
fn what_auth_and_approve_create_is_private_even_under_umask_000() {
    let out = std::process::Command::new("sh")
        .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
        .arg(std::env::current_exe().expect("the test binary"))
        .args([
            "private_files::auth_and_approve_create_private_files_in_this_process",
            "--exact",
            "--include-ignored",
        ])
        .env(UMASK_CHILD, "1")
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
#[ignore = "run in a process of its own by what_auth_and_approve_create_is_private_even_under_umask_000"]
async fn auth_and_approve_create_private_files_in_this_process() {
    if std::env::var_os(UMASK_CHILD).is_none() {
        return;
    }
    assert_eq!(
        nix::sys::stat::umask(nix::sys::stat::Mode::empty()),
        nix::sys::stat::Mode::empty(),
        "started under umask 000"
    );
    let home = tempfile::tempdir().expect("home");

    let token_dir = home.path().join("config/mcp-reconcile");
    let store = TokenStore::new(
        TokenFile::native(token_dir.join("oauth-tokens.json")),
        "remote",
        "http://127.0.0.1:9/mcp",
        "client",
        LoginLayer::User,
    );
    let recorded = store.record_challenge("Bearer".into()).await;

    let approvals_dir = home.path().join("other-config/mcp-reconcile");
    let approvals = ApprovalsStore::new(approvals_dir.join("approvals.json"));
    let decided = approvals.decide("/project", "a", &entry(), Decision::Rejected);

    recorded.expect("the token file is written");
    decided.expect("the decision is stored");
    for dir in [
        &token_dir,
        &token_dir.parent().expect("parent").to_path_buf(),
        &approvals_dir,
    ] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(&token_dir.join("oauth-tokens.json")), 0o600);
    assert_eq!(mode(&approvals_dir.join("approvals.json")), 0o600);
}

#[test]
fn an_approvals_file_in_a_directory_others_can_write_approves_nothing() {
    let home = tempfile::tempdir().expect("home");
    let dir = home.path().join("mcp-reconcile");
    let path = dir.join("approvals.json");
    planted_approvals(&path, "/project");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).expect("chmod");
    let store = ApprovalsStore::new(path.clone());
    let (approvals, problems) = store.load();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("can be written by other users")),
        "{problems:?}"
    );
    assert_eq!(
        approvals.state("/project", "evil", &entry()),
        ApprovalState::Pending,
        "a planted approval must not count"
    );
    // And nothing is written over it.
    let before = fs::read(&path).expect("read");
    let err = store
        .decide("/project", "other", &entry(), Decision::Approved)
        .expect_err("must refuse to write");
    assert!(format!("{err:#}").contains("other users"), "{err:#}");
    assert_eq!(fs::read(&path).expect("read"), before);
}

/// Needs root to plant a file owned by someone else.
#[test]
#[ignore = "needs root: run with --include-ignored as root"]
fn an_approvals_file_of_another_user_approves_nothing() {
    let home = tempfile::tempdir().expect("home");
    let path = home.path().join("approvals.json");
    planted_approvals(&path, "/project");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
    nix::unistd::chown(&path, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    let (approvals, problems) = ApprovalsStore::new(path).load();
    assert!(
        problems.iter().any(|p| p.contains("belongs to uid 65534")),
        "{problems:?}"
    );
    assert_eq!(
        approvals.state("/project", "evil", &entry()),
        ApprovalState::Pending
    );
}

/// The user's settings start servers without approval: a settings file other users can write
/// is not read, so nothing it names starts, and `status` says which file and why.
#[test]
fn a_user_settings_file_others_can_write_starts_nothing() {
    let p = common::Project::new();
    p.write_settings(serde_json::json!({"mcpServers": {"planted": p.server("planted", "echo")}}));
    fs::set_permissions(p.user_settings(), fs::Permissions::from_mode(0o666)).expect("chmod");
    let status = p.run(&["status", "--json"]);
    let text = common::output_text(&status);
    assert!(text.contains("can be written by other users"), "{text}");
    assert!(
        p.status().iter().all(|s| s["name"] != "planted"),
        "the planted server is configured: {text}"
    );
    // Made private again, it is read.
    fs::set_permissions(p.user_settings(), fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(p.status().iter().any(|s| s["name"] == "planted"));
}

/// Needs root to plant a file owned by someone else: another local user's `.mcp.json` in a
/// shared parent directory (a sticky, world-writable `/tmp`) is not read for a project below
/// it — its servers never shadow the user's same-named ones — and `status` names it.
#[test]
#[ignore = "needs root: run with --include-ignored as root"]
fn another_users_mcp_json_in_a_shared_parent_is_ignored() {
    let shared = tempfile::tempdir().expect("shared");
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o1777)).expect("chmod");
    let own = tempfile::tempdir().expect("private");
    let home = own.path().join("home");
    let project = shared.path().join("project");
    fs::create_dir_all(&home).expect("home");
    fs::create_dir_all(&project).expect("project");
    let planted = shared.path().join(".mcp.json");
    fs::write(&planted, r#"{"mcpServers":{"tools":{"command":"theirs"}}}"#).expect("plant");
    nix::unistd::chown(&planted, Some(nix::unistd::Uid::from_raw(65534)), None).expect("chown");
    fs::write(
        home.join(".claude.json"),
        r#"{"mcpServers":{"tools":{"command":"mine"}}}"#,
    )
    .expect("state");
    let out = std::process::Command::new(common::cli())
        .args(["status", "--json", "--layout", "claude", "--project"])
        .arg(&project)
        .arg("--state-dir")
        .arg(own.path().join("state"))
        .arg("--approvals")
        .arg(own.path().join("approvals.json"))
        .arg("--system-settings")
        .arg(own.path().join("etc/managed-settings.json"))
        .env("HOME", &home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .expect("status runs");
    let text = common::output_text(&out);
    assert!(
        text.contains(&planted.to_string_lossy().into_owned()) && text.contains("uid 65534"),
        "{text}"
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let tools = status
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == "tools"))
        .cloned()
        .unwrap_or_default();
    assert_ne!(
        tools["reason"], "pending_approval",
        "the user's own server is not replaced by the planted one: {text}"
    );
}
