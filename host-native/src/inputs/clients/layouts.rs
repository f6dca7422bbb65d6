//! Which files each client layout reads, at that client's real default locations, and in
//! which layer (SPEC §15: scopes follow the client).

use std::path::{Path, PathBuf};

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
    let home = |what: &str| env.home(what).map(Path::to_path_buf);
    let file = ClientFile::new;
    Ok(match layout {
        Layout::Claude => {
            // `CLAUDE_CONFIG_DIR` moves both the settings and the state file.
            let (config_dir, state) = claude_home(env, "Claude Code's files")?;
            let managed_settings = managed_settings
                .unwrap_or_else(|| PathBuf::from("/etc/claude-code/managed-settings.json"));
            let managed = managed_settings
                .parent()
                .map_or_else(|| PathBuf::from("/etc/claude-code"), Path::to_path_buf);
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
                        file(
                            Format::ClaudeMcpJson,
                            LayerSource::Project,
                            dir.join(".mcp.json"),
                        )
                    }),
            )
            .collect()
        }
        Layout::Cursor => vec![
            file(
                Format::Cursor,
                LayerSource::User,
                home("Cursor's mcp.json")?.join(".cursor/mcp.json"),
            ),
            file(
                Format::Cursor,
                LayerSource::Project,
                project.join(".cursor/mcp.json"),
            ),
        ],
        Layout::Vscode => {
            let config = match env.var("XDG_CONFIG_HOME").map(PathBuf::from) {
                Some(dir) if dir.is_absolute() => dir,
                _ => home("VS Code's user mcp.json")?.join(".config"),
            };
            vec![
                file(
                    Format::Vscode,
                    LayerSource::User,
                    config.join("Code/User/mcp.json"),
                ),
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
            project_file.needs_trust = true;
            vec![
                file(
                    Format::Codex,
                    LayerSource::User,
                    codex_home.join("config.toml"),
                ),
                project_file,
            ]
        }
        Layout::Copilot => vec![file(
            Format::Copilot,
            LayerSource::User,
            copilot_home(env)?.join("mcp-config.json"),
        )],
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
