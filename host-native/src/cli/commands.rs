//! The commands that talk to a running session or only read the files:
//! `status`, `approve` / `reject`, `plan`, `reconnect`, `auth`, `reload`, `eval`.

use std::io::{self, BufRead, Write};

use anyhow::{bail, Context};
use mcp_reconcile::display;
use mcp_reconcile::host::Host;
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::ipc::SessionRequest;
use mcp_reconcile::review::{quoted, ApprovalRequest};
use mcp_reconcile::status::{plan_json, report_json};
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::lsp::{lsp_approval_state, LspScope};
use mcp_reconcile_kernel::{assemble, Decision};
use serde_json::Value;

use super::args::{AuthArgs, DecideArgs, FlagsOnly, PlanArgs, ReconnectArgs, StatusArgs};
use super::client;
use super::print::{action_line_json, status_text, Known};

/// `reconnect`: asks the running session to restart one server (or all).
pub async fn reconnect(args: ReconnectArgs) -> anyhow::Result<()> {
    let inputs = Inputs::new(&args.layers.options())?;
    let name = if args.all { None } else { args.name };
    let names = client::require(&inputs, &SessionRequest::Reconnect { name }).await?;
    outln!("reconnecting {}", join_names(&names));
    Ok(())
}

/// `auth`: the interactive OAuth login of one streamable-HTTP server (or `--logout`), then a
/// running session reconnects only that server. Refuses a server that is not admitted (a
/// project entry waiting for approval, excluded, not allowed): its URL is not contacted.
pub async fn auth(args: AuthArgs) -> anyhow::Result<()> {
    use mcp_reconcile::auth::{self, OAuthEntry};
    let mut inputs = Inputs::new(&args.layers.options())?;
    let snapshot = inputs.load(None);
    let servers = assemble(&snapshot.layers).servers;
    let name = display::safe(&args.name).into_owned();
    let Some(config) = servers.get(&args.name) else {
        bail!("no configured server named \"{name}\"; run `mcp-reconcile status` to list them");
    };
    let gating = snapshot.gating_for(&servers);
    if let Some(reason) = mcp_reconcile_kernel::gating::unavailable_reason(
        &args.name,
        &servers,
        &gating,
        &[],
        Some((&snapshot.approvals, inputs.project_root())),
    ) {
        bail!(
            "server \"{name}\" is not admitted ({}); its URL is not contacted until it is",
            reason.as_str()
        );
    }
    let Some(url) = config.str_field("httpUrl").filter(|u| !u.is_empty()) else {
        bail!("server \"{name}\" has no `httpUrl`: OAuth is supported for streamable HTTP servers");
    };
    let entry = OAuthEntry::of(config);
    let masked = mcp_reconcile::redact::mask_url(url);
    let store = auth::token_store(Some(&inputs.paths().oauth_tokens), &args.name, url, &entry)?;
    if args.logout {
        use rmcp::transport::auth::CredentialStore;
        store
            .clear()
            .await
            .with_context(|| format!("cannot forget the tokens of server \"{name}\""))?;
        outln!(
            "forgot the tokens of server \"{name}\" ({})",
            display::safe(&masked)
        );
        return Ok(());
    }
    let project = std::path::Path::new(inputs.project_root());
    let logged_in = auth::login(store, url, &entry, Some(project), |auth_url| {
        outln!("Open this URL to authorize server \"{name}\":");
        outln!("{}", display::safe(auth_url));
        let _ = io::stdout().flush();
        if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
            let _ = std::process::Command::new(browser)
                .arg(auth_url)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
    })
    .await
    .with_context(|| {
        format!(
            "cannot authorize server \"{name}\" at {}",
            display::safe(&masked)
        )
    })?;
    let until = logged_in
        .expires
        .map(|at| format!(" until {}", httpdate(at)))
        .unwrap_or_default();
    outln!(
        "authorized server \"{name}\"{until}; tokens stored in {}",
        display::safe(&logged_in.path.display().to_string())
    );
    let request = SessionRequest::Reconnect {
        name: Some(args.name.clone()),
    };
    // The running session for these files: in its own process, else the daemon's.
    match client::ask(&inputs, &request).await {
        Ok(Some(_)) => outln!("reconnecting {name}"),
        Ok(None) => {}
        Err(e) => eprintln!("! the running session did not reconnect it: {e:#}"),
    }
    Ok(())
}

