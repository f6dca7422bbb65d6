//! The command line's own parts, kept out of the library: the clap types
//! ([`args`]), the session-socket client ([`client`]), the one-shot commands
//! ([`commands`]), what people read ([`print`], [`report`], [`prompt`]), what `watch`
//! shows ([`watch`], [`events`]) and `watch --demo` ([`demo`]). Sessions themselves
//! (`watch`, `serve`) start in `main.rs`.

pub mod args;
pub mod client;
pub mod commands;
pub mod daemon_watch;
pub mod demo;
pub mod events;
pub mod install;
pub mod mcp;
pub mod mcp_args;
pub mod print;
pub mod prompt;
pub mod report;
pub mod watch;
