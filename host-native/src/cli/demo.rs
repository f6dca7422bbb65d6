//! `watch --demo`: a small project that needs nothing from the user.
//!
//! Writes, in a fresh temporary directory, user settings with two fixture
//! servers and a project `.mcp.json` with a third that needs approval, and
//! says which file to edit to see an incremental reconcile. When the JSON
//! language server of the test setup is present (or on PATH), the user's
//! language-server file runs it too, to show a settings edit applied live.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Parser;
use serde_json::json;

use super::args::LayerFlags;

/// The demo's files and the flags that point at them.
pub struct Demo {
    /// Flags for every command (`watch`, `status`, `approve` …).
    pub flags: LayerFlags,
    /// What to tell the user.
    pub instructions: String,
    /// The demo directory.
    pub dir: PathBuf,
}

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    flags: LayerFlags,
}

/// The fixture server shipped next to this binary.
///
/// # Errors
/// It was not built.
pub fn fixture_server() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    for candidate in [
        dir.join("mcp-fixture-server"),
        dir.join("../mcp-fixture-server"),
    ] {
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "the demo needs the fixture server next to this binary ({}); build it with `cargo build -p mcp-reconcile-fixture`",
        dir.display()
    )
}

/// Writes the demo project.
///
/// # Errors
/// The fixture server is missing or the files cannot be written.
pub fn write_demo() -> anyhow::Result<Demo> {
    let fixture = fixture_server()?;
    let fixture = fixture.to_string_lossy().into_owned();
    let dir = std::env::temp_dir().join(format!("mcp-reconcile-demo-{}", std::process::id()));
    let project = dir.join("project");
    std::fs::create_dir_all(&project).with_context(|| format!("creating {}", project.display()))?;
    let user = dir.join("user-settings.json");
    let server = |name: &str, tools: &str| json!({"command": fixture, "args": ["--name", name, "--tools", tools]});
    let settings = json!({"mcpServers": {
        "notes": server("notes", "echo,add"),
        "clock": server("clock", "pid,sleep"),
    }});
    write(&user, &settings)?;
    let mcp_json = json!({"mcpServers": {
        "project-tools": {"command": fixture, "args": ["--name", "project-tools", "--tools", "echo", "--prompts", "greet"]},
    }});
    write(&project.join(".mcp.json"), &mcp_json)?;
    let approvals = dir.join("approvals.json");
    let state = dir.join("state");
    let user_lsp = dir.join("lsp.json");
    let json_server = json_language_server();
    let lsp = match &json_server {
        Some(command) => json!({"json": {
            "command": command.to_string_lossy(),
            "args": ["--stdio"],
            "extensionToLanguage": {".json": "json"},
            "settings": {"json": {"validate": {"enable": true}}},
        }}),
        None => json!({}),
    };
    write(&user_lsp, &lsp)?;
    let lsp_approvals = dir.join("lsp-approvals.json");
    let args = [
        "--user-lsp",
        &user_lsp.to_string_lossy(),
        "--lsp-approvals",
        &lsp_approvals.to_string_lossy(),
        "--user-settings",
        &user.to_string_lossy(),
        "--project",
        &project.to_string_lossy(),
        "--approvals",
        &approvals.to_string_lossy(),
        "--state-dir",
        &state.to_string_lossy(),
    ]
    .map(str::to_owned);
    let flags =
        Wrap::try_parse_from(std::iter::once("demo".to_owned()).chain(args.iter().cloned()))
            .context("building the demo flags")?
            .flags;
    let same = args.join(" ");
    // The binary as the user can run it from another terminal, even when it
    // is not on PATH (e.g. started with `cargo run`).
    let exe = std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "mcp-reconcile".to_owned());
    let lsp_lines = match &json_server {
        Some(_) => format!(
            "\x20 json (language server) from {lsp}\n",
            lsp = user_lsp.display()
        ),
        None => String::new(),
    };
    let lsp_try = match &json_server {
        Some(_) => format!(
            "\x20 4. edit {lsp}: set \"enable\" to false — the JSON language server gets the new \
             settings pushed, same process (`status` counts the pushes)\n",
            lsp = user_lsp.display()
        ),
        None => String::new(),
    };
    let instructions = format!(
        "Demo project in {dir}\n\
         \x20 notes, clock          from {user}\n\
         \x20 project-tools         from {mcp} (needs approval)\n\
         {lsp_lines}\
         Try, in another terminal:\n\
         \x20 1. edit {user}: change \"echo,add\" to \"echo,add,sleep\" — only `notes` reconnects\n\
         \x20 2. {exe} approve project-tools {same}\n\
         \x20 3. {exe} status {same}\n\
         {lsp_try}\
         Ctrl-C stops every server.\n",
        dir = dir.display(),
        user = user.display(),
        mcp = project.join(".mcp.json").display(),
    );
    Ok(Demo {
        flags,
        instructions,
        dir,
    })
}

/// `vscode-json-language-server`: the test setup's (`node_modules/.bin` of the checkout this
/// binary was built in), else one on PATH.
fn json_language_server() -> Option<PathBuf> {
    const NAME: &str = "vscode-json-language-server";
    let exe = std::env::current_exe().ok()?;
    let built = exe
        .ancestors()
        .skip(1)
        .map(|dir| dir.join("node_modules/.bin").join(NAME))
        .find(|candidate| candidate.is_file());
    built.or_else(|| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(NAME))
                .find(|candidate| candidate.is_file())
        })
    })
}

fn write(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("rendering demo settings")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
