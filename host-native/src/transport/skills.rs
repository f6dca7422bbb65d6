//! The skills extension upstream (SEP-2640, `io.modelcontextprotocol/skills`): whether a
//! server declares it, its `skills/list` (every page, within the listing caps) as part of its
//! catalog — re-listed on `notifications/resources/list_changed`, which is how the extension
//! announces a changed skill list — and `skills/get` forwarded to it.

use rmcp::model::{ClientRequest, GetSkillRequest, GetSkillRequestParams, GetSkillResult};
use rmcp::model::{ServerResult, Skill};
use rmcp::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::session::{list_pages, ListError};
use super::{CallError, Caller};

/// The skills of the server behind `peer`: `None` when it does not declare the extension
/// (rmcp would not send the request), else every page of `skills/list`.
pub(super) async fn list(peer: &Peer<RoleClient>) -> Result<Option<Vec<Skill>>, ListError> {
    let declared = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.supports_skills());
    if !declared {
        return Ok(None);
    }
    let skills = list_pages("skills/list", |p| async move {
        peer.list_skills(p).await.map(|r| (r.skills, r.next_cursor))
    })
    .await?;
    Ok(Some(skills))
}

impl Caller {
    /// Forwards `skills/get`: the manifest comes back as the server sent it (digests
    /// unchanged).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn get_skill(
        &self,
        params: GetSkillRequestParams,
    ) -> Result<GetSkillResult, CallError> {
        let what = format!("skills/get `{}`", params.uri);
        let request = ClientRequest::GetSkillRequest(GetSkillRequest::new(params));
        match self
            .request(&what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::GetSkillResult(result) => Ok(result),
            _ => Err(self.unexpected(&what)),
        }
    }
}
