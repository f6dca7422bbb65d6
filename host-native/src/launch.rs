//! [`Launch`]: where and with what environment a stdio server of one session starts, and when
//! two sessions would start it identically — the only case in which the daemon lets them share
//! one process (SPEC §6 pool mode, issue 12).
//!
//! A session of the per-user daemon brings its own project root and environment (those of the
//! `serve` that attached it). Its servers are spawned with exactly that environment — never the
//! daemon's — and a server without `cwd` runs in the session's project root. Two sessions share
//! a process exactly when the connection id (§2.1: command, args, `cwd`, `env`, …), the effective
//! working directory and the counted environment are all equal; [`Launch::shared_id`] folds
//! the last two into the pool's key.
//!
//! Every variable counts except the few in [`NOT_COUNTED`], which describe the terminal or the
//! shell a command was typed in rather than anything a server reads, the per-session ids MCP
//! clients hand their servers (every name ending in [`PER_SESSION_SUFFIX`], `_SESSION_ID`:
//! Claude Code's `CLAUDE_CODE_SESSION_ID`, qwen-code's `QWEN_CODE_SESSION_ID`), and
//! mcp-reconcile's own (`MCP_RECONCILE_*`, e.g. its log filter); a shared process gets the
//! values of the session that started it for those.
//!
//! `PATH` counts by what it resolves, not by how it is spelled ([`path_identity`]): Codex
//! prepends a directory of its own per session (links to its helpers, and a `.lock` file), so
//! two sessions' `PATH`s never read alike, yet every program either looks up resolves to the
//! same file. Entry by entry, a small directory (at most [`SMALL_DIR`] entries) counts as the
//! names of the executable regular files it holds and the file (device and inode, after links)
//! each resolves to; any other entry as its path. A name that is not an executable regular file
//! (a lock file, a directory) does not count: `execvp` and `which` pass over it, so it changes
//! what no program resolves. Two sessions share a process only when every name any program of
//! it could look up on `PATH` resolves, in the same order, to the same file.
//!
//! How widely a process is shared is its scope ([`Share`], the kernel's: `session`, `project`,
//! `user`); [`share::place`] turns the scope into the pool key and the launch the process
//! starts with.
//!
//! `SSL_CERT_FILE` and `SSL_CERT_DIR` count like any other variable, and must: a remote
//! connection trusts the roots its session names there ([`crate::tls::Trust::of_launch`]), so
//! two sessions with different trust never share one (when remote connections are pooled).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_reconcile_kernel::identity::ConnectionId;
pub use mcp_reconcile_kernel::share::Share;
use mcp_reconcile_kernel::ServerConfig;
use sha2::{Digest, Sha256};

pub mod share;

/// Variables that do not decide whether two sessions may share a server process: the shell's
/// and the terminal's bookkeeping, which differs between two windows of the same user; and
/// Cline CLI 3.0's `CLINE_CONNECTOR_CLI_LAUNCH` (how its chat connectors relaunch it: its own
/// path and the session's directory, measured in the environment it gives every server).
pub const NOT_COUNTED: &[&str] = &[
    "_",
    "CLINE_CONNECTOR_CLI_LAUNCH",
    "COLORTERM",
    "COLUMNS",
    "LINES",
    "OLDPWD",
    // OpenCode 1.18.33's own process id, set for every server it starts (each `opencode run`
    // and TUI window is a process of its own): it names the client, as a `*_SESSION_ID` does.
    "OPENCODE_PID",
    "PWD",
    "SHLVL",
    "SSH_TTY",
    "STY",
    "TERM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TERM_SESSION_ID",
    "TMUX_PANE",
    "VTE_VERSION",
    "WINDOW",
    "WINDOWID",
    // npm's own mark of the program that runs a script. OpenCode 1.18.33's embedded npm puts it
    // into OpenCode's environment when its background plugin install loads npm's config, so a
    // server started before that lacks it and one started after has it (measured: the one
    // difference between two concurrent `opencode run`s besides `OPENCODE_PID`).
    "npm_config_user_agent",
];

