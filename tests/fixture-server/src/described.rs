//! `--describe-from FILE`: the tools the server lists are the file's JSON array of tool
//! definitions, as `tools/list` carries them (`name`, `description`, `inputSchema`, ...),
//! re-read at every listing; or the file is an object `{"tools": [...], "prompts": [...]}`
//! and the prompts it lists replace `--prompts` too. The file is polled, and when its content
//! changes the server sends `notifications/tools/list_changed` and
//! `notifications/prompts/list_changed` — a server that changes its tool and prompt
//! descriptions at runtime (the description swap that pinning guards against). A listed name
//! that is one of the fixture's own tools (after the prefix) runs that tool; other names are
//! listed only. A listed prompt's `prompts/get` answers with its description.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{Prompt, Tool};
use rmcp::service::{Peer, RoleServer};
use serde::Deserialize;

use crate::cli::ToolKind;

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(50);

/// What the file describes: its tools, and its prompts when it is the object form.
#[derive(Default, Deserialize)]
#[serde(untagged)]
enum Described {
    #[default]
    Nothing,
    Tools(Vec<Tool>),
    Both {
        #[serde(default)]
        tools: Vec<Tool>,
        prompts: Vec<Prompt>,
    },
}

fn described(path: &Path) -> Described {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// The file's tools; none when it is missing or describes none.
pub fn read(path: &Path) -> Vec<Tool> {
    match described(path) {
        Described::Nothing => Vec::new(),
        Described::Tools(tools) | Described::Both { tools, .. } => tools,
    }
}

/// The file's prompts, when it is the object form (`None`: `--prompts` stands).
pub fn prompts(path: &Path) -> Option<Vec<Prompt>> {
    match described(path) {
        Described::Both { prompts, .. } => Some(prompts),
        _ => None,
    }
}

/// The fixture tool that `name` (listed in the file) runs.
pub fn kind_of(path: &Path, prefix: &str, name: &str) -> Option<ToolKind> {
    read(path).iter().find(|t| t.name == name)?;
    let base = name.strip_prefix(prefix)?;
    ToolKind::SELECTABLE
        .into_iter()
        .find(|k| k.base_name() == base)
}

/// Sends `tools/list_changed` and `prompts/list_changed` to `peer` whenever the file's content
/// changes, until the connection ends.
pub fn watch(path: PathBuf, peer: Peer<RoleServer>) {
    on_change(path, move || {
        let peer = peer.clone();
        async move {
            peer.notify_tool_list_changed().await.is_ok()
                && peer.notify_prompt_list_changed().await.is_ok()
        }
    });
}

/// Runs `notify` whenever the content of `path` changes (polled), until it says the
/// connection ended (`false`).
pub fn on_change<F, N>(path: PathBuf, notify: N)
where
    N: Fn() -> F + Send + 'static,
    F: std::future::Future<Output = bool> + Send,
{
    tokio::spawn(async move {
        let mut last = std::fs::read(&path).ok();
        loop {
            tokio::time::sleep(POLL).await;
            let now = std::fs::read(&path).ok();
            if now == last {
                continue;
            }
            last = now;
            if !notify().await {
                return;
            }
        }
    });
}
