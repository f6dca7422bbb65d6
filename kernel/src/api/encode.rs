//! Result encoding: every op's result type as the JSON its response carries
//! under `ok` (SPEC §10).

use crate::approvals::ApprovalState;
use crate::backoff::Backoff;
use crate::config::{servers_to_value, Transport};
use crate::gating::{Gating, Reason};
use crate::identity::{ApprovalHash, ConnectionId, SessionKey};
use crate::json::{Object, Value};
use crate::lsp::{LspJson, LspPlan, LspSeedId};
use crate::plan::Plan;
use crate::settings::RestartRequired;
use crate::sources::{Assembled, McpJson};

/// An op's result: what its codec encodes into the response.
pub(crate) trait Encode {
    /// The `ok` value.
    fn encode(self) -> Value;
}

impl Encode for bool {
    fn encode(self) -> Value {
        self.into()
    }
}

impl Encode for Vec<String> {
    fn encode(self) -> Value {
        Value::Array(self.into_iter().map(Value::String).collect())
    }
}

impl Encode for Option<String> {
    fn encode(self) -> Value {
        self.map_or(Value::Null, Value::String)
    }
}

impl Encode for Option<Reason> {
    fn encode(self) -> Value {
        self.map_or(Value::Null, |r| r.as_str().into())
    }
}

impl Encode for Transport {
    fn encode(self) -> Value {
        self.as_str().into()
    }
}

impl Encode for ConnectionId {
    fn encode(self) -> Value {
        Value::String(self.0)
    }
}

impl Encode for SessionKey {
    fn encode(self) -> Value {
        Value::String(self.0)
    }
}

impl Encode for ApprovalHash {
    fn encode(self) -> Value {
        Value::String(self.0)
    }
}

impl Encode for LspSeedId {
    fn encode(self) -> Value {
        Value::String(self.0)
    }
}

impl Encode for ApprovalState {
    fn encode(self) -> Value {
        self.as_str().into()
    }
}

impl Encode for Gating {
    fn encode(self) -> Value {
        self.to_value()
    }
}

impl Encode for Plan {
    fn encode(self) -> Value {
        self.to_value()
    }
}

impl Encode for LspPlan {
    fn encode(self) -> Value {
        self.to_value()
    }
}

impl Encode for McpJson {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("servers".into(), servers_to_value(&self.servers));
        out.insert("errors".into(), self.errors.encode());
        Value::Object(out)
    }
}

impl Encode for Assembled {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("servers".into(), servers_to_value(&self.servers));
        out.insert(
            "sources".into(),
            Value::Object(self.sources.map_values(|_, s| s.as_str().into())),
        );
        Value::Object(out)
    }
}

impl Encode for LspJson {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert(
            "servers".into(),
            Value::Object(self.servers.map_values(|_, entry| Value::Object(entry))),
        );
        out.insert("errors".into(), self.errors.encode());
        Value::Object(out)
    }
}

impl Encode for RestartRequired {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("suppressed".into(), self.suppressed.into());
        out.insert(
            "perPath".into(),
            Value::Object(self.per_path.map_values(|_, b| b.into())),
        );
        Value::Object(out)
    }
}

impl Encode for Backoff {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("delayMs".into(), Value::Number(self.delay_ms as f64));
        out.insert("crashLoop".into(), self.crash_loop.into());
        Value::Object(out)
    }
}
