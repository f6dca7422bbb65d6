//! The pure core of mcp-reconcile: deterministic; performs no IO; reads no
//! clock; spawns nothing.
//!
//! It computes server identities, admission, approval state, reconcile plans,
//! settings diffs and reload scheduling from data passed in, and returns data.
//! Hosts (native tokio, wasm for TypeScript) read files, call the kernel,
//! execute the returned actions and report outcomes back as new inputs.
//!
//! Everything is also reachable through one JSON request/response vocabulary,
//! [`api::evaluate`], so the same conformance vectors run against every host.
//! [`api`] is a layer on top of the domain modules: it decodes requests,
//! calls their typed functions and encodes the results, and no domain module
//! depends on it (`tests/architecture.rs` checks this, and that no kernel
//! source touches the file system, network, clock, threads, processes or
//! environment).
#![deny(missing_docs)]

pub mod api;
pub mod approvals;
pub mod backoff;
pub mod config;
pub mod dev;
pub mod gating;
pub mod hot_reload;
pub mod identity;
pub mod json;
pub mod lazy;
pub mod lsp;
pub mod pin;
pub mod plan;
pub mod policy;
pub mod pool;
pub mod reconnects;
pub mod reload;
pub mod restart;
pub mod scopes;
pub mod settings;
pub mod share;
pub mod sources;
pub mod supervise;
pub mod time;

pub use api::{evaluate, evaluate_op, evaluate_str, ApiError, ErrorKind};
pub use approvals::{ApprovalState, Approvals, Decision};
pub use backoff::{backoff, Backoff};
pub use config::Servers;
pub use config::{ServerConfig, Transport};
pub use gating::{gating_equal, match_pattern, Gating, Reason};
pub use hot_reload::{hot_reload, HotReload};
pub use identity::{
    approval_hash, connection_id, session_key, ApprovalHash, ConnectionId, SessionKey,
};
pub use json::{Object, Value};
pub use lsp::{
    lsp_approval_hash, lsp_plan, lsp_seed_id, parse_lsp_json, LspAction, LspEntry, LspPlan,
    LspScope, LspSeedId, LspServers,
};
pub use plan::{online_of, plan, Action, Mode, OnlineEntry, Plan, PlanError, Status};
pub use pool::{Acquire, Pool, Release};
pub use reconnects::{ReconnectLimit, RECONNECT_INTERVAL};
pub use reload::{ReloadScheduler, DEFAULT_DEBOUNCE, DEFAULT_QUIET};
pub use restart::{decide_restart, RestartOrder, RestartRequest, RestartStep};
pub use settings::{
    parse_settings, restart_required, settings_diff, settings_from_parsed, McpLists,
    RestartRequired,
};
pub use sources::{
    assemble, mcp_json_from_value, parse_mcp_json, Assembled, Layer, LayerSource, McpJson,
};
pub use time::Millis;

/// The README's code runs as a doctest, so the usage it shows keeps compiling.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