/// `at` as seconds since the epoch in UTC (`2026-12-03T06:10:00Z`).
fn httpdate(at: std::time::SystemTime) -> String {
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Howard Hinnant's days-to-civil: the proleptic Gregorian date of a day count since
/// 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `reload`: asks the running session to reload its files now.
pub async fn reload(args: FlagsOnly) -> anyhow::Result<()> {
    let inputs = Inputs::new(&args.layers.options())?;
    client::require(&inputs, &SessionRequest::Reload).await?;
    outln!("reload requested");
    Ok(())
}

fn join_names(value: &Value) -> String {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|name| mcp_reconcile::display::safe(name).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `status`: the running session's view, or what the files say when none
/// runs (nothing is started).
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    status_of(args.layers.options(), args.json).await
}

/// `status` of the files `options` name (`--json`: `json`).
///
/// # Errors
/// The files cannot be resolved.
pub async fn status_of(options: mcp_reconcile::inputs::Options, json: bool) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&options)?;
    let authorized = authorized_until(&mut inputs);
    let inputs_id = inputs.session_id();
    let inputs_dir = mcp_reconcile::daemon::socket_dir(inputs.env());
    let live = client::ask(&inputs, &SessionRequest::Status).await;
    let running = matches!(live, Ok(Some(_)));
    let (mut servers, errors) = match live {
        Ok(Some(report)) => (
            report
                .get("servers")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
            report
                .get("errors")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        ),
        // No running session (or it is unreachable): what the files say.
        _ => {
            let report = report_json(&Host::config_status(inputs));
            (report["servers"].clone(), report["errors"].clone())
        }
    };
    for server in servers.as_array_mut().into_iter().flatten() {
        let name = server.get("name").and_then(Value::as_str).unwrap_or("");
        if server.get("kind").and_then(Value::as_str) == Some("mcp") {
            if let Some(until) = authorized.get(name) {
                server["authorizedUntil"] = Value::String(until.clone());
            }
        }
    }
    let errors: Vec<String> = errors
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect();
    if json {
        outln!("{servers}");
        for error in &errors {
            eprintln!("! {}", display::safe_multiline(error));
        }
        return Ok(());
    }
    let servers = servers.as_array().cloned().unwrap_or_default();
    if !running && !servers.is_empty() {
        outln!(
            "no session runs for these files: this is what they say, and nothing is started \
             (\"disconnected\" until a session starts them)"
        );
    }
    out!("{}", status_text(&servers, &errors));
    out!("{}", daemon_sessions_text(&inputs_id, &inputs_dir).await);
    Ok(())
}

/// `status`'s last lines when the daemon runs sessions for these files: each session with the
/// servers it holds. Empty otherwise (or when the daemon cannot be asked).
async fn daemon_sessions_text(id: &str, dir: &std::path::Path) -> String {
    use mcp_reconcile::daemon::{bridge, DaemonRequest};
    use mcp_reconcile::ipc::Answer;
    let Ok(Some(Answer::Ok(status))) = bridge::ask(dir, &DaemonRequest::Status).await else {
        return String::new();
    };
    let mut out = String::new();
    let ours = mcp_reconcile::daemon::version::ours();
    if let Some(theirs) = status["version"].as_str().filter(|v| *v != ours) {
        out.push_str(&format!(
            "the daemon runs version {} (this binary: {ours})\n",
            display::safe(theirs)
        ));
    }
    for session in status["sessions"].as_array().into_iter().flatten() {
        if session["id"].as_str() != Some(id) {
            continue;
        }
        out.push_str(&format!(
            "daemon session {} ({} pid {}) holds: {}\n",
            display::safe(session["session"].as_str().unwrap_or_default()),
            display::safe(session["client"].as_str().unwrap_or_default()),
            session["pid"],
            join_names(&session["servers"]),
        ));
    }
    out
}

