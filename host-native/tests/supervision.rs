//! End-to-end supervision (SPEC §9): a real `watch` with fixture servers that crash, read
//! through `status --json` and the lines `watch` prints. Supervision time is scaled down with
//! `MCP_RECONCILE_BACKOFF_SCALE=0.01` (retry delays 10 ms, 20 ms, … and a 3 s healthy window).

mod common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

const SCALE: (&str, &str) = ("MCP_RECONCILE_BACKOFF_SCALE", "0.01");

fn crashing(p: &Project, name: &str, after_ms: u64) -> Value {
    let mut server = p.server(name, "echo");
    if let Some(args) = server["args"].as_array_mut() {
        args.extend([json!("--crash-after"), json!(after_ms.to_string())]);
    }
    server
}

fn entry(status: &[Value], name: &str) -> Value {
    status
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_default()
}

fn in_crash_loop(status: &[Value], name: &str) -> bool {
    entry(status, name)["reason"] == "crash_loop"
}

/// `(attempt, retry delay)` of every "NAME is failed (attempt K, retry in D ms)" line, and
/// how many "crash loop" lines, from `log` after byte `from`.
fn failures(log: &str, name: &str, from: usize) -> (Vec<(u32, u64)>, usize) {
    let prefix = format!("  {name} is failed (attempt ");
    let mut retries = Vec::new();
    let mut loops = 0;
    for line in log[from.min(log.len())..].lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let attempt: u32 = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if let Some(delay) = rest.split(", retry in ").nth(1) {
            let ms = delay
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            retries.push((attempt, ms));
        } else if rest.contains("crash loop") {
            loops += 1;
        }
    }
    (retries, loops)
}

#[test]
fn a_crashing_server_backs_off_longer_each_time_until_crash_loop_and_reconnect_or_reload_clear_it()
{
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "crashy": crashing(&p, "crashy", 200),
        "steady": p.server("steady", "echo"),
    }}));
    let watch = p.watch_env(&[], &[SCALE]);

    // Growing delays, read from status while it backs off, until the crash loop.
    let seen_retry_in = std::cell::Cell::new(false);
    let s = p.wait_for("crashy in crash loop", |s| {
        let c = entry(s, "crashy");
        if c["reason"] == "backing_off" && c["retryInMs"].is_u64() {
            seen_retry_in.set(true);
        }
        in_crash_loop(s, "crashy")
    });
    let c = entry(&s, "crashy");
    assert_eq!(c["state"], "failed", "{c:#}");
    assert_eq!(c["attempts"], 8, "{c:#}");
    assert_eq!(c["spawns"], 8, "one process per attempt: {c:#}");
    assert_eq!(c["retryInMs"], Value::Null, "no timer in crash loop");
    let error = c["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("crashing as asked"), "stderr tail: {error}");
    assert!(
        seen_retry_in.get(),
        "status showed retryInMs while backing off"
    );
    assert_eq!(p.spawns("crashy"), 8);
    // A neighbour is untouched.
    assert_eq!(state_of(&s, "steady"), "connected");
    assert_eq!(p.spawns("steady"), 1);

    let log = watch.output();
    let (retries, loops) = failures(&log, "crashy", 0);
    let attempts: Vec<u32> = retries.iter().map(|r| r.0).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6, 7], "log:\n{log}");
    assert!(
        retries.windows(2).all(|w| w[0].1 < w[1].1),
        "each delay is longer than the last: {retries:?}"
    );
    assert_eq!(loops, 1, "log:\n{log}");

    // No timer runs in crash loop.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(p.spawns("crashy"), 8);

    // `reconnect` clears it: a fresh process, counting from attempt 1 again.
    let mark = watch.output().len();
    let out = p.run(&["reconnect", "crashy"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    watch.wait_output("a new first failure", |o| {
        failures(o, "crashy", mark).0.first().map(|r| r.0) == Some(1)
    });
    assert!(p.spawns("crashy") > 8);

    // Back in crash loop; `reload` clears it too.
    p.wait_for("crash loop again", |s| {
        in_crash_loop(s, "crashy") && p.spawns("crashy") == 16
    });
    let mark = watch.output().len();
    let out = p.run(&["reload"]);
    assert!(out.status.success());
    watch.wait_output("a new first failure after reload", |o| {
        failures(o, "crashy", mark).0.first().map(|r| r.0) == Some(1)
    });
    assert!(p.spawns("crashy") > 16);
    assert_eq!(p.spawns("steady"), 1);
}

#[test]
fn a_server_that_stayed_healthy_starts_over_at_attempt_one() {
    let p = Project::new();
    // Up for 5 s before each crash: more than the (scaled) 3 s healthy window.
    p.write_settings(json!({"mcpServers": {"flaky": crashing(&p, "flaky", 5000)}}));
    let watch = p.watch_env(&[], &[SCALE]);
    watch.wait_output("two crashes", |o| failures(o, "flaky", 0).0.len() >= 2);
    let (retries, _) = failures(&watch.output(), "flaky", 0);
    assert!(
        retries.iter().all(|r| r.0 == 1),
        "the count reset after a healthy run: {retries:?}"
    );
    let s = p.status();
    assert!(entry(&s, "flaky")["spawns"].as_u64() >= Some(2));
}
