//! Dev mode (issue 25): a server is restarted when its own source files change.
//!
//! An entry may carry VS Code's `"dev": {"watch": "src/**/*.ts"}` (or a list of globs). Globs
//! are relative to the server's working directory, or absolute; `*` stays inside one path
//! component, `**` crosses any number, `{a,b}` and `[...]` work as in VS Code.
//!
//! What the kernel decides, given data:
//! * [`dev_globs`]: the globs an entry asks for (or why they are unusable);
//! * [`GlobRoot`]: where a glob's files can be — the literal directory its pattern starts
//!   from, how deep below it, and which directories a walk must not enter
//!   ([`GlobRoot::descends`]: never `node_modules` or `.git` unless the glob names them);
//! * [`DevMatcher`]: which servers a changed path belongs to;
//! * [`restart`]: the plan with those servers restarted — a server the plan keeps (or holds
//!   back after failures) becomes a `reconnect` to its own connection id, which a host runs
//!   make before break like any changed entry;
//! * [`Brake`] (`brake`): whether a change restarts a server now — at most
//!   [`BRAKE_RESTARTS`] dev restarts of one server within [`BRAKE_WINDOW`], then its dev
//!   restarts pause (a server that writes into its own watched folder restarts itself
//!   forever otherwise) until its sources are quiet or the user reconnects it.
//!
//! The host watches the directories (bounded by [`MAX_WATCHED_DIRS`] per session), debounces
//! the changes through its reload scheduler and runs the plan. `dev` is part of the entry but
//! not of its identity (editing it restarts nothing), and the approval hash covers it: a
//! project entry's dev mode applies only once that very entry is approved.

mod brake;

pub use brake::{paused_text, Brake, Paused, BRAKE_QUIET, BRAKE_RESTARTS, BRAKE_WINDOW};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::config::{ServerConfig, Servers};
use crate::gating::Reason;
use crate::identity::connection_id;
use crate::json::Value;
use crate::plan::{Action, Plan};

/// The most directories one session watches for dev mode. A server whose globs would need
/// more (with what the servers before it in map order use) is not watched: globs a
/// repository writes can never make the host watch a whole disk or use up the user's
/// inotify watches.
pub const MAX_WATCHED_DIRS: usize = 2048;

/// Directories a walk does not enter unless a glob names them: they hold thousands of
/// directories that are not a server's own source.
pub const SKIPPED_DIRS: [&str; 2] = ["node_modules", ".git"];

/// Why an entry's `dev` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DevError {
    /// `dev` is not an object.
    #[error("`dev` must be an object such as {{\"watch\": \"src/**/*.ts\"}}, not {found}")]
    NotAnObject {
        /// The value found, as JSON.
        found: String,
    },
    /// `dev.watch` is neither a string nor a list of strings.
    #[error("`dev.watch` must be a glob or a list of globs, not {found}")]
    NotGlobs {
        /// The value found, as JSON.
        found: String,
    },
    /// A glob is empty.
    #[error("`dev.watch` has an empty glob")]
    EmptyGlob,
    /// A glob does not parse.
    #[error("`dev.watch` glob {glob:?} is not a valid glob: {message}")]
    BadGlob {
        /// The glob as written.
        glob: String,
        /// What is wrong with it.
        message: String,
    },
    /// A glob would watch every directory of the machine.
    #[error("`dev.watch` glob {glob:?} would watch the whole file system; name the source directory (\"src/**/*.ts\")")]
    WholeFileSystem {
        /// The glob as written.
        glob: String,
    },
}

/// The `dev.watch` globs of `config`, in the order written; empty when it has none (no
/// `dev`, `dev` null, or `dev` without `watch`).
///
/// # Errors
/// `dev` is not an object, `watch` is not a glob or a list of globs, or a glob is empty or
/// invalid.
pub fn dev_globs(config: &ServerConfig) -> Result<Vec<String>, DevError> {
    let watch = match config.get("dev") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(dev)) => dev.get("watch"),
        Some(other) => {
            return Err(DevError::NotAnObject {
                found: other.to_json(),
            })
        }
    };
    let globs: Vec<String> = match watch {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(glob)) => vec![glob.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| DevError::NotGlobs {
                found: Value::Array(items.clone()).to_json(),
            })?,
        Some(other) => {
            return Err(DevError::NotGlobs {
                found: other.to_json(),
            })
        }
    };
    for glob in &globs {
        if glob.trim().is_empty() {
            return Err(DevError::EmptyGlob);
        }
        compile(glob).map_err(|message| DevError::BadGlob {
            glob: glob.clone(),
            message,
        })?;
    }
    Ok(globs)
}

