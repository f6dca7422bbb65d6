//! Which files each client layout reads, at that client's real default locations, and in
//! which layer (SPEC §15: scopes follow the client).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use mcp_reconcile_kernel::LayerSource;

use super::{ClientFile, Format};
use crate::inputs::paths::{claude_home, codex_home, copilot_home, gemini_home, HostEnv, Layout};

/// The client files of `layout` (none for the layouts that read settings files).
/// `managed_settings` (`--system-settings`) moves Claude Code's administrator files:
/// `managed-settings.json` is that file and `managed-mcp.json` lies beside it.
///
/// # Errors
/// A default location needs the home directory and none is known.
pub(in crate::inputs) fn client_files(
    layout: Layout,
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    let file = ClientFile::new;
    Ok(match layout {
        Layout::Claude => {
            // `CLAUDE_CONFIG_DIR` moves both the settings and the state file.
            let (config_dir, state) = claude_home(env, "Claude Code's files")?;
            let managed_settings = managed_settings
                .unwrap_or_else(|| claude_managed_dir().join("managed-settings.json"));
            let managed = managed_settings
                .parent()
                .map_or_else(claude_managed_dir, Path::to_path_buf);
            let plugins = env.var("CLAUDE_CODE_PLUGIN_CACHE_DIR").map_or_else(
                || config_dir.join("plugins"),
                |dir| env.absolute(Path::new(dir)),
            );
            vec![
                file(
                    Format::ClaudeSettings { managed: false },
                    LayerSource::User,
                    config_dir.join("settings.json"),
                ),
                file(
                    Format::ClaudeSettings { managed: false },
                    LayerSource::Project,
                    project.join(".claude/settings.json"),
                ),
                file(
                    Format::ClaudeSettings { managed: false },
                    LayerSource::Project,
                    project.join(".claude/settings.local.json"),
                ),
                file(
                    Format::ClaudeSettings { managed: true },
                    LayerSource::System,
                    managed_settings,
                ),
                file(Format::ClaudeState, LayerSource::User, state),
                file(
                    Format::ClaudePlugins,
                    LayerSource::User,
                    plugins.join("installed_plugins.json"),
                ),
                file(
                    Format::ClaudeManaged,
                    LayerSource::System,
                    managed.join("managed-mcp.json"),
                ),
            ]
            .into_iter()
            // Every `.mcp.json` from the project up to (not including) `/`; the nearest wins.
            .chain(
                project
                    .ancestors()
                    .filter(|dir| dir.parent().is_some())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .map(|dir| {
                        let mut f = file(
                            Format::ClaudeMcpJson,
                            LayerSource::Project,
                            dir.join(".mcp.json"),
                        );
                        // One above the project may be another user's (`/tmp/.mcp.json`).
                        f.kind.shared_parent = dir != project;
                        f
                    }),
            )
            .collect()
        }
        Layout::Cursor => {
            let (user, _) = editor_user_file(layout, env)?.context("Cursor's file")?;
            vec![
                file(Format::Cursor, LayerSource::User, sidecar(&user)),
                file(Format::Cursor, LayerSource::User, user),
                file(
                    Format::Cursor,
                    LayerSource::Project,
                    project.join(".cursor/mcp.json"),
                ),
            ]
        }
        Layout::Vscode => {
            let (user, _) = editor_user_file(layout, env)?.context("VS Code's file")?;
            vec![
                file(Format::Vscode, LayerSource::User, sidecar(&user)),
                file(Format::Vscode, LayerSource::User, user),
                file(
                    Format::Vscode,
                    LayerSource::Project,
                    project.join(".vscode/mcp.json"),
                ),
            ]
        }
        Layout::Codex => {
            let codex_home = codex_home(env, "Codex's config.toml")?;
            let mut project_file = file(
                Format::Codex,
                LayerSource::Project,
                project.join(".codex/config.toml"),
            );
            project_file.kind.needs_trust = true;
            // The administrator's files: `/etc/codex` (`--system-settings FILE` moves them
            // beside FILE). Order matters: each file's entries merge over the earlier ones.
            let etc = managed_settings
                .as_deref()
                .and_then(Path::parent)
                .map_or_else(|| PathBuf::from("/etc/codex"), Path::to_path_buf);
            vec![
                file(
                    Format::Codex,
                    LayerSource::SystemDefaults,
                    etc.join("config.toml"),
                ),
                file(
                    Format::Codex,
                    LayerSource::User,
                    codex_home.join("config.toml"),
                ),
                project_file,
                file(
                    Format::Codex,
                    LayerSource::System,
                    etc.join("managed_config.toml"),
                ),
                file(
                    Format::CodexRequirements,
                    LayerSource::System,
                    etc.join("requirements.toml"),
                ),
            ]
        }
        Layout::Copilot => {
            let (user, _) = editor_user_file(layout, env)?.context("Copilot CLI's file")?;
            let mut files = vec![
                file(Format::Copilot, LayerSource::User, sidecar(&user)),
                file(Format::Copilot, LayerSource::User, user),
                file(
                    Format::CopilotConfig,
                    LayerSource::User,
                    copilot_home(env)?.join("config.json"),
                ),
            ];
            // The project's files, read only while Copilot CLI trusts the folder:
            // `.github/mcp.json` at the repository's root, then every `.mcp.json` from the
            // root down to the project (the nearest wins).
            let root = super::git_root(project)
                .map(|(root, _)| root)
                .filter(|root| project.starts_with(root))
                .unwrap_or_else(|| project.to_path_buf());
            let mut dirs: Vec<&Path> = project
                .ancestors()
                .take_while(|dir| dir.starts_with(&root))
                .collect();
            dirs.reverse();
            let project_file = |path: PathBuf| {
                let mut f = file(Format::Copilot, LayerSource::Project, path);
                f.kind.needs_trust = true;
                f
            };
            files.push(project_file(root.join(".github/mcp.json")));
            files.extend(dirs.into_iter().map(|dir| {
                let mut f = project_file(dir.join(".mcp.json"));
                f.kind.shared_parent = dir != project;
                f
            }));
            files
        }
        // Beside the settings files (read as this host's own): the folder trust and the
        // per-server switches.
        Layout::Gemini => {
            let dir = gemini_home(env, "Gemini CLI's files")?;
            let trust = env.var("GEMINI_CLI_TRUSTED_FOLDERS_PATH").map_or_else(
                || dir.join("trustedFolders.json"),
                |path| env.absolute(Path::new(path)),
            );
            vec![
                file(Format::GeminiTrust, LayerSource::User, trust),
                file(
                    Format::GeminiEnablement,
                    LayerSource::User,
                    dir.join("mcp-server-enablement.json"),
                ),
            ]
        }
        Layout::Default | Layout::Qwen => Vec::new(),
    })
}

