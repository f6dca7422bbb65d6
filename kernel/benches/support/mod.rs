//! Deterministic benchmark inputs shared by the criterion benches and the
//! dump that feeds the wasm benchmark (`bench/kernel-wasm.mjs`), so native
//! and wasm time exactly the same requests.
//!
//! A scenario of `n` servers is a session before and after one settings
//! edit: 80 % of the servers come from the user's settings, 20 % from the
//! project's `.mcp.json` (all approved), one in ten is remote (`httpUrl`),
//! the rest are stdio servers with realistic `command` / `args` / `env`. The
//! edit changes the args of `max(1, n / 100)` servers (~1 %), spread evenly.

#![allow(dead_code)] // each bench target uses a different part

use mcp_reconcile_kernel::config::{servers_to_value, SCOPE};
use mcp_reconcile_kernel::gating::{compute_gating, gating_with_pending, Gating};
use mcp_reconcile_kernel::plan::{online_of, online_to_value, Online};
use mcp_reconcile_kernel::{
    approval_hash, assemble, Approvals, Layer, LayerSource, McpLists, Object, ServerConfig,
    Servers, Value,
};

/// The sizes every op is measured at.
pub const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];

/// The project root the approvals are recorded under.
pub const ROOT: &str = "/home/dev/src/acme-app";

/// One size's inputs, typed (for the native benches) and as the JSON
/// requests the kernel's API takes (for `evaluate_str` and wasm).
pub struct Scenario {
    /// Number of servers.
    pub n: usize,
    /// Names whose args the edit changes.
    pub changed: Vec<String>,
    /// The layers before and after the edit.
    pub old_layers: Vec<Layer>,
    pub new_layers: Vec<Layer>,
    /// Assembled servers before and after.
    pub old_servers: Servers,
    pub new_servers: Servers,
    /// Every project server approved for its pre- and post-edit config.
    pub approvals: Approvals,
    /// Settings `mcp.excluded` (patterns that match nothing, so every server
    /// is admitted but the gate still evaluates them).
    pub excluded: Vec<String>,
    pub old_gating: Gating,
    pub new_gating: Gating,
    /// What the live session runs: the pre-edit servers, all connected.
    pub online: Online,
    /// The user settings file before and after, parsed.
    pub old_settings: Value,
    pub new_settings: Value,
}

impl Scenario {
    /// Builds the scenario of `n` servers.
    pub fn new(n: usize) -> Self {
        let stride = (n / changed_count(n)).max(1);
        let changed_idx: std::collections::BTreeSet<usize> = (0..changed_count(n))
            .map(|k| k * stride + stride / 2)
            .collect();
        let is_changed = |i: usize| changed_idx.contains(&i);
        let mut old_user = Servers::new();
        let mut new_user = Servers::new();
        let mut old_project = Servers::new();
        let mut new_project = Servers::new();
        let mut changed = Vec::new();
        // Built as the file's JSON: `Approvals::record` copies the project's
        // records on every call, which is quadratic over 20 000 servers.
        let mut records = Object::new();
        let written: Vec<(ServerConfig, ServerConfig)> = (0..n)
            .map(|i| (server_config(i, false), server_config(i, is_changed(i))))
            .collect();
        // Each reading of a file copies every entry out of the parsed text,
        // one after the other: before and after are separate copies even
        // where nothing changed, each reading's entries close together in
        // memory (as in the host; building them here leaves holes).
        for (edited, user, project) in [
            (false, &mut old_user, &mut old_project),
            (true, &mut new_user, &mut new_project),
        ] {
            // One file, then the other.
            let in_project = |i: &usize| i % 5 == 4;
            let by_file = (0..n)
                .filter(|i| !in_project(i))
                .chain((0..n).filter(in_project));
            for i in by_file {
                let (before, after) = &written[i];
                let name = server_name(i);
                let is_project = in_project(&i);
                let config = as_read(if edited { after } else { before }, is_project);
                if !is_project {
                    user.insert(name, config);
                    continue;
                }
                if edited {
                    // The user approved the current config (the edited one
                    // for the changed servers).
                    let record = object([
                        ("hash", approval_hash(&config).0.into()),
                        ("status", "approved".into()),
                    ]);
                    records.insert(name.clone(), record);
                }
                project.insert(name, config);
            }
        }
        changed.extend((0..n).filter(|&i| is_changed(i)).map(server_name));
        let approvals = Approvals::new(object([(ROOT, Value::Object(records))]));
        let layers = |user: Servers, project: Servers| {
            vec![
                Layer {
                    source: LayerSource::User,
                    servers: user,
                    extension: None,
                    from_workspace: false,
                },
                Layer {
                    source: LayerSource::Project,
                    servers: project,
                    extension: None,
                    from_workspace: false,
                },
            ]
        };
        let old_layers = layers(old_user.clone(), old_project);
        let new_layers = layers(new_user.clone(), new_project);
        let old_servers = assemble(&old_layers).servers;
        let new_servers = assemble(&new_layers).servers;
        let excluded = vec!["legacy-*".to_owned(), "experimental-?".to_owned()];
        let gating_for = |servers: &Servers, approvals: &Approvals| {
            let lists = McpLists {
                excluded: Some(excluded.clone()),
                ..McpLists::default()
            };
            compute_gating(servers, &lists, None, approvals, ROOT, false)
        };
        let new_gating = gating_for(&new_servers, &approvals);
        // Before the edit the project servers were approved for their old
        // configs: the gating the session adopted then had nothing pending.
        let old_gating = Gating {
            pending: Some(Vec::new()),
            ..new_gating.clone()
        };
        let online = online_of(&old_servers, &old_gating);
        let old_settings = settings_value(&old_user);
        let new_settings = settings_value(&new_user);
        Scenario {
            n,
            changed,
            old_layers,
            new_layers,
            old_servers,
            new_servers,
            approvals,
            excluded,
            old_gating,
            new_gating,
            online,
            old_settings,
            new_settings,
        }
    }

