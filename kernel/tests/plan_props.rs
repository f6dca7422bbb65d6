//! Property tests for plans (SPEC §6 invariants 1–6) and the shared pool.
//!
//! The generators stay close to real settings: a small shared pool of server
//! names (integer-like ones included, so map order matters), configs built
//! from a few commands / args / env maps so that an online config differs
//! from the desired one by at most one small edit, gating lists that overlap
//! the names, and random supervision state. The oracles are independent of
//! the plan's own shortcuts: `Gating::denial` for admission and the identity
//! functions for "unchanged".

use std::collections::{HashMap, HashSet};

use mcp_reconcile_kernel::config::{servers_to_value, ServerConfig, Servers};
use mcp_reconcile_kernel::gating::{match_pattern, Gating, Reason};
use mcp_reconcile_kernel::identity::{connection_id, session_key, ConnectionId};
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::plan::{
    online_of, online_to_value, plan, Action, Mode, Online, OnlineEntry, Plan, Status,
};
use mcp_reconcile_kernel::pool::{Acquire, Pool, Release};
use mcp_reconcile_kernel::time::Millis;
use mcp_reconcile_kernel::{backoff, evaluate};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

const NAMES: [&str; 7] = ["a", "b", "c", "2", "10", "srv-1", "x::y"];
const PATTERNS: [&str; 12] = [
    "a", "b", "2", "10", "srv-1", "x::y", "*", "1*", "?", "s*", "*y", "[ab]",
];
const COMMANDS: [&str; 3] = ["node", "python", "npx"];

// ---------------------------------------------------------------------------
// Generators

/// A config as small choices: transport, target, args, env, trust,
/// includeTools, description. Every edit changes one of them.
type Spec = [u8; 7];
const SPEC_RANGES: Spec = [5, 3, 4, 4, 3, 4, 2];

fn spec() -> impl Strategy<Value = Spec> {
    (0..5u8, 0..3u8, 0..4u8, 0..4u8, 0..3u8, 0..4u8, 0..2u8)
        .prop_map(|(t, g, a, e, tr, i, d)| [t, g, a, e, tr, i, d])
}

/// (field, new value) of a one-field edit.
fn edit() -> impl Strategy<Value = (usize, u8)> {
    (0..7usize, any::<u8>())
}

fn apply_edit(mut spec: Spec, (field, value): (usize, u8)) -> Spec {
    spec[field] = value % SPEC_RANGES[field];
    spec
}

fn build(spec: &Spec) -> ServerConfig {
    let mut o = Object::new();
    let mut put = |k: &str, v: Value| o.insert(k.to_owned(), v);
    let target = usize::from(spec[1]);
    match spec[0] {
        0 => put("command", COMMANDS[target].into()),
        1 => put("httpUrl", format!("http://127.0.0.1:9/mcp{target}").into()),
        2 => put("url", format!("http://127.0.0.1:9/sse{target}").into()),
        3 => {
            put("type", "sdk".into());
            put("command", COMMANDS[target].into());
        }
        _ => put("description", "no transport".into()),
    }
    let strings = |items: &[&str]| Value::Array(items.iter().map(|s| Value::from(*s)).collect());
    match spec[2] {
        1 => put("args", strings(&["a.js"])),
        2 => put("args", strings(&["b.js"])),
        3 => put("args", strings(&["a.js", "--v2"])),
        _ => {}
    }
    let env = |pairs: &[(&str, &str)]| {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                .collect(),
        )
    };
    match spec[3] {
        1 => put("env", env(&[("X", "1")])),
        2 => put("env", env(&[("X", "1"), ("Y", "2")])),
        3 => put("env", env(&[("Y", "2"), ("X", "1")])),
        _ => {}
    }
    match spec[4] {
        1 => put("trust", true.into()),
        2 => put("trust", false.into()),
        _ => {}
    }
    match spec[5] {
        1 => put("includeTools", strings(&["t1"])),
        2 => put("includeTools", strings(&["t2", "t1"])),
        3 => put("includeTools", strings(&["t1", "t2"])),
        _ => {}
    }
    if spec[6] == 1 {
        put("description", "cosmetic".into());
    }
    ServerConfig::new(o)
}

