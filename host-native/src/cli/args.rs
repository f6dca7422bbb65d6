//! The command line: every command, its flags, and the layer flags every
//! command shares (turned into the library's [`inputs::Options`]).

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use mcp_reconcile::http_guard;
use mcp_reconcile::inputs::{self, layout_help, Layout};

/// Keep MCP server connections equal to your settings files while a session
/// runs: only servers that were added, removed or changed are touched; every
/// other server keeps its connection and its tools. Servers from
/// project-controlled files (`.mcp.json`, workspace settings) connect only
/// after you approved exactly that config.
///
/// Every command takes the same file flags, so `status`, `approve`, `reload`
/// … find the same files and the same running `watch`.
///
/// Start with `mcp-reconcile watch --demo`.
#[derive(Parser, Debug)]
#[command(name = "mcp-reconcile", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Connect the configured servers and keep them equal to the files until
    /// Ctrl-C, printing every applied plan. On a terminal, asks about servers
    /// that need approval.
    Watch(WatchArgs),
    /// Show every configured server: state, reason, approval, tools, pid,
    /// last error. Reads a running `watch`; without one, shows what the files
    /// say (nothing is started).
    Status(StatusArgs),
    /// Approve a project-controlled server (bound to its current config).
    Approve(DecideArgs),
    /// Reject a project-controlled server (until its config changes).
    Reject(DecideArgs),
    /// Show, as a word diff, the tools and prompts of a server that changed since you
    /// approved them (or are new) and that pinning withholds or warns of; `--yes` (or `y` at
    /// the question) makes exactly what was shown the new baseline.
    ReviewTools(ReviewToolsArgs),
    /// Dry run: what a reconcile would do now (from the running session's
    /// state, or from nothing when none runs).
    Plan(PlanArgs),
    /// Clear a server's failure / crash-loop state and restart it now.
    Reconnect(ReconnectArgs),
    /// Authorize a remote (streamable HTTP) server with OAuth: prints the
    /// authorization URL (and opens `$BROWSER` when set), waits for the
    /// redirect on 127.0.0.1, stores the tokens, and has a running `watch`
    /// reconnect that server. `--logout` forgets the tokens instead.
    Auth(AuthArgs),
    /// Reload the files now (no debounce); clears crash loops. SIGHUP to a
    /// running `watch` does the same.
    Reload(FlagsOnly),
    /// Run as an MCP server (stdio) that offers the tools, prompts and
    /// resources of every admitted server as `mcp__<server>__<name>`, keeps
    /// them equal to the files, and sends `list_changed` when they change.
    /// Configure it as an MCP client's only server to get hot reload.
    /// Logs go to stderr (`MCP_RECONCILE_LOG=info` for more).
    Serve(ServeArgs),
    /// Put `serve` in front of a client's servers: adds the gateway to the client's user
    /// configuration and makes the client start only it, while your servers stay in the
    /// client's files and are hot-reloaded from there. After `install claude`, Claude Code
    /// refuses `claude mcp add`: use `mcp-reconcile mcp add` (same arguments). Keeps the
    /// originals; `uninstall` restores them. `--dry-run` shows what would change.
    Install(InstallArgs),
    /// Claude Code's `claude mcp add / remove / get / list`, for a Claude Code behind the
    /// installed gateway (which refuses `claude mcp add`): the same arguments, the same files
    /// and scopes, applied live by the gateway.
    #[command(subcommand)]
    Mcp(super::mcp_args::McpCommand),
    /// Take `serve` out of a client's configuration again: restores the files install
    /// changed (exactly, when nothing else changed them since; else only install's entries
    /// come out).
    Uninstall(InstallArgs),
    /// Run the per-user daemon that a stdio `serve` attaches to: one process per
    /// stdio server for every session that would start it identically. Listens
    /// on $XDG_RUNTIME_DIR/mcp-reconcile/daemon.sock (else
    /// /run/user/<uid>/mcp-reconcile/, else ~/.local/state/mcp-reconcile/daemon/);
    /// exits once no session has been attached for the idle time. `serve`
    /// starts it when none runs.
    Daemon(DaemonArgs),
    /// Answer kernel JSON requests: one per stdin line, one response per
    /// stdout line (see docs/KERNEL_API.md).
    ///
    /// Example:
    ///   echo '{"op":"connectionId","name":"a","config":{"command":"x"}}' | mcp-reconcile eval
    Eval,
    /// The process-group watchdog a session starts for itself (internal): reads `+PGID` /
    /// `-PGID` lines on stdin and, at end-of-file, kills every group still listed.
    #[command(hide = true)]
    Reap,
}

