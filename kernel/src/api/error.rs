//! The API's error kinds, and how each domain error maps onto them.
//!
//! Domain modules fail with their own error types ([`IdentityError`],
//! [`PlanError`], [`SettingsError`], …); only this layer decides which
//! `kind` a response reports for each.

use crate::identity::IdentityError;
use crate::plan::PlanError;
use crate::settings::SettingsError;

/// What kind of failure a response reports (spelled in kebab-case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "kebab-case"))]
pub enum ErrorKind {
    /// The request line is not JSON.
    InvalidJson,
    /// The request is JSON but not a well-formed request for its op.
    InvalidRequest,
    /// `op` names no operation.
    UnknownOp,
    /// A server config the TypeScript host would throw on (e.g. a tool filter
    /// that is a number).
    InvalidConfig,
}

impl ErrorKind {
    /// The kebab-case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidJson => "invalid-json",
            ErrorKind::InvalidRequest => "invalid-request",
            ErrorKind::UnknownOp => "unknown-op",
            ErrorKind::InvalidConfig => "invalid-config",
        }
    }
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "KernelError"))]
pub struct ApiError {
    /// The failure class.
    pub kind: ErrorKind,
    /// A lower-case sentence naming the offending field or value.
    pub message: String,
}

impl ApiError {
    /// An `invalid-request` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError {
            kind: ErrorKind::InvalidRequest,
            message: message.into(),
        }
    }

    /// An `invalid-config` error.
    pub fn config(message: impl Into<String>) -> Self {
        ApiError {
            kind: ErrorKind::InvalidConfig,
            message: message.into(),
        }
    }
}

impl From<IdentityError> for ApiError {
    fn from(e: IdentityError) -> Self {
        ApiError::config(e.to_string())
    }
}

impl From<PlanError> for ApiError {
    fn from(e: PlanError) -> Self {
        ApiError::config(e.to_string())
    }
}

impl From<SettingsError> for ApiError {
    /// A settings file that is not a JSON object fails as `invalid-json`.
    fn from(e: SettingsError) -> Self {
        ApiError {
            kind: ErrorKind::InvalidJson,
            message: e.to_string(),
        }
    }
}
