//! How a gateway names its servers' tools and prompts for its clients (`serve --tool-names`).
//!
//! The session qualifies every tool and prompt `mcp__<server>__<name>`. A client that
//! qualifies its servers' tools itself (Claude Code and Codex name a tool `mcp__<server>__<tool>`)
//! would show `mcp__reconcile__mcp__github__create_issue`; with [`ToolNames::Short`] the gateway
//! drops the leading `mcp__` on the way out and puts it back on the way in, so the client shows
//! `mcp__reconcile__github__create_issue`. The mapping is one to one: every qualified name starts
//! with `mcp__`, and a short name always holds the `__` that separates server and tool. The
//! gateway's own tools (the language tools) keep their names in both styles.

use serde::{Deserialize, Serialize};

use crate::host::MergedCatalog;
use crate::lsp::tools::LspTool;

/// The prefix every qualified name starts with.
const QUALIFIED: &str = "mcp__";

/// A naming style.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolNames {
    /// `mcp__<server>__<name>`.
    #[default]
    Mcp,
    /// `<server>__<name>`: for clients that put their own `mcp__<gateway>__` in front.
    Short,
}

impl ToolNames {
    /// The session's name for `name` as a client sent it.
    pub fn inward(self, name: &str) -> String {
        match self {
            ToolNames::Short if LspTool::parse(name).is_none() => format!("{QUALIFIED}{name}"),
            _ => name.to_owned(),
        }
    }

    /// The name a client sees for the session's `name`.
    pub fn outward(self, name: &str) -> String {
        match self {
            ToolNames::Short => name.strip_prefix(QUALIFIED).unwrap_or(name).to_owned(),
            ToolNames::Mcp => name.to_owned(),
        }
    }

    /// `catalog` with its tools and prompts named for the client.
    pub fn rename(self, mut catalog: MergedCatalog) -> MergedCatalog {
        if self == ToolNames::Mcp {
            return catalog;
        }
        for tool in &mut catalog.tools {
            tool.name = self.outward(&tool.name).into();
        }
        for prompt in &mut catalog.prompts {
            prompt.name = self.outward(&prompt.name);
        }
        catalog
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_round_trip() {
        let short = ToolNames::Short;
        for name in ["mcp__github__create_issue", "mcp__a__b__c", "mcp____x"] {
            assert_eq!(short.inward(&short.outward(name)), name);
        }
        assert_eq!(
            short.outward("mcp__github__create_issue"),
            "github__create_issue"
        );
        assert_eq!(ToolNames::Mcp.inward("mcp__a__b"), "mcp__a__b");
        for tool in LspTool::ALL {
            assert_eq!(
                short.inward(tool.name()),
                tool.name(),
                "own tools keep their names"
            );
            assert_eq!(short.outward(tool.name()), tool.name());
        }
    }
}