#[derive(Args, Debug)]
pub struct WatchArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// Write a small demo project (fixture servers, one needing approval) to
    /// a temporary directory and watch it; prints which file to edit.
    #[arg(long)]
    pub demo: bool,
    /// Baseline mode for benchmarks: restart every server on every change.
    #[arg(long)]
    pub full_restart: bool,
    /// Never ask about servers that need approval; print the command that approves each
    /// instead. Without it, `watch` asks: one key on a terminal, a line (`a`, `r`, `A`, `s`)
    /// when stdin is a pipe.
    #[arg(long)]
    pub no_prompt: bool,
    /// What stdout carries: `text` for people, or `json`: one JSON object per line, for tools
    /// that follow the session (nothing is asked; other messages go to stderr).
    ///
    /// Every object has an "event": "plan" (run, trigger, elapsedMs, inputErrors, and steps:
    /// SPEC §10 action objects with elapsedMs, error, attempts and retryInMs of a failed
    /// start, changes [{field, before, after, hidden}] of a reconnect, tools {before, after}
    /// of a start); "server" (a server failed outside a pass: the `status --json` object);
    /// "approval_needed" (name, lsp, file, hash, approveCommand); "reload_failed" (message);
    /// "catalog_changed" (tools, prompts, resources: which lists changed); "lsp_plan"
    /// (actions); "lsp_server" (a language server's status object); "idle" (passes: nothing
    /// runs, is asked for or waits for a debounce — no pass follows until something new
    /// arrives — after that many passes; once each time); "stopped" (the last line).
    /// Secrets are never in an event; characters that could act on a terminal are \u-escaped.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = EventsFormat::Text,
          verbatim_doc_comment)]
    pub events: EventsFormat,
    /// Attach to the per-user daemon even where `watch` would not (it does by default:
    /// one more session for these files, sharing its servers with every stdio `serve`);
    /// fail if it cannot be reached instead of running the session here.
    #[arg(long, conflicts_with_all = ["demo", "full_restart", "no_daemon"])]
    pub daemon: bool,
    /// Run the session in this process instead of the per-user daemon: its servers are
    /// its own and stop when `watch` exits, and a second session for the same files is
    /// refused while it runs. `--demo` and `--full-restart` always run here.
    #[arg(long)]
    pub no_daemon: bool,
}

impl WatchArgs {
    /// Whether this `watch` is a session of the daemon: asked with `--daemon`, or by default
    /// (not for `--demo`, which must leave nothing running, nor `--full-restart`, a benchmark
    /// baseline).
    pub fn attaches(&self) -> bool {
        self.daemon || (!self.no_daemon && !self.demo && !self.full_restart)
    }
}