/// (status, attempts, retryAt, crashLoop).
type State = (Status, u32, Option<u64>, bool);

fn state() -> impl Strategy<Value = State> {
    (
        select(vec![
            Status::Connected,
            Status::Connecting,
            Status::Failed,
            Status::Disconnected,
        ]),
        0..10u32,
        option::of(0..3000u64),
        proptest::bool::weighted(0.15),
    )
}

/// A pattern list that is not set `unset` times out of `unset + 1`.
fn patterns(unset: u32) -> impl Strategy<Value = Option<Vec<String>>> {
    prop_oneof![
        unset => Just(None),
        1 => vec(select(PATTERNS.to_vec()), 0..4)
            .prop_map(|p| Some(p.into_iter().map(str::to_owned).collect())),
    ]
}

fn gating() -> impl Strategy<Value = Gating> {
    let pending = prop_oneof![
        2 => Just(None),
        1 =>
        vec(select(NAMES.to_vec()), 0..3)
            .prop_map(|p| Some(p.into_iter().map(str::to_owned).collect())),
    ];
    let blocked = prop_oneof![
        3 => Just(None),
        1 =>
        vec(select(NAMES.to_vec()), 0..2)
            .prop_map(|b| Some(b.into_iter().map(str::to_owned).collect())),
    ];
    (
        patterns(2),
        patterns(3),
        patterns(4),
        patterns(3),
        pending,
        blocked,
    )
        .prop_map(
            |(excluded, allowed, cap, workspace_allowed, pending, blocked)| Gating {
                excluded,
                allowed,
                cap,
                workspace_allowed,
                pending,
                blocked,
            },
        )
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Session), Just(Mode::Pool)]
}

#[derive(Clone, Debug)]
struct World {
    desired: Servers,
    online: Online,
    gating: Gating,
    mode: Mode,
    now: Millis,
}

fn world() -> impl Strategy<Value = World> {
    let per_name = (
        option::weighted(0.7, spec()),
        option::weighted(0.6, (option::weighted(0.5, edit()), spec(), state())),
    );
    (
        Just(NAMES.to_vec()).prop_shuffle(),
        Just(NAMES.to_vec()).prop_shuffle(),
        vec(per_name, NAMES.len()),
        gating(),
        mode(),
        0..3000u64,
    )
        .prop_map(
            |(desired_order, online_order, per_name, gating, mode, now)| {
                let choice = |name: &str| {
                    let at = NAMES.iter().position(|n| *n == name).unwrap_or(0);
                    per_name[at]
                };
                let mut desired = Servers::new();
                for name in &desired_order {
                    if let (Some(spec), _) = choice(name) {
                        desired.insert((*name).to_owned(), build(&spec));
                    }
                }
                let mut online = Online::new();
                for name in &online_order {
                    let (wanted, live) = choice(name);
                    let Some((edit, own, (status, attempts, retry_at, crash_loop))) = live else {
                        continue;
                    };
                    let spec = match (wanted, edit) {
                        (Some(w), Some(e)) => apply_edit(w, e),
                        (Some(w), None) => w,
                        (None, _) => own,
                    };
                    let entry = OnlineEntry {
                        config: build(&spec),
                        status,
                        attempts,
                        retry_at: retry_at.map(Millis),
                        crash_loop,
                        needs_auth: false,
                    };
                    online.insert((*name).to_owned(), entry);
                }
                World {
                    desired,
                    online,
                    gating,
                    mode,
                    now: Millis(now),
                }
            },
        )
}

// ---------------------------------------------------------------------------
// Helpers

fn run(w: &World) -> Plan {
    plan(&w.desired, &w.online, &w.gating, true, w.mode, w.now)
        .expect("generated configs have identities")
}

