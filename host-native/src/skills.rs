//! Skills (SEP-2640, `io.modelcontextprotocol/skills`) across a session's servers: which
//! server a `skill://` URI belongs to, and the merged skill list a gateway offers.
//!
//! Skills keep their URIs and names: a skill's name is in its URI (`skill://<name>/SKILL.md`)
//! and in its `SKILL.md`, both covered by its digests, so a gateway cannot rename one without
//! breaking the manifest. Collisions are settled as the merged catalog settles tool names: the
//! first server in settings order (among those that own their tool prefix) that lists a name or
//! URI keeps it, and a later server's skill of the same name or URI is not offered nor routed.

use std::collections::HashSet;

use crate::transport::{Catalog, Skill};

/// The folder a skill's files are under: its `SKILL.md` URI without `SKILL.md`.
fn folder(skill: &Skill) -> &str {
    skill.uri.strip_suffix(rmcp::model::SKILL_MD).unwrap_or("")
}

/// Whether `skill` serves the file `uri`: its manifest lists it, or (a `"dynamic"` manifest)
/// it is under the skill's folder.
fn serves(skill: &Skill, uri: &str) -> bool {
    match &skill.resources {
        rmcp::model::SkillResources::Files(files) => files.iter().any(|f| f.uri == uri),
        _ => {
            let folder = folder(skill);
            !folder.is_empty() && uri.starts_with(folder)
        }
    }
}

/// Whether `catalog`'s skills serve the file `uri` (a skill's `SKILL.md` or another of its
/// files): a `resources/read` of it goes to that server even though it lists no such resource.
pub fn serves_file(catalog: &Catalog, uri: &str) -> bool {
    catalog
        .skills
        .iter()
        .flatten()
        .any(|skill| serves(skill, uri))
}

/// The skill of `catalog` whose `SKILL.md` is at `uri`.
pub fn skill_at<'a>(catalog: &'a Catalog, uri: &str) -> Option<&'a Skill> {
    catalog
        .skills
        .iter()
        .flatten()
        .find(|skill| skill.uri == uri)
}

/// The skill of `catalog` whose `SKILL.md` is at `uri`, else the one that serves the file
/// `uri`.
pub fn owning<'a>(catalog: &'a Catalog, uri: &str) -> Option<&'a Skill> {
    skill_at(catalog, uri).or_else(|| {
        catalog
            .skills
            .iter()
            .flatten()
            .find(|skill| serves(skill, uri))
    })
}

/// The skills of several servers merged: unique names and URIs, first server wins, each with
/// the server that owns it.
#[derive(Clone, Debug, Default)]
pub struct SkillMerge {
    names: HashSet<String>,
    uris: HashSet<String>,
    /// The servers that declare the extension, settings order.
    pub servers: Vec<String>,
    /// Each offered skill with its owner.
    pub skills: Vec<(String, Skill)>,
}

impl SkillMerge {
    /// Adds `server`'s skills (`None`: it does not declare the extension), skipping a name or
    /// URI an earlier server took.
    pub fn add(&mut self, server: &str, skills: Option<Vec<Skill>>) {
        let Some(skills) = skills else { return };
        self.servers.push(server.to_owned());
        for skill in skills {
            if self.names.contains(skill.name()) || self.uris.contains(&skill.uri) {
                continue;
            }
            self.names.insert(skill.name().to_owned());
            self.uris.insert(skill.uri.clone());
            self.skills.push((server.to_owned(), skill));
        }
    }

    /// The server that owns the skill whose `SKILL.md` is at `uri`.
    pub fn owner(&self, uri: &str) -> Option<&str> {
        self.skills
            .iter()
            .find(|(_, skill)| skill.uri == uri)
            .map(|(server, _)| server.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{SkillFrontmatter, SkillResource, SkillResources};

    fn skill(uri: &str, name: &str) -> Skill {
        let files = vec![SkillResource::from_bytes(uri, b"x")];
        Skill::new(
            uri,
            SkillFrontmatter::new(name, "d"),
            SkillResources::Files(files),
        )
    }

    /// Guards that a second server cannot take over a skill name or URI the first offers.
    #[test]
    fn the_first_server_keeps_a_skill_name_or_uri() {
        let mut merge = SkillMerge::default();
        merge.add("a", Some(vec![skill("skill://git/SKILL.md", "git")]));
        merge.add("b", None);
        merge.add(
            "c",
            Some(vec![
                skill("skill://git/SKILL.md", "git"),
                skill("skill://acme/git/SKILL.md", "git"),
                skill("skill://fmt/SKILL.md", "fmt"),
            ]),
        );
        let owned: Vec<(&str, &str)> = merge
            .skills
            .iter()
            .map(|(server, skill)| (server.as_str(), skill.uri.as_str()))
            .collect();
        assert_eq!(
            owned,
            [("a", "skill://git/SKILL.md"), ("c", "skill://fmt/SKILL.md")]
        );
        assert_eq!(merge.servers, ["a", "c"]);
        assert_eq!(merge.owner("skill://git/SKILL.md"), Some("a"));
        assert_eq!(merge.owner("skill://acme/git/SKILL.md"), None);
    }
}
