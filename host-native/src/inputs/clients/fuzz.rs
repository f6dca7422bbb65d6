//! Entry points for the fuzz targets (`fuzz/fuzz_targets/client_*.rs`, `lsp_formats.rs`): every
//! client-file parser on arbitrary text, in a fixed context — no environment read, and no file
//! read but the ones a target writes itself. Not part of the API (hidden from the docs): they
//! follow the parsers.
//!
//! Each returns what the parse gave, as text, after checking what must hold whatever the input:
//! no panic; the same text parses the same way twice; every entry it yields (as used and as
//! written) is JSON whose text is a fixed point (`JSON.stringify` of its parse is itself), as
//! approval hashes and the status JSON need.

use std::collections::BTreeMap;
use std::path::Path;

use mcp_reconcile_kernel::json::parse_jsonc;
use mcp_reconcile_kernel::{LayerSource, Object, Servers, Value};

use super::super::checked::Text;
use super::{ClientContent, ClientFile, Context, Format};
use crate::inputs::lsp_formats::{to_own, LspFormat};

/// The JSON (with comments) client formats, chosen by a fuzz input's first byte.
const JSON_FORMATS: [(Format, LayerSource); 12] = [
    (Format::ClaudeState, LayerSource::User),
    (Format::ClaudeMcpJson, LayerSource::Project),
    (Format::ClaudeManaged, LayerSource::System),
    (Format::ClaudeSettings { managed: false }, LayerSource::User),
    (
        Format::ClaudeSettings { managed: true },
        LayerSource::System,
    ),
    (Format::Cursor, LayerSource::User),
    (Format::Vscode, LayerSource::Workspace),
    (Format::Copilot, LayerSource::Project),
    (Format::GeminiTrust, LayerSource::User),
    (Format::CopilotConfig, LayerSource::User),
    (Format::GeminiEnablement, LayerSource::User),
    (Format::Cursor, LayerSource::Project),
];

/// The TOML client formats (Codex's `config.toml` in each of its places, its
/// `requirements.toml`), chosen by a fuzz input's first byte.
const TOML_FORMATS: [(Format, LayerSource); 4] = [
    (Format::Codex, LayerSource::User),
    (Format::Codex, LayerSource::Project),
    (Format::Codex, LayerSource::System),
    (Format::CodexRequirements, LayerSource::System),
];