fn identity(name: &str, config: &ServerConfig, mode: Mode) -> String {
    match mode {
        Mode::Session => session_key(name, config).expect("identity").0,
        Mode::Pool => connection_id(name, config).expect("identity").0,
    }
}

fn admitted(w: &World) -> Vec<String> {
    w.desired
        .iter()
        .filter(|(name, config)| w.gating.denial(name, config).is_none())
        .map(|(name, _)| name.clone())
        .collect()
}

fn action_of<'p>(plan: &'p Plan, name: &str) -> Option<&'p Action> {
    plan.actions.iter().find(|a| a.name() == Some(name))
}

/// Executes `plan` against `online` with every start succeeding.
fn apply(plan: &Plan, desired: &Servers, online: &Online) -> Online {
    let mut next = online.clone();
    for action in &plan.actions {
        match action {
            Action::Disconnect { name, .. } => {
                next.remove(name);
            }
            Action::Connect { name, .. } | Action::Reconnect { name, .. } => {
                let config = desired
                    .get(name)
                    .expect("started servers are desired")
                    .clone();
                next.insert(name.clone(), OnlineEntry::connected(config));
            }
            Action::Retry { name, .. } => {
                if let Some(entry) = next.get_mut(name) {
                    entry.status = Status::Connected;
                    entry.attempts = 0;
                    entry.retry_at = None;
                }
            }
            Action::Keep { .. } | Action::Skip { .. } | Action::Noop { .. } => {}
        }
    }
    next
}

fn request(w: &World, trusted_folder: bool) -> Value {
    let mut o = Object::new();
    o.insert("op".into(), "plan".into());
    o.insert("desired".into(), servers_to_value(&w.desired));
    o.insert("online".into(), online_to_value(&w.online));
    o.insert("gating".into(), w.gating.to_value());
    o.insert("trustedFolder".into(), trusted_folder.into());
    o.insert("mode".into(), w.mode.as_str().into());
    o.insert("now".into(), Value::Number(w.now.0 as f64));
    Value::Object(o)
}

