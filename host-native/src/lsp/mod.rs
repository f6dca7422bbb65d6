//! Language servers (SPEC §14): the client connection and its place on the supervisor.

pub mod bounded;
pub(crate) mod confined;
pub mod connection;
pub(crate) mod kind;
pub mod tools;