/// The name ending of the variables an MCP client sets per session of its own for the servers
/// it starts (measured, issue 41: Claude Code's `CLAUDE_CODE_SESSION_ID`, qwen-code's
/// `QWEN_CODE_SESSION_ID`; Codex and Gemini CLI set none): two sessions of one client share a
/// server process (in scope `project` or `user`) even though each sets its own value. Safe
/// because such a variable names the client's conversation, not anything a server is started
/// differently for; a shared process sees the value of the session that started it, as for
/// [`NOT_COUNTED`]. An entry that puts such a variable into its own `env` or `args`
/// (`${CLAUDE_CODE_SESSION_ID}`) still gets a process per session, since the expanded value is
/// part of its connection id.
pub const PER_SESSION_SUFFIX: &str = "_SESSION_ID";

/// mcp-reconcile's own variables (not counted either).
pub const OWN_PREFIX: &str = "MCP_RECONCILE_";

/// A session's launch context: its project directory and its whole environment. `Debug`
/// names the variables, never their values.
#[derive(Clone, PartialEq, Eq)]
pub struct Launch {
    /// The session's project root: the working directory of a server without `cwd`, and what a
    /// relative `cwd` is resolved against.
    pub dir: PathBuf,
    /// The environment a server is spawned with (before its own `env`).
    pub vars: BTreeMap<String, String>,
    /// The rest of it: variables whose name or value is not UTF-8, as bytes.
    pub raw: Vec<(Vec<u8>, Vec<u8>)>,
    /// The session's OAuth token file (its layout's), for the remote servers it starts.
    pub tokens: Option<crate::token_store_file::TokenFile>,
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("dir", &self.dir)
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("raw", &self.raw.len())
            .field("tokens", &self.tokens)
            .finish()
    }
}

/// The directory a stdio server of `config` runs in: with a session's launch context, its
/// [`Launch::effective_cwd`]; without one (this process starts it: `watch --no-daemon`, an
/// embedding host), its `cwd` resolved against `base_dir` (the project directory), else this
/// process's working directory, which the child inherits. Dev mode's relative globs start
/// there.
pub fn server_dir(
    config: &ServerConfig,
    base_dir: Option<&Path>,
    launch: Option<&Launch>,
) -> PathBuf {
    let dir = match (launch, config.str_field("cwd").filter(|c| !c.is_empty())) {
        (Some(launch), _) => launch.effective_cwd(config),
        (None, Some(cwd)) => resolve_cwd(cwd, base_dir),
        (None, None) => PathBuf::new(),
    };
    if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().unwrap_or_default().join(dir)
    }
}

/// A server's `cwd` as its process gets it without a launch context: a relative one against
/// `base_dir` (the project directory) when given.
pub(crate) fn resolve_cwd(cwd: &str, base_dir: Option<&Path>) -> PathBuf {
    let path = Path::new(cwd);
    match base_dir {
        Some(base) if path.is_relative() => base.join(path),
        _ => path.to_path_buf(),
    }
}

impl Launch {
    /// The directory `config` runs in: its `cwd` (relative to [`Launch::dir`]) or the project
    /// root.
    pub fn effective_cwd(&self, config: &ServerConfig) -> PathBuf {
        match config.str_field("cwd").filter(|c| !c.is_empty()) {
            Some(cwd) if Path::new(cwd).is_absolute() => PathBuf::from(cwd),
            Some(cwd) => self.dir.join(cwd),
            None => self.dir.clone(),
        }
    }

    /// The key under which the pool shares `config`'s connection `id` for this session:
    /// `<name>::<16 hex>` of a hash over `id`, the effective working directory, every
    /// counted variable (name and value), every non-UTF-8 one and the token file. Equal exactly when the process would be started
    /// identically. The hash is one-way: no value can be read back from it.
    pub fn shared_id(&self, id: &ConnectionId, config: &ServerConfig) -> ConnectionId {
        self.shared_id_in(id, config, &mut PathIdentities::default())
    }

