//! Skills (SEP-2640, `io.modelcontextprotocol/skills`) through the gateway: the extension is
//! declared while (and only while) a server the gateway offers declares it; `skills/list` is
//! the merged list ([`crate::skills`]: names and URIs unchanged, the first server in settings
//! order keeps a name); `skills/get` goes to the skill's server, and a `skill://` file read is
//! routed as any resource read is (to the server whose skill serves it). Manifests pass
//! unchanged, digests included. A changed skill list is announced as the extension does it:
//! `notifications/resources/list_changed` (and on 2026-07-28 listen streams).

use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, ListSkillsResult, ServerCapabilities,
    SKILLS_EXTENSION_ID,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{era, gone, Gateway};
use crate::host::{MergedCatalog, Target};
use crate::session::Session;
use crate::transport::CallError;

/// Whether a server the gateway offers declares the skills extension, as last seen: rmcp
/// answers `skills/*` only while the gateway's own capabilities declare it, and reads those
/// without waiting ([`rmcp::ServerHandler::get_info`]).
#[derive(Default)]
pub(super) struct Offered(AtomicBool);

impl Offered {
    /// Notes what `catalog` (as the gateway's clients see it) offers.
    pub(super) fn note(&self, catalog: &MergedCatalog) {
        self.0
            .store(!catalog.skills.servers.is_empty(), Ordering::Release);
    }
}

impl<S: Session> Gateway<S> {
    /// Adds the skills extension to `capabilities` while an offered server declares it.
    pub(super) fn declare_skills(&self, capabilities: &mut ServerCapabilities) {
        if self.skills.0.load(Ordering::Acquire) {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(SKILLS_EXTENSION_ID.to_owned(), Default::default());
        }
    }

    /// Looks again whether an offered server declares the extension (before a handshake and
    /// before a change is announced, so a client that reacts to it finds it declared).
    pub(super) async fn refresh_skills(&self) {
        // `visible` notes it; a session that is gone offers nothing more.
        if self.visible().await.is_err() {
            self.skills.0.store(false, Ordering::Release);
        }
    }

    /// `skills/list`: the merged list, every skill as its server listed it.
    pub(super) async fn skills_list(&self) -> Result<ListSkillsResult, ErrorData> {
        let skills = self.visible().await?.skills.skills;
        Ok(
            ListSkillsResult::with_all_items(skills.into_iter().map(|(_, s)| s).collect())
                .with_ttl_ms(era::FRESH_MS)
                .with_cache_scope(era::SCOPE),
        )
    }

    /// `skills/get`, forwarded to the server that owns the skill; its answer passes unchanged.
    pub(super) async fn skill_get(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        let route = self.session.route(Target::Skill(request.uri.clone()));
        let route = self
            .offered(
                route.await.map_err(gone)?,
                &format!("skill `{}`", request.uri),
            )
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        let params = GetSkillRequestParams::new(request.uri);
        match route.caller.asking(context.peer).get_skill(params).await {
            Ok(mut result) => {
                era::complete(&mut result.result_type);
                result.ttl_ms.get_or_insert(era::FRESH_MS);
                result.cache_scope.get_or_insert(era::SCOPE);
                Ok(result)
            }
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }
}

/// `merged` as `serve --passthrough only` offers it: that server's skills.
pub(super) fn only(
    mut merged: crate::skills::SkillMerge,
    only: Option<&str>,
) -> crate::skills::SkillMerge {
    merged
        .servers
        .retain(|server| Some(server.as_str()) == only);
    merged
        .skills
        .retain(|(server, _)| Some(server.as_str()) == only);
    merged
}
