//! Language servers (SPEC §14): the client connection to one server.

pub mod connection;