    /// [`Launch::shared_id`], with `PATH`'s identity taken from `paths` (read once for the
    /// starts of one pass, not once per server).
    pub fn shared_id_in(
        &self,
        id: &ConnectionId,
        config: &ServerConfig,
        paths: &mut PathIdentities,
    ) -> ConnectionId {
        let mut hash = Sha256::new();
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        part(id.as_str().as_bytes());
        part(self.effective_cwd(config).as_os_str().as_encoded_bytes());
        for (key, value) in self.counted() {
            part(key.as_bytes());
            if key == "PATH" {
                part(paths.of(value));
            } else {
                part(value.as_bytes());
            }
        }
        for (key, value) in &self.raw {
            part(key);
            part(value);
        }
        // A remote connection (shared only with `pool_remote`) authorizes from this file.
        if let Some(tokens) = &self.tokens {
            part(tokens.path.as_os_str().as_encoded_bytes());
        }
        let digest = hash.finalize();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        ConnectionId(format!("{}::{hex}", id.server_name()))
    }

    /// The variables that decide sharing, in name order.
    pub fn counted(&self) -> impl Iterator<Item = (&String, &String)> + '_ {
        self.vars.iter().filter(|(key, _)| {
            !NOT_COUNTED.contains(&key.as_str())
                && !key.ends_with(PER_SESSION_SUFFIX)
                && !key.starts_with(OWN_PREFIX)
        })
    }
}

/// How long a [`PathIdentities`] answers from what it read: the starts of one pass.
const PATHS_FRESH: Duration = Duration::from_secs(1);

/// The [`path_identity`] of each `PATH` value read so far, for the starts of one pass (a
/// session's servers share its `PATH`): read once per pass instead of once per server, since
/// listing `PATH`'s directories (the file system reads a large one whole even to count
/// [`SMALL_DIR`] + 1 entries) was ~0.8 ms a server and most of a warm session start of 30
/// (`bench/start.mjs`). Forgotten after `PATHS_FRESH` (1 s), so a start outside a pass (a lazy
/// server's first call) reads the directories as they are then.
#[derive(Debug, Default)]
pub struct PathIdentities {
    read: Option<Instant>,
    known: HashMap<String, Vec<u8>>,
}

impl PathIdentities {
    /// `path`'s [`path_identity`], read from the file system unless it was read in the last
    /// `PATHS_FRESH`.
    pub fn of(&mut self, path: &str) -> &[u8] {
        self.of_at(path, Instant::now())
    }

    /// [`PathIdentities::of`] at `now`.
    fn of_at(&mut self, path: &str, now: Instant) -> &[u8] {
        if self
            .read
            .is_none_or(|read| now.duration_since(read) > PATHS_FRESH)
        {
            self.known.clear();
            self.read = Some(now);
        }
        self.known
            .entry(path.to_owned())
            .or_insert_with(|| path_identity(path))
    }
}

/// A directory on `PATH` with at most this many entries counts by its content.
pub const SMALL_DIR: usize = 64;

