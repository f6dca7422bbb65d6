//! Language servers (SPEC §14): the client connection and its place on the supervisor.
//!
//! * `connection` — one server over stdio ([`connection::LspConnection`], an `async-lsp`
//!   client): `start` reads an entry, `client` answers the server's requests, `framing` checks
//!   each message the server sends before `async-lsp` reads it (so a hostile server fails only
//!   its own connection), `queries` is what other tasks ask of a running server;
//! * `kind` — the supervisor's `ConnectionKind` for them (the session runs them on a second
//!   supervisor, `host/lsp.rs`);
//! * `tools` — the language tools `serve` offers, routed by file extension through
//!   `Session::language`;
//! * `bounded` — what a language tool returns, cut to a bound with a note of what was left out;
//! * `confined` — a document is read only if the file actually opened lies inside the
//!   resolved project root.

pub mod bounded;
pub(crate) mod confined;
pub mod connection;
pub(crate) mod kind;
pub mod tools;
