//! `watch --demo`: a small project that needs nothing from the user.
//!
//! Writes, in a fresh temporary directory, user settings with two fixture
//! servers and a project `.mcp.json` with a third that needs approval, and
//! says which file to edit to see an incremental reconcile.

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
    let args = [
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
    let instructions = format!(
        "Demo project in {dir}\n\
         \x20 notes, clock          from {user}\n\
         \x20 project-tools         from {mcp} (needs approval)\n\
         Try, in another terminal:\n\
         \x20 1. edit {user}: change \"echo,add\" to \"echo,add,sleep\" — only `notes` reconnects\n\
         \x20 2. {exe} approve project-tools {same}\n\
         \x20 3. {exe} status {same}\n\
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

fn write(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("rendering demo settings")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
