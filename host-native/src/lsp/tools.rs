//! The language tools `serve` offers when language servers are configured (SPEC §14.5):
//! `lsp_diagnostics`, `lsp_hover`, `lsp_definition`, `lsp_references`, `lsp_document_symbols`,
//! routed by the file's extension to the running server that serves it.
//!
//! Lines and characters are 1-based, as editors show them; paths are relative to the project
//! root or absolute inside it (anything else is refused). Results are JSON text with 1-based
//! positions and project-relative paths, bounded ([`super::bounded`]: at most 2000 items and
//! 1 MiB, with a note of what was left out).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lsp_types::{
    DiagnosticSeverity, DocumentSymbol, DocumentSymbolResponse, GotoDefinitionResponse,
    HoverContents, Location, MarkedString, Position, Range, SymbolInformation, Url,
};
use rmcp::model::Tool;
use serde_json::{json, Map, Value};

use super::bounded::{self, Listed};
use super::connection::LspHandle;

/// How long `lsp_diagnostics` waits for the server to publish.
pub const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(15);

/// One of the language tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LspTool {
    /// `lsp_diagnostics {path}`.
    Diagnostics,
    /// `lsp_hover {path, line, character}`.
    Hover,
    /// `lsp_definition {path, line, character}`.
    Definition,
    /// `lsp_references {path, line, character}`.
    References,
    /// `lsp_document_symbols {path}`.
    DocumentSymbols,
}

impl LspTool {
    /// Every tool, in the order they are listed.
    pub const ALL: [LspTool; 5] = [
        LspTool::Diagnostics,
        LspTool::Hover,
        LspTool::Definition,
        LspTool::References,
        LspTool::DocumentSymbols,
    ];

    /// The MCP tool name.
    pub fn name(self) -> &'static str {
        match self {
            LspTool::Diagnostics => "lsp_diagnostics",
            LspTool::Hover => "lsp_hover",
            LspTool::Definition => "lsp_definition",
            LspTool::References => "lsp_references",
            LspTool::DocumentSymbols => "lsp_document_symbols",
        }
    }

    /// The tool named `name`, if it is one.
    pub fn parse(name: &str) -> Option<LspTool> {
        LspTool::ALL.into_iter().find(|tool| tool.name() == name)
    }

    fn at_position(self) -> bool {
        matches!(
            self,
            LspTool::Hover | LspTool::Definition | LspTool::References
        )
    }

    fn description(self) -> &'static str {
        match self {
            LspTool::Diagnostics => {
                "Errors and warnings a language server reports for a file, as it is on disk."
            }
            LspTool::Hover => {
                "What a language server shows on hover at a position (1-based line and character)."
            }
            LspTool::Definition => "Where the symbol at a position (1-based) is defined.",
            LspTool::References => {
                "Every reference to the symbol at a position (1-based), its declaration included."
            }
            LspTool::DocumentSymbols => "The symbols (outline) of a file.",
        }
    }

    /// The MCP tool definition.
    pub fn definition(self) -> Tool {
        let mut properties = json!({
            "path": {"type": "string", "description": "The file: relative to the project root, or absolute inside it."},
        });
        let mut required = vec![json!("path")];
        if self.at_position() {
            properties["line"] =
                json!({"type": "integer", "minimum": 1, "description": "1-based line."});
            properties["character"] = json!({"type": "integer", "minimum": 1, "description": "1-based character in the line."});
            required.extend([json!("line"), json!("character")]);
        }
        let schema = json!({"type": "object", "properties": properties, "required": required});
        let Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        Tool::new(self.name(), self.description(), Arc::new(schema))
    }
}

/// Every language tool's definition.
pub fn definitions() -> Vec<Tool> {
    LspTool::ALL.into_iter().map(LspTool::definition).collect()
}

/// Where a language tool call goes: the running server for the file's extension.
#[derive(Clone, Debug)]
pub struct LspRoute {
    /// The server's name.
    pub server: String,
    /// Its connection.
    pub handle: LspHandle,
    /// The language id for the file (`extensionToLanguage`).
    pub language_id: String,
    /// The project root: paths are relative to it, and only files inside it are asked about.
    pub project_root: PathBuf,
}

/// Why no running language server can answer a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LspUnavailable {
    /// What to tell the caller.
    pub message: String,
    /// The server for the file is starting: asking again shortly will reach it.
    pub starting: bool,
}

impl LspUnavailable {
    /// Unavailable for good (until something changes).
    pub fn because(message: String) -> Self {
        LspUnavailable {
            message,
            starting: false,
        }
    }
}

/// How long a call waits for the file's language server to finish starting.
pub const START_WAIT: Duration = Duration::from_secs(20);

