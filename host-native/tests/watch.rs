//! End-to-end: a real `mcp-reconcile watch` on a temp project with real
//! fixture servers, driven by real file edits and read through
//! `status --json` (the scenarios of issue 4, item 7).

use crate::common;

use std::fs;
use std::time::Duration;

use common::*;
use serde_json::json;

#[test]
fn only_the_added_removed_or_changed_server_is_touched() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo"),
        "c": p.server("c", "echo"),
    }}));
    let watch = p.watch();
    let s = p.wait_for("a, b, c connected", |s| all_connected(s, &["a", "b", "c"]));
    let (a, b, c) = (pid_of(&s, "a"), pid_of(&s, "b"), pid_of(&s, "c"));
    assert!(a.is_some() && b.is_some() && c.is_some(), "{s:#?}");

    // Change b's args: only b restarts, with its new tool list.
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo,add"),
        "c": p.server("c", "echo"),
    }}));
    let s = p.wait_for("b with two tools", |s| {
        s.iter()
            .any(|x| x["name"] == "b" && x["state"] == "connected" && x["tools"] == 2)
    });
    assert_eq!(pid_of(&s, "a"), a);
    assert_eq!(pid_of(&s, "c"), c);
    assert_ne!(pid_of(&s, "b"), b);
    // The old process is stopped in the background after its tools were purged.
    wait_until("the old b process to exit", || !alive(b.unwrap_or(0)));

    // Add d: nothing else restarts.
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo,add"),
        "c": p.server("c", "echo"),
        "d": p.server("d", "echo"),
    }}));
    let s = p.wait_for("d connected", |s| state_of(s, "d") == "connected");
    let b2 = pid_of(&s, "b");
    assert_eq!((pid_of(&s, "a"), pid_of(&s, "c")), (a, c));

    // Remove c: it stops; the others stay.
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "echo,add"),
        "d": p.server("d", "echo"),
    }}));
    let s = p.wait_for("c gone", |s| state_of(s, "c") == "absent");
    assert_eq!((pid_of(&s, "a"), pid_of(&s, "b")), (a, b2));
    assert_eq!(p.spawns("a"), 1);
    wait_until("the removed server's process to exit", || {
        !alive(c.unwrap_or(0))
    });
    watch.stop();
    assert!(!alive(a.unwrap_or(0)), "stopping watch stops every server");
}

#[test]
fn excluded_and_allowed_toggle_admission_live() {
    let p = Project::new();
    let servers = json!({"a": p.server("a", "echo"), "b": p.server("b", "echo")});
    p.write_settings(json!({"mcpServers": servers}));
    let _watch = p.watch();
    let s = p.wait_for("both connected", |s| all_connected(s, &["a", "b"]));
    let a = pid_of(&s, "a");

    p.write_settings(json!({"mcpServers": servers, "mcp": {"excluded": ["b"]}}));
    let s = p.wait_for("b excluded", |s| state_of(s, "b") == "skipped");
    let b = s
        .iter()
        .find(|x| x["name"] == "b")
        .cloned()
        .unwrap_or_default();
    assert_eq!(b["reason"], "excluded");
    assert_eq!(b["tools"], 0, "an excluded server's tools are purged");
    assert_eq!(pid_of(&s, "a"), a);

    p.write_settings(json!({"mcpServers": servers}));
    p.wait_for("b back", |s| state_of(s, "b") == "connected");

    p.write_settings(json!({"mcpServers": servers, "mcp": {"allowed": []}}));
    let s = p.wait_for("all down", |s| {
        s.iter()
            .all(|x| x["state"] == "skipped" && x["reason"] == "not_allowed")
    });
    assert_eq!(s.len(), 2);

    p.write_settings(json!({"mcpServers": servers}));
    p.wait_for("all back", |s| all_connected(s, &["a", "b"]));
}

