//! Which of Claude Code's installed plugins count: `enabledPlugins` merged over the settings
//! files (user, project, local, managed; the later wins; `true` or a list turns a plugin on),
//! and in which layer — a plugin turned on by the user's or the administrator's file is the
//! user's, one turned on only by a project's settings file is the project's (gated). A plugin
//! server that runs what the user configured by hand is dropped, as Claude Code drops it.

use std::collections::BTreeMap;

use mcp_reconcile_kernel::lsp::LspScope;
use mcp_reconcile_kernel::{LayerSource, Object, Servers, Value};

use super::{ClientContent, ClientFile};

/// Puts the servers of the enabled plugins into their file's layers: merged `enabledPlugins`
/// over `contents` in file order (the later file wins); a plugin turned on by a
/// project-controlled file only is the project's (gated).
pub(super) fn enable(contents: &mut [(&ClientFile, ClientContent)]) {
    let mut enabled: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    for (file, content) in contents.iter() {
        for (id, on) in &content.enabled_plugins {
            enabled.insert(id.clone(), (*on, file.kind.project_controlled()));
        }
    }
    // What the user configured by hand: a plugin server that would run the same thing is
    // dropped, as Claude Code drops it.
    let by_hand: BTreeMap<String, String> = contents
        .iter()
        .flat_map(|(_, content)| &content.layers)
        .flat_map(|(_, used, _)| used.iter())
        .filter_map(|(name, config)| Some((identity(config)?, name.clone())))
        .collect();
    for (_, content) in contents.iter_mut() {
        let mut layers: [(LayerSource, Servers, Servers); 2] = [
            (LayerSource::User, Servers::new(), Servers::new()),
            (LayerSource::Project, Servers::new(), Servers::new()),
        ];
        let mut lsp = [
            (LspScope::User, Object::new(), Object::new()),
            (LspScope::Project, Object::new(), Object::new()),
        ];
        for plugin in std::mem::take(&mut content.plugins) {
            let Some((true, by_project)) = enabled.get(&plugin.id).copied() else {
                continue;
            };
            let layer = &mut layers[usize::from(by_project)];
            for (name, config) in plugin.used {
                let duplicate = identity(&config).and_then(|id| by_hand.get(&id));
                if let Some(other) = duplicate {
                    content.entry_errors.push(format!(
                        "plugin server \"{name}\" is not started: it runs the same as \"{other}\", \
                         which you configured yourself (Claude Code drops it too)"
                    ));
                    continue;
                }
                if let Some(written) = plugin.written.get(&name) {
                    layer.2.insert(name.clone(), written.clone());
                }
                layer.1.insert(name, config);
            }
            let lsp = &mut lsp[usize::from(by_project)];
            lsp.1.extend(plugin.lsp);
            lsp.2.extend(plugin.lsp_written);
        }
        content
            .lsp
            .extend(lsp.into_iter().filter(|(_, used, _)| !used.is_empty()));
        content.layers.extend(
            layers
                .into_iter()
                .filter(|(_, used, written)| !used.is_empty() || !written.is_empty()),
        );
    }
}

/// What a server runs, environment aside, as Claude Code compares a plugin's server with the
/// user's: the command line of a stdio server, the URL of a remote one.
fn identity(config: &mcp_reconcile_kernel::ServerConfig) -> Option<String> {
    if let Some(command) = config.str_field("command") {
        let args = config.get("args").map(Value::to_json).unwrap_or_default();
        return Some(format!("stdio {command} {args}"));
    }
    ["httpUrl", "url"]
        .into_iter()
        .find_map(|key| config.str_field(key))
        .map(|url| format!("url {url}"))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::claude_plugins::Plugin;
    use super::*;
    use crate::inputs::object;

    #[test]
    fn the_later_settings_file_decides_and_a_projects_switch_gates() {
        let file = |scope| {
            ClientFile::new(
                super::super::Format::ClaudeSettings { managed: false },
                scope,
                PathBuf::from("/s"),
            )
        };
        let plugins_file = ClientFile::new(
            super::super::Format::ClaudePlugins,
            LayerSource::User,
            PathBuf::from("/i"),
        );
        let (user, project, local) = (
            file(LayerSource::User),
            file(LayerSource::Project),
            file(LayerSource::Project),
        );
        let switches = |list: &str| ClientContent {
            enabled_plugins: super::super::claude::enabled_plugins(&object(list)),
            ..ClientContent::default()
        };
        let plugin = |id: &str| Plugin {
            id: id.to_owned(),
            used: crate::inputs::clients::tests::servers(&[&format!("plugin:{id}:s")]),
            written: Servers::new(),
            lsp: Object::new(),
            lsp_written: Object::new(),
        };
        let mut contents = vec![
            (
                &plugins_file,
                ClientContent {
                    plugins: vec![
                        plugin("mine"),
                        plugin("repo"),
                        plugin("off"),
                        plugin("unset"),
                    ],
                    ..ClientContent::default()
                },
            ),
            (
                &user,
                switches(r#"{"enabledPlugins":{"mine":true,"off":true,"repo":false}}"#),
            ),
            (
                &project,
                switches(r#"{"enabledPlugins":{"repo":["x"],"bad":"yes"}}"#),
            ),
            (&local, switches(r#"{"enabledPlugins":{"off":false}}"#)),
        ];
        enable(&mut contents);
        let layers: Vec<(LayerSource, Vec<&String>)> = contents[0]
            .1
            .layers
            .iter()
            .map(|(source, used, _)| (*source, used.keys().collect()))
            .collect();
        assert_eq!(
            layers,
            [
                (LayerSource::User, vec![&"plugin:mine:s".to_owned()]),
                (LayerSource::Project, vec![&"plugin:repo:s".to_owned()]),
            ]
        );
    }

    #[test]
    fn a_plugin_server_that_runs_what_the_user_configured_is_dropped() {
        let plugins_file = ClientFile::new(
            super::super::Format::ClaudePlugins,
            LayerSource::User,
            PathBuf::from("/i"),
        );
        let state = ClientFile::new(
            super::super::Format::ClaudeState,
            LayerSource::User,
            PathBuf::from("/s"),
        );
        let config =
            |json: &str| mcp_reconcile_kernel::ServerConfig::from_json(json).expect("config");
        let mut mine = Servers::new();
        mine.insert("mine".into(), config(r#"{"command":"gh","args":["mcp"]}"#));
        let mut plugin_servers = Servers::new();
        plugin_servers.insert(
            "plugin:gh:gh".into(),
            config(r#"{"command":"gh","args":["mcp"],"env":{"CLAUDE_PLUGIN_ROOT":"/r"}}"#),
        );
        plugin_servers.insert(
            "plugin:gh:other".into(),
            config(r#"{"command":"gh","args":["other"]}"#),
        );
        let mut contents = vec![
            (
                &plugins_file,
                ClientContent {
                    plugins: vec![Plugin {
                        id: "gh@m".into(),
                        used: plugin_servers,
                        ..Plugin::default()
                    }],
                    enabled_plugins: vec![("gh@m".into(), true)],
                    ..ClientContent::default()
                },
            ),
            (
                &state,
                ClientContent {
                    layers: vec![(LayerSource::User, mine.clone(), mine)],
                    ..ClientContent::default()
                },
            ),
        ];
        enable(&mut contents);
        let names: Vec<&String> = contents[0].1.layers[0].1.keys().collect();
        assert_eq!(names, ["plugin:gh:other"]);
        assert!(
            contents[0].1.entry_errors[0].contains("\"mine\""),
            "{:?}",
            contents[0].1.entry_errors
        );
    }
}