/// The extension (with the dot) of the `path` argument, which routes a call.
///
/// # Errors
/// No `path` argument, or a path without an extension.
pub fn extension(arguments: &Map<String, Value>) -> Result<String, String> {
    let Some(Value::String(given)) = arguments.get("path") else {
        return Err("`path` is required: the file, relative to the project root".into());
    };
    Path::new(given)
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| format!(".{e}"))
        .ok_or_else(|| {
            format!(
                "{} has no file extension to route by",
                crate::display::safe(given)
            )
        })
}

/// The file a call names, absolute; it must lie inside `project_root`.
///
/// # Errors
/// No `path` argument, or a path outside `project_root`.
pub fn target(project_root: &Path, arguments: &Map<String, Value>) -> Result<PathBuf, String> {
    let Some(Value::String(given)) = arguments.get("path") else {
        return Err("`path` is required: the file, relative to the project root".into());
    };
    let path = crate::inputs::clean(&project_root.join(given));
    if !path.starts_with(project_root) {
        return Err(format!(
            "{} is outside the project ({}); only files inside it can be asked about",
            crate::display::safe(given),
            project_root.display()
        ));
    }
    Ok(path)
}

/// Runs `tool` on `path` through `route`; the JSON text of the answer.
///
/// # Errors
/// A bad position, or the server's failure, as a sentence.
pub async fn call(
    tool: LspTool,
    route: &LspRoute,
    arguments: &Map<String, Value>,
) -> Result<String, String> {
    let project_root = route.project_root.as_path();
    let path = target(project_root, arguments)?;
    let shown = Shown::of(project_root);
    let project_root = &shown;
    let path = path.as_path();
    let handle = &route.handle;
    let language = route.language_id.as_str();
    Ok(match tool {
        LspTool::Diagnostics => {
            let diagnostics = handle.diagnostics(path, language, DIAGNOSTICS_WAIT).await?;
            Listed::of(&diagnostics, "diagnostics", |d| {
                let mut item = range_json(&d.range);
                item["severity"] = json!(severity(d.severity));
                item["message"] = bounded::field(&d.message);
                if let Some(source) = &d.source {
                    item["source"] = bounded::field(source);
                }
                item
            })
            .render()
        }
        LspTool::Hover => {
            let hover = handle.hover(path, language, position(arguments)?).await?;
            bounded::hover(hover.map(|h| hover_text(&h.contents)).as_deref())
        }
        LspTool::Definition => {
            let found = handle
                .definition(path, language, position(arguments)?)
                .await?;
            let locations = match found {
                None => Vec::new(),
                Some(GotoDefinitionResponse::Scalar(location)) => vec![location],
                Some(GotoDefinitionResponse::Array(locations)) => locations,
                Some(GotoDefinitionResponse::Link(links)) => links
                    .into_iter()
                    .map(|l| Location::new(l.target_uri, l.target_selection_range))
                    .collect(),
            };
            locations_json(&locations, project_root).render()
        }
        LspTool::References => {
            let found = handle
                .references(path, language, position(arguments)?)
                .await?;
            locations_json(&found.unwrap_or_default(), project_root).render()
        }
        LspTool::DocumentSymbols => match handle.document_symbols(path, language).await? {
            None => "[]".to_owned(),
            Some(DocumentSymbolResponse::Nested(symbols)) => nested_listed(&symbols).render(),
            Some(DocumentSymbolResponse::Flat(symbols)) => {
                Listed::of(&symbols, "symbols", |s| flat_json(s, project_root)).render()
            }
        },
    })
}

/// The 0-based LSP position of 1-based `line` and `character` arguments.
fn position(arguments: &Map<String, Value>) -> Result<Position, String> {
    let one_based = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_u64)
            .filter(|n| *n >= 1)
            .and_then(|n| u32::try_from(n - 1).ok())
            .ok_or_else(|| format!("`{key}` must be a whole number from 1 (as editors count)"))
    };
    Ok(Position::new(one_based("line")?, one_based("character")?))
}

fn range_json(range: &Range) -> Value {
    json!({
        "line": range.start.line + 1,
        "character": range.start.character + 1,
        "endLine": range.end.line + 1,
        "endCharacter": range.end.character + 1,
    })
}

fn severity(severity: Option<DiagnosticSeverity>) -> &'static str {
    match severity {
        Some(DiagnosticSeverity::ERROR) => "error",
        Some(DiagnosticSeverity::WARNING) => "warning",
        Some(DiagnosticSeverity::INFORMATION) => "information",
        Some(DiagnosticSeverity::HINT) => "hint",
        _ => "unknown",
    }
}