#[test]
fn a_settings_edit_never_widens_the_launch_flag() {
    let p = Project::new();
    p.write_settings(
        json!({"mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")}}),
    );
    let watch = p.watch_with(&["--allowed-mcp-server-names", "a"]);
    let s = p.wait_for("a connected, b not allowed", |s| {
        state_of(s, "a") == "connected" && state_of(s, "b") == "skipped"
    });
    assert!(s
        .iter()
        .any(|x| x["name"] == "b" && x["reason"] == "not_allowed"));
    let before = watch.passes();
    p.write_settings(json!({
        "mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")},
        "mcp": {"allowed": ["a", "b"]},
    }));
    // Once the pass that read the edit has been applied, b must still be out.
    watch.wait_pass(before, "user settings");
    let s = p.status();
    assert_eq!(state_of(&s, "b"), "skipped", "{s:#?}");
    assert_eq!(p.spawns("b"), 0, "b was never spawned");
}

#[test]
fn a_project_server_waits_for_approval_and_asks_again_after_an_edit() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let watch = p.watch();
    let s = p.wait_for("a connected, proj pending", |s| {
        state_of(s, "a") == "connected" && state_of(s, "proj") == "skipped"
    });
    let proj = s
        .iter()
        .find(|x| x["name"] == "proj")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (proj["reason"].clone(), proj["approval"].clone()),
        (json!("pending_approval"), json!("pending"))
    );
    watch.wait_output("the approval hint", |o| o.contains("needs approval"));
    assert_eq!(p.spawns("proj"), 0, "a pending server is never spawned");

    // Reject from another process: it stays down.
    assert!(p.run(&["reject", "proj"]).status.success());
    p.wait_for("proj rejected", |s| {
        s.iter()
            .any(|x| x["name"] == "proj" && x["reason"] == "rejected")
    });
    assert_eq!(p.spawns("proj"), 0);

    // Approve from another process: it connects live.
    assert!(p.run(&["approve", "proj"]).status.success());
    p.wait_for("proj connected", |s| state_of(s, "proj") == "connected");
    assert_eq!(p.spawns("proj"), 1);

    // Edit its args: pending again, and torn down.
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo,add")}}),
    );
    p.wait_for("proj pending again", |s| {
        s.iter()
            .any(|x| x["name"] == "proj" && x["approval"] == "pending" && x["state"] == "skipped")
    });
    assert_eq!(
        p.spawns("proj"),
        1,
        "the edited config did not start before approval"
    );
}

/// The kernel's plan calls a rejected server `pending_approval` (it sees only the gating); the
/// lines a person reads say it was rejected, in `watch` and in `plan`.
#[test]
fn a_rejected_server_is_called_rejected_in_plan_lines() {
    let p = Project::new();
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let watch = p.watch();
    watch.wait_output("proj skipped as pending", |o| {
        o.contains("! skip proj (pending approval)")
    });
    assert!(p.run(&["approve", "proj"]).status.success());
    p.wait_for("proj connected", |s| state_of(s, "proj") == "connected");

    assert!(p.run(&["reject", "proj"]).status.success());
    watch.wait_output("proj disconnected as rejected", |o| {
        o.contains("- disconnect proj (rejected)")
    });
    let plan = p.run(&["plan"]);
    assert!(plan.status.success());
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.contains("! skip proj (rejected)"), "{plan}");
    let output = watch.stop();
    assert!(
        !output
            .lines()
            .skip_while(|l| !l.contains("(rejected)"))
            .any(|l| l.contains("proj (pending approval)")),
        "after the rejection no line calls proj pending: {output}"
    );
}

#[test]
fn an_untrusted_folder_starts_nothing() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch_with(&["--untrusted"]);
    p.wait_for("a skipped as untrusted", |s| {
        s.iter()
            .any(|x| x["name"] == "a" && x["reason"] == "untrusted_folder")
    });
    watch.wait_output("one pass", |o| o.contains("reconcile #1"));
    assert_eq!(p.spawns("a"), 0);
}

