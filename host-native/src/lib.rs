//! The native host of mcp-reconcile: keeps real MCP connections equal to the
//! settings files while a session runs.
//!
//! Layers, outside in:
//! * [`inputs`] — the files a session reads, from the layer flags, with
//!   each file's last good content ([`approvals_store`] persists approvals,
//!   [`watcher`] reports file changes);
//! * [`redact`] — secrets never leave the host.
//! * [`transport`] — MCP connections (stdio, streamable HTTP, legacy SSE) with their catalogs.
//!
//! The kernel (`mcp-reconcile-kernel`) decides; this crate reads files,
//! watches them, runs transports and executes the kernel's plans.

pub mod approvals_store;
pub mod inputs;
pub mod redact;
pub mod transport;
pub mod watcher;
