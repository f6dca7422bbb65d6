//! The file side of the native host with real files in temp dirs and real
//! filesystem events: layer flags → paths, loading with last-good retention,
//! the approvals store and the directory watcher.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_reconcile::approvals_store::{backup_path, ApprovalsStore};
use mcp_reconcile::inputs::{HostEnv, Inputs, LayerPaths, Layout, Options, Snapshot};
use mcp_reconcile::watcher::{self, Change, Landing};
use mcp_reconcile_kernel::json::{self, Value};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::{ApprovalState, Decision, LayerSource, ServerConfig};
use tempfile::TempDir;
use tokio::sync::mpsc::UnboundedReceiver;

/// A temp "machine": a home dir, a project dir and an /etc stand-in.
struct World {
    tmp: TempDir,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in ["home", "project", "etc"] {
            fs::create_dir_all(tmp.path().join(dir)).expect("mkdir");
        }
        World { tmp }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn project(&self) -> PathBuf {
        self.path("project")
            .canonicalize()
            .expect("canonical project")
    }

    fn env(&self) -> HostEnv {
        HostEnv {
            vars: BTreeMap::from([
                ("HOME".to_owned(), self.home().display().to_string()),
                ("GREETING".to_owned(), "hello".to_owned()),
            ]),
            cwd: self.project(),
            home: Some(self.home()),
            raw: Vec::new(),
        }
    }

    /// Flags with every file inside the world (default layout).
    fn flags(&self) -> Options {
        Options {
            project: Some(self.project()),
            system_settings: Some(self.path("etc/settings.json")),
            system_defaults: Some(self.path("etc/system-defaults.json")),
            ..Options::default()
        }
    }

    fn inputs(&self, flags: &Options) -> Inputs {
        Inputs::with_env(flags, self.env()).expect("inputs")
    }

    fn user_settings(&self) -> PathBuf {
        self.home().join(".config/mcp-reconcile/settings.json")
    }