fn hover_text(contents: &HoverContents) -> String {
    let marked = |m: &MarkedString| match m {
        MarkedString::String(s) => s.clone(),
        MarkedString::LanguageString(l) => l.value.clone(),
    };
    match contents {
        HoverContents::Scalar(m) => marked(m),
        HoverContents::Array(items) => items.iter().map(marked).collect::<Vec<_>>().join("\n\n"),
        HoverContents::Markup(markup) => markup.value.clone(),
    }
}

/// How paths in answers are shown: relative to the project root as given or as resolved (the
/// documents are opened by their resolved paths), else absolute.
struct Shown<'a> {
    root: &'a Path,
    real: Option<PathBuf>,
}

impl<'a> Shown<'a> {
    fn of(root: &'a Path) -> Self {
        Shown {
            root,
            real: std::fs::canonicalize(root).ok(),
        }
    }

    /// A file URI as a path relative to the project root (or as the URI when outside it).
    fn path(&self, uri: &Url) -> String {
        let Ok(path) = uri.to_file_path() else {
            return uri.to_string();
        };
        std::iter::once(self.root)
            .chain(self.real.as_deref())
            .find_map(|root| path.strip_prefix(root).ok())
            .map_or_else(|| path.display().to_string(), |p| p.display().to_string())
    }
}

fn locations_json(locations: &[Location], project_root: &Shown<'_>) -> Listed {
    Listed::of(locations, "locations", |l| {
        let mut item = range_json(&l.range);
        item["path"] = bounded::field(&project_root.path(&l.uri));
        item
    })
}

/// Nested symbols, at most [`bounded::MAX_ITEMS`] of them counting every child (the first
/// ones, depth first).
fn nested_listed(symbols: &[DocumentSymbol]) -> Listed {
    fn count(symbols: &[DocumentSymbol]) -> usize {
        symbols
            .iter()
            .map(|s| 1 + count(s.children.as_deref().unwrap_or_default()))
            .sum()
    }
    let mut left = bounded::MAX_ITEMS;
    let mut items = Vec::new();
    for symbol in symbols {
        if left == 0 {
            break;
        }
        items.push(nested_json(symbol, &mut left));
    }
    Listed {
        items,
        total: count(symbols),
        what: "symbols",
    }
}

/// One symbol and as many of its children as `left` allows; how many it holds in all.
fn nested_json(symbol: &DocumentSymbol, left: &mut usize) -> (Value, usize) {
    *left = left.saturating_sub(1);
    let mut item = range_json(&symbol.selection_range);
    item["name"] = bounded::field(&symbol.name);
    item["kind"] = json!(format!("{:?}", symbol.kind).to_lowercase());
    let mut held = 1;
    let mut children = Vec::new();
    for child in symbol.children.as_deref().unwrap_or_default() {
        if *left == 0 {
            break;
        }
        let (child, n) = nested_json(child, left);
        held += n;
        children.push(child);
    }
    if !children.is_empty() {
        item["children"] = Value::Array(children);
    }
    (item, held)
}

#[allow(deprecated)] // `SymbolInformation::deprecated` is part of the type; it is not read.
fn flat_json(symbol: &SymbolInformation, project_root: &Shown<'_>) -> Value {
    let mut item = range_json(&symbol.location.range);
    item["name"] = bounded::field(&symbol.name);
    item["kind"] = json!(format!("{:?}", symbol.kind).to_lowercase());
    item["path"] = bounded::field(&project_root.path(&symbol.location.uri));
    if let Some(container) = &symbol.container_name {
        item["container"] = bounded::field(container);
    }
    item
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_outside_the_project_is_refused_and_one_inside_is_routed_by_extension() {
        let root = Path::new("/work/project");
        let args = |p: &str| json!({"path": p}).as_object().cloned().unwrap_or_default();
        assert_eq!(
            target(root, &args("src/a.json")),
            Ok(PathBuf::from("/work/project/src/a.json"))
        );
        assert_eq!(extension(&args("src/a.json")), Ok(".json".to_owned()));
        assert_eq!(
            extension(&args("/work/project/b.yaml")),
            Ok(".yaml".to_owned())
        );
        assert!(target(root, &args("../secret.json")).is_err());
        assert!(target(root, &args("/etc/passwd.json")).is_err());
        assert!(extension(&args("Makefile")).is_err());
        assert!(target(root, &Map::new()).is_err());
        assert!(extension(&Map::new()).is_err());
    }

    #[test]
    fn positions_are_one_based_and_checked() {
        let args = json!({"line": 3, "character": 1})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(position(&args), Ok(Position::new(2, 0)));
        let zero = json!({"line": 0, "character": 1})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(position(&zero).is_err());
    }
}
