//! `--skills-from FILE`: the server declares the skills extension (SEP-2640,
//! `io.modelcontextprotocol/skills`) and serves the skills of FILE, a JSON array of
//! `{"name", "description", "files": {"PATH": "TEXT", ...}, ...}` (other members are further
//! frontmatter fields, e.g. `"version"`). Skill `NAME` is `skill://NAME/SKILL.md`; each file
//! is `skill://NAME/PATH` with its `sha256:` digest, readable with `resources/read`. FILE is
//! re-read at every request and polled: when its content changes the server sends
//! `notifications/resources/list_changed` (how the extension announces a changed skill list)
//! — a server whose skills change at runtime.

use std::path::{Path, PathBuf};

use rmcp::model::{
    ReadResourceResult, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Map, Value};

/// The skills of the file; none when it is missing or not a JSON array of objects.
pub fn read(path: &Path) -> Vec<Skill> {
    let entries: Vec<Map<String, Value>> = std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    entries.iter().filter_map(skill).collect()
}

/// One entry of the file as a skill with its manifest.
fn skill(entry: &Map<String, Value>) -> Option<Skill> {
    let name = entry.get("name")?.as_str()?;
    let description = entry.get("description")?.as_str()?;
    let mut frontmatter = SkillFrontmatter::new(name, description);
    for (key, value) in entry {
        if !matches!(key.as_str(), "name" | "description" | "files") {
            frontmatter = frontmatter.with_field(key.clone(), value.clone());
        }
    }
    let files = files(entry)
        .map(|(path, text)| SkillResource::from_bytes(file_uri(name, &path), text.as_bytes()))
        .collect();
    Some(Skill::new(
        file_uri(name, "SKILL.md"),
        frontmatter,
        SkillResources::Files(files),
    ))
}

/// The entry's files (`SKILL.md` always, made up when the entry has none).
fn files(entry: &Map<String, Value>) -> impl Iterator<Item = (String, String)> {
    let mut files: Vec<(String, String)> = entry
        .get("files")
        .and_then(Value::as_object)
        .map(|files| {
            files
                .iter()
                .filter_map(|(path, text)| Some((path.clone(), text.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if !files.iter().any(|(path, _)| path == "SKILL.md") {
        let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
        files.push(("SKILL.md".to_owned(), format!("---\nname: {name}\n---\n")));
    }
    files.into_iter()
}

fn file_uri(name: &str, path: &str) -> String {
    format!("skill://{name}/{path}")
}

/// The skill whose `SKILL.md` is at `uri`.
pub fn get(path: &Path, uri: &str) -> Option<Skill> {
    read(path).into_iter().find(|s| s.uri == uri)
}

/// The text of the file at `uri` (`skill://NAME/PATH`), if the file has it.
pub fn read_file(path: &Path, uri: &str) -> Option<ReadResourceResult> {
    let rest = uri.strip_prefix("skill://")?;
    let (name, file) = rest.split_once('/')?;
    let entries: Vec<Map<String, Value>> = std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())?;
    let entry = entries
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?;
    let (_, text) = files(entry).find(|(p, _)| p == file)?;
    Some(ReadResourceResult::new(vec![
        ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("text/markdown".to_owned()),
            text,
            meta: None,
        },
    ]))
}

/// Sends `resources/list_changed` to `peer` whenever the file's content changes, until the
/// connection ends.
pub fn watch(path: PathBuf, peer: Peer<RoleServer>) {
    crate::described::on_change(path, move || {
        let peer = peer.clone();
        async move { peer.notify_resource_list_changed().await.is_ok() }
    });
}