/// Ten saves 20 ms apart, inside a 600 ms quiet window, each unlike the one before and the
/// last (the only one with three tools) unlike every other; how many passes followed the start
/// pass once the session is idle again (each restarted a once: checked).
fn passes_for_a_burst_of_ten_saves(rename: bool) -> usize {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch_with(&[
        "--debounce-ms",
        "2000",
        "--quiet-ms",
        "600",
        "--events",
        "json",
    ]);
    p.wait_for("a connected", |s| state_of(s, "a") == "connected");
    wait_events(&watch, "idle after the start pass", |events| {
        idle_after(events, |plan| plan["trigger"] == "start").is_some()
    });
    // A save inside the quiet window after a pass started joins that pass's burst: begin the
    // burst after the start pass's window.
    std::thread::sleep(Duration::from_millis(700));
    for i in 0..10 {
        let tools = match i {
            9 => "echo,add,pid",
            _ if i % 2 == 0 => "echo,add",
            _ => "echo",
        };
        let settings = json!({"mcpServers": {"a": p.server("a", tools)}});
        if rename {
            p.write_settings(settings);
        } else {
            let text = serde_json::to_string_pretty(&settings).expect("json");
            std::fs::write(p.user_settings(), text).expect("write in place");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // What is tested is a quiet period: no further pass follows the one that applied the last
    // save. The session says when it is idle (nothing runs, is asked for or is pending).
    let events = wait_events(&watch, "idle after the last save applied", |events| {
        idle_after(events, applies_the_last_save).is_some()
    });
    let passes = idle_after(&events, applies_the_last_save).unwrap_or_default() - 1;
    let plans = events.iter().filter(|e| e["event"] == "plan").count();
    assert_eq!(plans - 1, passes, "every pass reported: {events:#?}");
    let s = p.status();
    assert!(
        s.iter().any(|x| x["name"] == "a" && x["tools"] == 3),
        "a runs the last save's config: {s:#?}"
    );
    assert_eq!(p.spawns("a"), 1 + passes, "one restart per pass");
    passes
}

/// Whether a `plan` event restarted `a` with the last save's three tools.
fn applies_the_last_save(plan: &serde_json::Value) -> bool {
    plan["steps"].as_array().into_iter().flatten().any(|step| {
        step["name"] == "a" && step["tools"]["after"].as_array().map(Vec::len) == Some(3)
    })
}

/// The pass count of the first `idle` event after the first `plan` event `plan` picks.
fn idle_after(
    events: &[serde_json::Value],
    plan: impl Fn(&serde_json::Value) -> bool,
) -> Option<usize> {
    let from = events
        .iter()
        .position(|e| e["event"] == "plan" && plan(e))?;
    events[from..]
        .iter()
        .find(|e| e["event"] == "idle")
        .and_then(|e| e["passes"].as_u64())
        .and_then(|n| usize::try_from(n).ok())
}

/// The `--events json` lines `watch` printed, once `done` holds for them.
fn wait_events(
    watch: &Watch,
    what: &str,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let events = |output: &str| -> Vec<serde_json::Value> {
        output
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    watch.wait_output(what, |o| done(&events(o)));
    events(&watch.output())
}

/// Saves in place (truncate, write, close) are whole at their close, as rename saves are on
/// arrival: one pass at the first save, one after the last.
#[test]
fn ten_saves_in_place_inside_the_quiet_window_make_one_pass_at_once_and_one_after() {
    assert_eq!(passes_for_a_burst_of_ten_saves(false), 2);
}

/// A session whose quiet window (60 s) and debounce (120 s) outlast the test's patience: only
/// a save known whole is applied within it.
fn patient_watch(p: &Project) -> Watch {
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch_with(&["--debounce-ms", "120000", "--quiet-ms", "60000"]);
    p.wait_for("a connected", |s| state_of(s, "a") == "connected");
    watch.wait_output("the start pass", |o| o.contains("reconcile #1"));
    watch
}

/// `a`'s new entry (two tools), as JSON text.
fn two_tools(p: &Project) -> String {
    serde_json::to_string(&json!({"mcpServers": {"a": p.server("a", "echo,add")}})).expect("json")
}

/// A write in place that its writer closed is as whole as a rename (inotify `IN_CLOSE_WRITE`):
/// it is applied at once, however long the quiet window.
#[test]
fn a_closed_write_in_place_is_applied_without_waiting_the_quiet_window() {
    let p = Project::new();
    let watch = patient_watch(&p);
    let before = watch.passes();
    fs::write(p.user_settings(), two_tools(&p)).expect("write in place");
    watch.wait_pass(before, "user settings");
    p.wait_for("a with two tools", |s| {
        s.iter()
            .any(|x| x["name"] == "a" && x["state"] == "connected" && x["tools"] == 2)
    });
}

/// A write in place whose writer still holds the file open is not applied, though what it
/// wrote so far parses (the writer may not be done); its close applies it.
#[test]
fn a_write_in_place_held_open_is_applied_only_once_closed() {
    let p = Project::new();
    let watch = patient_watch(&p);
    let before = watch.passes();
    let mut open = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(p.user_settings())
        .expect("open");
    std::io::Write::write_all(&mut open, two_tools(&p).as_bytes()).expect("write");
    // Absence can only be checked for a while: a slow machine makes this pass, never fail.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(watch.passes(), before, "applied while still open");
    drop(open);
    watch.wait_pass(before, "user settings");
    p.wait_for("a with two tools", |s| {
        s.iter()
            .any(|x| x["name"] == "a" && x["state"] == "connected" && x["tools"] == 2)
    });
}

/// A rename save is complete on arrival and applied at once; the saves that follow it inside
/// the quiet window wait for the burst to end: one pass at the first save, one after the last.
#[test]
fn ten_rename_saves_inside_the_quiet_window_make_one_pass_at_once_and_one_after() {
    assert_eq!(passes_for_a_burst_of_ten_saves(true), 2);
}

/// Settle detection: a file that does not parse yet holds the reload back (up to the
/// debounce); once it is complete the reload runs, and no pass ever reads the half-written file.
#[test]
fn a_half_written_file_is_never_read_by_a_pass() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch_with(&["--debounce-ms", "2000"]);
    p.wait_for("a connected", |s| state_of(s, "a") == "connected");
    watch.wait_output("the start pass", |o| o.contains("reconcile #1"));
    let before = watch.passes();
    // An in-place save in two writes: the first leaves invalid JSON behind for a moment.
    let full = serde_json::to_string(&json!({"mcpServers": {"a": p.server("a", "echo,add")}}))
        .expect("json");
    let (head, _) = full.split_at(full.len() / 2);
    std::fs::write(p.user_settings(), head).expect("write");
    // The writer pauses mid-save: the half file stays on disk for 12 settle windows (25 ms
    // each) — long enough that a session without settle detection would read it.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(p.user_settings(), &full).expect("write");
    watch.wait_output("the pass that restarted a", |o| o.contains("~ reconnect a"));
    p.wait_for("a reconnected", |s| {
        p.spawns("a") == 2 && state_of(s, "a") == "connected"
    });
    let log = watch.output();
    assert!(
        !log.contains("not valid JSON"),
        "a pass read the half-written file:\n{log}"
    );
    assert_eq!(watch.passes(), before + 1, "log:\n{log}");
}

#[test]
fn an_edit_during_a_reconcile_makes_exactly_one_follow_up() {
    let p = Project::new();
    // `slow` hangs in its handshake until its 2 s timeout: run #1 stays busy.
    let mut slow = p.server("slow", "echo");
    if let Some(args) = slow["args"].as_array_mut() {
        args.push(json!("--hang-handshake"));
    }
    slow["discoveryTimeoutMs"] = json!(2000);
    p.write_settings(json!({"mcpServers": {"slow": slow, "a": p.server("a", "echo")}}));
    let watch = p.watch();
    p.wait_for("run #1 busy with slow's handshake", |s| {
        state_of(s, "slow") == "connecting"
    });
    p.write_settings(json!({"mcpServers": {"slow": slow, "a": p.server("a", "echo"), "b": p.server("b", "echo")}}));
    p.wait_for("b connected", |s| state_of(s, "b") == "connected");
    // slow's first retry runs ~1 s after run #1 failed it, once no pass runs: a second
    // follow-up of the edit (whose debounce ran out long before) would have run before it.
    watch.wait_pass(0, "retry");
    let out = watch.output();
    let passes: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("reconcile #"))
        .take_while(|l| !l.contains("(retry)"))
        .collect();
    assert_eq!(
        passes.len(),
        2,
        "start pass plus exactly one follow-up; log:\n{out}"
    );
    assert!(passes[1].contains("(change in user settings)"), "{out}");
}

#[test]
fn a_half_written_settings_file_tears_nothing_down() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch();
    let s = p.wait_for("a connected", |s| state_of(s, "a") == "connected");
    let a = pid_of(&s, "a");
    let before = watch.passes();
    fs::write(p.user_settings(), "{\"mcpServers\": {\"a\": ").expect("write");
    // Held back while it does not parse, then read once the debounce runs out.
    watch.wait_pass(before, "user settings");
    let out = p.run(&["status", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("user-settings.json"),
        "the broken file is named: {stderr}"
    );
    let s = p.status();
    assert_eq!(
        (state_of(&s, "a"), pid_of(&s, "a")),
        ("connected".to_owned(), a)
    );
    p.write_settings(
        json!({"mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")}}),
    );
    let s = p.wait_for("b connected", |s| state_of(s, "b") == "connected");
    assert_eq!(pid_of(&s, "a"), a);
}

