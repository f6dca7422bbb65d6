//! Command-line options. Every option also reads a `FIXTURE_*` environment variable, so an MCP
//! config can change the server's behaviour through its `env` block as well as its `args`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::Parser;

/// A configurable MCP server for integration tests, demos and benchmarks.
///
/// Serves MCP over stdio (default) or streamable HTTP. Its tools, prompts and resources are
/// chosen by options, so editing a server's args or env changes what it offers; fault options
/// make it crash, hang, exit or talk garbage on purpose. Lines it writes to stderr start with
/// "fixture: ".
#[derive(Parser, Debug)]
#[command(name = "mcp-fixture-server", version, after_help = AFTER_HELP)]
pub struct Args {
    /// Tools to offer, comma-separated, from: echo (returns `text`), add (sums `a` and `b`),
    /// sleep (waits `ms` milliseconds, reports progress every tenth of the wait but at least every
    /// 250 ms when asked, honours cancellation), env (returns
    /// the variable `name`), pid (returns the process id), and the tools that ask the client
    /// (ask, ask_later, roots, flood: see `asks.rs`). An empty list offers no tools.
    #[arg(long, env = "FIXTURE_TOOLS", value_name = "LIST", default_value = "echo",
          value_parser = parse_tools)]
    pub tools: ToolSet,

    /// Prompts to offer, comma-separated, from: greet, farewell (each takes a required `name`).
    #[arg(long, env = "FIXTURE_PROMPTS", value_name = "LIST", default_value = "",
          value_parser = parse_prompts)]
    pub prompts: PromptSet,

    /// Number of static text resources to offer (`fixture://resources/1` ... `/N`).
    #[arg(long, env = "FIXTURE_RESOURCES", value_name = "N", default_value_t = 0)]
    pub resources: u32,

    /// Offer one resource template with this RFC 6570 URI template (e.g. `fixture://t/{id}`);
    /// a read of a URI that starts like it (before the first `{`) answers
    /// `fixture template: URI`.
    #[arg(long, env = "FIXTURE_RESOURCE_TEMPLATE", value_name = "URI_TEMPLATE")]
    pub resource_template: Option<String>,

    /// Server name reported in the `initialize` result.
    #[arg(long, env = "FIXTURE_NAME", default_value = "mcp-fixture-server")]
    pub name: String,

    /// Prefix put before every tool name (`--tool-prefix v2_` offers `v2_echo`).
    #[arg(
        long,
        env = "FIXTURE_TOOL_PREFIX",
        value_name = "P",
        default_value = ""
    )]
    pub tool_prefix: String,

    /// MS milliseconds after the client's `initialized` notification, add the tool `late`
    /// (prefixed like the others; returns "late") and send `notifications/tools/list_changed`.
    /// Per connection: every HTTP session has its own timer.
    #[arg(long, env = "FIXTURE_CHANGE_TOOLS_AFTER", value_name = "MS")]
    pub change_tools_after: Option<u64>,

    /// List the tools of FILE (a JSON array of tool definitions, or an object with `tools`
    /// and `prompts` arrays, whose prompts replace `--prompts`) instead of `--tools`, re-read
    /// at every listing; a change of FILE sends `notifications/tools/list_changed` and
    /// `notifications/prompts/list_changed`. A listed name that is a fixture tool's (after the
    /// prefix) runs it.
    #[arg(long, env = "FIXTURE_DESCRIBE_FROM", value_name = "FILE")]
    pub describe_from: Option<std::path::PathBuf>,

    /// Declare the skills extension (SEP-2640) and serve the skills of FILE (a JSON array of
    /// `{"name", "description", "files": {"PATH": "TEXT"}, ...}`; other members are frontmatter
    /// fields), re-read at every request; a change of FILE sends
    /// `notifications/resources/list_changed`.
    #[arg(long, env = "FIXTURE_SKILLS_FROM", value_name = "FILE")]
    pub skills_from: Option<std::path::PathBuf>,

    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio. ADDR must be loopback
    /// (127.0.0.0/8, [::1] or localhost); port 0 picks a free port. The bound URL is printed
    /// alone on one stdout line, and as "fixture: listening on URL" on stderr.
    #[arg(long, env = "FIXTURE_HTTP", value_name = "ADDR", value_parser = parse_loopback)]
    pub http: Option<SocketAddr>,

    /// With `--http`: serve HTTPS (https://ADDR/mcp) with the certificate chain in FILE (PEM,
    /// the server's certificate first). Needs `--tls-key`.
    #[arg(long, env = "FIXTURE_TLS_CERT", value_name = "FILE", requires_all = ["http", "tls_key"])]
    pub tls_cert: Option<PathBuf>,

    /// With `--http`: `/mcp` wants an OAuth bearer token, and a minimal authorization server
    /// on the same origin issues them (metadata, dynamic registration, an `/authorize` that
    /// redirects at once with a code, `/token`, and `POST /oauth/revoke-all`).
    #[arg(long, env = "FIXTURE_OAUTH", requires = "http", value_parser = BoolishValueParser::new())]
    pub oauth: bool,

    /// Offer what the MCP conformance suite's server scenarios ask for (their tools, prompts,
    /// resources, template, completion, logging and subscriptions) instead of the options'
    /// catalog. Over stdio or `--http`.
    #[arg(long, env = "FIXTURE_CONFORMANCE_REFERENCE", value_parser = BoolishValueParser::new())]
    pub conformance_reference: bool,

    /// With `--conformance-reference`: also speak MCP 2026-07-28 (stateless requests,
    /// `server/discover`, input-required results, `subscriptions/listen`) and offer what its
    /// scenarios ask for. Without it the fixture is a legacy server (up to 2025-11-25).
    #[arg(long, env = "FIXTURE_MODERN", requires = "conformance_reference", value_parser = BoolishValueParser::new())]
    pub modern: bool,

    /// With `--oauth`: how long an access token lives, in seconds.
    #[arg(
        long,
        env = "FIXTURE_OAUTH_TOKEN_TTL",
        value_name = "SECS",
        default_value_t = 3600
    )]
    pub oauth_token_ttl: u64,

    /// With `--http`: the private key for `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "FIXTURE_TLS_KEY", value_name = "FILE", requires_all = ["http", "tls_cert"])]
    pub tls_key: Option<PathBuf>,

    /// Append "server <pid>" to FILE at start (before anything else), so tests can count spawns.
    #[arg(long, env = "FIXTURE_MARKER", value_name = "FILE")]
    pub marker: Option<PathBuf>,

    /// Start a grandchild (`sleep 1000`, stdio detached) in this process's group and append
    /// "child <pid>" to the marker file. It is deliberately left running when this server
    /// exits: cleaning it up is the host's job (process-group kill).
    #[arg(long, env = "FIXTURE_SPAWN_CHILD", value_parser = BoolishValueParser::new())]
    pub spawn_child: bool,

    /// Write N numbered lines to stderr at start ("fixture: stderr line I of N").
    #[arg(
        long,
        env = "FIXTURE_STDERR_LINES",
        value_name = "N",
        default_value_t = 0
    )]
    pub stderr_lines: u32,

    /// Exit with CODE (default 1) after the marker, grandchild and stderr lines, before any MCP
    /// traffic.
    #[arg(long, env = "FIXTURE_EXIT_IMMEDIATELY", value_name = "CODE", num_args = 0..=1,
          default_missing_value = "1")]
    pub exit_immediately: Option<i32>,

    /// MS milliseconds after start, write "fixture: crashing as asked" to stderr and exit
    /// with status 1.
    #[arg(long, env = "FIXTURE_CRASH_AFTER", value_name = "MS")]
    pub crash_after: Option<u64>,

    /// Wait MS milliseconds before serving (after the marker, grandchild and stderr lines): a
    /// server with a slow start, like an `npx` server's 0.5–2 s, so a benchmark can time a
    /// gateway's start against its servers' own (`bench/start.mjs`).
    #[arg(long, env = "FIXTURE_START_DELAY_MS", value_name = "MS")]
    pub start_delay_ms: Option<u64>,

    /// Do not read stdin (so answer no `initialize`) until FILE exists: a server whose start
    /// a test holds back, and lets go of once it has seen what it checks meanwhile.
    #[arg(long, env = "FIXTURE_WAIT_FOR", value_name = "FILE")]
    pub wait_for: Option<std::path::PathBuf>,

    /// Never answer `initialize`: read and drop stdin until it closes (HTTP: accept every
    /// request and never respond).
    #[arg(long, env = "FIXTURE_HANG_HANDSHAKE", value_parser = BoolishValueParser::new(),
          conflicts_with = "garbage")]
    pub hang_handshake: bool,

    /// Answer every stdin line with a line of non-JSON-RPC garbage instead of MCP (HTTP: every
    /// request gets 200 with a garbage `application/json` body).
    #[arg(long, env = "FIXTURE_GARBAGE", value_parser = BoolishValueParser::new())]
    pub garbage: bool,

    /// A catalog fault: `endless-pages` answers every `tools/list` with the tools and a
    /// `nextCursor`, forever; `bad-names` also offers tools and prompts named as MCP clients
    /// reject (see [`bad_names`]) next to the valid ones.
    #[arg(long, env = "FIXTURE_FAULT", value_name = "FAULT", value_enum)]
    pub fault: Option<Fault>,
}

