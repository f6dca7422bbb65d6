//! Model-based plan fuzzing (SPEC §6): builds a desired map, a live state and
//! gating lists from a small vocabulary (so names overlap and edits are one
//! field), plans, applies the plan to the simulated live state with every
//! start succeeding, and checks the invariants:
//!
//! * exactly one action per name in desired ∪ online, teardowns before starts;
//! * nothing starts that is not admitted (pending, excluded, not allowed,
//!   outside the cap, no transport), and an untrusted folder is one `noop`;
//! * a healthy server whose identity is unchanged and that stays admitted is
//!   kept;
//! * after applying, the live set is exactly the admitted desired subset (when
//!   nothing was failed), and planning again is quiet (only keep/skip);
//! * same input, same plan.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcp_reconcile_kernel::gating::Gating;
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::plan::{online_of, plan, Action, Mode, Online, OnlineEntry, Status};
use mcp_reconcile_kernel::{Millis, ServerConfig, Servers};

const NAMES: [&str; 7] = ["a", "b", "2", "10", "a::b", "srv-x", "__proto__"];
const COMMANDS: [&str; 3] = ["node", "uvx", "npx"];

#[derive(Arbitrary, Debug)]
struct Entry {
    name: u8,
    transport: u8,
    args: u8,
    env: u8,
    trust: u8,
    tools: u8,
}

#[derive(Arbitrary, Debug)]
struct Live {
    entry: Entry,
    status: u8,
    attempts: u8,
    retry_at: u16,
    crash_loop: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    desired: Vec<Entry>,
    online: Vec<Live>,
    excluded: Option<Vec<u8>>,
    allowed: Option<Vec<u8>>,
    cap: Option<Vec<u8>>,
    workspace_allowed: Option<Vec<u8>>,
    pending: Option<Vec<u8>>,
    blocked: Option<Vec<u8>>,
    trusted: bool,
    pool: bool,
    now: u16,
}

fn name(i: u8) -> String {
    NAMES[usize::from(i) % NAMES.len()].to_owned()
}

fn pattern(i: u8) -> String {
    match i % 10 {
        7 => "*".into(),
        8 => "a*".into(),
        9 => "?".into(),
        n => name(n),
    }
}

fn config(e: &Entry) -> ServerConfig {
    let mut o = Object::new();
    let command = COMMANDS[usize::from(e.args) % COMMANDS.len()];
    match e.transport % 5 {
        0 => o.insert("command".into(), command.into()),
        1 => o.insert("httpUrl".into(), "http://127.0.0.1:9/mcp".into()),
        2 => o.insert("url".into(), "http://127.0.0.1:9/sse".into()),
        3 => {
            o.insert("type".into(), "sdk".into());
            o.insert("command".into(), command.into());
        }
        _ => o.insert("description".into(), "no transport".into()),
    }
    if e.args % 3 == 1 {
        o.insert("args".into(), Value::Array(vec!["x.js".into()]));
    }
    let env: Object = match e.env % 3 {
        1 => [("X".to_owned(), Value::from("1"))].into_iter().collect(),
        2 => [("Y".to_owned(), "2".into()), ("X".to_owned(), "1".into())].into_iter().collect(),
        _ => Object::new(),
    };
    if !env.is_empty() {
        o.insert("env".into(), Value::Object(env));
    }
    match e.trust % 3 {
        1 => o.insert("trust".into(), true.into()),
        2 => o.insert("trust".into(), false.into()),
        _ => {}
    }
    if e.tools % 2 == 1 {
        o.insert("includeTools".into(), Value::Array(vec!["t2".into(), "t1".into()]));
    }
    ServerConfig::new(o)
}

fn status(i: u8) -> Status {
    match i % 4 {
        0 => Status::Connected,
        1 => Status::Connecting,
        2 => Status::Failed,
        _ => Status::Disconnected,
    }
}

fn list(items: &Option<Vec<u8>>, f: fn(u8) -> String) -> Option<Vec<String>> {
    items.as_ref().map(|v| v.iter().take(6).map(|&i| f(i)).collect())
}