/// Where a glob's files can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobRoot {
    /// The glob as written.
    pub glob: String,
    /// The literal directory its pattern starts from: absolute, or relative to the server's
    /// working directory (`""` is that directory itself).
    pub dir: String,
    /// The rest of the glob, matched below `dir`.
    pub pattern: String,
    /// How many directory levels below `dir` its files can be: `Some(0)` for `dir` itself,
    /// `None` for any depth (`**`, or a `{…}` that may hold a `/`).
    pub depth: Option<usize>,
}

impl GlobRoot {
    /// Splits `glob` at its last literal directory (no `*`, `?`, `[`, `{` or `\` in it or in
    /// a component before it).
    pub fn of(glob: &str) -> GlobRoot {
        let trimmed = match glob.trim_end_matches('/') {
            "" if glob.starts_with('/') => "/",
            trimmed => trimmed,
        };
        let parts: Vec<&str> = trimmed.split('/').collect();
        // The last component is what is matched, even when it is literal.
        let literal = parts
            .iter()
            .take(parts.len().saturating_sub(1))
            .take_while(|part| !part.contains(['*', '?', '[', ']', '{', '}', '\\']))
            .count();
        let dir = match parts[..literal].join("/") {
            // `/x`: the root's empty first component.
            dir if dir.is_empty() && literal > 0 => "/".to_owned(),
            dir => dir,
        };
        let pattern = parts[literal..].join("/");
        let depth = if pattern.contains("**") || pattern.contains('{') {
            None
        } else {
            Some(pattern.matches('/').count())
        };
        GlobRoot {
            glob: glob.to_owned(),
            dir,
            pattern,
            depth,
        }
    }

    /// Whether a walk below [`GlobRoot::dir`] enters the directory named `name`: not
    /// `node_modules` or `.git` ([`SKIPPED_DIRS`]) unless the pattern names it.
    pub fn descends(&self, name: &str) -> bool {
        !SKIPPED_DIRS.contains(&name) || self.pattern.split('/').any(|part| part.contains(name))
    }

    /// The absolute pattern of the glob once its directory resolved to `dir` (the real
    /// path, where the host watches it): `dir` escaped (a directory name may hold `*` or
    /// `[`), then the pattern.
    ///
    /// # Errors
    /// The glob would watch every directory of the machine (`/**`).
    pub fn anchored(&self, dir: &str) -> Result<String, DevError> {
        let dir = dir.trim_end_matches('/');
        if dir.is_empty() && self.depth.is_none() {
            return Err(DevError::WholeFileSystem {
                glob: self.glob.clone(),
            });
        }
        Ok(format!("{}/{}", escape(dir), self.pattern))
    }
}

/// Which servers a changed path belongs to: each server's globs, anchored at the real
/// directories the host watches ([`GlobRoot::anchored`]).
#[derive(Clone, Debug, Default)]
pub struct DevMatcher {
    servers: Vec<(String, GlobSet)>,
}

impl DevMatcher {
    /// A matcher that matches nothing.
    pub fn new() -> Self {
        DevMatcher::default()
    }

    /// Restarts `server` when a path matches one of `patterns` (absolute globs).
    ///
    /// # Errors
    /// A pattern is not a valid glob (the server is not added).
    pub fn watch(&mut self, server: &str, patterns: &[String]) -> Result<(), DevError> {
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = compile(pattern).map_err(|message| DevError::BadGlob {
                glob: pattern.clone(),
                message,
            })?;
            set.add(glob);
        }
        let set = set.build().map_err(|e| DevError::BadGlob {
            glob: patterns.join(", "),
            message: e.to_string(),
        })?;
        self.servers.push((server.to_owned(), set));
        Ok(())
    }

    /// The servers whose globs match `path` (absolute), in the order they were added.
    pub fn servers<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.servers
            .iter()
            .filter(move |(_, set)| set.is_match(path))
            .map(|(name, _)| name.as_str())
    }

    /// Whether no server is watched.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// `plan` with the servers named in `sources_changed` restarted: each whose action is
/// `keep`, or `skip` for `backing_off` or `crash_loop` (their sources may hold the fix),
/// becomes a `reconnect` from its connection id to the same id with nothing in `changed`,
/// in the reconnect group. A server the plan starts anyway, stops, or may not run is left
/// as planned.
pub fn restart(plan: Plan, sources_changed: &[String], desired: &Servers) -> Plan {
    let mut actions: Vec<Action> = plan
        .actions
        .into_iter()
        .map(|action| {
            let name = match &action {
                Action::Keep { name }
                | Action::Skip {
                    name,
                    reason: Reason::BackingOff | Reason::CrashLoop,
                } => name,
                _ => return action,
            };
            if !sources_changed.contains(name) {
                return action;
            }
            match desired.get(name).map(|config| connection_id(name, config)) {
                Some(Ok(id)) => Action::Reconnect {
                    name: name.clone(),
                    from: id.clone(),
                    to: id,
                    changed: Vec::new(),
                },
                _ => action,
            }
        })
        .collect();
    // Stable: the plan's order inside each group stays.
    actions.sort_by_key(group);
    Plan { actions }
}