    /// `{"op":"plan",...}`: new desired servers against the live session.
    pub fn plan_request(&self) -> Value {
        object([
            ("op", "plan".into()),
            ("desired", servers_to_value(&self.new_servers)),
            ("online", online_to_value(&self.online)),
            ("gating", self.new_gating.to_value()),
            ("trustedFolder", true.into()),
            ("mode", "session".into()),
            ("now", Value::Number(1_000.0)),
        ])
    }

    /// `{"op":"settingsDiff",...}`: the user settings before and after.
    pub fn settings_diff_request(&self) -> Value {
        object([
            ("op", "settingsDiff".into()),
            ("old", self.old_settings.clone()),
            ("new", self.new_settings.clone()),
        ])
    }

    /// `{"op":"hotReload",...}`: what the host runs when the debounce fires.
    pub fn hot_reload_request(&self) -> Value {
        let layer = |l: &Layer| {
            object([
                ("source", l.source.as_str().into()),
                ("servers", servers_to_value(&l.servers)),
            ])
        };
        let excluded = Value::Array(
            self.excluded
                .iter()
                .map(|s| Value::from(s.as_str()))
                .collect(),
        );
        object([
            ("op", "hotReload".into()),
            (
                "previous",
                object([
                    ("servers", servers_to_value(&self.old_servers)),
                    ("gating", self.old_gating.to_value()),
                    ("removed", Value::Array(Vec::new())),
                ]),
            ),
            (
                "layers",
                Value::Array(self.new_layers.iter().map(layer).collect()),
            ),
            ("settings", object([("excluded", excluded)])),
            ("approvals", self.approvals.as_value().clone()),
            ("projectRoot", ROOT.into()),
        ])
    }

    /// One `{"op":"connectionId","name","config"}` per desired server.
    pub fn connection_id_requests(&self) -> Vec<Value> {
        self.new_servers
            .iter()
            .map(|(name, config)| {
                object([
                    ("op", "connectionId".into()),
                    ("name", name.as_str().into()),
                    ("config", config.to_value()),
                ])
            })
            .collect()
    }

    /// One `{"op":"approvalHash","config"}` per desired server.
    pub fn approval_hash_requests(&self) -> Vec<Value> {
        self.new_servers
            .values()
            .map(|config| object([("op", "approvalHash".into()), ("config", config.to_value())]))
            .collect()
    }
}

/// The hot-reload gating function a host passes: settings `excluded`, no
/// `allowed`, no launch cap.
pub fn gating_for(scenario: &Scenario) -> impl Fn(&Servers, Option<Vec<String>>) -> Gating + '_ {
    let lists = McpLists {
        excluded: Some(scenario.excluded.clone()),
        ..McpLists::default()
    };
    move |_, pending| gating_with_pending(&lists, None, pending)
}

