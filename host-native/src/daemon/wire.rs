//! What travels on the daemon socket: one [`DaemonRequest`] line from the client, one answer
//! line (`{"ok": …}` or `{"error": "…"}`); after a successful `attach` the same connection
//! carries MCP (newline-delimited JSON-RPC) between the bridge and its session.

use serde::{Deserialize, Serialize};

use crate::inputs::{HostEnv, Options};
use crate::ipc::SessionRequest;

/// One request on the daemon socket.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum DaemonRequest {
    /// Make a session for these files, in this environment; the connection then speaks MCP to
    /// it, and the session lives as long as the connection.
    Attach {
        /// The session's layer flags.
        options: Box<Options>,
        /// The attaching process's environment, current directory and home: its paths,
        /// `$VAR`s and the environment its servers are spawned with.
        env: Box<HostEnv>,
        /// Who attaches (`serve`), for `status`.
        client: String,
        /// The attaching process, for `status`.
        pid: u32,
        /// How the session's gateway names tools and prompts (`serve --tool-names`).
        #[serde(default)]
        tool_names: crate::gateway::ToolNames,
        /// `serve --manage-tools`: the session's gateway also offers the tools that show the
        /// status, reload and reconnect (never approve). Left out when false, so a daemon of
        /// an earlier version reads the request as before.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        manage_tools: bool,
        /// The attaching binary's version ([`super::version`]): a daemon older than it
        /// retires. `None` from a `serve` that predates the field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
    },
    /// Every session and every connection with the sessions holding it.
    Status,
    /// A request for the sessions of one file set (`Inputs::session_id`), as the session
    /// socket takes it.
    Session {
        /// The session id of the file set.
        id: String,
        /// What to ask each of them.
        request: SessionRequest,
    },
}

impl DaemonRequest {
    /// The request as sent: one JSON line.
    ///
    /// # Errors
    /// Never in practice (every field serializes).
    pub fn line(&self) -> serde_json::Result<String> {
        Ok(serde_json::to_string(self)? + "\n")
    }

    /// Reads one request line; `Err` is the message the client gets.
    ///
    /// # Errors
    /// Not JSON, or not a known request.
    pub fn parse(line: &[u8]) -> Result<DaemonRequest, String> {
        serde_json::from_slice(line).map_err(|e| format!("not a daemon request: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_without_showing_values_in_debug() {
        let mut env = HostEnv::default();
        env.vars.insert("TOKEN".into(), "s3cret".into());
        let attach = DaemonRequest::Attach {
            options: Box::new(Options {
                debounce_ms: Some(150),
                ..Options::default()
            }),
            env: Box::new(env),
            client: "serve".into(),
            pid: 7,
            tool_names: crate::gateway::ToolNames::Short,
            manage_tools: false,
            version: None,
        };
        let line = attach.line().expect("line");
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        assert!(!line.contains("manage_tools"), "left out when off: {line}");
        let back = DaemonRequest::parse(line.as_bytes()).expect("parses");
        let DaemonRequest::Attach {
            options,
            env,
            manage_tools,
            ..
        } = back
        else {
            panic!("an attach");
        };
        assert!(!manage_tools);
        assert_eq!(options.debounce_ms, Some(150));
        let managed = line.replacen(
            "\"cmd\":\"attach\"",
            "\"cmd\":\"attach\",\"manage_tools\":true",
            1,
        );
        assert!(matches!(
            DaemonRequest::parse(managed.as_bytes()),
            Ok(DaemonRequest::Attach {
                manage_tools: true,
                ..
            })
        ));
        assert_eq!(env.vars.get("TOKEN").map(String::as_str), Some("s3cret"));
        assert!(!format!("{env:?}").contains("s3cret"));
        let session = DaemonRequest::parse(
            br#"{"cmd":"session","id":"00ff","request":{"cmd":"reconnect","name":null}}"#,
        )
        .expect("parses");
        assert!(matches!(
            session,
            DaemonRequest::Session {
                request: SessionRequest::Reconnect { name: None },
                ..
            }
        ));
        assert!(DaemonRequest::parse(b"{\"cmd\":\"nope\"}").is_err());
    }
}