/// An action's group in plan order (SPEC §6).
fn group(action: &Action) -> u8 {
    match action {
        Action::Disconnect { .. } => 0,
        Action::Reconnect { .. } => 1,
        Action::Retry { .. } => 2,
        Action::Connect { .. } => 3,
        Action::Keep { .. } => 4,
        Action::Skip { .. } => 5,
        Action::Noop { .. } => 6,
    }
}

/// `glob` compiled as VS Code reads it: `*` inside one component, `\` escapes.
fn compile(glob: &str) -> Result<globset::Glob, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())
}

/// `text` matched literally in a glob.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '?' | '*' | '[' | ']' | '{' | '}' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval_hash;
    use crate::gating::Gating;
    use crate::plan::{plan, Mode, Online, OnlineEntry, Status};
    use crate::time::Millis;

    fn config(json: &str) -> ServerConfig {
        ServerConfig::from_json(json).expect("config")
    }

    #[test]
    fn the_globs_are_read_as_vs_code_writes_them() {
        let one = config(r#"{"command":"x","dev":{"watch":"src/**/*.ts"}}"#);
        assert_eq!(dev_globs(&one), Ok(vec!["src/**/*.ts".to_owned()]));
        let many = config(r#"{"command":"x","dev":{"watch":["src/*.py","/abs/**"]}}"#);
        assert_eq!(
            dev_globs(&many),
            Ok(vec!["src/*.py".to_owned(), "/abs/**".to_owned()])
        );
        for none in [
            r#"{"command":"x"}"#,
            r#"{"command":"x","dev":null}"#,
            r#"{"command":"x","dev":{"debug":{"type":"node"}}}"#,
        ] {
            assert_eq!(dev_globs(&config(none)), Ok(Vec::new()), "{none}");
        }
    }

    #[test]
    fn an_unusable_dev_entry_says_what_is_wrong() {
        let error = |json: &str| dev_globs(&config(json)).expect_err("an error").to_string();
        assert!(error(r#"{"dev":"src"}"#).contains("must be an object"));
        assert!(error(r#"{"dev":{"watch":3}}"#).contains("glob or a list of globs, not 3"));
        assert!(error(r#"{"dev":{"watch":["a",1]}}"#).contains("[\"a\",1]"));
        assert!(error(r#"{"dev":{"watch":" "}}"#).contains("empty glob"));
        assert!(error(r#"{"dev":{"watch":"src/[a"}}"#).contains("src/[a"));
    }

    #[test]
    fn a_glob_starts_from_its_literal_directory() {
        let root = |glob: &str| {
            let r = GlobRoot::of(glob);
            (r.dir, r.pattern, r.depth)
        };
        let s = |t: &str| t.to_owned();
        assert_eq!(root("src/**/*.ts"), (s("src"), s("**/*.ts"), None));
        assert_eq!(root("src/*.ts"), (s("src"), s("*.ts"), Some(0)));
        assert_eq!(root("src/*/x.ts"), (s("src"), s("*/x.ts"), Some(1)));
        assert_eq!(root("*.ts"), (s(""), s("*.ts"), Some(0)));
        assert_eq!(root("main.py"), (s(""), s("main.py"), Some(0)));
        assert_eq!(root("lib/main.py"), (s("lib"), s("main.py"), Some(0)));
        assert_eq!(
            root("src/{a,b/c}/*.ts"),
            (s("src"), s("{a,b/c}/*.ts"), None)
        );
        assert_eq!(root("/opt/app/**"), (s("/opt/app"), s("**"), None));
        assert_eq!(root("/**/*.ts"), (s("/"), s("**/*.ts"), None));
        assert_eq!(root("../shared/*.ts"), (s("../shared"), s("*.ts"), Some(0)));
        assert_eq!(root("src/"), (s(""), s("src"), Some(0)));
    }

    #[test]
    fn a_walk_skips_node_modules_and_git_unless_the_glob_names_them() {
        let all = GlobRoot::of("**/*.js");
        assert!(all.descends("src"));
        assert!(!all.descends("node_modules"));
        assert!(!all.descends(".git"));
        assert!(GlobRoot::of("**/node_modules/my-lib/*.js").descends("node_modules"));
        assert!(GlobRoot::of("**/.git/HEAD").descends(".git"));
        // A literal directory is where the walk starts: it is never asked about.
        assert_eq!(GlobRoot::of("node_modules/x/**").dir, "node_modules/x");
    }

    #[test]
    fn a_glob_never_watches_the_whole_file_system() {
        let error = GlobRoot::of("/**/*.ts").anchored("/").expect_err("refused");
        assert!(matches!(error, DevError::WholeFileSystem { .. }), "{error}");
        // One level of `/` is one directory: allowed.
        assert_eq!(GlobRoot::of("/*.ts").anchored("/").as_deref(), Ok("/*.ts"));
    }

    #[test]
    fn paths_match_the_servers_whose_globs_name_them() {
        let mut matcher = DevMatcher::new();
        let anchored = |glob: &str, dir: &str| GlobRoot::of(glob).anchored(dir).expect("pattern");
        matcher
            .watch("ts", &[anchored("src/**/*.ts", "/p/a[1]/src")])
            .expect("watch");
        matcher
            .watch(
                "py",
                &[anchored("*.py", "/p/py"), anchored("lib/*.py", "/p/py/lib")],
            )
            .expect("watch");
        let servers = |path: &str| matcher.servers(path).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(servers("/p/a[1]/src/x.ts"), ["ts"]);
        assert_eq!(servers("/p/a[1]/src/deep/er/x.ts"), ["ts"]);
        assert!(
            servers("/p/a1/src/x.ts").is_empty(),
            "the directory is literal"
        );
        assert!(servers("/p/a[1]/src/x.js").is_empty());
        assert_eq!(servers("/p/py/main.py"), ["py"]);
        assert_eq!(servers("/p/py/lib/util.py"), ["py"]);
        // `*` stays inside one component.
        assert!(servers("/p/py/sub/main.py").is_empty());
        assert!(servers("/p/py/lib/sub/util.py").is_empty());
    }

    fn servers(json: &str) -> Servers {
        crate::config::servers_from_value(&crate::json::parse_jsonc(json).expect("json"))
            .expect("servers")
    }

    #[test]
    fn a_kept_server_whose_sources_changed_is_reconnected_to_its_own_id() {
        let desired = servers(
            r#"{"a":{"command":"a","dev":{"watch":"*.ts"}},"b":{"command":"b"},"c":{"command":"c"}}"#,
        );
        let mut online = Online::new();
        for (name, config) in desired.iter() {
            online.insert(name.clone(), OnlineEntry::connected(config.clone()));
        }
        let mut failed = online.get("c").cloned().expect("c");
        failed.status = Status::Failed;
        failed.attempts = 2;
        failed.retry_at = Some(Millis(10_000));
        online.insert("c".to_owned(), failed);
        let kept = plan(
            &desired,
            &online,
            &Gating::default(),
            true,
            Mode::Session,
            Millis(0),
        )
        .expect("plan");
        let restarted = restart(kept.clone(), &["a".to_owned(), "c".to_owned()], &desired);
        let kinds: Vec<(&str, &str)> = restarted
            .actions
            .iter()
            .map(|a| (a.kind(), a.name().unwrap_or("")))
            .collect();
        assert_eq!(
            kinds,
            [("reconnect", "a"), ("reconnect", "c"), ("keep", "b")]
        );
        let Action::Reconnect {
            from, to, changed, ..
        } = &restarted.actions[0]
        else {
            panic!("{restarted:?}")
        };
        assert_eq!((from, changed.len()), (to, 0));
        // Nothing changed: the plan stays as it was.
        assert_eq!(restart(kept.clone(), &[], &desired), kept);
    }

    #[test]
    fn a_server_that_may_not_run_is_never_restarted() {
        let desired = servers(r#"{"a":{"command":"a","dev":{"watch":"*.ts"}}}"#);
        let gating = Gating {
            excluded: Some(vec!["a".to_owned()]),
            ..Gating::default()
        };
        let online = Online::new();
        let planned =
            plan(&desired, &online, &gating, true, Mode::Session, Millis(0)).expect("plan");
        assert_eq!(
            restart(planned.clone(), &["a".to_owned()], &desired),
            planned
        );
    }

    #[test]
    fn dev_is_covered_by_the_approval_hash_but_not_by_the_identity() {
        let plain = config(r#"{"command":"x"}"#);
        let dev = config(r#"{"command":"x","dev":{"watch":"src/**"}}"#);
        let other = config(r#"{"command":"x","dev":{"watch":"/**"}}"#);
        assert_ne!(approval_hash(&plain), approval_hash(&dev));
        assert_ne!(approval_hash(&dev), approval_hash(&other));
        assert_eq!(
            crate::session_key("x", &plain).expect("key"),
            crate::session_key("x", &dev).expect("key")
        );
    }
}
