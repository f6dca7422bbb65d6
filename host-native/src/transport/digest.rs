//! What a listing is made of, in digests: how a session tells that its merged catalog changed
//! without building and serializing it after every event.

use super::Catalog;

/// Content digests of one listing: per tool (a session view keeps some of them), and one per
/// other list. Equal lists give equal digests; the serialized form of each item is hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digests {
    pub tools: Vec<u64>,
    pub prompts: u64,
    pub resources: u64,
}

impl Catalog {
    /// This listing's [`Digests`], computed once: whether a session's merged catalog changed is
    /// asked after every event, and serializing every tool of 200 servers each time is not
    /// free.
    pub fn digests(&self) -> &Digests {
        self.digests.get_or_init(|| Digests {
            tools: self.tools.iter().map(|t| digest(&[t])).collect(),
            prompts: digest(&self.prompts),
            // A changed skill list is announced as resources are (the extension's own way).
            resources: digest(&self.resources)
                ^ digest(&self.resource_templates).rotate_left(1)
                ^ digest(&[&self.skills]).rotate_left(2),
        })
    }
}

/// One digest of `items` in order: each item's serialized form, streamed into the hasher.
pub fn digest<T: serde::Serialize>(items: &[T]) -> u64 {
    use std::hash::Hasher;
    struct Into<'a>(&'a mut std::collections::hash_map::DefaultHasher);
    impl std::io::Write for Into<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for item in items {
        // Items end with `}`: no two sequences of them stream the same bytes.
        let _ = serde_json::to_writer(Into(&mut hasher), item);
        hasher.write_u8(0);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{Prompt, Tool};

    fn listing(description: &str) -> Catalog {
        let tool = |name: &str| {
            Tool::new(
                name.to_owned(),
                description.to_owned(),
                serde_json::Map::new(),
            )
        };
        Catalog {
            tools: vec![tool("a"), tool("b")],
            prompts: vec![Prompt::new("p", None::<String>, None)],
            ..Catalog::default()
        }
    }

    #[test]
    fn equal_listings_have_equal_digests_and_a_changed_item_changes_its_own() {
        let (one, again, changed) = (listing("x"), listing("x"), listing("y"));
        let (d1, d2, d3) = (one.digests(), again.digests(), changed.digests());
        assert_eq!(d1.tools, d2.tools);
        assert_eq!((d1.prompts, d1.resources), (d2.prompts, d2.resources));
        assert_ne!(
            d1.tools[0], d3.tools[0],
            "a tool's description is part of it"
        );
        assert_ne!(d1.tools[0], d1.tools[1], "so is its name");
        assert_eq!(d1.prompts, d3.prompts);
        // Computed once, and kept by a clone.
        assert!(std::ptr::eq(one.digests(), d1));
        assert_eq!(one.clone().digests().tools, d1.tools);
    }

    #[test]
    fn a_digest_tells_where_one_item_ends() {
        let tool = |name: &str| Tool::new(name.to_owned(), "d", serde_json::Map::new());
        assert_ne!(digest(&[tool("ab")]), digest(&[tool("a"), tool("b")]));
        assert_ne!(digest::<Tool>(&[]), digest(&[tool("a")]));
    }
}
