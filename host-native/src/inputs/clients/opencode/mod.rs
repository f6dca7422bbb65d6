//! OpenCode (`opencode`, 1.18.33): its `opencode.json` / `opencode.jsonc` files, read live at
//! the places and in the order OpenCode's config loader (`Config.loadInstanceState`) merges
//! them, later files winning a server's name:
//!
//! * the user's: `$XDG_CONFIG_HOME/opencode/` (`~/.config/opencode/`) `config.json`,
//!   `opencode.json`, `opencode.jsonc`; the file `$OPENCODE_CONFIG` names; `~/.opencode/` and
//!   `$OPENCODE_CONFIG_DIR` (`opencode.json`, `opencode.jsonc`);
//! * the project's (gated by this host's approvals: OpenCode has none of its own, SPEC §15):
//!   `opencode.json` / `opencode.jsonc` in every directory from the git worktree's top (`/`
//!   outside git) down to the project, the nearest winning, then the `.opencode/` directories
//!   on the same path (the workspace layer); none of them when
//!   `OPENCODE_DISABLE_PROJECT_CONFIG` is set, as in OpenCode;
//! * the administrator's: `/etc/opencode/opencode.json(c)` (moved beside
//!   `--system-settings FILE`), over everything.
//!
//! OpenCode merges files key by key; here a later file's entry replaces an earlier one of the
//! same name whole, except OpenCode's switch-only entry `{"enabled": false}`, which turns the
//! name off wherever it is defined. Entries: `entry`; variables: `vars`.

mod entry;
mod vars;

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::layouts::sidecar;
use super::spec::{ClientSpec, Editor};
use super::strategy::{How, Install};
use super::{ClientContent, ClientFile, Format, JsonFormat};
use crate::inputs::host_env::{xdg, HostEnv};

/// OpenCode's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "opencode",
    title: "OpenCode",
    about: "OpenCode's opencode.json files",
    help: "\
$XDG_CONFIG_HOME/opencode/{config.json,opencode.json,opencode.jsonc}, $OPENCODE_CONFIG,
~/.opencode/ and $OPENCODE_CONFIG_DIR (user); opencode.json(c) from the git top down to
<project>, then <project>/.opencode/ (gated; skipped under OPENCODE_DISABLE_PROJECT_CONFIG);
/etc/opencode/opencode.json(c) (administrator)",
    project_servers: "opencode.json",
    files,
    editor: Some(Editor::new(user_file, "mcp")),
    install: Some(Install {
        how: How::OpenCode,
        afterwards: AFTERWARDS,
        ..Install::EDITOR
    }),
    ..ClientSpec::CLIENT
};

/// What changes for an OpenCode user, after install.
const AFTERWARDS: &str =
    "OpenCode now starts only `reconcile`. Your servers moved, as written, to \
     mcp-reconcile.json beside your opencode.json: edit them there and the gateway applies each \
     edit live. Tools appear as reconcile_SERVER__TOOL. A server you add to opencode.json, and \
     the servers of a project's opencode.json, are started by OpenCode itself (it has no \
     approvals) until you run install again, which hands the user's over.";

/// The user's file install edits: `opencode.jsonc` when there is one (OpenCode reads it last,
/// so it wins), else `opencode.json` (what OpenCode itself creates).
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    let dir = config_dir(env)?;
    let jsonc = dir.join(NAMES[1]);
    Ok(if jsonc.exists() {
        jsonc
    } else {
        dir.join(NAMES[0])
    })
}

/// `$XDG_CONFIG_HOME/opencode` (`~/.config/opencode`).
fn config_dir(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(xdg(
        env,
        "XDG_CONFIG_HOME",
        &[".config"],
        "OpenCode's opencode.json",
    )?
    .join("opencode"))
}

/// OpenCode's `opencode.json(c)`: `{file:…}` is relative to the file, so the parser takes its
/// path.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "opencode",
    parse,
});

