//! The native host of mcp-reconcile: keeps real MCP connections equal to the
//! settings files while a session runs.
//!
//! Layers, outside in:
//! * [`redact`] — secrets never leave the host.
//!
//! The kernel (`mcp-reconcile-kernel`) decides; this crate reads files,
//! watches them, runs transports and executes the kernel's plans.

pub mod redact;
