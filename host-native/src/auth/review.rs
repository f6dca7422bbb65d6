//! What an approval review says about the stored OAuth login an entry would use: above the
//! token store (it reads the logins) and the bindings (it says why one is not used).

use mcp_reconcile_kernel::ServerConfig;

use super::binding::{LoginLayer, Refusal, TokenIssuer};
use super::{token_store, OAuthEntry, TokenFile};

/// What an approval review says about the stored OAuth login the entry `name` (`config`,
/// from a project file) would use with the token file `file`: `None` when the file holds
/// no login for its URL. The login of a project entry it would use, with the token endpoint
/// that issued it; or that the user's own login for the URL is not shared with it.
pub fn review_line(file: &TokenFile, name: &str, config: &ServerConfig) -> Option<String> {
    let url = config.str_field("httpUrl").filter(|u| !u.is_empty())?;
    let entry = OAuthEntry::of(config);
    if entry.client_credentials {
        return None;
    }
    let store = token_store(Some(file), name, url, &entry).ok()?;
    let shown = |u: &str| crate::display::safe(&crate::redact::mask_url(u)).into_owned();
    let Some(login) = store.login().ok().flatten() else {
        let theirs = (entry.layer < LoginLayer::User)
            .then(|| store.login_in(LoginLayer::User).ok().flatten())
            .flatten()?;
        return Some(format!(
            "does not use your own stored OAuth login for {} ({}); it would need its own \
             `mcp-reconcile auth`",
            shown(url),
            Refusal::Layer(theirs.binding.layer).sentence()
        ));
    };
    let issued_by = login
        .binding
        .token_endpoint
        .as_deref()
        .or(login.binding.issuer.as_deref())
        .map_or_else(|| "an unrecorded authorization server".to_owned(), shown);
    if let Some(metadata) = entry.configured_metadata() {
        if let Some(why) = login
            .binding
            .refusal(entry.layer, &TokenIssuer::of(&metadata))
        {
            return Some(format!(
                "does not use the stored OAuth login for {}: {}",
                shown(url),
                why.sentence()
            ));
        }
    } else if login.binding.layer > entry.layer {
        return None;
    }
    Some(format!(
        "uses your stored OAuth login for {} (issued by {issued_by})",
        shown(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::TokenStore;

    #[tokio::test]
    async fn the_review_says_which_stored_login_a_project_entry_would_use() {
        use rmcp::transport::auth::{CredentialStore, StoredCredentials};
        let dir = tempfile::tempdir().expect("tempdir");
        let file = TokenFile::native(dir.path().join("oauth-tokens.json"));
        let url = "http://127.0.0.1:1/mcp";
        let entry = |json: &str| ServerConfig::from_json(json).expect("config");
        let project = entry(&format!(r#"{{"httpUrl":"{url}","scope":"project"}}"#));
        assert_eq!(review_line(&file, "api", &project), None, "no login stored");

        let login = || StoredCredentials::new("c".into(), None, vec![], None);
        let real = TokenIssuer {
            token_endpoint: "http://127.0.0.1:1/token".into(),
            issuer: Some("http://127.0.0.1:1".into()),
        };
        let mine = TokenStore::new(file.clone(), "api", url, "dynamic", LoginLayer::User);
        mine.bind(real.clone());
        mine.save(login()).await.expect("save");
        let text = review_line(&file, "api", &project).expect("a line");
        assert!(
            text.starts_with("does not use your own stored OAuth login for"),
            "{text}"
        );

        let theirs = TokenStore::new(file.clone(), "api", url, "dynamic", LoginLayer::Project);
        theirs.bind(real);
        theirs.save(login()).await.expect("save");
        let text = review_line(&file, "api", &project).expect("a line");
        assert_eq!(
            text,
            format!("uses your stored OAuth login for {url} (issued by http://127.0.0.1:1/token)")
        );
        let elsewhere = entry(&format!(
            r#"{{"httpUrl":"{url}","oauth":{{"authorizationUrl":"http://127.0.0.1:2/a","tokenUrl":"http://127.0.0.1:2/t"}},"scope":"project"}}"#
        ));
        let text = review_line(&file, "api", &elsewhere).expect("a line");
        assert!(
            text.starts_with("does not use the stored OAuth login"),
            "{text}"
        );
        assert!(text.contains("http://127.0.0.1:2/t"), "{text}");
    }
}