/// `watch --events`.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventsFormat {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (loopback
    /// only, e.g. 127.0.0.1:8931; port 0 picks one). Prints the URL, then
    /// the path of the file holding the bearer token every request must
    /// send as `Authorization: Bearer <token>` (a new random token per run,
    /// in a 0600 file in the state dir, removed at exit).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// With --http: use the token on the first line of this file instead of
    /// a random one. The file must not be accessible by group or others
    /// (`chmod 600`).
    #[arg(long, value_name = "PATH", requires = "http")]
    pub token_file: Option<std::path::PathBuf>,
    /// Offer only the configured server NAME, under its own tool, prompt and resource names
    /// (no `mcp__NAME__` prefix); hot reload, approvals and supervision work as ever.
    #[arg(long, value_name = "NAME")]
    pub passthrough: Option<String>,
    /// How the servers' tools and prompts are named: `mcp` (`mcp__SERVER__TOOL`) or `short`
    /// (`SERVER__TOOL`, for clients that put their own `mcp__GATEWAY__` in front, such as
    /// Claude Code and Codex)
    #[arg(long, value_enum, default_value_t = ToolNamesArg::Mcp, value_name = "STYLE", conflicts_with = "passthrough")]
    pub tool_names: ToolNamesArg,
    /// With --http: accept requests without the bearer token (still loopback only, still
    /// refusing foreign Host and Origin headers). Any local process of any user can then call
    /// every admitted server's tools; meant for clients that cannot send a token, such as the
    /// MCP conformance suite. Warns on stderr.
    #[arg(long, requires = "http", conflicts_with = "token_file")]
    pub no_auth: bool,
    /// With --http: let browser pages from ORIGIN call (exact match, e.g.
    /// http://localhost:5173; repeatable). Requests with any other Origin
    /// header are refused (403); requests without one are not affected.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    pub allow_origin: Vec<String>,
    /// With --http: at most N MCP sessions at once; a new one beyond that
    /// gets 503.
    #[arg(long, value_name = "N", default_value_t = http_guard::DEFAULT_MAX_SESSIONS,
          value_parser = clap::value_parser!(u32).range(1..), requires = "http")]
    pub max_sessions: u32,
    /// With --http: close a session after SECS without a request.
    #[arg(long, value_name = "SECS", default_value_t = http_guard::DEFAULT_SESSION_IDLE_SECS,
          value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    pub session_idle_secs: u64,
    /// With --http: at most N TCP connections at once. Past it, the
    /// oldest connection that has not sent the bearer token is closed to
    /// make room (or the new one, when every open connection has sent it).
    #[arg(long, value_name = "N", default_value_t = http_guard::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..), requires = "http")]
    pub max_connections: u32,
    /// With --http: close a connection whose request headers are not
    /// complete SECS after the server starts reading them; an idle
    /// keep-alive connection is closed after as long.
    #[arg(long, value_name = "SECS", default_value_t = http_guard::DEFAULT_HEADER_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    pub header_timeout_secs: u64,
    /// Also offer tools an agent may call to manage the session: mcp_reconcile_status (every
    /// server, its state, the reason and what to do), mcp_reconcile_reload (read the files
    /// again now, as `mcp-reconcile reload`) and mcp_reconcile_reconnect (restart one server).
    /// None of them approves or rejects a server: that stays the user's act.
    #[arg(long)]
    pub manage_tools: bool,
    /// Attach to the per-user daemon (started if none runs): the default on
    /// stdio without --passthrough. Servers are shared with every other
    /// session that would start them identically, and several `serve`s for
    /// the same files may run at once.
    #[arg(long, conflicts_with_all = ["http", "passthrough", "no_daemon"])]
    pub daemon: bool,
    /// Run the session in this process instead of the per-user daemon: its
    /// servers are its own and stop when it exits, and a second `serve` (or
    /// `watch`) for the same files is refused while it runs.
    #[arg(long)]
    pub no_daemon: bool,
}

impl ServeArgs {
    /// Whether this `serve` attaches to the daemon: asked with `--daemon`, or by default on
    /// stdio without `--passthrough` (an HTTP `serve` already takes many clients).
    pub fn attaches(&self) -> bool {
        self.daemon || (!self.no_daemon && self.http.is_none() && self.passthrough.is_none())
    }
}

#[derive(Args, Debug)]
pub struct InstallArgs {
    /// The client whose files to change
    #[arg(value_parser = client_parser(), value_name = "CLIENT")]
    pub client: Layout,
    /// Show what would change (a diff of each file) and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Claude Code: also rename the permission rules of ~/.claude/settings.json to the
    /// gateway's tool names (mcp__github__x becomes mcp__reconcile__github__x); uninstall
    /// names them back. With --dry-run, shows that change too
    #[arg(long)]
    pub permissions: bool,
    /// Where install keeps the originals and its record [default: $XDG_STATE_HOME/mcp-reconcile or ~/.local/state/mcp-reconcile]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// Keep a server running this long after the last session holding it
    /// ended (a client that restarts re-attaches); one the sessions' files no
    /// longer run stops at once.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub drain_ms: u64,
    /// Exit after this long without any attached session.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub idle_exit_ms: u64,
    /// Do not run one: print the running daemon's sessions (with the servers
    /// each holds) and its connections (with their holders).
    #[arg(long)]
    pub status: bool,
    /// With --status: print the daemon's JSON answer.
    #[arg(long, requires = "status")]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// Print a JSON array, one object per server (fields in docs/COMMANDS.md).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct DecideArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// The server name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub name: Option<String>,
    /// Every gated server that is not already decided this way (MCP servers and language
    /// servers).
    #[arg(long)]
    pub all: bool,
    /// NAME is a language server from the project's .lsp.json.
    #[arg(long, conflicts_with = "all")]
    pub lsp: bool,
    /// Decide only if the entry still has this approval hash (as printed by
    /// the prompt, by `watch`/`serve` and by an earlier `approve`): what was
    /// reviewed is exactly what is decided; a changed entry is refused.
    #[arg(long, value_name = "HASH", conflicts_with = "all")]
    pub hash: Option<String>,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// Print the plan as JSON (SPEC §10 action objects).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReconnectArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// The server name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub name: Option<String>,
    /// Every configured server.
    #[arg(long)]
    pub all: bool,
}