/// What a `PATH` value resolves: entry by entry, a small directory's executable regular files
/// by name with the file each resolves to (device and inode, links followed), any other entry
/// its path. Bounded: a directory is listed only up to [`SMALL_DIR`] + 1 entries.
pub fn path_identity(path: &str) -> Vec<u8> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = Vec::new();
    for entry in path.split(':') {
        out.push(0);
        let listed = std::fs::read_dir(entry).ok().and_then(|dir| {
            let names: Vec<_> = dir.take(SMALL_DIR + 1).collect::<Result<_, _>>().ok()?;
            (names.len() <= SMALL_DIR).then_some(names)
        });
        let Some(names) = listed.filter(|_| !entry.is_empty()) else {
            out.extend_from_slice(b"path:");
            out.extend_from_slice(entry.as_bytes());
            continue;
        };
        let mut files: Vec<(std::ffi::OsString, u64, u64)> = names
            .iter()
            .filter_map(|e| {
                let meta = std::fs::metadata(e.path()).ok()?;
                let executable = meta.is_file() && meta.mode() & 0o111 != 0;
                executable.then(|| (e.file_name(), meta.dev(), meta.ino()))
            })
            .collect();
        files.sort();
        out.extend_from_slice(b"dir:");
        for (name, dev, ino) in files {
            out.extend_from_slice(name.as_encoded_bytes());
            out.push(b'=');
            out.extend_from_slice(&dev.to_le_bytes());
            out.extend_from_slice(&ino.to_le_bytes());
            out.push(b'/');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> ServerConfig {
        ServerConfig::from_json(json).expect("config")
    }

    fn launch(dir: &str, vars: &[(&str, &str)]) -> Launch {
        Launch {
            dir: PathBuf::from(dir),
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            raw: Vec::new(),
            tokens: None,
        }
    }

    #[test]
    fn relative_cwd_is_resolved_against_the_project_dir() {
        let base = Path::new("/project");
        assert_eq!(
            resolve_cwd("sub/dir", Some(base)),
            Path::new("/project/sub/dir")
        );
        assert_eq!(resolve_cwd("/abs", Some(base)), Path::new("/abs"));
        assert_eq!(resolve_cwd("rel", None), Path::new("rel"));
    }

    #[test]
    fn a_servers_directory_is_where_its_process_runs() {
        let here = std::env::current_dir().expect("cwd");
        let base = Path::new("/project");
        let session = launch("/session", &[]);
        let plain = config(r#"{"command":"x"}"#);
        let relative = config(r#"{"command":"x","cwd":"srv"}"#);
        assert_eq!(server_dir(&plain, Some(base), None), here);
        assert_eq!(
            server_dir(&relative, Some(base), None),
            Path::new("/project/srv")
        );
        assert_eq!(
            server_dir(&plain, Some(base), Some(&session)),
            Path::new("/session")
        );
        assert_eq!(
            server_dir(&relative, Some(base), Some(&session)),
            Path::new("/session/srv")
        );
    }

    #[test]
    fn sharing_needs_the_same_directory_and_counted_environment() {
        let id = ConnectionId("a::0123456789abcdef".into());
        let plain = config(r#"{"command":"x"}"#);
        let base = launch("/p", &[("PATH", "/bin"), ("TOKEN", "s3")]);
        let key = base.shared_id(&id, &plain);
        assert!(key.as_str().starts_with("a::"), "{key}");
        // A terminal's bookkeeping does not count.
        let other_shell = launch(
            "/p",
            &[
                ("PATH", "/bin"),
                ("TOKEN", "s3"),
                ("PWD", "/q"),
                ("SHLVL", "3"),
                ("MCP_RECONCILE_LOG", "info"),
            ],
        );
        assert_eq!(other_shell.shared_id(&id, &plain), key);
        // Two sessions of one client (each with its own session id) share the process.
        let claude = |session: &str| {
            launch(
                "/p",
                &[
                    ("PATH", "/bin"),
                    ("TOKEN", "s3"),
                    ("CLAUDE_CODE_SESSION_ID", session),
                ],
            )
        };
        assert_eq!(claude("one").shared_id(&id, &plain), key);
        assert_eq!(
            claude("one").shared_id(&id, &plain),
            claude("two").shared_id(&id, &plain)
        );
        // Another project root is another working directory for a server without `cwd`.
        assert_ne!(
            launch("/q", &[("PATH", "/bin"), ("TOKEN", "s3")]).shared_id(&id, &plain),
            key
        );
        // Another value, or one more variable, is another environment.
        assert_ne!(
            launch("/p", &[("PATH", "/bin"), ("TOKEN", "s4")]).shared_id(&id, &plain),
            key
        );
        assert_ne!(
            launch("/p", &[("PATH", "/bin")]).shared_id(&id, &plain),
            key
        );
        // An absolute `cwd` is the same directory from any project root.
        let fixed = config(r#"{"command":"x","cwd":"/srv"}"#);
        assert_eq!(
            base.shared_id(&id, &fixed),
            launch("/q", &[("PATH", "/bin"), ("TOKEN", "s3")]).shared_id(&id, &fixed)
        );
        assert!(!key.as_str().contains("s3"));
        assert!(!format!("{base:?}").contains("s3"));
    }

    #[test]
    fn per_session_path_directories_that_resolve_alike_do_not_split_the_key() {
        use std::os::unix::fs::{symlink, PermissionsExt as _};
        let tmp = tempfile::tempdir().expect("tmp");
        let executable = |name: &str| {
            let path = tmp.path().join(name);
            std::fs::write(&path, "#!/bin/sh\n").expect("tool");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            path
        };
        let (tool, other) = (executable("codex"), executable("other"));
        // Codex's per-session directory: links to its helpers and a lock file of its own.
        let session = |name: &str, target: &Path| {
            let dir = tmp.path().join(name);
            std::fs::create_dir(&dir).expect("dir");
            symlink(target, dir.join("apply_patch")).expect("link");
            std::fs::write(dir.join(".lock"), name).expect("lock");
            dir.display().to_string()
        };
        let (one, two, odd) = (
            session("s1", &tool),
            session("s2", &tool),
            session("s3", &other),
        );
        let id = ConnectionId("fs::abc".into());
        let cfg = config(r#"{"command":"npx"}"#);
        let key = |path: String| launch("/p", &[("PATH", &path)]).shared_id(&id, &cfg);
        assert_eq!(
            key(format!("{one}:/usr/bin")),
            key(format!("{two}:/usr/bin")),
            "two sessions' own directories with the same links share"
        );
        assert_ne!(
            key(format!("{one}:/usr/bin")),
            key(format!("{odd}:/usr/bin")),
            "a name that resolves to another file splits"
        );
        assert_ne!(
            key(format!("{one}:/usr/bin")),
            key(format!("/usr/bin:{one}")),
            "the order of PATH counts"
        );
        assert_ne!(key("/usr/bin".into()), key("/bin/x-none".into()));
        // An executable where another session has none is another resolution.
        let plain = tmp.path().join("plain");
        std::fs::create_dir(&plain).expect("dir");
        std::fs::write(plain.join("apply_patch"), "not executable").expect("file");
        let bare = tmp.path().join("bare");
        std::fs::create_dir(&bare).expect("dir");
        assert_eq!(
            key(plain.display().to_string()),
            key(bare.display().to_string()),
            "a file no lookup finds does not count"
        );
        assert_ne!(
            key(format!("{one}:/usr/bin")),
            key(format!("{}:/usr/bin", bare.display())),
            "a helper one session has and the other lacks splits"
        );
    }

    /// The starts of one pass read `PATH`'s directories once (not once per server: most of a
    /// warm session start of 30), and a start a second later reads them again.
    #[test]
    fn path_directories_are_read_once_for_the_starts_of_a_pass() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = tempfile::tempdir().expect("tmp");
        let path = tmp.path().display().to_string();
        let add = |name: &str| {
            let file = tmp.path().join(name);
            std::fs::write(&file, "#!/bin/sh\n").expect("tool");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        add("one");
        let mut paths = PathIdentities::default();
        let start = Instant::now();
        let first = paths.of_at(&path, start).to_vec();
        assert_eq!(first, path_identity(&path));
        add("two");
        assert_ne!(path_identity(&path), first, "the directory changed");
        let same_pass = start + Duration::from_millis(200);
        assert_eq!(paths.of_at(&path, same_pass), first, "read once in a pass");
        let later = start + PATHS_FRESH + Duration::from_millis(1);
        assert_eq!(
            paths.of_at(&path, later),
            path_identity(&path),
            "read again later"
        );
    }

    #[test]
    fn no_clients_per_session_id_splits_the_key() {
        let id = ConnectionId("a::0123456789abcdef".into());
        let plain = config(r#"{"command":"x"}"#);
        let base = launch("/p", &[("PATH", "/bin")]).shared_id(&id, &plain);
        for var in [
            "CLAUDE_CODE_SESSION_ID",
            "QWEN_CODE_SESSION_ID",
            "NEXT_CLIENT_SESSION_ID",
        ] {
            for value in ["one", "two"] {
                let with = launch("/p", &[("PATH", "/bin"), (var, value)]);
                assert_eq!(with.shared_id(&id, &plain), base, "{var}");
            }
        }
        // A per-project directory of a client's own still counts (scope `project`).
        let qwen = |dir: &str| {
            launch("/p", &[("PATH", "/bin"), ("QWEN_CODE_PROJECT_DIR", dir)]).shared_id(&id, &plain)
        };
        assert_ne!(qwen("/h/.qwen/projects/a"), qwen("/h/.qwen/projects/b"));
    }
}