    fn workspace_settings(&self) -> PathBuf {
        self.project().join(".mcp-reconcile/settings.json")
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

fn cfg(text: &str) -> ServerConfig {
    match json::parse(text).expect("json") {
        Value::Object(o) => ServerConfig::new(o),
        other => panic!("not an object: {other}"),
    }
}

// ---------------------------------------------------------------- paths

#[test]
fn default_layout_paths() {
    let w = World::new();
    let inputs = w.inputs(&Options {
        project: Some(w.project()),
        ..Options::default()
    });
    let p = inputs.paths();
    assert_eq!(p.user, w.user_settings());
    assert_eq!(p.workspace, w.workspace_settings());
    assert_eq!(p.system, PathBuf::from("/etc/mcp-reconcile/settings.json"));
    assert_eq!(
        p.system_defaults,
        PathBuf::from("/etc/mcp-reconcile/system-defaults.json")
    );
    assert_eq!(p.mcp_json, w.project().join(".mcp.json"));
    assert_eq!(
        p.approvals,
        w.home().join(".config/mcp-reconcile/approvals.json")
    );
    assert_eq!(p.state_dir, w.home().join(".local/state/mcp-reconcile"));
    assert_eq!(inputs.state_dir(), p.state_dir);
    assert_eq!(inputs.project_root(), w.project().to_str().expect("utf8"));
    assert_eq!(inputs.debounce().0, 300);

    // XDG directories move the defaults; relative XDG values are ignored.
    let mut env = w.env();
    env.vars.insert(
        "XDG_CONFIG_HOME".into(),
        w.path("cfg").display().to_string(),
    );
    env.vars.insert("XDG_STATE_HOME".into(), "relative".into());
    let p = LayerPaths::resolve(&Options::default(), &w.project(), &env).expect("paths");
    assert_eq!(p.user, w.path("cfg/mcp-reconcile/settings.json"));
    assert_eq!(p.approvals, w.path("cfg/mcp-reconcile/approvals.json"));
    assert_eq!(p.state_dir, w.home().join(".local/state/mcp-reconcile"));
}

#[test]
fn qwen_layout_paths_are_the_typescript_cli_defaults() {
    let w = World::new();
    let flags = Options {
        layout: Layout::QWEN,
        ..Options::default()
    };
    let p = LayerPaths::resolve(&flags, &w.project(), &w.env()).expect("paths");
    assert_eq!(p.user, w.home().join(".qwen/settings.json"));
    assert_eq!(p.workspace, w.project().join(".qwen/settings.json"));
    assert_eq!(p.mcp_json, w.project().join(".mcp.json"));
    assert_eq!(p.approvals, w.home().join(".qwen/mcpApprovals.json"));
    if cfg!(target_os = "linux") {
        assert_eq!(p.system, PathBuf::from("/etc/qwen-code/settings.json"));
        assert_eq!(
            p.system_defaults,
            PathBuf::from("/etc/qwen-code/system-defaults.json")
        );
    }

    // The TypeScript CLI's environment overrides are honoured.
    let mut env = w.env();
    for (k, v) in [
        ("QWEN_HOME", "~/alt".to_owned()),
        (
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            "/opt/q/sys.json".to_owned(),
        ),
        (
            "QWEN_CODE_MCP_APPROVALS_PATH",
            w.path("ap.json").display().to_string(),
        ),
    ] {
        env.vars.insert(k.into(), v);
    }
    let p = LayerPaths::resolve(&flags, &w.project(), &env).expect("paths");
    assert_eq!(p.user, w.home().join("alt/settings.json"));
    assert_eq!(p.system, PathBuf::from("/opt/q/sys.json"));
    assert_eq!(
        p.system_defaults,
        PathBuf::from("/opt/q/system-defaults.json")
    );
    assert_eq!(p.approvals, w.path("ap.json"));
}

#[test]
fn explicit_flags_override_the_layout_and_resolve_against_the_cwd() {
    let w = World::new();
    let flags = Options {
        layout: Layout::QWEN,
        user_settings: Some("u/../user.json".into()),
        workspace_settings: Some(w.path("ws.json")),
        system_settings: Some(w.path("etc/s.json")),
        system_defaults: Some(w.path("etc/d.json")),
        approvals: Some("./a.json".into()),
        state_dir: Some(w.path("state")),
        ..Options::default()
    };
    let p = LayerPaths::resolve(&flags, &w.project(), &w.env()).expect("paths");
    assert_eq!(p.user, w.project().join("user.json"));
    assert_eq!(p.workspace, w.path("ws.json"));
    assert_eq!(p.system, w.path("etc/s.json"));
    assert_eq!(p.system_defaults, w.path("etc/d.json"));
    assert_eq!(p.approvals, w.project().join("a.json"));
    assert_eq!(p.state_dir, w.path("state"));
}

#[test]
fn project_root_is_the_real_path_and_keys_the_session() {
    let w = World::new();
    let link = w.path("link-to-project");
    std::os::unix::fs::symlink(w.project(), &link).expect("symlink");
    let via_link = w.inputs(&Options {
        project: Some(link),
        ..w.flags()
    });
    let direct = w.inputs(&w.flags());
    assert_eq!(via_link.project_root(), direct.project_root());
    assert_eq!(via_link.project_dir(), w.project());
    assert_eq!(via_link.session_id(), direct.session_id());
    assert_eq!(direct.session_id().len(), 16);

    // Flags that do not pick inputs keep it.
    let same = w.inputs(&Options {
        yolo: true,
        debounce_ms: Some(5),
        ..w.flags()
    });
    assert_eq!(same.session_id(), direct.session_id());
    // Every input that changes what the session runs or trusts gives another session: `status`
    // or `reconnect` with other files must never reach this one.
    let others = [
        Options {
            user_settings: Some(w.path("other.json")),
            ..w.flags()
        },
        Options {
            approvals: Some(w.path("other-approvals.json")),
            ..w.flags()
        },
        Options {
            mcp_config: vec![r#"{"x":{"command":"y"}}"#.into()],
            ..w.flags()
        },
        Options {
            mcp_config: vec![w.path("extra.json").display().to_string()],
            ..w.flags()
        },
        Options {
            lsp_approvals: Some(w.path("other-lsp-approvals.json")),
            ..w.flags()
        },
    ];
    let mut ids: Vec<String> = others.iter().map(|o| w.inputs(o).session_id()).collect();
    ids.push(direct.session_id());
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "{ids:?}");

    let missing = Inputs::with_env(
        &Options {
            project: Some(w.path("nope")),
            ..Options::default()
        },
        w.env(),
    );
    let message = format!("{:#}", missing.expect_err("missing project"));
    assert!(message.contains("--project"), "{message}");
}

// ---------------------------------------------------------------- loading

#[test]
fn missing_files_are_empty_and_no_error() {
    let w = World::new();
    let mut inputs = w.inputs(&w.flags());
    let snap = inputs.load(None);
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert!(snap.layers.iter().all(|l| l.servers.is_empty()));
    let kinds: Vec<LayerSource> = snap.layers.iter().map(|l| l.source).collect();
    assert_eq!(
        kinds,
        [
            LayerSource::SystemDefaults,
            LayerSource::User,
            LayerSource::Workspace,
            LayerSource::System,
            LayerSource::Project
        ]
    );
    assert!(snap.trusted && !snap.yolo);
    assert_eq!(snap.cli_allowed, None);
    assert_eq!(snap.lists.allowed, None);
}

#[test]
fn a_broken_file_keeps_its_last_good_content_until_it_parses_again() {
    let w = World::new();
    let user = w.user_settings();
    let mut inputs = w.inputs(&w.flags());
    write(
        &user,
        r#"// user settings
        {"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}, "mcp": {"excluded": ["b"]}}"#,
    );
    let snap = inputs.load(None);
    assert_eq!(snap.names_in(LayerSource::User), ["a", "b"]);
    assert!(snap.errors.is_empty());

    // Half-written: the old servers and lists stay, the error names the file.
    write(&user, r#"{"mcpServers": {"a": {"command": "#);
    let snap = inputs.load(Some(&[FileSource::Settings("user".into())]));
    assert_eq!(snap.names_in(LayerSource::User), ["a", "b"]);
    assert_eq!(snap.lists.excluded, Some(vec!["b".to_owned()]));
    assert_eq!(snap.errors.len(), 1, "{:?}", snap.errors);
    assert_eq!(snap.errors[0].file, user);
    assert!(
        snap.errors[0].message.contains("last good"),
        "{}",
        snap.errors[0]
    );
    assert!(snap.errors[0].to_string().contains("settings.json"));

    // An empty file is an error too (not `{}`).
    write(&user, "  \n");
    let snap = inputs.load(None);
    assert_eq!(snap.names_in(LayerSource::User), ["a", "b"]);
    assert_eq!(snap.errors.len(), 1);

    // Valid again: applied, error gone.
    write(&user, r#"{"mcpServers": {"c": {"command": "z"}}}"#);
    let snap = inputs.load(Some(&[FileSource::Settings("user".into())]));
    assert_eq!(snap.names_in(LayerSource::User), ["c"]);
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert_eq!(snap.lists.excluded, None);

    // Deleted: held as missing (its last content stays, the error says so) until the host
    // gives up on it; from then on missing is `{}`.
    fs::remove_file(&user).expect("rm");
    let snap = inputs.load(None);
    assert_eq!(snap.names_in(LayerSource::User), ["c"]);
    assert_eq!(snap.errors.len(), 1, "{:?}", snap.errors);
    assert!(
        snap.errors[0].message.contains("file missing"),
        "{}",
        snap.errors[0]
    );
    assert!(inputs.missing());
    let (sources, servers) = inputs.expire_missing();
    assert_eq!(sources, [FileSource::Settings("user".into())]);
    assert_eq!(servers, ["c"]);
    assert!(!inputs.missing());
    let snap = inputs.load(None);
    assert!(snap.names_in(LayerSource::User).is_empty());
    assert!(snap.errors.is_empty());
}

#[test]
fn a_file_that_never_parsed_contributes_nothing_and_says_so() {
    let w = World::new();
    write(&w.user_settings(), "[1, 2]");
    let mut inputs = w.inputs(&w.flags());
    let snap = inputs.load(None);
    assert!(snap.names_in(LayerSource::User).is_empty());
    assert_eq!(snap.errors.len(), 1);
    assert!(
        snap.errors[0].message.contains("nothing from it"),
        "{}",
        snap.errors[0]
    );
}

#[test]
fn only_the_changed_files_are_reloaded() {
    let w = World::new();
    let mut inputs = w.inputs(&w.flags());
    write(
        &w.user_settings(),
        r#"{"mcpServers": {"a": {"command": "x"}}}"#,
    );
    inputs.load(None);
    write(
        &w.user_settings(),
        r#"{"mcpServers": {"b": {"command": "x"}}}"#,
    );
    write(
        &w.project().join(".mcp.json"),
        r#"{"mcpServers": {"p": {"command": "x"}}}"#,
    );
    let snap = inputs.load(Some(&[FileSource::McpJson]));
    assert_eq!(snap.names_in(LayerSource::User), ["a"], "user not reread");
    assert_eq!(snap.names_in(LayerSource::Project), ["p"]);
    let snap = inputs.load(Some(&[FileSource::Settings("user".into())]));
    assert_eq!(snap.names_in(LayerSource::User), ["b"]);
}

#[test]
fn settings_entries_expand_env_and_bad_entries_are_reported_by_name() {
    let w = World::new();
    write(
        &w.user_settings(),
        r#"{"mcpServers": {"good": {"command": "echo", "args": ["$GREETING"]}, "bad": 5},
            "mcp": {"allowed": ["good", "", "good", "x*"]}}"#,
    );
    let mut inputs = w.inputs(&w.flags());
    let snap = inputs.load(None);
    assert_eq!(snap.names_in(LayerSource::User), ["good"]);
    let good = &snap.layers[1].servers;
    assert_eq!(
        good.get("good")
            .and_then(|c| c.get("args"))
            .map(Value::to_json),
        Some(r#"["hello"]"#.to_owned())
    );
    assert_eq!(snap.errors.len(), 1);
    assert!(
        snap.errors[0].message.contains("\"bad\""),
        "{}",
        snap.errors[0]
    );
    assert_eq!(
        snap.lists.allowed,
        Some(vec!["good".to_owned(), "x*".to_owned()])
    );
}

#[test]
fn lists_merge_across_scopes_and_gating_applies_the_cap() {
    let w = World::new();
    write(
        &w.path("etc/system-defaults.json"),
        r#"{"mcp": {"excluded": ["d"]}}"#,
    );
    write(
        &w.user_settings(),
        r#"{"mcp": {"excluded": ["u"], "allowed": ["*"]}}"#,
    );
    write(&w.workspace_settings(), r#"{"mcp": {"excluded": ["w"]}}"#);
    write(
        &w.path("etc/settings.json"),
        r#"{"mcp": {"excluded": ["s", "d"]}}"#,
    );
    let mut inputs = w.inputs(&Options {
        allowed_mcp_server_names: vec!["a, b".into(), "c".into()],
        ..w.flags()
    });
    let snap = inputs.load(None);
    assert_eq!(
        snap.lists.excluded,
        Some(vec!["d".into(), "u".into(), "w".into(), "s".into()])
    );
    assert_eq!(snap.cli_allowed, Some(vec!["a, b".into(), "c".into()]));
    let gating = snap.gating_for(&snap.assembled().servers);
    assert_eq!(
        gating.cap,
        Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()])
    );
    assert_eq!(gating.allowed, Some(vec!["*".to_owned()]));
}

#[test]
fn an_untrusted_folder_has_no_workspace_settings() {
    let w = World::new();
    write(
        &w.workspace_settings(),
        r#"{"mcpServers": {"ws": {"command": "x"}}, "mcp": {"excluded": ["z"]}}"#,
    );
    let trusted = w.inputs(&w.flags()).load(None);
    assert_eq!(trusted.names_in(LayerSource::Workspace), ["ws"]);
    assert_eq!(trusted.lists.excluded, Some(vec!["z".to_owned()]));

    let mut inputs = w.inputs(&Options {
        untrusted: true,
        ..w.flags()
    });
    let snap = inputs.load(None);
    assert!(!snap.trusted);
    assert!(snap
        .layers
        .iter()
        .all(|l| l.source != LayerSource::Workspace));
    assert_eq!(snap.lists.excluded, None);
    assert!(inputs.watched().iter().all(
        |(p, s)| *p != w.workspace_settings() && *s != FileSource::Settings("workspace".into())
    ));
}

#[test]
fn a_project_in_the_home_directory_does_not_read_user_settings_twice() {
    let w = World::new();
    write(
        &w.home().join(".qwen/settings.json"),
        r#"{"mcpServers": {"mine": {"command": "x"}}}"#,
    );
    let mut inputs = w.inputs(&Options {
        layout: Layout::QWEN,
        project: Some(w.home()),
        ..w.flags()
    });
    let snap = inputs.load(None);
    assert_eq!(snap.names_in(LayerSource::User), ["mine"]);
    assert!(snap
        .layers
        .iter()
        .all(|l| l.source != LayerSource::Workspace));
    let servers = snap.assembled().servers;
    assert_eq!(snap.gating_for(&servers).pending, Some(vec![]), "not gated");
}

#[test]
fn inputs_and_watcher_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<Inputs>();
    send::<Snapshot>();
    send::<watcher::Watcher>();
    send::<ApprovalsStore>();
}

#[test]
fn mcp_json_servers_are_stamped_project_and_gated() {
    let w = World::new();
    write(
        &w.project().join(".mcp.json"),
        "\u{feff}{\"mcpServers\": {\"p\": {\"command\": \"run\", \"args\": [\"${GREETING}\"], \"scope\": \"user\"},
          \"web\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:1/mcp\"}, \"junk\": []}}",
    );
    let mut inputs = w.inputs(&w.flags());
    let snap = inputs.load(None);
    let servers = snap.assembled().servers;
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["p", "web"]);
    for config in servers.values() {
        assert_eq!(config.scope(), Some("project"));
    }
    assert_eq!(
        servers
            .get("p")
            .and_then(|c| c.get("args"))
            .map(Value::to_json),
        Some(r#"["hello"]"#.to_owned())
    );
    assert!(servers.get("web").and_then(|c| c.get("httpUrl")).is_some());
    assert_eq!(snap.errors.len(), 1, "{:?}", snap.errors);
    assert!(snap.errors[0].message.contains("junk"));
    let gating = snap.gating_for(&servers);
    assert_eq!(gating.pending, Some(vec!["p".to_owned(), "web".to_owned()]));

    // Broken `.mcp.json`: last good servers stay.
    write(&w.project().join(".mcp.json"), "{\"mcpServers\": ");
    let snap = inputs.load(Some(&[FileSource::McpJson]));
    assert_eq!(snap.names_in(LayerSource::Project), ["p", "web"]);
    // The parse error, then the entry error of the content still in use.
    assert_eq!(snap.errors.len(), 2, "{:?}", snap.errors);
    assert_eq!(snap.errors[0].file, w.project().join(".mcp.json"));
    assert!(
        snap.errors[0].message.contains("last good"),
        "{}",
        snap.errors[0]
    );
    assert!(snap.errors[1].message.contains("junk"));

    // Yolo: no approval gate and no expansion.
    let mut yolo = w.inputs(&Options {
        yolo: true,
        ..w.flags()
    });
    write(
        &w.project().join(".mcp.json"),
        r#"{"mcpServers": {"p": {"command": "run", "args": ["${GREETING}"]}}}"#,
    );
    let snap = yolo.load(None);
    let servers = snap.assembled().servers;
    assert_eq!(
        servers
            .get("p")
            .and_then(|c| c.get("args"))
            .map(Value::to_json),
        Some(r#"["${GREETING}"]"#.to_owned())
    );
    assert_eq!(snap.gating_for(&servers).pending, None);
}

#[test]
fn mcp_config_takes_inline_json_and_files() {
    let w = World::new();
    let file = w.path("extra.json");
    write(&file, r#"{"mcpServers": {"f": {"command": "x"}}}"#);
    let mut inputs = w.inputs(&Options {
        mcp_config: vec![
            r#"{"inline": {"command": "y"}}"#.into(),
            r#" {"mcpServers": {"wrapped": {"httpUrl": "http://127.0.0.1:1"}}}"#.into(),
            file.display().to_string(),
        ],
        ..w.flags()
    });
    let watched = inputs.watched();
    assert!(watched.contains(&(
        file.clone(),
        FileSource::McpConfig(file.display().to_string())
    )));
    assert!(watched.contains(&(w.project().join(".mcp.json"), FileSource::McpJson)));
    assert!(watched.contains(&(
        inputs.approvals_store().path().to_path_buf(),
        FileSource::Approvals
    )));
    let snap = inputs.load(None);
    assert_eq!(
        snap.names_in(LayerSource::CliConfig),
        ["inline", "wrapped", "f"]
    );
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert_eq!(
        snap.assembled().servers.get("f").and_then(|c| c.scope()),
        None
    );

    // The file is watched and reloaded like any other input.
    write(&file, r#"{"g": {"command": "x"}}"#);
    let snap = inputs.load(Some(&[FileSource::McpConfig(file.display().to_string())]));
    assert_eq!(
        snap.names_in(LayerSource::CliConfig),
        ["inline", "wrapped", "g"]
    );
    write(&file, "{oops");
    let snap = inputs.load(None);
    assert_eq!(
        snap.names_in(LayerSource::CliConfig),
        ["inline", "wrapped", "g"]
    );
    assert_eq!(snap.errors.len(), 1);
    assert_eq!(snap.errors[0].file, file);

    let mut bad_inline = w.inputs(&Options {
        mcp_config: vec!["{not json".into()],
        ..w.flags()
    });
    let snap = bad_inline.load(None);
    assert_eq!(snap.errors.len(), 1);
    assert!(snap.errors[0].to_string().contains("--mcp-config"));
}

#[test]
fn server_command_becomes_the_mcp_server_and_is_restart_required() {
    let w = World::new();
    write(
        &w.user_settings(),
        r#"{"mcp": {"serverCommand": "node 'my server.js' --greet $GREETING"}}"#,
    );
    let mut inputs = w.inputs(&w.flags());
    let snap = inputs.load(None);
    let servers = snap.assembled().servers;
    let mcp = servers.get("mcp").expect("mcp server");
    assert_eq!(mcp.str_field("command"), Some("node"));
    assert_eq!(
        mcp.get("args").map(Value::to_json),
        Some(r#"["my server.js","--greet","hello"]"#.to_owned())
    );
    assert_eq!(mcp.str_field("cwd"), Some(inputs.project_root()));
    assert_eq!(
        snap.assembled().sources.get("mcp"),
        Some(&LayerSource::ServerCommand)
    );

    write(&w.user_settings(), r#"{"mcp": {"serverCommand": "other"}}"#);
    let snap = inputs.load(None);
    let servers = snap.assembled().servers;
    assert_eq!(
        servers.get("mcp").and_then(|c| c.str_field("command")),
        Some("node")
    );
    assert_eq!(snap.errors.len(), 1);
    assert!(
        snap.errors[0].message.contains("restart"),
        "{}",
        snap.errors[0]
    );

    write(&w.user_settings(), r#"{"mcp": {"serverCommand": "a | b"}}"#);
    let mut piped = w.inputs(&w.flags());
    let snap = piped.load(None);
    assert!(snap.assembled().servers.get("mcp").is_none());
    assert_eq!(snap.errors.len(), 1);
    assert_eq!(snap.errors[0].file, w.user_settings());
}

// ---------------------------------------------------------------- approvals

const ROOT: &str = "/home/dev/repo";

#[test]
fn decide_creates_the_parent_and_writes_0600_atomically() {
    let w = World::new();
    let path = w.path("deep/er/approvals.json");
    let store = ApprovalsStore::new(path.clone());
    let slack = cfg(r#"{"command":"npx","args":["slack"],"scope":"project"}"#);
    store
        .decide(ROOT, "slack", &slack, Decision::Approved)
        .expect("decide");
    let meta = fs::metadata(&path).expect("written");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let first_inode = meta.ino();

    let (approvals, problems) = store.load();
    assert!(problems.is_empty());
    assert_eq!(
        approvals.state(ROOT, "slack", &slack),
        ApprovalState::Approved
    );
    let text = fs::read_to_string(&path).expect("read");
    assert!(
        text.starts_with("{\n  \"/home/dev/repo\": {\n    \"slack\": {\n      \"hash\": \""),
        "{text}"
    );

    // A second decision replaces the file by rename (a new inode), leaves no
    // temporary file behind, and keeps the mode.
    store
        .decide(ROOT, "slack", &slack, Decision::Rejected)
        .expect("decide");
    let meta = fs::metadata(&path).expect("written");
    assert_ne!(meta.ino(), first_inode, "replaced, not rewritten in place");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let names: Vec<String> = fs::read_dir(path.parent().expect("parent"))
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["approvals.json"]);
    assert_eq!(
        store.load().0.state(ROOT, "slack", &slack),
        ApprovalState::Rejected
    );
}

#[test]
fn decide_keeps_other_records_and_unknown_content() {
    let w = World::new();
    let path = w.path("approvals.json");
    write(
        &path,
        r#"{"/other": {"x": {"hash": "abc", "status": "approved"}},
            "/home/dev/repo": {"old": {"hash": "def", "status": "rejected"}}}"#,
    );
    let store = ApprovalsStore::new(path.clone());
    let a = cfg(r#"{"command":"a","scope":"project"}"#);
    store
        .decide(ROOT, "a", &a, Decision::Approved)
        .expect("decide");
    let value = json::parse(&fs::read_to_string(&path).expect("read")).expect("json");
    let store_value = value.as_object().expect("object");
    assert_eq!(
        store_value.get("/other").map(Value::to_json),
        Some(r#"{"x":{"hash":"abc","status":"approved"}}"#.to_owned())
    );
    let project = store_value
        .get(ROOT)
        .and_then(Value::as_object)
        .expect("project");
    assert_eq!(project.keys().collect::<Vec<_>>(), ["old", "a"]);
    assert!(!backup_path(&path).exists(), "no backup of a good file");
}

#[test]
fn a_malformed_file_fails_closed_and_is_backed_up_before_replacing() {
    let w = World::new();
    let path = w.path("approvals.json");
    let garbage = "{\"/home/dev/repo\": {\"p\": {\"hash\": ";
    write(&path, garbage);
    let store = ApprovalsStore::new(path.clone());
    let (approvals, problems) = store.load();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("not valid JSON"), "{}", problems[0]);
    assert_eq!(approvals, mcp_reconcile_kernel::Approvals::empty());

    // Through Inputs: every gated server is pending and the problem shows.
    write(
        &w.project().join(".mcp.json"),
        r#"{"mcpServers": {"p": {"command": "x"}}}"#,
    );
    let mut inputs = w.inputs(&Options {
        approvals: Some(path.clone()),
        ..w.flags()
    });
    let snap = inputs.load(None);
    let servers = snap.assembled().servers;
    assert_eq!(
        snap.gating_for(&servers).pending,
        Some(vec!["p".to_owned()])
    );
    assert_eq!(snap.errors.len(), 1);
    assert_eq!(snap.errors[0].file, path);
    assert!(snap.errors[0].message.contains("pending"));

    // The next write keeps a copy of the unreadable original first.
    let p = servers.get("p").expect("p").clone();
    store
        .decide(inputs.project_root(), "p", &p, Decision::Approved)
        .expect("decide");
    assert_eq!(
        fs::read_to_string(backup_path(&path)).expect("bak"),
        garbage
    );
    assert_eq!(
        fs::metadata(backup_path(&path))
            .expect("bak")
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let snap = inputs.load(Some(&[FileSource::Approvals]));
    assert!(snap.errors.is_empty(), "{:?}", snap.errors);
    assert_eq!(snap.gating_for(&servers).pending, Some(vec![]));
}

#[test]
fn a_malformed_project_entry_is_reported_and_backed_up() {
    let w = World::new();
    let path = w.path("approvals.json");
    let original = r#"{"/home/dev/repo": ["not", "an", "object"], "/x": {}}"#;
    write(&path, original);
    let store = ApprovalsStore::new(path.clone());
    let (_, problems) = store.load();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let a = cfg(r#"{"command":"a","scope":"workspace"}"#);
    store
        .decide(ROOT, "a", &a, Decision::Approved)
        .expect("decide");
    assert_eq!(
        fs::read_to_string(backup_path(&path)).expect("bak"),
        original
    );
    let (approvals, problems) = store.load();
    assert!(problems.is_empty());
    assert_eq!(approvals.state(ROOT, "a", &a), ApprovalState::Approved);
    assert!(json::parse(&fs::read_to_string(&path).expect("read"))
        .expect("json")
        .as_object()
        .expect("object")
        .contains_key("/x"));
}

#[test]
fn an_unreadable_original_is_never_overwritten() {
    let w = World::new();
    // A directory where the file should be: it cannot be read or backed up.
    let path = w.path("approvals.json");
    fs::create_dir_all(&path).expect("mkdir");
    let store = ApprovalsStore::new(path.clone());
    let (_, problems) = store.load();
    assert_eq!(problems.len(), 1);
    let a = cfg(r#"{"command":"a"}"#);
    let err = store
        .decide(ROOT, "a", &a, Decision::Approved)
        .expect_err("must refuse");
    assert!(format!("{err:#}").contains("left unchanged"), "{err:#}");
    assert!(path.is_dir());
}

#[test]
fn a_symlinked_approvals_file_stays_a_symlink() {
    let w = World::new();
    let real = w.path("dotfiles/approvals.json");
    write(&real, "{}");
    let link = w.path("approvals.json");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let store = ApprovalsStore::new(link.clone());
    let a = cfg(r#"{"command":"a"}"#);
    store
        .decide(ROOT, "a", &a, Decision::Approved)
        .expect("decide");
    assert!(fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    assert_eq!(
        ApprovalsStore::new(real).load().0.state(ROOT, "a", &a),
        ApprovalState::Approved
    );
}

// ---------------------------------------------------------------- watcher

const WAIT: Duration = Duration::from_secs(20);

/// The next event is about `want` (after a [`settle`], nothing else is queued).
async fn expect_source(rx: &mut UnboundedReceiver<Change>, want: &FileSource) -> Change {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(got)) => {
            assert_eq!(got.source, *want, "the event's source");
            got
        }
        Ok(None) => panic!("watcher channel closed"),
        Err(_) => panic!("no event for {want:?} within {WAIT:?}"),
    }
}

/// Waits until the watcher has handled every filesystem event caused so far. Every watch of
/// the process shares one platform watcher that handles events in the order they happened:
/// once it reported a write made now to a file of a watch of its own, it has sent whatever
/// the earlier events meant for the other watches.
async fn barrier() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("barrier.json");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _watch = watcher::watch(vec![(file.clone(), FileSource::McpJson)], tx).expect("watch");
    fs::write(&file, "{}").expect("write the barrier");
    expect_source(&mut rx, &FileSource::McpJson).await;
}

/// Everything reported for what happened so far.
async fn drain(rx: &mut UnboundedReceiver<Change>) -> Vec<Change> {
    barrier().await;
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

/// Drops what is left of the previous step's burst (one save is several events), so the next
/// step starts from an empty queue.
async fn settle(rx: &mut UnboundedReceiver<Change>) {
    barrier().await;
    while rx.try_recv().is_ok() {}
}

/// Nothing was reported for what happened so far.
async fn expect_quiet(rx: &mut UnboundedReceiver<Change>) {
    let got = drain(rx).await;
    assert!(got.is_empty(), "unexpected events: {got:?}");
}

fn user() -> FileSource {
    FileSource::Settings("user".into())
}

fn workspace() -> FileSource {
    FileSource::Settings("workspace".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_reports_writes_renames_and_recreation() {
    let w = World::new();
    let dir = w.path("cfg");
    fs::create_dir_all(&dir).expect("mkdir");
    let settings = dir.join("settings.json");
    let approvals = dir.join("approvals.json");
    write(&settings, "{}");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = watcher::watch(
        vec![
            (settings.clone(), user()),
            (approvals.clone(), FileSource::Approvals),
        ],
        tx,
    )
    .expect("watch");

    // A plain write.
    fs::write(&settings, r#"{"a": 1}"#).expect("write");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;

    // An editor's save: write a temp file, rename it over the original.
    let tmp = dir.join(".settings.json.swp");
    fs::write(&tmp, r#"{"a": 2}"#).expect("write tmp");
    fs::rename(&tmp, &settings).expect("rename");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;

    // Delete, then recreate.
    fs::remove_file(&settings).expect("rm");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;
    fs::write(&settings, "{}").expect("recreate");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;

    // A file that did not exist at start (the approvals file) appears.
    fs::write(&approvals, "{}").expect("write approvals");
    expect_source(&mut rx, &FileSource::Approvals).await;
    settle(&mut rx).await;

    // Unrelated files in the same directory are ignored; so are reads.
    fs::write(dir.join("notes.txt"), "hi").expect("write unrelated");
    fs::rename(dir.join("notes.txt"), dir.join("notes2.txt")).expect("rename unrelated");
    let _ = fs::read_to_string(&settings).expect("read");
    expect_quiet(&mut rx).await;
}

/// Settle detection applies a whole save at once: the watcher must tell a file renamed onto
/// the watched path (complete on arrival) and a write in place its writer closed from the
/// writes before that close (the writer may not be done) and from the file being renamed
/// away — and report a rename save once, not once per side.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_tells_a_whole_save_from_a_write_still_open() {
    let w = World::new();
    let dir = w.path("cfg");
    fs::create_dir_all(&dir).expect("mkdir");
    let settings = dir.join("settings.json");
    write(&settings, "{}");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = watcher::watch(vec![(settings.clone(), user())], tx).expect("watch");

    // In place: truncate, write, close — the writes say "changed", the close "closed".
    fs::write(&settings, r#"{"a": 1}"#).expect("write");
    let got = drain(&mut rx).await;
    let (last, writes) = got.split_last().expect("the write is reported");
    assert_eq!(
        (&last.source, last.landing),
        (&user(), Landing::Closed),
        "{got:?}"
    );
    assert!(
        writes
            .iter()
            .all(|c| c.source == user() && c.landing == Landing::Changed),
        "{got:?}"
    );

    // Held open after a write: changed, not closed, until the writer closes it.
    let mut open = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&settings)
        .expect("open");
    std::io::Write::write_all(&mut open, br#"{"a": 3}"#).expect("write");
    let got = drain(&mut rx).await;
    assert!(!got.is_empty(), "the write is reported");
    assert!(got.iter().all(|c| c.landing == Landing::Changed), "{got:?}");
    drop(open);
    let got = drain(&mut rx).await;
    assert_eq!(
        got,
        vec![Change {
            source: user(),
            landing: Landing::Closed
        }],
        "the close"
    );

    // A rename save: one report, renamed.
    let tmp = dir.join("settings.json.tmp");
    fs::write(&tmp, r#"{"a": 2}"#).expect("write tmp");
    fs::rename(&tmp, &settings).expect("rename");
    let got = drain(&mut rx).await;
    assert_eq!(
        got,
        vec![Change {
            source: user(),
            landing: Landing::Renamed
        }],
        "one report per rename save"
    );

    // Renamed away: the file is gone, nothing arrived.
    fs::rename(&settings, dir.join("settings.json.bak")).expect("rename away");
    let got = drain(&mut rx).await;
    assert!(!got.is_empty(), "the rename away is reported");
    assert!(
        got.iter()
            .all(|c| c.source == user() && c.landing == Landing::Changed),
        "{got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_follows_a_symlinked_file_through_its_target() {
    let w = World::new();
    let real = w.path("dotfiles/settings.json");
    write(&real, "{}");
    let link = w.path("home/.qwen/settings.json");
    fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = watcher::watch(vec![(link.clone(), user())], tx).expect("watch");

    fs::write(&real, r#"{"edited": true}"#).expect("edit target");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;

    // Re-pointing the link counts, and the new target is then followed.
    let other = w.path("other/settings.json");
    write(&other, "{}");
    settle(&mut rx).await;
    let tmp_link = w.path("home/.qwen/.tmp-link");
    std::os::unix::fs::symlink(&other, &tmp_link).expect("symlink");
    fs::rename(&tmp_link, &link).expect("re-point");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;
    fs::write(&other, r#"{"x": 1}"#).expect("edit new target");
    expect_source(&mut rx, &user()).await;
    settle(&mut rx).await;
    fs::write(&real, r#"{"old": true}"#).expect("edit old target");
    expect_quiet(&mut rx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_picks_up_a_file_in_a_directory_that_appears_later() {
    let w = World::new();
    let qwen_dir = w.project().join(".qwen");
    let settings = qwen_dir.join("settings.json");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watcher = watcher::watch(vec![(settings.clone(), workspace())], tx).expect("watch");
    assert_eq!(watcher.watched_dirs(), [w.project()]);

    // Something else in the project is not this file.
    fs::write(w.project().join("README.md"), "hi").expect("write");
    expect_quiet(&mut rx).await;

    fs::create_dir(&qwen_dir).expect("mkdir .qwen");
    fs::write(&settings, r#"{"mcpServers": {}}"#).expect("write");
    expect_source(&mut rx, &workspace()).await;
    settle(&mut rx).await;
    assert_eq!(watcher.watched_dirs(), std::slice::from_ref(&qwen_dir));

    // Watching continues in the new directory.
    fs::write(&settings, "{}").expect("write");
    expect_source(&mut rx, &workspace()).await;
    settle(&mut rx).await;

    // The directory goes away (the file with it) and comes back.
    fs::remove_dir_all(&qwen_dir).expect("rm -r");
    expect_source(&mut rx, &workspace()).await;
    settle(&mut rx).await;
    fs::create_dir(&qwen_dir).expect("mkdir again");
    fs::write(&settings, "{}").expect("write again");
    expect_source(&mut rx, &workspace()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_covers_every_input_of_an_inputs_set() {
    let w = World::new();
    let extra = w.path("extra.json");
    write(&extra, "{}");
    let inputs = w.inputs(&Options {
        mcp_config: vec![extra.display().to_string()],
        approvals: Some(w.path("state/approvals.json")),
        ..w.flags()
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let _watcher = watcher::watch(inputs.watched(), tx).expect("watch");
    for (path, source) in [
        (w.project().join(".mcp.json"), FileSource::McpJson),
        (w.user_settings(), user()),
        (w.workspace_settings(), workspace()),
        (
            w.path("etc/system-defaults.json"),
            FileSource::Settings("systemDefaults".into()),
        ),
        (
            extra.clone(),
            FileSource::McpConfig(extra.display().to_string()),
        ),
        (w.path("state/approvals.json"), FileSource::Approvals),
    ] {
        // `write` creates missing directories: a directory that appears is reported for every
        // file it may now hold (the user's `lsp.json` beside its settings), in an order that
        // depends on when the watcher looks. What is tested is that this file's write is told.
        write(&path, "{}");
        expect_eventually(&mut rx, &source).await;
        settle(&mut rx).await;
    }
}

/// Waits until an event about `want` arrives (others may come first).
async fn expect_eventually(rx: &mut UnboundedReceiver<Change>, want: &FileSource) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(got)) if got.source == *want => return,
            Ok(Some(_)) => {}
            Ok(None) => panic!("watcher channel closed"),
            Err(_) => panic!("no event for {want:?} within {WAIT:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_watcher_stops_it() {
    let w = World::new();
    let settings = w.path("cfg/settings.json");
    write(&settings, "{}");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watcher = watcher::watch(vec![(settings.clone(), user())], tx).expect("watch");
    drop(watcher);
    fs::write(&settings, r#"{"a": 1}"#).expect("write");
    let closed = tokio::time::timeout(WAIT, rx.recv()).await.expect("closes");
    assert_eq!(closed, None, "the sender is gone with the watcher");
}

/// Two watches of one directory under two spellings (a project opened through a symlink by one
/// session and by its real path by another) share the process's one platform watcher: each
/// hears its file's edits, and ending one leaves the other watching.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_spellings_of_one_directory_keep_their_own_watches() {
    let w = World::new();
    let real_dir = w.path("proj");
    fs::create_dir_all(&real_dir).expect("mkdir");
    let link_dir = w.path("link-to-proj");
    std::os::unix::fs::symlink(&real_dir, &link_dir).expect("symlink");
    let settings = real_dir.join("settings.json");
    write(&settings, "{}");
    let (real_tx, mut real_rx) = tokio::sync::mpsc::unbounded_channel();
    let real_watch = watcher::watch(vec![(settings.clone(), user())], real_tx).expect("watch");
    let (link_tx, mut link_rx) = tokio::sync::mpsc::unbounded_channel();
    let link_watch = watcher::watch(vec![(link_dir.join("settings.json"), workspace())], link_tx)
        .expect("watch");

    fs::write(&settings, r#"{"a": 1}"#).expect("write");
    expect_source(&mut real_rx, &user()).await;
    expect_source(&mut link_rx, &workspace()).await;
    settle(&mut real_rx).await;
    settle(&mut link_rx).await;

    drop(link_watch);
    fs::write(&settings, r#"{"a": 2}"#).expect("write");
    expect_source(&mut real_rx, &user()).await;
    drop(real_watch);
}