/// What `--fault` breaks in the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// Every `tools/list` page has a next cursor.
    EndlessPages,
    /// Tools and prompts with invalid names too.
    BadNames,
}

/// The extra tool and prompt names `--fault bad-names` offers: a control sequence, 5,000
/// characters, a space, and a valid 120-character name whose qualified name is too long.
pub fn bad_names() -> Vec<String> {
    vec![
        "bad\u{1b}[2Jname".to_owned(),
        "x".repeat(5000),
        "with space".to_owned(),
        "q".repeat(120),
    ]
}

const AFTER_HELP: &str = "\
Exits with status 0 when stdin closes (stdio mode) and on SIGTERM or SIGINT; with status 2 on a
bad option. Speaks the MCP versions that start with `initialize` (up to 2025-11-25).

Examples:
  mcp-fixture-server --tools echo,add --prompts greet
  mcp-fixture-server --http 127.0.0.1:0 --resources 3
  FIXTURE_MARKER=/tmp/spawns mcp-fixture-server --crash-after 500";

/// A tool the fixture can offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    Echo,
    Add,
    Sleep,
    Env,
    Pid,
    Ask,
    AskLater,
    Roots,
    Flood,
    /// Only ever added by `--change-tools-after`.
    Late,
}

impl ToolKind {
    /// The tools `--tools` accepts.
    pub const SELECTABLE: [ToolKind; 9] = [
        ToolKind::Echo,
        ToolKind::Add,
        ToolKind::Sleep,
        ToolKind::Env,
        ToolKind::Pid,
        ToolKind::Ask,
        ToolKind::AskLater,
        ToolKind::Roots,
        ToolKind::Flood,
    ];