/// The two names OpenCode reads in a config directory, in its order (the second wins).
const NAMES: [&str; 2] = ["opencode.json", "opencode.jsonc"];

/// Every file, lowest precedence first within each layer kind.
fn files(
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    let file = |scope, path: PathBuf| ClientFile::editor(FORMAT, scope, path);
    let config = config_dir(env)?;
    let home = env.home("OpenCode's opencode.json")?;
    // The servers `install opencode` moved beside the user's file, first: OpenCode's own
    // files win a name.
    let mut out = vec![file(LayerSource::User, sidecar(&user_file(env)?))];
    out.extend(
        ["config.json", NAMES[0], NAMES[1]]
            .into_iter()
            .map(|name| file(LayerSource::User, config.join(name))),
    );
    let user_dirs = [
        Some(home.join(".opencode")),
        env.var("OPENCODE_CONFIG_DIR").map(PathBuf::from),
    ];
    if let Some(explicit) = env.var("OPENCODE_CONFIG") {
        out.push(file(LayerSource::User, env.absolute(Path::new(explicit))));
    }
    for dir in user_dirs.into_iter().flatten() {
        out.extend(NAMES.map(|name| file(LayerSource::User, dir.join(name))));
    }
    if !env
        .var("OPENCODE_DISABLE_PROJECT_CONFIG")
        .is_some_and(flag_on)
    {
        out.extend(project_files(project));
    }
    // The administrator's files: `/etc/opencode` (`--system-settings FILE` moves them beside
    // FILE).
    let etc = managed_settings
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("/etc/opencode"), Path::to_path_buf);
    out.extend(NAMES.map(|name| file(LayerSource::System, etc.join(name))));
    Ok(out)
}

/// OpenCode's boolean variables: `true` or `1`, any case.
fn flag_on(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "true" | "1")
}

/// The project's files: `opencode.json(c)` in each directory from the worktree's top down to
/// the project (nearest last, so it wins), then `.opencode/opencode.json(c)` in the same
/// directories nearest first (OpenCode's order: a parent's `.opencode` wins). A file above the
/// project is read only while no other user could have put it there.
fn project_files(project: &Path) -> Vec<ClientFile> {
    let top = project
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(Path::new("/"));
    let mut dirs: Vec<&Path> = project.ancestors().collect();
    if let Some(at) = dirs.iter().position(|dir| *dir == top) {
        dirs.truncate(at + 1);
    }
    let file = |scope, dir: &Path, path: PathBuf| {
        let mut f = ClientFile::editor(FORMAT, scope, path);
        f.kind.shared_parent = dir != project;
        f
    };
    let plain = dirs
        .iter()
        .rev()
        .flat_map(|dir| NAMES.map(|name| file(LayerSource::Project, dir, dir.join(name))));
    let hidden = dirs.iter().flat_map(|dir| {
        NAMES.map(|name| {
            file(
                LayerSource::Workspace,
                dir,
                dir.join(".opencode").join(name),
            )
        })
    });
    plain.chain(hidden).collect()
}

/// An OpenCode file: its `mcp` servers as one layer of kind `scope` (V1 `mcp.NAME` and V2
/// `mcp.servers.NAME`; a V1 entry wins a name both define, as OpenCode's compatibility step
/// decides), with the switched-off ones listed.
fn parse(top: &Object, path: &Path, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    let mut out = ClientContent::default();
    let dir = path.parent().unwrap_or(Path::new("/"));
    let at = vars::At { ctx, dir };
    match top.get("mcp") {
        None | Some(Value::Null) => {
            out.layers
                .push((scope, Default::default(), Default::default()))
        }
        Some(Value::Object(map)) => {
            let (used, written) = entry::all(map, &at, &mut out);
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "mcp must be an object of server entries, found {} — no servers are loaded from it",
            other.preview(60)
        )),
    }
    out
}

#[cfg(test)]
mod tests;
