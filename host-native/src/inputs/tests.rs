//! Read once: what settle detection's completeness check read and parsed is what the pass
//! uses, counted (`checked::counts`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::LayerSource;

use super::checked::counts;
use super::{HostEnv, Inputs, Options};

/// A project, a home and an administrator's directory in a temporary directory.
struct World {
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        for dir in ["home", "project", "etc"] {
            std::fs::create_dir_all(tmp.path().join(dir)).expect("mkdir");
        }
        World { tmp }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp
            .path()
            .join(rel)
            .canonicalize()
            .unwrap_or_else(|_| self.tmp.path().join(rel))
    }

    fn inputs(&self) -> Inputs {
        let flags = Options {
            project: Some(self.path("project")),
            system_settings: Some(self.path("etc").join("settings.json")),
            system_defaults: Some(self.path("etc").join("system-defaults.json")),
            ..Options::default()
        };
        let env = HostEnv {
            vars: BTreeMap::from([("HOME".to_owned(), self.path("home").display().to_string())]),
            cwd: self.path("project"),
            home: Some(self.path("home")),
            raw: Vec::new(),
        };
        Inputs::with_env(&flags, env).expect("inputs")
    }

    fn mcp_json(&self) -> PathBuf {
        self.path("project").join(".mcp.json")
    }

    fn user_settings(&self) -> PathBuf {
        self.path("home")
            .join(".config/mcp-reconcile/settings.json")
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// `{"mcpServers": {name: …}}`.
fn servers(name: &str) -> String {
    format!(r#"{{"mcpServers": {{"{name}": {{"command": "{name}"}}}}}}"#)
}

fn user() -> FileSource {
    FileSource::Settings("user".into())
}

/// A save that settle detection found complete is read and parsed once in all: the pass
/// takes the check's text and parse instead of reading the file again.
#[test]
fn one_save_costs_one_read_and_one_parse() {
    let w = World::new();
    write(&w.mcp_json(), &servers("a"));
    let mut inputs = w.inputs();
    inputs.load(None);
    counts::take();

    write(&w.mcp_json(), &servers("bb"));
    assert!(inputs.complete(&FileSource::McpJson));
    let snapshot = inputs.load(Some(&[FileSource::McpJson]));
    assert_eq!(snapshot.names_in(LayerSource::Project), ["bb"]);
    assert_eq!(
        counts::take(),
        (1, 1),
        "(reads, parses) of one checked save"
    );

    // The events of one save in place are each checked: the text is read each time, and
    // parsed once.
    write(&w.mcp_json(), &servers("ccc"));
    assert!(inputs.complete(&FileSource::McpJson));
    assert!(inputs.complete(&FileSource::McpJson));
    let snapshot = inputs.load(Some(&[FileSource::McpJson]));
    assert_eq!(snapshot.names_in(LayerSource::Project), ["ccc"]);
    assert_eq!(
        counts::take(),
        (2, 1),
        "(reads, parses) of a save checked twice"
    );
}

/// Two files checked before one pass are each read and parsed once: what a check keeps is
/// kept per file, not in one slot the second check would take.
#[test]
fn two_files_changed_before_one_pass_are_each_read_once() {
    let w = World::new();
    let mut inputs = w.inputs();
    inputs.load(None);
    counts::take();

    write(&w.mcp_json(), &servers("p"));
    write(&w.user_settings(), &servers("u"));
    assert!(inputs.complete(&FileSource::McpJson));
    assert!(inputs.complete(&user()));
    let snapshot = inputs.load(Some(&[FileSource::McpJson, user()]));
    assert_eq!(snapshot.names_in(LayerSource::Project), ["p"]);
    assert_eq!(snapshot.names_in(LayerSource::User), ["u"]);
    assert_eq!(
        counts::take(),
        (2, 2),
        "(reads, parses) of two checked saves"
    );
}

/// A file written again after its check is read again by the pass: what it holds now is what
/// loads, never the text the check kept.
#[test]
fn a_file_changed_after_its_check_is_read_again() {
    let w = World::new();
    let mut inputs = w.inputs();
    inputs.load(None);
    write(&w.mcp_json(), &servers("checked"));
    assert!(inputs.complete(&FileSource::McpJson));
    write(&w.mcp_json(), &servers("written-after"));
    counts::take();
    let snapshot = inputs.load(Some(&[FileSource::McpJson]));
    assert_eq!(snapshot.names_in(LayerSource::Project), ["written-after"]);
    assert_eq!(counts::take(), (1, 1), "read and parsed afresh");
}

/// A server's origin is the layer it runs from (the last in precedence), that layer's file,
/// and its entry as written there.
#[test]
fn a_servers_origin_is_the_file_of_the_layer_it_runs_from() {
    let w = World::new();
    write(&w.user_settings(), &servers("s"));
    write(
        &w.mcp_json(),
        r#"{"mcpServers": {"s": {"command": "${X:-x}"}}}"#,
    );
    let snapshot = w.inputs().load(None);
    let origin = snapshot.origin("s").expect("a layer holds it");
    assert_eq!(origin.source, LayerSource::Project);
    assert_eq!(origin.file, Some(w.mcp_json().as_path()));
    assert_eq!(origin.written.str_field("command"), Some("${X:-x}"));
    assert!(snapshot.origin("absent").is_none());
}

/// In a client layout a server's origin is that client's file (here Claude Code's
/// `~/.claude.json`), not a settings file of this host's that the layout does not read.
#[test]
fn a_client_layouts_server_comes_from_the_clients_own_file() {
    let w = World::new();
    let state = w.path("home").join(".claude.json");
    write(&state, &servers("c"));
    let flags = Options {
        project: Some(w.path("project")),
        layout: super::Layout::CLAUDE,
        ..Options::default()
    };
    let env = HostEnv {
        vars: BTreeMap::from([("HOME".to_owned(), w.path("home").display().to_string())]),
        cwd: w.path("project"),
        home: Some(w.path("home")),
        raw: Vec::new(),
    };
    let snapshot = Inputs::with_env(&flags, env).expect("inputs").load(None);
    let origin = snapshot.origin("c").expect("a layer holds it");
    assert_eq!(
        (origin.source, origin.file),
        (LayerSource::User, Some(state.as_path()))
    );
}
