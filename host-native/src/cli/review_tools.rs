//! `mcp-reconcile review-tools NAME` (issue 40): the word diff of what pinning holds back of a
//! server, and accepting it. A command of its own rather than part of `approve`: `approve`
//! decides a project entry's config, this a server's tool definitions, of any scope; and like
//! `approve`, it is a person's act at a terminal — no MCP tool of the gateway does it.

use std::io::{self, BufRead, IsTerminal, Write};

use anyhow::bail;
use mcp_reconcile::display;
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::pins::review::{accept, review_text};
use mcp_reconcile::pins::{connection_key, pins_path, PinsStore};
use mcp_reconcile::review::quoted;
use mcp_reconcile_kernel::assemble;

use super::args::ReviewToolsArgs;

/// Shows the review of `args.name` and, on `--yes` or a `y` at the terminal, makes what it
/// showed the baseline (a running session re-reads the file and offers those items again).
pub fn review_tools(args: &ReviewToolsArgs) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&args.layers.options())?;
    let snapshot = inputs.load(None);
    let servers = assemble(&snapshot.layers).servers;
    let Some(config) = servers.get(&args.name) else {
        bail!(
            "no configured server named {}; run `mcp-reconcile status` with the same flags to list them",
            quoted(&args.name)
        );
    };
    let id = connection_key(&args.name, config);
    let store = PinsStore::new(pins_path(inputs.approvals_store().path()));
    let file = store.load().map_err(anyhow::Error::msg);
    let pinned = match &file {
        Ok(file) => file.servers.get(&id).cloned(),
        Err(e) => {
            eprintln!("! {}", display::safe_multiline(&e.to_string()));
            None
        }
    };
    let Some(pinned) = pinned.filter(|p| !p.pending.is_empty()) else {
        outln!(
            "nothing of {} waits for review: its tools and prompts are as approved",
            quoted(&args.name)
        );
        return Ok(());
    };
    out!("{}", display::safe_multiline(&review_text(&pinned)));
    if !args.yes && !ask_yes(&args.name)? {
        outln!(
            "nothing accepted; to accept exactly this, run: mcp-reconcile review-tools {} --yes",
            display::safe(&args.name)
        );
        return Ok(());
    }
    let shown = pinned.pending.clone();
    let mut accepted = 0;
    store.update(true, |file| {
        let entry = file
            .servers
            .entry(id.clone())
            .or_insert_with(|| pinned.clone());
        accepted = accept(entry, &shown);
        accepted > 0
    })?;
    outln!(
        "accepted {accepted} definition(s) of {} as the new baseline",
        quoted(&args.name)
    );
    Ok(())
}

/// Asks at a terminal whether to accept; `false` without one.
fn ask_yes(name: &str) -> anyhow::Result<bool> {
    if !io::stdin().is_terminal() {
        return Ok(false);
    }
    print!(
        "Accept these definitions of {} as approved? [y/N] ",
        quoted(name)
    );
    io::stdout().flush()?;
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}