    pub fn base_name(self) -> &'static str {
        match self {
            ToolKind::Echo => "echo",
            ToolKind::Add => "add",
            ToolKind::Sleep => "sleep",
            ToolKind::Env => "env",
            ToolKind::Pid => "pid",
            ToolKind::Ask => "ask",
            ToolKind::AskLater => "ask_later",
            ToolKind::Roots => "roots",
            ToolKind::Flood => "flood",
            ToolKind::Late => "late",
        }
    }
}

/// A prompt the fixture can offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromptKind {
    Greet,
    Farewell,
}

impl PromptKind {
    pub const ALL: [PromptKind; 2] = [PromptKind::Greet, PromptKind::Farewell];

    pub fn name(self) -> &'static str {
        match self {
            PromptKind::Greet => "greet",
            PromptKind::Farewell => "farewell",
        }
    }
}

/// The tools chosen by `--tools`, in the order given, without repeats.
#[derive(Clone, Debug, Default)]
pub struct ToolSet(pub Vec<ToolKind>);

/// The prompts chosen by `--prompts`, in the order given, without repeats.
#[derive(Clone, Debug, Default)]
pub struct PromptSet(pub Vec<PromptKind>);

fn parse_tools(list: &str) -> Result<ToolSet, String> {
    parse_list(list, &ToolKind::SELECTABLE, |t| t.base_name()).map(ToolSet)
}

fn parse_prompts(list: &str) -> Result<PromptSet, String> {
    parse_list(list, &PromptKind::ALL, |p| p.name()).map(PromptSet)
}

fn parse_list<T: Copy + PartialEq>(
    list: &str,
    known: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<Vec<T>, String> {
    let mut chosen = Vec::new();
    for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let Some(&item) = known.iter().find(|&&k| name(k) == word) else {
            let names: Vec<_> = known.iter().map(|&k| name(k)).collect();
            return Err(format!(
                "unknown name `{word}`; expected one of: {}",
                names.join(", ")
            ));
        };
        if !chosen.contains(&item) {
            chosen.push(item);
        }
    }
    Ok(chosen)
}

fn parse_loopback(addr: &str) -> Result<SocketAddr, String> {
    let parsed = match addr.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
            .map_err(|e| format!("bad port in `{addr}`: {e}"))?,
        None => addr
            .parse::<SocketAddr>()
            .map_err(|e| format!("`{addr}` is not HOST:PORT: {e}"))?,
    };
    if parsed.ip().is_loopback() {
        Ok(parsed)
    } else {
        Err(format!(
            "`{addr}` is not a loopback address; the fixture only listens on 127.0.0.0/8, [::1] \
             or localhost"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order_drop_repeats_and_allow_empty() {
        let tools = parse_tools("add, echo,add").expect("valid list");
        assert_eq!(tools.0, vec![ToolKind::Add, ToolKind::Echo]);
        assert!(parse_tools("").expect("empty list").0.is_empty());
        assert!(
            parse_tools("late").is_err(),
            "late is only added by a timer"
        );
        assert!(parse_prompts("greet,nope").is_err());
    }

    #[test]
    fn tls_needs_http_and_both_files() {
        let parse = |args: &[&str]| {
            Args::try_parse_from(std::iter::once("mcp-fixture-server").chain(args.iter().copied()))
        };
        assert!(parse(&["--http", "127.0.0.1:0", "--tls-cert", "c", "--tls-key", "k"]).is_ok());
        assert!(parse(&["--http", "127.0.0.1:0", "--tls-cert", "c"]).is_err());
        assert!(parse(&["--tls-cert", "c", "--tls-key", "k"]).is_err());
    }

    #[test]
    fn only_loopback_addresses_are_accepted() {
        assert!(parse_loopback("127.0.0.1:0").is_ok());
        assert!(parse_loopback("127.1.2.3:8080").is_ok());
        assert!(parse_loopback("[::1]:0").is_ok());
        assert_eq!(
            parse_loopback("localhost:0"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert!(parse_loopback("0.0.0.0:0").is_err());
        assert!(parse_loopback("192.168.1.1:80").is_err());
        assert!(parse_loopback("example.com:80").is_err());
    }
}