/// When the stored OAuth tokens of each configured streamable-HTTP server expire (a server
/// without tokens, or whose tokens say no expiry, is left out). Only the time is read from the
/// token file; no token leaves it.
fn authorized_until(inputs: &mut Inputs) -> std::collections::BTreeMap<String, String> {
    use mcp_reconcile::auth::{token_store, OAuthEntry};
    let snapshot = inputs.load(None);
    assemble(&snapshot.layers)
        .servers
        .iter()
        .filter_map(|(name, config)| {
            let url = config.str_field("httpUrl").filter(|u| !u.is_empty())?;
            let file = Some(&inputs.paths().oauth_tokens);
            let store = token_store(file, name, url, &OAuthEntry::of(config)).ok()?;
            let expires = store.expiry().ok().flatten()?;
            Some((name.clone(), httpdate(expires)))
        })
        .collect()
}

/// `approve` / `reject`: stores the decision for the named (or every
/// waiting) project-controlled server, after showing its review.
pub fn decide(args: DecideArgs, decision: Decision) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&args.layers.options())?;
    let snapshot = inputs.load(None);
    for error in &snapshot.errors {
        eprintln!("! {}", display::safe_multiline(&error.to_string()));
    }
    let servers = assemble(&snapshot.layers).servers;
    let root = inputs.project_root().to_owned();
    let undecided = |state: ApprovalState| match decision {
        Decision::Approved => state != ApprovalState::Approved,
        Decision::Rejected => state == ApprovalState::Pending,
    };
    // What is decided is exactly what is shown: one snapshot, read once.
    let requests: Vec<ApprovalRequest> = match &args.name {
        Some(name) if args.lsp => {
            let Some(entry) = snapshot.lsp.get(name) else {
                bail!("no configured language server named {}; run `mcp-reconcile status` with the same flags to list them", quoted(name));
            };
            if entry.scope != LspScope::Project {
                bail!(
                    "language server {} comes from your own language-server file, so it needs no approval",
                    quoted(name)
                );
            }
            ApprovalRequest::language_server(&snapshot, name)
                .into_iter()
                .collect()
        }
        Some(name) => {
            let Some(config) = servers.get(name) else {
                if snapshot.lsp.contains_key(name) {
                    bail!(
                        "{} is a language server; decide it with `--lsp`",
                        quoted(name)
                    );
                }
                bail!("no configured server named {}; run `mcp-reconcile status` with the same flags to list them", quoted(name));
            };
            if !config.is_gated() {
                bail!(
                    "{} does not come from a project-controlled file, so it needs no approval",
                    quoted(name)
                );
            }
            vec![ApprovalRequest::new(&snapshot, name, config)]
        }
        None => {
            let mcp = servers
                .iter()
                .filter(|(_, cfg)| cfg.is_gated())
                .filter(|(name, cfg)| undecided(snapshot.approvals.state(&root, name, cfg)))
                .map(|(name, config)| ApprovalRequest::new(&snapshot, name, config));
            let lsp = snapshot
                .lsp
                .iter()
                .filter(|(_, entry)| entry.scope == LspScope::Project)
                .filter(|(name, entry)| {
                    undecided(lsp_approval_state(
                        &snapshot.lsp_approvals,
                        &root,
                        name,
                        &entry.config,
                    ))
                })
                .filter_map(|(name, _)| ApprovalRequest::language_server(&snapshot, name));
            mcp.chain(lsp).collect()
        }
    };
    if requests.is_empty() {
        outln!("nothing to decide: no project-controlled server is waiting");
        return Ok(());
    }
    let verb = match decision {
        Decision::Approved => "approved",
        Decision::Rejected => "rejected",
    };
    if let Some(expected) = &args.hash {
        for request in &requests {
            if !request.hash.eq_ignore_ascii_case(expected.trim()) {
                out!("{}", request.review());
                bail!(
                    "{} changed since it was reviewed: its entry now hashes to {}, not {} — nothing was {verb}; review the entry above and run the command again with the new hash",
                    quoted(&request.name),
                    request.hash,
                    display::safe(expected)
                );
            }
        }
    }
    for request in requests {
        out!("{}", request.review());
        let store = if request.lsp {
            inputs.lsp_approvals_store()
        } else {
            inputs.approvals_store()
        };
        store
            .decide_hash(&root, &request.name, &request.hash, decision)
            .with_context(|| format!("storing the decision for {}", quoted(&request.name)))?;
        outln!("{verb} {} (hash {})", quoted(&request.name), request.hash);
    }
    Ok(())
}