// ---------------------------------------------------------------------------
// Invariants 1–5

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every name gets exactly one action, grouped in the §6 order.
    #[test]
    fn one_action_per_name_in_group_order(w in world()) {
        let plan = run(&w);
        let mut names: Vec<&str> = plan.actions.iter().filter_map(Action::name).collect();
        let expected: HashSet<&str> =
            w.desired.keys().chain(w.online.keys()).map(String::as_str).collect();
        prop_assert_eq!(names.len(), expected.len());
        names.sort_unstable();
        names.dedup();
        prop_assert_eq!(names.len(), expected.len());
        let rank = |a: &Action| ["disconnect", "reconnect", "retry", "connect", "keep", "skip"]
            .iter()
            .position(|k| *k == a.kind())
            .unwrap_or(usize::MAX);
        prop_assert!(plan.actions.windows(2).all(|p| rank(&p[0]) <= rank(&p[1])));
    }

    /// 1. Idempotence: `plan(d, online_of(d))` only keeps admitted servers
    /// and skips the others.
    #[test]
    fn idempotent_on_its_own_outcome(w in world()) {
        let online = online_of(&w.desired, &w.gating);
        let plan = plan(&w.desired, &online, &w.gating, true, w.mode, w.now).expect("plan");
        prop_assert!(plan.is_quiet(), "{:?}", plan);
        for name in admitted(&w) {
            prop_assert_eq!(action_of(&plan, &name), Some(&Action::Keep { name: name.clone() }));
        }
    }

    /// 2. Applying a plan (no failed entries, all starts succeed) yields
    /// exactly the admitted subset, each with its desired identity; the
    /// replan is quiet.
    #[test]
    fn applying_a_plan_reaches_the_admitted_subset(mut w in world()) {
        w.online = w
            .online
            .into_iter()
            .map(|(name, mut entry)| {
                if entry.status == Status::Failed {
                    entry.status = Status::Connected;
                }
                entry.crash_loop = false;
                (name, entry)
            })
            .collect();
        let plan = run(&w);
        let next = apply(&plan, &w.desired, &w.online);
        let names: Vec<String> = next.keys().cloned().collect();
        let mut want = admitted(&w);
        let mut got = names.clone();
        want.sort();
        got.sort();
        prop_assert_eq!(got, want);
        for (name, entry) in &next {
            let desired = w.desired.get(name).expect("desired");
            prop_assert_eq!(identity(name, &entry.config, w.mode), identity(name, desired, w.mode));
            prop_assert!(matches!(entry.status, Status::Connected | Status::Connecting));
        }
        let again = plan_of(&w, &next);
        prop_assert!(again.is_quiet(), "{:?}", again);
    }

    /// 3. A healthy server whose identity is unchanged and that stays
    /// admitted is kept, whatever else the inputs say.
    #[test]
    fn healthy_unchanged_admitted_servers_are_kept(w in world()) {
        let plan = run(&w);
        for (name, live) in &w.online {
            let Some(desired) = w.desired.get(name) else { continue };
            let healthy = matches!(live.status, Status::Connected | Status::Connecting);
            if healthy
                && w.gating.denial(name, desired).is_none()
                && identity(name, &live.config, w.mode) == identity(name, desired, w.mode)
            {
                prop_assert_eq!(action_of(&plan, name), Some(&Action::Keep { name: name.clone() }));
            }
        }
    }

    /// 3 (relation form): whatever the other servers, their states and the
    /// gating of other names look like, a healthy server whose live config
    /// differs at most cosmetically from the desired one is kept.
    #[test]
    fn unrelated_edits_leave_a_healthy_server_alone(
        other in world(),
        keep_at in 0..NAMES.len(),
        wanted in spec(),
        cosmetic in 0..2u8,
        status in select(vec![Status::Connected, Status::Connecting]),
        attempts in 0..10u32,
    ) {
        let name = NAMES[keep_at];
        let mut wanted = wanted;
        wanted[0] %= 4; // a server without a transport is not admitted
        let mut live_spec = wanted;
        live_spec[6] = cosmetic;
        let live = OnlineEntry { status, attempts, ..OnlineEntry::connected(build(&live_spec)) };
        let mut w = other;
        w.desired.insert(name.to_owned(), build(&wanted));
        w.online.insert(name.to_owned(), live);
        for list in [&mut w.gating.excluded, &mut w.gating.pending, &mut w.gating.blocked]
            .into_iter()
            .flatten()
        {
            list.retain(|p| !match_pattern(p, name));
        }
        for list in [&mut w.gating.allowed, &mut w.gating.cap, &mut w.gating.workspace_allowed]
            .into_iter()
            .flatten()
        {
            list.push(name.to_owned());
        }
        let plan = run(&w);
        prop_assert_eq!(action_of(&plan, name), Some(&Action::Keep { name: name.to_owned() }));
    }

    /// 4. Nothing starts that is pending, excluded, not allowed or outside
    /// the cap; an untrusted folder starts and stops nothing.
    #[test]
    fn nothing_unadmitted_ever_starts(w in world()) {
        let plan = run(&w);
        for action in plan.actions.iter().filter(|a| a.starts()) {
            let name = action.name().expect("named");
            let desired = w.desired.get(name).expect("started servers are desired");
            prop_assert_eq!(w.gating.denial(name, desired), None, "{:?}", action);
        }
        for action in &plan.actions {
            if let Action::Skip { name, reason } | Action::Disconnect { name, reason } = action {
                if let Some(desired) = w.desired.get(name) {
                    if let Some(denial) = w.gating.denial(name, desired) {
                        prop_assert_eq!(*reason, denial);
                    }
                } else {
                    prop_assert_eq!(*reason, Reason::Removed);
                }
            }
        }
        let untrusted = plan_untrusted(&w);
        prop_assert_eq!(untrusted.actions, vec![Action::Noop { reason: Reason::UntrustedFolder }]);
    }

    /// 4. Widening `allowed` with names outside the cap admits nothing new:
    /// the plan is the same action for action.
    #[test]
    fn widening_allowed_beyond_the_cap_changes_nothing(
        mut w in world(),
        cap in vec(select(PATTERNS.to_vec()), 0..3),
        extra in vec(select(NAMES.to_vec()), 1..4),
    ) {
        let cap: Vec<String> = cap.into_iter().map(str::to_owned).collect();
        w.gating.cap = Some(cap.clone());
        let before = run(&w);
        let outside = extra
            .into_iter()
            .filter(|n| !cap.iter().any(|p| match_pattern(p, n)))
            .map(str::to_owned);
        let widened = match &w.gating.allowed {
            Some(list) => list.iter().cloned().chain(outside).collect(),
            None => return Ok(()), // not set is already the widest
        };
        w.gating.allowed = Some(widened);
        prop_assert_eq!(run(&w), before);
    }

    /// SPEC §3.3: the workspace's own `mcp.allowed` only narrows. Whatever it
    /// says, every server the plan starts is one the plan would also start
    /// without it, with the same action.
    #[test]
    fn a_workspace_allow_list_never_widens(
        mut w in world(),
        workspace in vec(select(PATTERNS.to_vec()), 0..4),
    ) {
        w.gating.workspace_allowed = None;
        let base = run(&w);
        w.gating.workspace_allowed = Some(workspace.into_iter().map(str::to_owned).collect());
        let narrowed = run(&w);
        for action in narrowed.actions.iter().filter(|a| a.starts()) {
            prop_assert!(base.actions.contains(action), "{:?} not in {:?}", action, base);
        }
    }

    /// 5. Determinism: the same request gives the same bytes, and the JSON
    /// API answers what the typed function answers.
    #[test]
    fn same_input_same_bytes(w in world(), trusted in proptest::bool::weighted(0.8)) {
        let request = request(&w, trusted);
        let first = evaluate(&request).to_json();
        let second = evaluate(&request.clone()).to_json();
        prop_assert_eq!(&first, &second);
        let typed = plan(&w.desired, &w.online, &w.gating, trusted, w.mode, w.now).expect("plan");
        let mut ok = Object::new();
        ok.insert("ok".into(), typed.to_value());
        prop_assert_eq!(first, Value::Object(ok).to_json());
    }
}

