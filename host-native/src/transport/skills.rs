//! The skills extension upstream (SEP-2640, `io.modelcontextprotocol/skills`): whether a
//! server declares it, its `skills/list` (every page, within the listing caps) as part of its
//! catalog — re-listed on `notifications/resources/list_changed`, which is how the extension
//! announces a changed skill list — and `skills/get` forwarded to it.

use rmcp::model::{PaginatedRequestParams, Skill};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};

/// Whether the server behind `peer` declares the extension (else rmcp would not send
/// `skills/list`, and the server has no skills to list).
pub(super) fn declared(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.capabilities.supports_skills())
}

/// One page of `skills/list` and the cursor of the next (`skills/get` is forwarded by
/// [`Caller::get_skill`](super::Caller::get_skill)).
pub(super) async fn page(
    peer: &Peer<RoleClient>,
    params: Option<PaginatedRequestParams>,
) -> Result<(Vec<Skill>, Option<String>), ServiceError> {
    peer.list_skills(params)
        .await
        .map(|r| (r.skills, r.next_cursor))
}
