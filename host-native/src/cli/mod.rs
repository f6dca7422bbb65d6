//! The command line's own parts, kept out of the library: the clap types
//! ([`args`]), the session-socket client ([`client`]), the one-shot commands
//! ([`commands`]), what people read ([`print`], [`report`], [`prompt`]), what `watch`
//! shows ([`watch`], [`events`]) and `watch --demo` ([`demo`]). Sessions themselves
//! (`watch`, `serve`) start in `main.rs`.

/// `print!` that a closed stdout cannot stop (`mcp-reconcile status --json | head`): `print!`
/// panics on a broken pipe; this finishes the command's work and loses only the output nobody
/// reads (`watch::say`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::watch::say(&format!($($arg)*))
    };
}

/// [`out!`] with a line end: `println!` that a closed stdout cannot stop.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::watch::say(&format!("{}\n", format_args!($($arg)*)))
    };
}

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
pub mod review_tools;
pub mod watch;
