//! `watch` on a terminal: the question about a server that needs approval,
//! and the hint printed instead when nobody can be asked.

use std::io::{self, BufRead, Write};

use mcp_reconcile::review::{quoted, ApprovalRequest};

pub enum Answer {
    Approve,
    ApproveAll,
    Reject,
    Skip,
}

/// What `watch` (without a terminal) and `serve` print for a server that
/// waits: its review and the command that approves exactly that entry.
pub fn approval_hint(request: &ApprovalRequest) -> String {
    format!(
        "{}! {} needs approval (from a project file): run `{}` with the same flags to approve exactly this entry\n",
        request.review(),
        quoted(&request.name),
        request.approve_command()
    )
}

/// Asks on the terminal, after showing the review. Skip, Esc and end of
/// input store nothing.
pub async fn ask(request: &ApprovalRequest) -> Answer {
    print!("{}", request.review());
    print!("  [a]pprove, [r]eject, approve [A]ll, [s]kip? ");
    let _ = io::stdout().flush();
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    })
    .await
    .ok()
    .flatten();
    match line.as_deref().map(str::trim_end) {
        Some("a" | "approve" | "y" | "yes") => Answer::Approve,
        Some("A" | "all") => Answer::ApproveAll,
        Some("r" | "reject" | "n" | "no") => Answer::Reject,
        _ => Answer::Skip,
    }
}