/// The file `mcp-reconcile install` moves an editor's servers to: `mcp-reconcile.json` beside
/// the editor's user file (same format, read first, so the editor's own file wins a name).
pub(crate) fn sidecar(user_file: &Path) -> PathBuf {
    user_file.with_file_name(SIDECAR)
}

/// Where Claude Code's administrator files live: `/Library/Application Support/ClaudeCode` on
/// macOS, `/etc/claude-code` elsewhere.
fn claude_managed_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/ClaudeCode")
    } else {
        PathBuf::from("/etc/claude-code")
    }
}

/// VS Code's user directory: `~/Library/Application Support/Code/User` on macOS (VS Code does
/// not read `XDG_CONFIG_HOME` there), `$XDG_CONFIG_HOME/Code/User` (`~/.config`) elsewhere.
///
/// # Errors
/// The home directory is needed and unknown.
fn vscode_user_dir(env: &HostEnv) -> anyhow::Result<PathBuf> {
    let what = "VS Code's user mcp.json";
    if cfg!(target_os = "macos") {
        return Ok(env
            .home(what)?
            .join("Library/Application Support/Code/User"));
    }
    let config = match env.var("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => env.home(what)?.join(".config"),
    };
    Ok(config.join("Code/User"))
}

/// The name of [`sidecar`]'s file.
const SIDECAR: &str = "mcp-reconcile.json";

/// An editor's user file and the key its servers are under: Cursor's `~/.cursor/mcp.json`
/// (`mcpServers`), VS Code's `$XDG_CONFIG_HOME/Code/User/mcp.json` (`servers`), Copilot CLI's
/// `$COPILOT_HOME/mcp-config.json` (`mcpServers`); `None` for the other layouts.
///
/// # Errors
/// The home directory is needed and unknown.
pub(crate) fn editor_user_file(
    layout: Layout,
    env: &HostEnv,
) -> anyhow::Result<Option<(PathBuf, &'static str)>> {
    Ok(match layout {
        Layout::Cursor => Some((
            env.home("Cursor's mcp.json")?.join(".cursor/mcp.json"),
            "mcpServers",
        )),
        Layout::Vscode => Some((vscode_user_dir(env)?.join("mcp.json"), "servers")),
        Layout::Copilot => Some((copilot_home(env)?.join("mcp-config.json"), "mcpServers")),
        _ => None,
    })
}
