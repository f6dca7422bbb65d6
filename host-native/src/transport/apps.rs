//! What every server connection declares of MCP Apps (SEP-1865): the
//! `io.modelcontextprotocol/ui` extension, so that a server that offers its UI tools only to
//! hosts that can render them offers them to the gateway, which passes them to its clients
//! (`gateway/apps.rs`). A connection is made before any client and may serve several (the
//! daemon's pool shares it), so it declares the extension always rather than per client.

use rmcp::model::ClientCapabilities;
use serde_json::Value;

/// The extension's identifier.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an app's HTML: what the gateway's clients may render.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// `capabilities` with the extension declared, with the one setting it requires
/// (`mimeTypes`).
pub(super) fn declare_ui(capabilities: &mut ClientCapabilities) {
    let mut settings = serde_json::Map::new();
    settings.insert("mimeTypes".into(), Value::from(vec![APP_MIME_TYPE]));
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(UI_EXTENSION.to_owned(), settings);
}