fn plan_of(w: &World, online: &Online) -> Plan {
    plan(&w.desired, online, &w.gating, true, w.mode, w.now).expect("plan")
}

fn plan_untrusted(w: &World) -> Plan {
    plan(&w.desired, &w.online, &w.gating, false, w.mode, w.now).expect("plan")
}

// ---------------------------------------------------------------------------
// Invariant 6: totality

const KEYS: [&str; 26] = [
    "op",
    "desired",
    "online",
    "gating",
    "trustedFolder",
    "mode",
    "now",
    "config",
    "status",
    "attempts",
    "retryAt",
    "crashLoop",
    "command",
    "args",
    "includeTools",
    "oauth",
    "enabled",
    "scopes",
    "excluded",
    "allowed",
    "cap",
    "pending",
    "seed",
    "type",
    "a",
    "2",
];
const STRINGS: [&str; 10] = [
    "",
    "a",
    "2",
    "connected",
    "failed",
    "session",
    "pool",
    "sdk",
    "plan",
    "*",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let number = prop_oneof![
        select(vec![
            -1.0,
            -0.0,
            0.0,
            0.5,
            1.0,
            7.0,
            1e300,
            f64::INFINITY,
            f64::NAN,
            4_294_967_295.0,
            4_294_967_296.0,
            9_007_199_254_740_992.0,
            18_446_744_073_709_551_616.0,
        ]),
        any::<f64>(),
        (0..20u32).prop_map(f64::from),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number.prop_map(Value::Number),
        select(STRINGS.to_vec()).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((select(KEYS.to_vec()), inner), 0..5).prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                )
            }),
        ]
    })
}