/// How many servers the edit changes: ~1 %, at least one.
pub fn changed_count(n: usize) -> usize {
    (n / 100).max(1)
}

/// `github`, `postgres-3`, ...: names as people write them, never integer-like.
pub fn server_name(i: usize) -> String {
    const KINDS: [&str; 8] = [
        "github",
        "postgres",
        "filesystem",
        "slack",
        "jira",
        "sentry",
        "browser",
        "search",
    ];
    format!("{}-{i}", KINDS[i % KINDS.len()])
}

/// A realistic entry: stdio (`npx`/`uvx`/`docker`/a path) with args and env,
/// or every tenth a remote `httpUrl` with headers. `edited` bumps one arg.
pub fn server_config(i: usize, edited: bool) -> ServerConfig {
    let version = if edited { "1.4.1" } else { "1.4.0" };
    let mut c = Object::new();
    if i % 10 == 9 {
        c.insert(
            "httpUrl".into(),
            format!("https://mcp.example.invalid/{i}/mcp?v={version}").into(),
        );
        c.insert(
            "headers".into(),
            object([
                ("Authorization", format!("Bearer tok-{i:08x}").into()),
                ("X-Team", "platform".into()),
            ]),
        );
        c.insert("timeout".into(), Value::Number(30_000.0));
        return ServerConfig::new(c);
    }
    let (command, args): (&str, Vec<String>) = match i % 4 {
        0 => (
            "npx",
            vec![
                "-y".into(),
                format!("@acme/mcp-server-{i}@{version}"),
                "--root".into(),
                format!("/home/dev/src/project-{}", i % 37),
            ],
        ),
        1 => (
            "uvx",
            vec![
                format!("mcp-server-tool{i}=={version}"),
                "--log-level".into(),
                "info".into(),
            ],
        ),
        2 => (
            "docker",
            vec![
                "run".into(),
                "-i".into(),
                "--rm".into(),
                "-e".into(),
                "API_TOKEN".into(),
                format!("ghcr.io/acme/mcp-{i}:{version}"),
            ],
        ),
        _ => (
            "/usr/local/bin/mcp-local",
            vec![
                "--port".into(),
                format!("{}", 8_000 + i % 1_000),
                "--version".into(),
                version.into(),
            ],
        ),
    };
    c.insert("command".into(), command.into());
    c.insert(
        "args".into(),
        Value::Array(args.into_iter().map(Value::String).collect()),
    );
    c.insert(
        "env".into(),
        object([
            (
                "API_TOKEN",
                format!(
                    "secret-{:016x}",
                    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                )
                .into(),
            ),
            ("LOG_LEVEL", "info".into()),
            (
                "REGION",
                ["eu-west-1", "us-east-1", "ap-south-1"][i % 3].into(),
            ),
        ]),
    );
    if i.is_multiple_of(3) {
        c.insert(
            "cwd".into(),
            format!("/home/dev/src/project-{}", i % 37).into(),
        );
    }
    if i.is_multiple_of(7) {
        c.insert(
            "includeTools".into(),
            Value::Array(vec!["search".into(), "read".into(), "list".into()]),
        );
    }
    c.insert("timeout".into(), Value::Number(60_000.0));
    ServerConfig::new(c)
}

/// The entry as the host reads it: `parse_mcp_json` stamps a project entry
/// `scope: "project"` (last, as it is not written in the file).
fn as_read(written: &ServerConfig, is_project: bool) -> ServerConfig {
    let mut entry = written.object().clone();
    if is_project {
        entry.insert(SCOPE.into(), "project".into());
    }
    ServerConfig::new(entry)
}

/// A user settings file: unrelated settings plus `mcpServers`.
fn settings_value(user: &Servers) -> Value {
    object([
        ("theme", "dark".into()),
        (
            "editor",
            object([("tabSize", Value::Number(2.0)), ("wordWrap", true.into())]),
        ),
        (
            "mcp",
            object([("excluded", Value::Array(vec!["legacy-*".into()]))]),
        ),
        ("mcpServers", servers_to_value(user)),
    ])
}

fn object<const K: usize>(members: [(&str, Value); K]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}
