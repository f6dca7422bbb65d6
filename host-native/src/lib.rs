//! The native host of mcp-reconcile: keeps real MCP connections equal to the
//! settings files while a session runs.
//!
//! The main modules (`ARCHITECTURE.md` at the repository's root is the full map, with the
//! layer rules `tests/imports.rs` checks):
//! * [`host`] — the live session: the drive loop around the kernel's
//!   scheduler and plans, the merged catalog, status;
//! * `supervisor` — the one connection supervisor the session host and the
//!   pool share: start tasks, generations, connection events, the kernel's
//!   supervision per connection, retry timers, stopping;
//! * [`inputs`], [`approvals_store`], [`watcher`] — the files and their
//!   changes;
//! * [`transport`] — real MCP connections (stdio, streamable HTTP, SSE); [`tls`] — the
//!   roots and crypto provider HTTPS uses, and certificate errors in plain words;
//! * [`lsp`] — language-server connections (SPEC §14);
//! * [`gateway`] — `mcp-reconcile serve`: one MCP server in front of a host;
//! * [`view`] — what a session sees of a server (tool filters, qualified names);
//! * [`pool`] — connections shared by several sessions in one process (pool mode); [`launch`]
//!   — where and with what environment a session's server starts, and when two sessions may
//!   share it;
//! * [`session`] — the trait a gateway fronts; [`daemon`] — the per-user daemon that holds one
//!   pool for every `serve`;
//! * [`install`] — puts `serve` in front of a client's servers; [`auth`] — OAuth for remote
//!   servers;
//! * [`ipc`], [`status`] — the session socket a running session answers on,
//!   and the JSON it carries;
//! * [`redact`] — secrets never leave the host; [`display`] — nothing a
//!   repository writes reaches a terminal unescaped; [`diff`] — what changed in an entry,
//!   field by field, for people (secrets masked).
//!
//! The kernel (`mcp-reconcile-kernel`) decides; this crate reads files,
//! watches them, runs transports and executes the kernel's plans. The command
//! line (flags, the socket client, the text people read, the demo) is the
//! `mcp-reconcile` binary's own: this library never depends on clap
//! (`tests/architecture.rs` checks it).

pub mod approvals_store;
pub mod auth;
pub mod clock;
pub mod daemon;
pub mod diff;
pub mod display;
mod forker;
pub mod gateway;
pub mod host;
pub mod http_client;
pub mod http_guard;
pub mod inputs;
pub mod install;
pub mod ipc;
pub mod launch;
pub mod listing_cache;
pub mod lsp;
pub mod pins;
pub mod pool;
pub mod private;
pub mod reaper;
pub mod redact;
pub mod review;
pub mod session;
pub mod signal;
pub mod skills;
pub mod status;
mod supervisor;
#[cfg(test)]
pub(crate) mod testkit;
pub mod tls;
pub mod token_store_file;
pub mod transport;
pub mod view;
pub mod watcher;

/// The README's code runs as a doctest, so the usage it shows keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