/// `plan`: what a reconcile would do now (from the running session, or from
/// nothing when none runs).
pub async fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&args.layers.options())?;
    let live = client::ask(&inputs, &SessionRequest::Plan).await?;
    // The approvals file is what the session reads too: its rejected servers, which the
    // kernel's plan calls pending.
    let rejected = if args.json {
        Vec::new()
    } else {
        let snapshot = inputs.load(None);
        snapshot.rejected(&snapshot.assembled().servers)
    };
    let plan = match live {
        Some(plan) => plan,
        None => plan_json(&Host::config_plan(inputs).map_err(anyhow::Error::msg)?),
    };
    if args.json {
        outln!("{plan}");
        return Ok(());
    }
    let actions = plan
        .get("actions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for action in &actions {
        let known = Known {
            rejected: &rejected,
            ..Known::default()
        };
        outln!("{}", action_line_json(action, known));
    }
    Ok(())
}

/// One response line per request line, flushed per line so a driving process
/// can talk to it interactively. Blank lines are skipped.
pub fn eval(input: impl BufRead, mut output: impl Write) -> anyhow::Result<()> {
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

/// Whether the command line is `--version` (or `-V`) alone.
pub fn asks_version() -> bool {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    matches!(args.as_slice(), [one] if one == "--version" || one == "-V")
}

/// `--version`: this binary's version, and the running daemon's when it differs (it retires
/// when the next session of a newer binary attaches).
pub async fn version() -> anyhow::Result<()> {
    use mcp_reconcile::daemon::{bridge, socket_dir, DaemonRequest};
    use mcp_reconcile::ipc::Answer;
    let ours = mcp_reconcile::daemon::version::ours();
    outln!("mcp-reconcile {ours}");
    let env = mcp_reconcile::inputs::HostEnv::from_process()?;
    let dir = socket_dir(&env);
    let asked = bridge::ask(&dir, &DaemonRequest::Status);
    if let Ok(Ok(Some(Answer::Ok(status)))) =
        tokio::time::timeout(std::time::Duration::from_secs(2), asked).await
    {
        match status["version"].as_str() {
            Some(theirs) if theirs == ours => {}
            Some(theirs) => outln!(
                "daemon {} (pid {}): retires when the next session of this version starts",
                display::safe(theirs),
                status["pid"]
            ),
            None => outln!("daemon of an older version (pid {})", status["pid"]),
        }
    }
    Ok(())
}

/// `daemon --status`: the running daemon's sessions (the servers each holds) and its
/// connections (state, pid, holders), or that none runs.
pub async fn daemon_status(dir: &std::path::Path, json: bool) -> anyhow::Result<()> {
    use mcp_reconcile::daemon::{bridge, DaemonRequest};
    let Some(answer) = bridge::ask(dir, &DaemonRequest::Status).await? else {
        outln!(
            "no mcp-reconcile daemon runs (looked in {})",
            display::safe(&dir.display().to_string())
        );
        return Ok(());
    };
    let ok = answer
        .into_result()
        .map_err(anyhow::Error::msg)?
        .unwrap_or(Value::Null);
    if json {
        outln!("{ok}");
        return Ok(());
    }
    let text = |v: &Value| {
        display::safe(&v.as_str().map_or_else(|| v.to_string(), str::to_owned)).into_owned()
    };
    let ours = mcp_reconcile::daemon::version::ours();
    match ok["version"].as_str() {
        Some(theirs) if theirs != ours => outln!(
            "daemon pid {}, version {} (this binary: {ours})",
            ok["pid"],
            text(&ok["version"])
        ),
        Some(_) => outln!("daemon pid {}, version {ours}", ok["pid"]),
        None => outln!("daemon pid {} (an older version)", ok["pid"]),
    }
    for session in ok["sessions"].as_array().into_iter().flatten() {
        outln!(
            "session {} ({} pid {}) in {}: {}",
            text(&session["session"]),
            text(&session["client"]),
            session["pid"],
            text(&session["project"]),
            join_names(&session["servers"]),
        );
    }
    for conn in ok["connections"].as_array().into_iter().flatten() {
        let holders = join_names(&conn["holders"]);
        let held = if conn["draining"] == Value::Bool(true) {
            "draining".to_owned()
        } else {
            format!("held by {holders}")
        };
        outln!(
            "server {} {} pid {} {held}",
            text(&conn["server"]),
            text(&conn["state"]),
            conn["pid"],
        );
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