fn apply(actions: &[Action], desired: &Servers, online: &Online) -> Online {
    let mut next = online.clone();
    for action in actions {
        match action {
            Action::Disconnect { name, .. } => {
                next.remove(name);
            }
            Action::Connect { name, .. } | Action::Reconnect { name, .. } | Action::Retry { name, .. } => {
                let config = desired.get(name).expect("a started server is desired").clone();
                next.insert(name.clone(), OnlineEntry::connected(config));
            }
            _ => {}
        }
    }
    next
}

fuzz_target!(|input: Input| {
    let mut desired = Servers::new();
    for e in input.desired.iter().take(8) {
        desired.insert(name(e.name), config(e));
    }
    let mut online = Online::new();
    for l in input.online.iter().take(8) {
        online.insert(
            name(l.entry.name),
            OnlineEntry {
                config: config(&l.entry),
                status: status(l.status),
                attempts: u32::from(l.attempts % 10),
                retry_at: (l.retry_at % 3 != 0).then_some(Millis(u64::from(l.retry_at))),
                crash_loop: l.crash_loop,
                needs_auth: false,
            },
        );
    }
    let gating = Gating {
        excluded: list(&input.excluded, pattern),
        allowed: list(&input.allowed, pattern),
        cap: list(&input.cap, pattern),
        workspace_allowed: list(&input.workspace_allowed, pattern),
        pending: list(&input.pending, name),
        blocked: list(&input.blocked, name),
    };
    let mode = if input.pool { Mode::Pool } else { Mode::Session };
    let now = Millis(u64::from(input.now));
    let result = plan(&desired, &online, &gating, input.trusted, mode, now).expect("vocabulary configs have identities");
    let again = plan(&desired, &online, &gating, input.trusted, mode, now).expect("same input");
    assert_eq!(result, again, "deterministic");

    if !input.trusted {
        assert!(matches!(result.actions.as_slice(), [Action::Noop { .. }]));
        return;
    }

    // One action per name; teardowns come before starts.
    let mut seen: Vec<&str> = Vec::new();
    let mut started = false;
    for action in &result.actions {
        let n = action.name().expect("named action in a trusted folder");
        assert!(!seen.contains(&n), "two actions for {n}");
        seen.push(n);
        let teardown = matches!(action, Action::Disconnect { .. });
        assert!(!(teardown && started), "a teardown after a start: {result:?}");
        started |= action.starts();
        if action.starts() {
            let cfg = desired.get(n).expect("a started server is desired");
            assert!(gating.denial(n, cfg).is_none(), "{n} started but not admitted: {gating:?}");
        }
    }
    let every = desired.keys().chain(online.keys()).filter(|k| !seen.contains(&k.as_str())).count();
    assert_eq!(every, 0, "a name without an action");

    // A healthy, unchanged, admitted server is kept.
    let same = online_of(&desired, &gating);
    for action in &result.actions {
        if let (Some(n), true) = (action.name(), matches!(action, Action::Disconnect { .. } | Action::Reconnect { .. } | Action::Retry { .. })) {
            if let (Some(live), Some(want)) = (online.get(n), same.get(n)) {
                let healthy = matches!(live.status, Status::Connected | Status::Connecting);
                assert!(!(healthy && live.config == want.config), "healthy unchanged {n} touched: {action:?}");
            }
        }
    }

    // Applying the plan with every start succeeding.
    let applied = apply(&result.actions, &desired, &online);
    let failed = online.values().any(|e| matches!(e.status, Status::Failed));
    if !failed {
        let mut got: Vec<&String> = applied.keys().collect();
        let mut want: Vec<&String> = same.keys().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "applied state is not the admitted subset");
    }
    let replan = plan(&desired, &applied, &gating, true, mode, now).expect("replan");
    assert!(
        replan.actions.iter().all(|a| matches!(a, Action::Keep { .. } | Action::Skip { .. })),
        "replanning after apply is not quiet: {replan:?}"
    );
});
