//! `mcp-reconcile`: apply MCP server configuration edits to a running session.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Keep MCP server connections equal to your settings files while a session
/// runs: only added, removed or changed servers are touched.
#[derive(Parser, Debug)]
#[command(name = "mcp-reconcile", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Answer kernel JSON requests: one request per stdin line, one response
    /// per stdout line (SPEC §10). Malformed lines get an error response.
    ///
    /// Example:
    ///   echo '{"op":"connectionId","name":"a","config":{"command":"x"}}' | mcp-reconcile eval
    Eval,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval => eval(io::stdin().lock(), io::stdout().lock()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-reconcile: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// One response line per request line, flushed per line so a driving process
/// can talk to it interactively. Blank lines are skipped.
fn eval(input: impl BufRead, mut output: impl Write) -> anyhow::Result<()> {
    for line in input.split(b'\n') {
        let line = line.context("reading a request from stdin")?;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        let response = mcp_reconcile_kernel::evaluate_str(text);
        match writeln!(output, "{response}").and_then(|()| output.flush()) {
            Ok(()) => {}
            // The reader went away (e.g. `| head`): stop quietly.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e).context("writing a response to stdout"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_answers_each_line_and_survives_garbage() {
        let input = b"{\"op\":\"connectionId\",\"name\":\"a\",\"config\":{\"command\":\"x\"}}\n\nnot json\n{\"op\":\"nope\"}\n";
        let mut out = Vec::new();
        eval(&input[..], &mut out).expect("eval runs");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("{\"ok\":\"a::"), "{}", lines[0]);
        assert!(
            lines[1].contains("\"kind\":\"invalid-json\""),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("\"kind\":\"unknown-op\""), "{}", lines[2]);
    }
}
