//! Which stored login an entry may use. A login is bound to what obtained it: the layer of the
//! entry that logged in ([`LoginLayer`]) and the authorization server that issued its tokens
//! ([`TokenIssuer`]: the token endpoint and, when discovered, the issuer). An entry uses a
//! stored login only when it comes from a layer at least as trusted and its own authorization
//! server — configured or discovered — is that very one; so a repository's entry that names
//! the user's server URL with token endpoints of its own never receives the user's refresh
//! token, and never clears the user's login with an `invalid_grant` of its own.
//!
//! In the token file a login carries its binding beside rmcp's credentials:
//!
//! ```json
//! {"client_id": "…", "token_response": {…}, …,
//!  "login": {"layer": "user", "tokenEndpoint": "https://auth.example/token",
//!            "issuer": "https://auth.example"}}
//! ```
//!
//! A login written before bindings existed (no `login` member) is read the safe way: made by
//! the user's own configuration, and bound to the authorization server the file recorded —
//! the `issuer` rmcp keeps in the credentials, or the TypeScript CLI's `tokenUrl` — if any. One
//! that recorded neither is used by no entry until `mcp-reconcile auth NAME` logs in again.

use mcp_reconcile_kernel::ServerConfig;
use rmcp::transport::auth::AuthorizationMetadata;
use serde_json::{json, Value};

/// The layer of the entry that logged in, least trusted first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LoginLayer {
    /// A project-controlled entry: `.mcp.json`, the workspace settings, a workspace
    /// `mcp.serverCommand` (the entries an approval gates).
    Project,
    /// The user's own configuration: user, system and system-default settings,
    /// `--mcp-config`, extensions, the session's own servers.
    User,
}

impl LoginLayer {
    /// The layer of `config`, an entry as assembly stamped it.
    pub fn of(config: &ServerConfig) -> Self {
        if config.is_gated() {
            LoginLayer::Project
        } else {
            LoginLayer::User
        }
    }

    /// The token file's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginLayer::Project => "project",
            LoginLayer::User => "user",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "project" => Some(LoginLayer::Project),
            "user" => Some(LoginLayer::User),
            _ => None,
        }
    }
}

/// The authorization server an entry's tokens come from and are refreshed at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenIssuer {
    /// Where the refresh token is sent.
    pub token_endpoint: String,
    /// The issuer its metadata names (`None` for endpoints an entry configures itself).
    pub issuer: Option<String>,
}

impl TokenIssuer {
    /// The authorization server `metadata` (discovered or configured) describes.
    pub fn of(metadata: &AuthorizationMetadata) -> Self {
        TokenIssuer {
            token_endpoint: metadata.token_endpoint.clone(),
            issuer: metadata.issuer.clone(),
        }
    }
}

/// What a stored login is bound to, as the token file records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The layer of the entry that logged in.
    pub layer: LoginLayer,
    /// The token endpoint that issued the tokens, if recorded.
    pub token_endpoint: Option<String>,
    /// The issuer of the authorization server that issued them, if recorded.
    pub issuer: Option<String>,
}

/// Why an entry does not use a stored login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The login was made for an entry of a more trusted layer (the user's own server).
    Layer(LoginLayer),
    /// The file does not record which authorization server issued the login.
    Unbound,
    /// The entry's token endpoint is not the one that issued the login.
    TokenEndpoint { issued_by: String, entry: String },
    /// The entry's authorization server is not the issuer of the login.
    Issuer {
        issued_by: String,
        entry: Option<String>,
    },
}

impl Binding {
    /// The binding of a login `layer` makes at `server`.
    pub fn new(layer: LoginLayer, server: Option<&TokenIssuer>) -> Self {
        Binding {
            layer,
            token_endpoint: server.map(|s| s.token_endpoint.clone()),
            issuer: server.and_then(|s| s.issuer.clone()),
        }
    }

    /// The `login` member of a stored record.
    pub fn to_json(&self) -> Value {
        let mut login = json!({"layer": self.layer.as_str()});
        if let Some(endpoint) = &self.token_endpoint {
            login["tokenEndpoint"] = Value::String(endpoint.clone());
        }
        if let Some(issuer) = &self.issuer {
            login["issuer"] = Value::String(issuer.clone());
        }
        login
    }