/// Replaces the `pick`-th node (pre-order, modulo the node count) of `value`.
fn replace_node(value: &mut Value, pick: usize, with: Value) {
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    fn walk(v: &mut Value, target: &mut usize, with: &mut Option<Value>) {
        if *target == 0 {
            if let Some(w) = with.take() {
                *v = w;
            }
            return;
        }
        *target -= 1;
        match v {
            Value::Array(items) => {
                for item in items {
                    walk(item, target, with);
                }
            }
            Value::Object(o) => {
                let keys: Vec<String> = o.keys().cloned().collect();
                for key in keys {
                    let mut child = o.get(&key).cloned().unwrap_or_default();
                    walk(&mut child, target, with);
                    o.insert(key, child);
                }
            }
            _ => {}
        }
    }
    let mut target = pick % count(value);
    walk(value, &mut target, &mut Some(with));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// 6. Arbitrary requests for `plan` and `backoff` give a response, never
    /// a panic.
    #[test]
    fn arbitrary_requests_never_panic(
        op in select(vec!["plan", "backoff"]),
        fields in vec((select(KEYS.to_vec()), arb_json()), 0..8),
    ) {
        let mut request: Object = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        request.insert("op".into(), op.into());
        let response = evaluate(&Value::Object(request));
        prop_assert!(response.as_object().is_some_and(|r| r.contains_key("ok") || r.contains_key("error")));
    }

    /// 6. A realistic request with one node replaced by arbitrary JSON gives a
    /// plan or a typed error, never a panic.
    #[test]
    fn mutated_requests_never_panic(w in world(), pick in any::<usize>(), with in arb_json()) {
        let mut request = request(&w, true);
        replace_node(&mut request, pick, with);
        let response = evaluate(&request);
        let response = response.as_object().expect("object response");
        if let Some(Value::Object(error)) = response.get("error") {
            let kind = error.get("kind").and_then(Value::as_str).unwrap_or("");
            prop_assert!(["invalid-request", "invalid-config", "unknown-op"].contains(&kind), "{}", kind);
        } else {
            prop_assert!(response.get("ok").is_some());
        }
    }

    /// 6. The backoff op accepts exactly the non-negative integers (seed up
    /// to 2^53) and agrees with the typed function.
    #[test]
    fn backoff_op_matches_the_function(attempts in any::<u32>(), seed in 0..=(1u64 << 53)) {
        let mut request = Object::new();
        request.insert("op".into(), "backoff".into());
        request.insert("attempts".into(), Value::Number(f64::from(attempts)));
        request.insert("seed".into(), Value::Number(seed as f64));
        let response = evaluate(&Value::Object(request));
        let ok = response.as_object().and_then(|r| r.get("ok")).and_then(Value::as_object).cloned();
        let b = backoff(attempts, seed);
        let ok = ok.expect("ok");
        prop_assert_eq!(ok.get("delayMs"), Some(&Value::Number(b.delay_ms as f64)));
        prop_assert_eq!(ok.get("crashLoop"), Some(&Value::Bool(b.crash_loop)));
    }
}

// ---------------------------------------------------------------------------
// Pool properties

#[derive(Clone, Debug)]
enum PoolOp {
    Acquire(usize, usize),
    Release(usize, usize),
    EndSession(usize),
    Advance(u64),
    Timeout,
}