#[derive(Args, Debug)]
pub struct ReviewToolsArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// The server name.
    pub name: String,
    /// Accept what is shown without asking.
    #[arg(long)]
    pub yes: bool,
}

#[derive(Args, Debug)]
pub struct AuthArgs {
    #[command(flatten)]
    pub layers: LayerFlags,
    /// The server name.
    pub name: String,
    /// Forget the stored tokens of this server.
    #[arg(long)]
    pub logout: bool,
}

#[derive(Args, Debug)]
pub struct FlagsOnly {
    #[command(flatten)]
    pub layers: LayerFlags,
}

/// The flags every command accepts to find its files and its session.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Files and session (the same for every command)")]
pub struct LayerFlags {
    /// User settings file (JSON with comments) [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub user_settings: Option<PathBuf>,
    /// Workspace settings file; its servers need approval [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub workspace_settings: Option<PathBuf>,
    /// System settings file; overrides user and workspace [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub system_settings: Option<PathBuf>,
    /// System defaults file; below the user settings [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub system_defaults: Option<PathBuf>,
    /// Project directory: its `.mcp.json` is read and it keys approvals [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Extra servers: a JSON file or inline JSON, with or without {"mcpServers": …}; repeatable
    #[arg(long = "mcp-config", value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,
    /// Upper bound on admitted server names (patterns with * and ?, comma-separated;
    /// repeatable). Settings can narrow it, never widen it; "" admits nothing
    #[arg(long = "allowed-mcp-server-names", value_name = "LIST")]
    pub allowed_mcp_server_names: Vec<String>,
    /// Approvals file [default: from --layout]
    #[arg(long, value_name = "FILE")]
    pub approvals: Option<PathBuf>,
    /// The user's language-server file (like .lsp.json, not gated) [default: from --layout]
    #[arg(long, value_name = "FILE")]
    pub user_lsp: Option<PathBuf>,
    /// Language-server approvals file [default: lsp-approvals.json beside the approvals file]
    #[arg(long, value_name = "FILE")]
    pub lsp_approvals: Option<PathBuf>,
    /// Treat the project folder as untrusted: no workspace settings, nothing connects
    #[arg(long)]
    pub untrusted: bool,
    /// Turn the approval gate off: project servers connect without asking
    /// (and `$VAR`s in .mcp.json are not expanded)
    #[arg(long)]
    pub yolo: bool,
    /// The longest wait after a file change before reloading, in ms: for a file that does
    /// not parse yet (empty, half-written) [default: 300]
    #[arg(long, value_name = "N")]
    pub debounce_ms: Option<u64>,
    /// Once every changed file parses, reload after N ms without a further change; a save
    /// known whole (renamed into place, or on Linux written in place and closed) is reloaded
    /// at once [default: 25]
    #[arg(long, value_name = "N")]
    pub quiet_ms: Option<u64>,
    /// Default file set: `default` (this host's own), or a client's own files
    #[arg(long, value_parser = layout_parser(), default_value = "default", value_name = "NAME",
          long_help = layout_help())]
    pub layout: Layout,
    /// Where a running session keeps its socket [default: $XDG_STATE_HOME/mcp-reconcile or ~/.local/state/mcp-reconcile]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl LayerFlags {
    /// The library's options for these flags.
    pub fn options(&self) -> inputs::Options {
        inputs::Options {
            user_settings: self.user_settings.clone(),
            workspace_settings: self.workspace_settings.clone(),
            system_settings: self.system_settings.clone(),
            system_defaults: self.system_defaults.clone(),
            project: self.project.clone(),
            mcp_config: self.mcp_config.clone(),
            allowed_mcp_server_names: self.allowed_mcp_server_names.clone(),
            approvals: self.approvals.clone(),
            user_lsp: self.user_lsp.clone(),
            lsp_approvals: self.lsp_approvals.clone(),
            untrusted: self.untrusted,
            yolo: self.yolo,
            debounce_ms: self.debounce_ms,
            quiet_ms: self.quiet_ms,
            layout: self.layout,
            state_dir: self.state_dir.clone(),
        }
    }
}

