//! The table of clients: one [`ClientSpec`] per `--layout` (this host's own files and each
//! client's), holding everything that differs per client. Each client's entry lives in its own
//! file beside its parser (`claude.rs`, `opencode/`, `kiro.rs`, …); [`CLIENTS`] lists them,
//! and the command line (`--layout`, `install`, `uninstall`), their `--help`, the install
//! code and the `docs/CLIENTS.md` check all read this list, so a new client is its file, its
//! `mod` line and one line here.

use serde::{Deserialize, Deserializer};

use super::spec::{ClientSpec, Layout};

/// Every layout, in `--help` order: this host's own files first, then each client's.
pub static CLIENTS: &[&ClientSpec] = &[
    &DEFAULT,
    &super::qwen::SPEC,
    &super::gemini::SPEC,
    &super::claude::SPEC,
    &super::cursor::SPEC,
    &super::vscode::SPEC,
    &super::codex::SPEC,
    &super::copilot::SPEC,
    &super::kiro::SPEC,
    &super::cline::SPEC,
    &super::windsurf::SPEC,
    &super::junie::SPEC,
    &super::crush::SPEC,
    &super::zed::SPEC,
    &super::goose::SPEC,
    &super::opencode::SPEC,
    &super::roo::SPEC,
];

/// This host's own files under XDG directories.
static DEFAULT: ClientSpec = ClientSpec {
    name: "default",
    title: "mcp-reconcile",
    about: "mcp-reconcile's own files under XDG directories",
    help: "\
$XDG_CONFIG_HOME/mcp-reconcile/settings.json (user), <project>/.mcp-reconcile/settings.json
(workspace), /etc/mcp-reconcile/settings.json and system-defaults.json, <project>/.mcp.json;
approvals.json, lsp.json (user language servers), lsp-approvals.json and oauth-tokens.json in
$XDG_CONFIG_HOME/mcp-reconcile/; <project>/.lsp.json",
    reads_client_files: false,
    reads_mcp_json: true,
    project_servers: ".mcp.json",
    ..ClientSpec::CLIENT
};

impl Layout {
    /// mcp-reconcile's own files (the default).
    pub const DEFAULT: Layout = Layout(&DEFAULT);
    /// qwen-code's files.
    pub const QWEN: Layout = Layout(&super::qwen::SPEC);
    /// Gemini CLI's files (its settings semantics differ in places: `inputs::build`).
    pub const GEMINI: Layout = Layout(&super::gemini::SPEC);
    /// Claude Code's files.
    pub const CLAUDE: Layout = Layout(&super::claude::SPEC);
    /// Codex's files.
    pub const CODEX: Layout = Layout(&super::codex::SPEC);

    /// The layout of that name, if the table has one.
    pub fn named(name: &str) -> Option<Layout> {
        CLIENTS.iter().find(|c| c.name == name).map(|c| Layout(c))
    }

    /// Every layout, in `--help` order.
    pub fn all() -> impl Iterator<Item = Layout> {
        CLIENTS.iter().map(|c| Layout(c))
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout::DEFAULT
    }
}

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Layout::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown layout {name:?}")))
    }
}

/// `--layout`'s long help: what the flag does and every layout's files, from [`CLIENTS`].
pub fn layout_help() -> String {
    let mut help = String::from(
        "Which default files to read; an explicit flag overrides its own one \
         (--user-settings, --approvals, ...).\n",
    );
    for client in CLIENTS {
        help.push_str(&format!("\n--layout {} ({}):\n", client.name, client.about));
        for line in client.help.lines() {
            help.push_str("  ");
            help.push_str(line);
            help.push('\n');
        }
    }
    help.push_str(
        "\nThe client layouts (all but default, qwen and gemini) read that client's own files \
         live (nothing is copied), with this host's approvals, language-server and token files \
         as in --layout default. $XDG_CONFIG_HOME defaults to ~/.config. Settings files are \
         JSON with comments; a missing file counts as {}.",
    );
    help
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the one list of clients: names are unique, each parses back to its own
    /// entry (as `--layout` and serialized options name it), and the help names every one.
    #[test]
    fn every_client_is_one_unique_table_entry_the_help_lists() {
        let mut names: Vec<&str> = CLIENTS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CLIENTS.len(), "a name is used twice");
        let help = layout_help();
        for layout in Layout::all() {
            assert_eq!(Layout::named(layout.as_str()), Some(layout));
            let json = serde_json::to_string(&layout).expect("serialize");
            assert_eq!(json, format!("\"{}\"", layout.as_str()));
            let back: Layout = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, layout);
            assert!(
                help.contains(&format!("--layout {} (", layout.as_str())),
                "{} missing from the help",
                layout.as_str()
            );
        }
        assert!(serde_json::from_str::<Layout>("\"nope\"").is_err());
        assert_eq!(Layout::default().as_str(), "default");
    }

    /// The clients whose row `docs/CLIENTS.md` does not have yet (each must really be missing,
    /// so the list cannot go stale).
    const UNDOCUMENTED: &[&str] = &[];

    /// `docs/CLIENTS.md`'s table has one row per client of the table (by its title) and no
    /// other, and its `install` column says yes exactly for the clients install knows.
    #[test]
    fn the_clients_doc_table_lists_exactly_the_tables_clients() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/CLIENTS.md"),
        )
        .expect("docs/CLIENTS.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .skip_while(|l| !l.starts_with("| client |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        assert!(!rows.is_empty(), "no client table in docs/CLIENTS.md");
        for row in &rows {
            let client = CLIENTS.iter().find(|c| c.title == row[0]);
            let client = client.unwrap_or_else(|| panic!("{} is not in CLIENTS", row[0]));
            assert_eq!(
                row[4].starts_with("yes"),
                client.install.is_some(),
                "the install column of {}",
                row[0]
            );
        }
        for client in CLIENTS.iter().filter(|c| c.name != "default") {
            let documented = rows.iter().any(|row| row[0] == client.title);
            assert_eq!(
                documented,
                !UNDOCUMENTED.contains(&client.name),
                "{}'s row in docs/CLIENTS.md",
                client.title
            );
        }
    }
}