fn pool_op() -> impl Strategy<Value = PoolOp> {
    prop_oneof![
        4 => (0..3usize, 0..5usize).prop_map(|(s, c)| PoolOp::Acquire(s, c)),
        3 => (0..3usize, 0..5usize).prop_map(|(s, c)| PoolOp::Release(s, c)),
        1 => (0..3usize).prop_map(PoolOp::EndSession),
        2 => (0..80u64).prop_map(PoolOp::Advance),
        2 => Just(PoolOp::Timeout),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Refcounts match a model and never go below zero, an id spawns once
    /// while it is open, and a gated server never spawns or attaches.
    #[test]
    fn pool_follows_its_model(
        ops in vec(pool_op(), 1..60),
        drain in 0..50u64,
        gating in gating(),
        pool_remote in any::<bool>(),
    ) {
        let sessions = ["s0", "s1", "s2"];
        let servers: Vec<(String, ServerConfig)> = [
            ("a", [0, 0, 1, 0, 0, 0, 0]),
            ("2", [0, 1, 0, 1, 1, 0, 0]),
            ("srv-1", [1, 0, 0, 0, 0, 0, 0]),
            ("x::y", [3, 0, 0, 0, 0, 0, 0]),
            ("b", [0, 2, 3, 2, 0, 1, 0]),
        ]
        .iter()
        .map(|(name, spec)| ((*name).to_owned(), build(spec)))
        .collect();
        let ids: Vec<ConnectionId> = servers
            .iter()
            .map(|(name, config)| connection_id(name, config).expect("id"))
            .collect();
        let mut pool = Pool::new();
        pool.set_drain(Millis(drain));
        pool.set_pool_remote(pool_remote);
        let mut holds: HashMap<(usize, usize), u32> = HashMap::new();
        let mut open: HashMap<usize, Option<Millis>> = HashMap::new(); // server → closes_at
        let mut now = Millis(0);
        let total = |holds: &HashMap<(usize, usize), u32>, c: usize| -> u32 {
            holds.iter().filter(|((_, k), _)| *k == c).map(|(_, n)| *n).sum()
        };
        for op in ops {
            match op {
                PoolOp::Acquire(s, c) => {
                    let (name, config) = &servers[c];
                    let got = pool.acquire(sessions[s], &ids[c], config, &gating, now);
                    if let Some(reason) = gating.denial(name, config) {
                        prop_assert_eq!(got, Acquire::Refused { reason });
                        continue;
                    }
                    if !pool.is_poolable(config.transport()) {
                        prop_assert!(matches!(got, Acquire::Unpooled { .. }), "{:?}", got);
                        continue;
                    }
                    let was_open = open.insert(c, None).is_some();
                    *holds.entry((s, c)).or_insert(0) += 1;
                    if was_open {
                        prop_assert_eq!(got, Acquire::Attach { refcount: total(&holds, c) });
                    } else {
                        prop_assert_eq!(got, Acquire::Spawn);
                    }
                }
                PoolOp::Release(s, c) => {
                    let got = pool.release(sessions[s], &ids[c], now);
                    match holds.get_mut(&(s, c)) {
                        None | Some(0) => prop_assert_eq!(got, Release::NotHeld),
                        Some(n) => {
                            *n -= 1;
                            let left = total(&holds, c);
                            if left == 0 {
                                let deadline = Millis(now.0 + drain);
                                open.insert(c, Some(deadline));
                                prop_assert_eq!(got, Release::Draining { deadline });
                            } else {
                                prop_assert_eq!(got, Release::Held { refcount: left });
                            }
                        }
                    }
                }
                PoolOp::EndSession(s) => {
                    for (id, release) in pool.release_session(sessions[s], now) {
                        let c = ids.iter().position(|i| *i == id).expect("known id");
                        holds.remove(&(s, c));
                        if total(&holds, c) == 0 {
                            let deadline = Millis(now.0 + drain);
                            open.insert(c, Some(deadline));
                            prop_assert_eq!(release, Release::Draining { deadline });
                        }
                    }
                }
                PoolOp::Advance(ms) => now = Millis(now.0 + ms),
                PoolOp::Timeout => {
                    let want_min = open.values().flatten().min().copied();
                    prop_assert_eq!(pool.poll_timeout(), want_min);
                    for close in pool.handle_timeout(now) {
                        let c = ids.iter().position(|i| *i == close.id).expect("known id");
                        let closes_at = open.remove(&c).flatten();
                        prop_assert!(closes_at.is_some_and(|at| at <= now), "closed a held id");
                    }
                    prop_assert!(open.values().flatten().all(|at| *at > now), "missed a close");
                }
            }
            for (c, id) in ids.iter().enumerate() {
                prop_assert_eq!(pool.refcount(id), total(&holds, c));
                prop_assert_eq!(pool.is_open(id), open.contains_key(&c));
            }
        }
    }
}
