//! The codecs of every op, grouped by the domain module they front: each op
//! has a request record (read by [`Decode`](super::request::Decode)) and an
//! `op_*` function from that record to a typed result (written by
//! [`Encode`](super::encode::Encode)), which calls the domain function.

pub(crate) mod approvals;
pub(crate) mod gating;
pub(crate) mod hot_reload;
pub(crate) mod identity;
pub(crate) mod lsp;
pub(crate) mod plan;
pub(crate) mod policy;
pub(crate) mod settings;
pub(crate) mod sources;
pub(crate) mod supervise;
