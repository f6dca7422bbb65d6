//! Client policy op: `clientPolicy` — which servers a client's administrator
//! policy (Claude Code's `allowedMcpServers` / `deniedMcpServers`, SPEC §15)
//! turns off, so a host in another language gets the kernel's matching rules
//! instead of a copy of them. Its `blocked` is what a host passes on as the
//! `blocked` of `gating`, `hotReload` or a gating object.

use crate::api::encode::Encode;
use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::config::Servers;
use crate::json::{Object, Value};
use crate::policy::{parse_rules, Policy, PolicyRule};

/// `clientPolicy`: a client's policy lists and the servers they judge.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ClientPolicyRequest {
    pub(crate) policy: PolicyLists,
    pub(crate) servers: Servers,
}

/// A client's policy lists. A rule is exactly one of `{serverName}`,
/// `{serverCommand}` or `{serverUrl}`; a list entry that is not a rule is
/// left out and reported in the result's `errors`, and a list that is not an
/// array counts as `[]` (an allow list then admits nothing).
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct PolicyLists {
    /// Allow rules: not set (absent or `null`) allows every server, `[]` none.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) allowed: Option<Vec<PolicyRule>>,
    /// Deny rules: a server matching one is blocked, whatever `allowed` says.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) denied: Option<Vec<PolicyRule>>,
    /// What was wrong with the lists' entries, one message each.
    #[cfg_attr(feature = "ts", ts(skip))]
    pub(crate) errors: Vec<String>,
}

impl Decode for ClientPolicyRequest {
    /// `policy: {allowed?, denied?}` (an object), `servers` (a server map).
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let policy = Request {
            fields: req.object("policy")?,
        };
        let mut errors = Vec::new();
        let mut rules = |list: &str| {
            let (rules, problems) = parse_rules(policy.get(list)?);
            errors.extend(problems.into_iter().map(|p| format!("{list}: {p}")));
            Some(rules)
        };
        let allowed = rules("allowed");
        let denied = rules("denied");
        let servers = req.servers("servers")?;
        Ok(ClientPolicyRequest {
            policy: PolicyLists {
                allowed,
                denied,
                errors,
            },
            servers,
        })
    }
}

/// What `clientPolicy` answers.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ClientPolicyOutcome {
    /// The servers the policy turns off, in map order.
    pub(crate) blocked: Vec<String>,
    /// One message per list or rule that was left out (`"allowed: rule 1 must be …"`).
    pub(crate) errors: Vec<String>,
}

impl Encode for ClientPolicyOutcome {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("blocked".into(), self.blocked.encode());
        out.insert("errors".into(), self.errors.encode());
        Value::Object(out)
    }
}

/// Op `clientPolicy`: `{policy: {allowed?, denied?}, servers}` →
/// `{blocked, errors}`.
pub(crate) fn op_client_policy(req: ClientPolicyRequest) -> Result<ClientPolicyOutcome, ApiError> {
    let PolicyLists {
        allowed,
        denied,
        errors,
    } = req.policy;
    let policy = Policy {
        allowed,
        denied: denied.unwrap_or_default(),
    };
    Ok(ClientPolicyOutcome {
        blocked: policy.blocked(&req.servers),
        errors,
    })
}

#[cfg(test)]
mod tests {
    use crate::evaluate_str;

    #[test]
    fn a_request_of_the_wrong_shape_is_an_invalid_request() {
        for request in [
            r#"{"op":"clientPolicy","servers":{}}"#,
            r#"{"op":"clientPolicy","policy":null,"servers":{}}"#,
            r#"{"op":"clientPolicy","policy":[],"servers":{}}"#,
            r#"{"op":"clientPolicy","policy":{}}"#,
            r#"{"op":"clientPolicy","policy":{},"servers":[]}"#,
            r#"{"op":"clientPolicy","policy":{},"servers":{"a":1}}"#,
        ] {
            let response = evaluate_str(request);
            assert!(
                response.starts_with(r#"{"error":{"kind":"invalid-request""#),
                "{request} → {response}"
            );
        }
    }

    #[test]
    fn malformed_lists_are_reported_by_name_and_fail_closed() {
        let response = evaluate_str(
            r#"{"op":"clientPolicy","policy":{"allowed":"gh","denied":[{"serverName":"fs"},{"serverName":1}]},"servers":{"gh":{"command":"x"},"fs":{"command":"y"}}}"#,
        );
        assert_eq!(
            response,
            r#"{"ok":{"blocked":["gh","fs"],"errors":["allowed: must be an array of rules, found \"gh\"","denied: rule 1 must be exactly one of {\"serverName\": string}, {\"serverCommand\": [strings]} or {\"serverUrl\": string}, found {\"serverName\":1} — it is ignored"]}}"#
        );
    }
}
