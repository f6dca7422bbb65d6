//! The last listing of each lazy server (issue 41), kept on disk so a session can offer a lazy
//! server's tools, prompts and resources without starting it.
//!
//! One file per connection id in `<state dir>/lazy/`, named by a digest of the id (a server's
//! name is repository text and never becomes a path), holding the id and the listing as the
//! server gave it: tools, prompts, resources and resource templates — never the entry, so no
//! environment value, header or token is ever written. The directory is private
//! ([`crate::private`], checked again before each read); files are written atomically with mode
//! 0600. A read is bounded (the inputs' 4 MiB cap); a file that is missing, too large, not a listing, or names another id is
//! no listing: the server is started once to learn it again, nothing fails.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::identity::{sha256_hex, ConnectionId};
use serde::{Deserialize, Serialize};

use crate::transport::{Catalog, Prompt, Resource, ResourceTemplate, Tool};

/// The stored form of one listing.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    /// The connection id the listing is of.
    id: String,
    tools: Vec<Tool>,
    prompts: Vec<Prompt>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
}

/// The listings of lazy servers under one state directory.
#[derive(Clone, Debug)]
pub struct ListingCache {
    dir: PathBuf,
}

impl ListingCache {
    /// The cache under `state_dir` (nothing is created until a listing is stored).
    pub fn new(state_dir: &Path) -> ListingCache {
        ListingCache {
            dir: state_dir.join("lazy"),
        }
    }

    /// Where the listing of `id` is kept.
    fn file(&self, id: &ConnectionId) -> PathBuf {
        let digest = sha256_hex(id.0.as_bytes());
        self.dir.join(format!("{}.json", &digest[..32]))
    }

    /// The kept listing of `id`, if a sound one is there.
    pub fn load(&self, id: &ConnectionId) -> Option<Catalog> {
        // A listing is offered to the client as the server's own words: only from a directory
        // nobody else could have written it into.
        crate::private::check_dir(&self.dir).ok()?;
        let text = crate::inputs::read_text(&self.file(id)).ok()??;
        let stored: Stored = serde_json::from_str(&text).ok()?;
        (stored.id == id.0).then(|| Catalog {
            tools: stored.tools,
            prompts: stored.prompts,
            resources: stored.resources,
            resource_templates: stored.resource_templates,
            // Skills are listed once the server runs; a kept listing offers none.
            skills: None,
            digests: std::sync::OnceLock::new(),
        })
    }

    /// Keeps `catalog` as the listing of `id`, atomically.
    ///
    /// # Errors
    /// The private directory cannot be made, or the file cannot be written.
    pub fn store(&self, id: &ConnectionId, catalog: &Catalog) -> anyhow::Result<()> {
        let stored = Stored {
            id: id.0.clone(),
            tools: catalog.tools.clone(),
            prompts: catalog.prompts.clone(),
            resources: catalog.resources.clone(),
            resource_templates: catalog.resource_templates.clone(),
        };
        let text = serde_json::to_vec(&stored)?;
        crate::private::ensure_dir(&self.dir)?;
        crate::approvals_store::write_atomic(&self.file(id), &text)?;
        Ok(())
    }

    /// Forgets the listing of `id` (its entry's identity changed).
    pub fn remove(&self, id: &ConnectionId) {
        let _ = std::fs::remove_file(self.file(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Catalog {
        let tool: Tool = serde_json::from_value(serde_json::json!({
            "name": "echo",
            "inputSchema": {"type": "object"}
        }))
        .expect("tool");
        Catalog {
            tools: vec![tool],
            ..Catalog::default()
        }
    }

    /// Guards the round trip and that a listing is only ever served for its own id.
    #[test]
    fn a_listing_comes_back_for_its_own_id_only() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = ListingCache::new(dir.path());
        let id = ConnectionId("fs::0123456789abcdef".into());
        assert!(cache.load(&id).is_none());
        cache.store(&id, &listing()).expect("stored");
        let back = cache.load(&id).expect("loaded");
        assert_eq!(back.tools[0].name, "echo");
        let other = ConnectionId("fs::fedcba9876543210".into());
        assert!(cache.load(&other).is_none());
        // A file renamed onto another id's name is not that id's listing.
        std::fs::copy(cache.file(&id), cache.file(&other)).expect("copy");
        assert!(cache.load(&other).is_none());
        cache.remove(&id);
        assert!(cache.load(&id).is_none());
    }

    /// Guards "a broken cache file is no cache": garbage, wrong shapes and oversized files
    /// read as nothing.
    #[test]
    fn a_broken_file_is_no_listing() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = ListingCache::new(dir.path());
        let id = ConnectionId("fs::0123456789abcdef".into());
        cache.store(&id, &listing()).expect("stored");
        let file = cache.file(&id);
        for bad in [
            b"{not json".to_vec(),
            br#"{"id":"fs::0123456789abcdef","tools":7}"#.to_vec(),
            vec![b' '; 5 * 1024 * 1024],
        ] {
            std::fs::write(&file, bad).expect("write");
            assert!(cache.load(&id).is_none());
        }
    }
}