/// `serve --tool-names`.
#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolNamesArg {
    /// `mcp__SERVER__TOOL`.
    #[default]
    Mcp,
    /// `SERVER__TOOL`.
    Short,
}

impl From<ToolNamesArg> for mcp_reconcile::gateway::ToolNames {
    fn from(arg: ToolNamesArg) -> Self {
        match arg {
            ToolNamesArg::Mcp => Self::Mcp,
            ToolNamesArg::Short => Self::Short,
        }
    }
}

/// The parser of `--layout`: the names in the table of clients, each with its one line.
fn layout_parser() -> impl TypedValueParser<Value = Layout> {
    names_parser(Layout::all())
}

/// The parser of `install` / `uninstall`'s client: the table's clients install knows.
fn client_parser() -> impl TypedValueParser<Value = Layout> {
    names_parser(mcp_reconcile::install::installable())
}

/// A parser accepting exactly the names of `layouts` (listed in `--help` with their line).
fn names_parser(layouts: impl Iterator<Item = Layout>) -> impl TypedValueParser<Value = Layout> {
    PossibleValuesParser::new(
        layouts
            .map(|l| PossibleValue::new(l.as_str()).help(l.spec().about))
            .collect::<Vec<_>>(),
    )
    .try_map(|name| Layout::named(&name).ok_or("not in the table of clients"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command that takes the layer flags.
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        flags: LayerFlags,
    }

    #[test]
    fn the_whole_command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn flags_parse_and_the_help_teaches_the_layouts() {
        use clap::{CommandFactory, Parser};
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "x",
            "--layout",
            "qwen",
            "--mcp-config",
            r#"{"a":{"command":"b"}}"#,
            "--mcp-config",
            "extra.json",
            "--allowed-mcp-server-names",
            "a,b",
            "--allowed-mcp-server-names",
            "",
            "--untrusted",
            "--debounce-ms",
            "50",
        ])
        .expect("parse");
        let options = cli.flags.options();
        assert_eq!(options.layout, Layout::QWEN);
        assert_eq!(options.mcp_config.len(), 2);
        assert_eq!(options.allowed_mcp_server_names, ["a,b", ""]);
        assert!(options.untrusted && !options.yolo);
        assert_eq!(options.debounce_ms, Some(50));
        let defaults = Cli::try_parse_from(["x"]).expect("parse").flags.options();
        assert_eq!(defaults.layout, Layout::DEFAULT);
        assert!(defaults.allowed_mcp_server_names.is_empty());

        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "~/.qwen/settings.json",
            "mcpApprovals.json",
            "--workspace-settings",
        ] {
            assert!(help.contains(needle), "{needle} missing from:\n{help}");
        }
    }

    /// `--layout`, `install` and `uninstall` take exactly the table's names (every layout;
    /// the clients install knows), and their help lists each with its line.
    #[test]
    fn the_command_line_takes_and_lists_every_client_of_the_table() {
        use clap::{CommandFactory, Parser};
        for layout in Layout::all() {
            let cli = Cli::try_parse_from(["x", "--layout", layout.as_str()]).expect("parse");
            assert_eq!(cli.flags.options().layout, layout);
        }
        assert!(Cli::try_parse_from(["x", "--layout", "nope"]).is_err());
        let help = Cli::command().render_long_help().to_string();
        for layout in Layout::all() {
            assert!(
                help.contains(layout.spec().about),
                "{layout:?} missing:\n{help}"
            );
        }

        let installable: Vec<Layout> = mcp_reconcile::install::installable().collect();
        let mut top = super::Cli::command();
        let install_help = top
            .find_subcommand_mut("install")
            .expect("install")
            .render_long_help()
            .to_string();
        for layout in Layout::all() {
            let parsed = super::Cli::try_parse_from(["x", "uninstall", layout.as_str()]);
            match parsed.map(|cli| cli.command) {
                Ok(Command::Uninstall(args)) => {
                    assert!(installable.contains(&layout));
                    assert_eq!(args.client, layout);
                    assert!(install_help.contains(layout.spec().about), "{install_help}");
                }
                Ok(other) => panic!("{other:?}"),
                Err(_) => assert!(!installable.contains(&layout), "{layout:?} refused"),
            }
        }
        assert!(!installable.is_empty());
    }
}