#[test]
fn status_without_a_session_spawns_nothing_and_reports_broken_files() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let s = p.status();
    assert_eq!(state_of(&s, "a"), "disconnected");
    let proj = s
        .iter()
        .find(|x| x["name"] == "proj")
        .cloned()
        .unwrap_or_default();
    assert_eq!(proj["approval"], "pending");
    assert_eq!((p.spawns("a"), p.spawns("proj")), (0, 0));
    fs::write(p.user_settings(), "{ nope").expect("write");
    let out = p.run(&["status", "--json"]);
    assert!(
        out.status.success(),
        "a broken file is reported, never fatal"
    );
}

#[test]
fn a_crashing_server_backs_off_and_reconnect_clears_it() {
    let p = Project::new();
    let mut crashy = p.server("crashy", "echo");
    if let Some(args) = crashy["args"].as_array_mut() {
        args.extend([json!("--crash-after"), json!("100")]);
    }
    p.write_settings(json!({"mcpServers": {"crashy": crashy}}));
    let _watch = p.watch();
    let s = p.wait_for("crashy failed", |s| state_of(s, "crashy") == "failed");
    let c = s
        .iter()
        .find(|x| x["name"] == "crashy")
        .cloned()
        .unwrap_or_default();
    assert!(
        c["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("crashing as asked")),
        "{c:#?}"
    );
    assert_eq!(c["reason"], "backing_off");
    p.wait_for("a retry", |_| p.spawns("crashy") >= 2);
    let out = p.run(&["reconnect", "crashy"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Retry passes and scheduled passes share one count: `reconcile #1 (start)`, `#2 (retry)`,
/// `#3 (change in …)`, `#4 (retry)`, never a second `#1`.
#[test]
fn every_pass_has_its_own_number() {
    let p = Project::new();
    let mut crashy = p.server("crashy", "echo");
    if let Some(args) = crashy["args"].as_array_mut() {
        args.extend([json!("--crash-after"), json!("100")]);
    }
    p.write_settings(json!({"mcpServers": {"crashy": crashy.clone()}}));
    let watch = p.watch();
    watch.wait_output("a retry pass", |o| o.contains("(retry)"));
    p.write_settings(json!({"mcpServers": {"crashy": crashy, "b": p.server("b", "echo")}}));
    watch.wait_output("a retry pass after the edit's pass", |o| {
        o.lines()
            .skip_while(|l| !(l.starts_with("reconcile #") && l.contains("(change in")))
            .any(|l| l.starts_with("reconcile #") && l.contains("(retry)"))
    });
    let output = watch.stop();
    let numbers: Vec<u64> = output
        .lines()
        .filter_map(|l| l.strip_prefix("reconcile #"))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter_map(|n| n.parse().ok())
        .collect();
    let expected: Vec<u64> = (1..=numbers.len() as u64).collect();
    assert_eq!(numbers, expected, "{output}");
}

/// A settings file deleted and written again a moment later (past the debounce, as some
/// editors and tools do) keeps its servers: a missing file is held for a grace period.
#[test]
fn a_settings_file_deleted_and_recreated_keeps_its_servers() {
    let p = Project::new();
    let settings = json!({"mcpServers": {"a": p.server("a", "echo")}});
    p.write_settings(settings.clone());
    let watch = p.watch();
    let s = p.wait_for("a connected", |s| state_of(s, "a") == "connected");
    let pid = pid_of(&s, "a");
    fs::remove_file(p.user_settings()).expect("delete the settings file");
    watch.wait_output("the file held as missing", |o| o.contains("file missing"));
    let passes = watch.passes();
    p.write_settings(settings);
    watch.wait_output("the pass of the recreated file", |o| {
        o.lines().filter(|l| l.starts_with("reconcile #")).count() > passes
    });
    let s = p.status();
    assert_eq!(state_of(&s, "a"), "connected", "{s:#?}");
    assert_eq!(pid_of(&s, "a"), pid);
    assert_eq!(p.spawns("a"), 1, "{}", watch.output());
    let output = watch.stop();
    assert!(!output.contains("disconnect a"), "{output}");
}

/// A settings file that stays missing past the grace stops its servers, and the plan line
/// says the file is missing.
#[test]
fn a_settings_file_that_stays_missing_stops_its_servers() {
    let p = Project::new();
    p.write_settings(
        json!({"mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")}}),
    );
    let watch = p.watch();
    p.wait_for("a and b connected", |s| all_connected(s, &["a", "b"]));
    fs::remove_file(p.user_settings()).expect("delete the settings file");
    p.wait_for("a and b gone", |s| {
        state_of(s, "a") == "absent" && state_of(s, "b") == "absent"
    });
    let output = watch.stop();
    assert!(output.contains("- disconnect a (file missing)"), "{output}");
    assert!(output.contains("- disconnect b (file missing)"), "{output}");
}

/// `PR_SET_PDEATHSIG` fires when the *thread* that forked a server exits. A session that keeps
/// reloading for longer than tokio keeps an idle blocking thread (10 s) must not lose a server
/// it started early to that: its pid stays the same through 16 s of unrelated edits. Killing
/// the host then takes the server with it.
#[test]
fn a_server_outlives_every_thread_of_its_host_but_not_the_host() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let watch = p.watch();
    let s = p.wait_for("a connected", |s| all_connected(s, &["a"]));
    let a = pid_of(&s, "a").expect("a's pid");
    let start = std::time::Instant::now();
    let mut round = 0;
    while start.elapsed() < Duration::from_secs(16) {
        round += 1;
        p.write_settings(json!({"mcpServers": {
            "a": p.server("a", "echo"),
            "churn": p.server("churn", if round % 2 == 0 { "echo" } else { "echo,add" }),
        }}));
        std::thread::sleep(Duration::from_millis(400));
    }
    let s = p.wait_for("a still connected", |s| all_connected(s, &["a"]));
    assert_eq!(pid_of(&s, "a"), Some(a), "a was never restarted");
    assert_eq!(p.spawns("a"), 1, "a was started once");
    assert!(alive(a));
    // Whatever happens, do not leave the server (the leader of its own group) behind.
    let _server = KillGroup(u32::try_from(a).expect("pid"));
    // The host dies without a chance to stop anything: its server goes with it.
    let host = nix::unistd::Pid::from_raw(watch.child.id() as i32);
    let _ = nix::sys::signal::kill(host, nix::sys::signal::Signal::SIGKILL);
    wait_until("a to die with its host", || !alive(a));
    drop(watch);
}