    /// The binding of a stored `record` (this host's credentials object). Without a `login`
    /// member, or with a layer it does not know: the user layer (a repository cannot write the
    /// token file) and rmcp's own `issuer`, if it kept one. A `login` member names the layer;
    /// an unknown name reads as the least trusted.
    pub fn read(record: &Value) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        match record.get("login").filter(|l| l.is_object()) {
            Some(login) => Binding {
                layer: login
                    .get("layer")
                    .and_then(Value::as_str)
                    .map_or(LoginLayer::Project, |l| {
                        LoginLayer::parse(l).unwrap_or(LoginLayer::Project)
                    }),
                token_endpoint: text(login.get("tokenEndpoint")),
                issuer: text(login.get("issuer")),
            },
            None => Binding {
                layer: LoginLayer::User,
                token_endpoint: None,
                issuer: text(record.get("issuer")),
            },
        }
    }

    /// `None` when an entry of `layer` whose authorization server is `server` may use this
    /// login; else why not.
    pub fn refusal(&self, layer: LoginLayer, server: &TokenIssuer) -> Option<Refusal> {
        if layer < self.layer {
            return Some(Refusal::Layer(self.layer));
        }
        if self.token_endpoint.is_none() && self.issuer.is_none() {
            return Some(Refusal::Unbound);
        }
        if let Some(issued_by) = &self.token_endpoint {
            if *issued_by != server.token_endpoint {
                return Some(Refusal::TokenEndpoint {
                    issued_by: issued_by.clone(),
                    entry: server.token_endpoint.clone(),
                });
            }
        }
        if let Some(issued_by) = &self.issuer {
            if Some(issued_by) != server.issuer.as_ref() {
                return Some(Refusal::Issuer {
                    issued_by: issued_by.clone(),
                    entry: server.issuer.clone(),
                });
            }
        }
        None
    }
}

impl Refusal {
    /// The clause a `needs_auth` message gives as its reason (URLs masked and escaped).
    pub fn sentence(&self) -> String {
        let url = |u: &str| crate::display::safe(&crate::redact::mask_url(u)).into_owned();
        match self {
            Refusal::Layer(_) => "the stored OAuth login for this URL belongs to your own \
                 server entry, and an entry from a project file never uses it"
                .to_owned(),
            Refusal::Unbound => "the stored OAuth login for this URL does not record which \
                 authorization server issued it (it predates login binding), so it is not used"
                .to_owned(),
            Refusal::TokenEndpoint { issued_by, entry } => format!(
                "the stored OAuth login for this URL was issued by token endpoint {}, \
                 but this entry's token endpoint is {}, so it is not used",
                url(issued_by),
                url(entry)
            ),
            Refusal::Issuer { issued_by, entry } => format!(
                "the stored OAuth login for this URL was issued by {}, but this entry's \
                 authorization server is {}, so it is not used",
                url(issued_by),
                entry.as_deref().map_or_else(|| "its own".to_owned(), url)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(endpoint: &str, issuer: Option<&str>) -> TokenIssuer {
        TokenIssuer {
            token_endpoint: endpoint.into(),
            issuer: issuer.map(str::to_owned),
        }
    }

    #[test]
    fn a_login_is_used_only_by_as_trusted_an_entry_at_the_server_that_issued_it() {
        let real = server("https://auth.example/token", Some("https://auth.example"));
        let login = Binding::new(LoginLayer::User, Some(&real));
        assert_eq!(login.refusal(LoginLayer::User, &real), None);
        assert_eq!(
            login.refusal(LoginLayer::Project, &real),
            Some(Refusal::Layer(LoginLayer::User)),
            "a repository's entry never uses the user's login"
        );
        let theirs = server("https://evil.example/token", None);
        assert!(matches!(
            login.refusal(LoginLayer::User, &theirs),
            Some(Refusal::TokenEndpoint { .. })
        ));
        let same_endpoint_other_issuer =
            server("https://auth.example/token", Some("https://other.example"));
        assert!(matches!(
            login.refusal(LoginLayer::User, &same_endpoint_other_issuer),
            Some(Refusal::Issuer { .. })
        ));
        // A project login serves a project entry (and a user one) at its own server.
        let project = Binding::new(LoginLayer::Project, Some(&real));
        assert_eq!(project.refusal(LoginLayer::Project, &real), None);
        assert_eq!(project.refusal(LoginLayer::User, &real), None);
        // Round trip through the file.
        let record = json!({"client_id": "c", "login": login.to_json()});
        assert_eq!(Binding::read(&record), login);
    }

    #[test]
    fn an_old_record_is_the_user_s_bound_to_what_it_recorded_or_to_nothing() {
        let real = server("https://auth.example/token", Some("https://auth.example"));
        let with_issuer =
            Binding::read(&json!({"client_id": "c", "issuer": "https://auth.example"}));
        assert_eq!(with_issuer.layer, LoginLayer::User);
        assert_eq!(with_issuer.refusal(LoginLayer::User, &real), None);
        assert!(with_issuer
            .refusal(
                LoginLayer::User,
                &server("https://evil.example/token", None)
            )
            .is_some());
        let bare = Binding::read(&json!({"client_id": "c"}));
        assert_eq!(
            bare.refusal(LoginLayer::User, &real),
            Some(Refusal::Unbound)
        );
        let odd = Binding::read(&json!({"login": {"layer": "root", "tokenEndpoint": "x"}}));
        assert_eq!(
            odd.layer,
            LoginLayer::Project,
            "unknown reads least trusted"
        );
        let text = Refusal::TokenEndpoint {
            issued_by: "https://auth.example/token".into(),
            entry: "https://u:pw@evil.example/t\u{1b}".into(),
        }
        .sentence();
        assert!(!text.contains("pw") && !text.contains('\u{1b}'), "{text}");
    }
}