/// The variables a fuzz context has: some set, one empty, one that names itself.
fn vars() -> BTreeMap<String, String> {
    [
        ("HOME", "/home/u"),
        ("TOKEN", "s3cret"),
        ("EMPTY", ""),
        ("SELF", "${SELF}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Parses `text` as `format` from `path` in a context whose project is `project`.
fn parse(format: Format, scope: LayerSource, path: &Path, project: &Path, text: &str) -> String {
    let vars = vars();
    let ctx = Context {
        vars: &vars,
        home: Some(Path::new("/home/u")),
        project,
        project_given: project,
        git_root: Some(project),
    };
    let file = ClientFile::new(format, scope, path.to_path_buf());
    let read = |text: &str| {
        file.kind
            .read(path, &mut Text::new(text.to_owned()), &ctx, false)
    };
    let (once, twice) = (read(text), read(text));
    let shown = |parsed: &Result<ClientContent, String>| match parsed {
        Ok(content) => {
            check_entries(content);
            format!("{content:?}")
        }
        Err(message) => format!("error: {message}"),
    };
    let shown_once = shown(&once);
    assert_eq!(shown_once, shown(&twice), "the same text parsed twice");
    shown_once
}

/// Every entry of `content` is JSON whose text is a fixed point.
fn check_entries(content: &ClientContent) {
    let layers = content
        .layers
        .iter()
        .flat_map(|(_, used, written)| [used, written]);
    let plugins = content
        .plugins
        .iter()
        .flat_map(|plugin| [&plugin.used, &plugin.written]);
    for servers in layers.chain(plugins) {
        check_servers(servers);
    }
    for plugin in &content.plugins {
        for entry in plugin.lsp.values().chain(plugin.lsp_written.values()) {
            check_json(&Value::Object(entry.clone()));
        }
    }
}

fn check_servers(servers: &Servers) {
    for config in servers.values() {
        check_json(&Value::Object(config.object().clone()));
    }
}

/// `value`'s JSON text parses, and its parse's text is the same text.
fn check_json(value: &Value) {
    let text = value.to_json();
    let again = parse_jsonc(&text).expect("an entry's JSON text parses");
    assert_eq!(
        again.to_json(),
        text,
        "an entry's JSON text is a fixed point"
    );
}

/// A JSON client file (first byte: which format; the rest: the file), parsed as the layouts
/// read it: Claude Code's state, `.mcp.json`, managed and settings files, Cursor's, VS Code's
/// and Copilot CLI's server files, Gemini CLI's trust and enablement files, Copilot CLI's
/// config. What it gave, as text.
pub fn client_json(data: &[u8]) -> String {
    let Some((&which, rest)) = data.split_first() else {
        return String::new();
    };
    let (format, scope) = JSON_FORMATS[usize::from(which) % JSON_FORMATS.len()];
    let text = String::from_utf8_lossy(rest);
    parse_json_file(format, scope, &text)
}

/// `text` through the JSON reading every non-TOML client file gets, then `format`.
fn parse_json_file(format: Format, scope: LayerSource, text: &str) -> String {
    let project = Path::new("/work/proj");
    parse(format, scope, &project.join("client.json"), project, text)
}

/// A Codex TOML file (first byte: `config.toml` in the user's, the project's or the
/// administrator's place, or `requirements.toml`; the rest: the file). What it gave, as text.
pub fn client_toml(data: &[u8]) -> String {
    let Some((&which, rest)) = data.split_first() else {
        return String::new();
    };
    let (format, scope) = TOML_FORMATS[usize::from(which) % TOML_FORMATS.len()];
    let text = String::from_utf8_lossy(rest);
    let project = Path::new("/work/proj");
    parse(format, scope, &project.join("config.toml"), project, &text)
}

/// The separator of the parts of a [`claude_plugin`] input.
pub const PLUGIN_PART: &[u8] = b"\n----\n";

/// Claude Code's plugins: `data` is `installed_plugins.json`, then its plugin's
/// `.claude-plugin/plugin.json` manifest and the `.mcp.json` at the plugin's root, separated by
/// [`PLUGIN_PART`]. `$ROOT` in the first part is the plugin's directory, which is `dir/plugin`
/// (its files written there first; `dir` must be a private directory of the caller's). What it
/// gave, as text.
pub fn claude_plugin(dir: &Path, data: &[u8]) -> String {
    let mut parts = split(data, PLUGIN_PART);
    let installed = parts.next().unwrap_or_default();
    let manifest = parts.next();
    let mcp_json = parts.next();
    let root = dir.join("plugin");
    let meta = root.join(".claude-plugin");
    std::fs::create_dir_all(&meta).expect("the plugin directory");
    for (path, part) in [
        (meta.join("plugin.json"), manifest),
        (root.join(".mcp.json"), mcp_json),
    ] {
        match part {
            Some(bytes) => std::fs::write(&path, bytes).expect("a plugin file"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let text = String::from_utf8_lossy(installed).replace("$ROOT", &root.to_string_lossy());
    let project = Path::new("/work/proj");
    parse(
        Format::ClaudePlugins,
        LayerSource::User,
        &dir.join("installed_plugins.json"),
        project,
        &text,
    )
}

/// `data` cut at each `separator`.
fn split<'a>(data: &'a [u8], separator: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(data);
    std::iter::from_fn(move || {
        let now = rest?;
        match now.windows(separator.len()).position(|w| w == separator) {
            Some(at) => {
                rest = Some(&now[at + separator.len()..]);
                Some(&now[..at])
            }
            None => {
                rest = None;
                Some(now)
            }
        }
    })
}

/// A language-server file (first byte: this host's `.lsp.json`, a Claude Code plugin's, or
/// Copilot CLI's `lsp-config.json`; the rest: the file) turned into this host's form and
/// parsed by the kernel, as the session reads it. The converted text (or why the file was
/// refused) and the kernel's parse, as text.
pub fn lsp_file(data: &[u8]) -> String {
    let Some((&which, rest)) = data.split_first() else {
        return String::new();
    };
    let format =
        [LspFormat::Own, LspFormat::ClaudePlugin, LspFormat::Copilot][usize::from(which) % 3];
    let text = String::from_utf8_lossy(rest);
    let Ok(Value::Object(top)) = parse_jsonc(&text) else {
        return String::new();
    };
    let convert = |errors: &mut Vec<String>| to_own(format, &top, errors);
    let (mut errors, mut again) = (Vec::new(), Vec::new());
    let converted = convert(&mut errors);
    assert_eq!(converted, convert(&mut again), "converted twice alike");
    assert_eq!(errors, again);
    let Ok(own) = converted else {
        return format!("{converted:?}");
    };
    let env: Object = vars()
        .into_iter()
        .map(|(k, v)| (k, Value::from(v)))
        .collect();
    let options = mcp_reconcile_kernel::lsp::LspParseOptions {
        env: Some(&env),
        expand: true,
        scope: Some(mcp_reconcile_kernel::lsp::LspScope::Project),
        project_root: Some("/work/proj"),
    };
    let parsed = mcp_reconcile_kernel::lsp::lsp_json_from_value(&own, options);
    for entry in parsed.servers.values() {
        check_json(&Value::Object(entry.clone()));
    }
    let own = Value::Object(own).to_json();
    format!("{own}\n{errors:?}\n{parsed:?}")
}
