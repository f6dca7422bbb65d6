//! Property tests for language-server plans (SPEC §14.2 invariants, plus the
//! §6 invariants they inherit) and the `.lsp.json` parser.
//!
//! Entries are built from small per-field choices, several of which are
//! equal after defaulting (`args` absent ≡ `[]`, `env` key order, explicit
//! default timeouts…). The oracle for "this field changed" is a table of
//! those equivalences written out by hand, independent of the kernel's
//! canonical JSON; admission is read from the approval records directly.

use std::collections::HashSet;

use mcp_reconcile_kernel::approvals::{ApprovalState, Approvals};
use mcp_reconcile_kernel::config::ServerConfig;
use mcp_reconcile_kernel::evaluate;
use mcp_reconcile_kernel::json::{parse, Object, Value};
use mcp_reconcile_kernel::lsp::{
    lsp_approval_hash, lsp_approval_state, lsp_online_of, lsp_plan, lsp_seed_id, parse_lsp_json,
    LspAction, LspEntry, LspParseOptions, LspPlan, LspPlanContext, LspScope, LspServers,
};
use mcp_reconcile_kernel::plan::{Online, OnlineEntry, Status};
use mcp_reconcile_kernel::time::Millis;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

const ROOT: &str = "/home/dev/repo";
const NAMES: [&str; 6] = ["a", "b", "2", "10", "x::y", "srv-1"];

// ---------------------------------------------------------------------------
// Entries as choices

/// Seed choices: command, args, env, transport, workspaceFolder,
/// initializationOptions.
type Seed = [u8; 6];
const SEED_NAMES: [&str; 6] = [
    "command",
    "args",
    "env",
    "transport",
    "workspaceFolder",
    "initializationOptions",
];
/// Choice → equivalence class after defaulting.
const SEED_CLASSES: [&[u8]; 6] = [
    &[0, 1, 2],    // absent, "node", "pylsp"
    &[0, 0, 2, 3], // absent, [], ["--stdio"], ["--stdio","-v"]
    &[0, 0, 2, 2], // absent, {}, {A,B}, {B,A}
    &[0, 0],       // absent, "stdio"
    &[0, 1, 2],    // absent, "sub", "pkg/a"
    &[0, 0, 2, 3], // absent, null, {"a":1}, {}
];

/// Live choices: settings, extensionToLanguage, startupTimeout,
/// shutdownTimeout, restartOnCrash, maxRestarts.
type Live = [u8; 6];
const LIVE_NAMES: [&str; 6] = [
    "settings",
    "extensionToLanguage",
    "startupTimeout",
    "shutdownTimeout",
    "restartOnCrash",
    "maxRestarts",
];
const LIVE_CLASSES: [&[u8]; 6] = [
    &[0, 0, 2, 3], // absent, {}, {"x":{"y":1}}, {"x":{"y":2}}
    &[0, 1, 0],    // absent, {".a":"a"}, {}
    &[0, 0, 2],    // absent, 10000, 20000
    &[0, 0, 2],    // absent, 5000, 1000
    &[0, 0, 2],    // absent, true, false
    &[0, 0, 2],    // absent, 8, 3
];

#[derive(Clone, Copy, Debug, PartialEq)]
struct Spec {
    seed: Seed,
    live: Live,
    /// An unknown field (`x-note`): hashed for approval, nothing else.
    note: bool,
}

fn seed() -> impl Strategy<Value = Seed> {
    (0..3u8, 0..4u8, 0..4u8, 0..2u8, 0..3u8, 0..4u8)
        .prop_map(|(a, b, c, d, e, f)| [a, b, c, d, e, f])
}

fn live() -> impl Strategy<Value = Live> {
    (0..4u8, 0..3u8, 0..3u8, 0..3u8, 0..3u8, 0..3u8)
        .prop_map(|(a, b, c, d, e, f)| [a, b, c, d, e, f])
}

fn spec() -> impl Strategy<Value = Spec> {
    (seed(), live(), any::<bool>()).prop_map(|(seed, live, note)| Spec { seed, live, note })
}

fn json(text: &str) -> Value {
    parse(text).unwrap_or(Value::Null)
}

fn build(spec: &Spec) -> Object {
    let mut o = Object::new();
    let mut put = |k: &str, text: &str| o.insert(k.to_owned(), json(text));
    let [command, args, env, transport, folder, init] = spec.seed;
    match command {
        1 => put("command", r#""node""#),
        2 => put("command", r#""pylsp""#),
        _ => {}
    }
    match args {
        1 => put("args", "[]"),
        2 => put("args", r#"["--stdio"]"#),
        3 => put("args", r#"["--stdio","-v"]"#),
        _ => {}
    }
    match env {
        1 => put("env", "{}"),
        2 => put("env", r#"{"A":"1","B":"2"}"#),
        3 => put("env", r#"{"B":"2","A":"1"}"#),
        _ => {}
    }
    if transport == 1 {
        put("transport", r#""stdio""#);
    }
    match folder {
        1 => put("workspaceFolder", r#""sub""#),
        2 => put("workspaceFolder", r#""pkg/a""#),
        _ => {}
    }
    match init {
        1 => put("initializationOptions", "null"),
        2 => put("initializationOptions", r#"{"a":1}"#),
        3 => put("initializationOptions", "{}"),
        _ => {}
    }
    let [settings, routing, startup, shutdown, restart, max] = spec.live;
    match settings {
        1 => put("settings", "{}"),
        2 => put("settings", r#"{"x":{"y":1}}"#),
        3 => put("settings", r#"{"x":{"y":2}}"#),
        _ => {}
    }
    match routing {
        1 => put("extensionToLanguage", r#"{".a":"a"}"#),
        2 => put("extensionToLanguage", "{}"),
        _ => {}
    }
    match startup {
        1 => put("startupTimeout", "10000"),
        2 => put("startupTimeout", "20000"),
        _ => {}
    }
    match shutdown {
        1 => put("shutdownTimeout", "5000"),
        2 => put("shutdownTimeout", "1000"),
        _ => {}
    }
    match restart {
        1 => put("restartOnCrash", "true"),
        2 => put("restartOnCrash", "false"),
        _ => {}
    }
    match max {
        1 => put("maxRestarts", "8"),
        2 => put("maxRestarts", "3"),
        _ => {}
    }
    if spec.note {
        put("x-note", r#""n""#);
    }
    o
}

/// The field names whose classes differ, sorted (all names are ASCII).
fn oracle_changes(
    names: &[&str; 6],
    classes: &[&[u8]; 6],
    a: &[u8; 6],
    b: &[u8; 6],
) -> Vec<String> {
    let mut out: Vec<String> = (0..6)
        .filter(|&i| classes[i][usize::from(a[i])] != classes[i][usize::from(b[i])])
        .map(|i| names[i].to_owned())
        .collect();
    out.sort();
    out
}

fn seed_changes(a: &Spec, b: &Spec) -> Vec<String> {
    oracle_changes(&SEED_NAMES, &SEED_CLASSES, &a.seed, &b.seed)
}

fn live_changes(a: &Spec, b: &Spec) -> Vec<String> {
    oracle_changes(&LIVE_NAMES, &LIVE_CLASSES, &a.live, &b.live)
}

// ---------------------------------------------------------------------------
// Worlds

/// What the approvals file says about one name.
#[derive(Clone, Copy, Debug)]
enum Record {
    None,
    ApprovedDesired,
    RejectedDesired,
    ApprovedOnline,
    RejectedOnline,
    Malformed,
}

fn record() -> impl Strategy<Value = Record> {
    select(vec![
        Record::None,
        Record::ApprovedDesired,
        Record::RejectedDesired,
        Record::ApprovedOnline,
        Record::RejectedOnline,
        Record::Malformed,
    ])
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
        any::<bool>(),
    )
}

#[derive(Clone, Debug)]
struct Server {
    name: &'static str,
    desired: Option<(Spec, LspScope)>,
    online: Option<(Spec, State)>,
    record: Record,
}

fn scope() -> impl Strategy<Value = LspScope> {
    select(vec![LspScope::User, LspScope::Project])
}

fn servers() -> impl Strategy<Value = Vec<Server>> {
    btree_map(
        0..NAMES.len(),
        (
            option::of((spec(), scope())),
            option::of((spec(), state())),
            record(),
        ),
        0..=NAMES.len(),
    )
    .prop_map(|m| {
        m.into_iter()
            .map(|(i, (desired, online, record))| Server {
                name: NAMES[i],
                desired,
                online,
                record,
            })
            .collect()
    })
}

struct World {
    desired: LspServers,
    online: Online,
    approvals: Approvals,
}

fn record_value(hash: &str, status: &str) -> Value {
    let mut r = Object::new();
    r.insert("hash".into(), hash.into());
    r.insert("status".into(), status.into());
    Value::Object(r)
}

fn world(servers: &[Server]) -> World {
    let mut desired = LspServers::new();
    let mut online = Online::new();
    let mut project = Object::new();
    for s in servers {
        if let Some((spec, scope)) = &s.desired {
            let mut config = build(spec);
            config.insert("scope".into(), scope.as_str().into());
            desired.insert(
                s.name.to_owned(),
                LspEntry {
                    config,
                    scope: *scope,
                },
            );
        }
        if let Some((spec, (status, attempts, retry_at, crash_loop))) = &s.online {
            online.insert(
                s.name.to_owned(),
                OnlineEntry {
                    config: ServerConfig::new(build(spec)),
                    status: *status,
                    attempts: *attempts,
                    retry_at: retry_at.map(Millis),
                    crash_loop: *crash_loop,
                    needs_auth: false,
                },
            );
        }
        let hash_of = |spec: Option<&Spec>| spec.map(|s| lsp_approval_hash(&build(s)).0);
        let desired_hash = hash_of(s.desired.as_ref().map(|d| &d.0));
        let online_hash = hash_of(s.online.as_ref().map(|o| &o.0));
        let value = match s.record {
            Record::None => None,
            Record::ApprovedDesired => desired_hash.map(|h| record_value(&h, "approved")),
            Record::RejectedDesired => desired_hash.map(|h| record_value(&h, "rejected")),
            Record::ApprovedOnline => online_hash.map(|h| record_value(&h, "approved")),
            Record::RejectedOnline => online_hash.map(|h| record_value(&h, "rejected")),
            Record::Malformed => Some(json(r#"{"hash":5,"status":"approved"}"#)),
        };
        if let Some(value) = value {
            project.insert(s.name.to_owned(), value);
        }
    }
    let mut store = Object::new();
    store.insert(ROOT.into(), Value::Object(project));
    World {
        desired,
        online,
        approvals: Approvals::new(Value::Object(store)),
    }
}

fn ctx(approvals: &Approvals, trusted_folder: bool, now: u64) -> LspPlanContext<'_> {
    LspPlanContext {
        approvals,
        project_root: ROOT,
        trusted_folder,
        now: Millis(now),
    }
}

fn run(w: &World, now: u64) -> LspPlan {
    lsp_plan(&w.desired, &w.online, ctx(&w.approvals, true, now))
}

/// Admitted per the records, read directly.
fn admitted(w: &World, name: &str, entry: &LspEntry) -> bool {
    entry.scope == LspScope::User
        || lsp_approval_state(&w.approvals, ROOT, name, &entry.config) == ApprovalState::Approved
}

fn group(action: &LspAction) -> usize {
    match action {
        LspAction::Disconnect { .. } => 0,
        LspAction::Restart { .. } => 1,
        LspAction::Reconfigure { .. } => 2,
        LspAction::Retry { .. } => 3,
        LspAction::Connect { .. } => 4,
        LspAction::Keep { .. } => 5,
        _ => 6,
    }
}

/// The JSON of a request for the `lspPlan` op.
fn request(w: &World, trusted: bool, now: u64) -> Value {
    let mut desired = Object::new();
    for (name, entry) in &w.desired {
        desired.insert(name.clone(), Value::Object(entry.config.clone()));
    }
    let mut r = Object::new();
    r.insert("op".into(), "lspPlan".into());
    r.insert("desired".into(), Value::Object(desired));
    r.insert(
        "online".into(),
        mcp_reconcile_kernel::plan::online_to_value(&w.online),
    );
    r.insert("approvals".into(), w.approvals.as_value().clone());
    r.insert("projectRoot".into(), ROOT.into());
    r.insert("trustedFolder".into(), trusted.into());
    r.insert("now".into(), Value::Number(now as f64));
    Value::Object(r)
}

// ---------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// §6 invariant 1: planning a desired set against its own online state
    /// yields only plain keeps (admitted) and skips (not admitted).
    #[test]
    fn idempotent(servers in servers()) {
        let w = world(&servers);
        let online = lsp_online_of(&w.desired, &w.approvals, ROOT);
        let plan = lsp_plan(&w.desired, &online, ctx(&w.approvals, true, 0));
        prop_assert_eq!(plan.actions.len(), w.desired.len());
        for action in &plan.actions {
            let name = action.name().unwrap_or_default();
            let entry = w.desired.get(name);
            prop_assert!(entry.is_some());
            match action {
                LspAction::Keep { reason: None, .. } => {
                    prop_assert!(entry.is_some_and(|e| admitted(&w, name, e)));
                }
                LspAction::Skip { .. } => {
                    prop_assert!(entry.is_some_and(|e| !admitted(&w, name, e)));
                }
                other => prop_assert!(false, "not quiet: {:?}", other),
            }
        }
    }

    /// One action per name in desired ∪ online, grouped in the §14.2 order,
    /// desired names before online-only names inside a group; deterministic,
    /// and the JSON op answers the same.
    #[test]
    fn shape_order_and_determinism(servers in servers(), now in 0..3000u64) {
        let w = world(&servers);
        let plan = run(&w, now);
        let names: Vec<&str> = plan.actions.iter().filter_map(LspAction::name).collect();
        let unique: HashSet<&str> = names.iter().copied().collect();
        prop_assert_eq!(unique.len(), names.len());
        let expected: HashSet<&str> = w
            .desired
            .keys()
            .chain(w.online.keys())
            .map(String::as_str)
            .collect();
        prop_assert_eq!(&unique, &expected);
        let rank = |name: &str| {
            w.desired
                .index_of(name)
                .or_else(|| w.online.index_of(name).map(|i| i + NAMES.len()))
        };
        for pair in plan.actions.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            prop_assert!(group(a) <= group(b), "group order: {:?}", plan.actions);
            if group(a) == group(b) {
                prop_assert!(rank(a.name().unwrap_or_default()) < rank(b.name().unwrap_or_default()));
            }
        }
        prop_assert_eq!(&run(&w, now), &plan);
        let req = request(&w, true, now);
        let mut ok = Object::new();
        ok.insert("ok".into(), plan.to_value());
        prop_assert_eq!(evaluate(&req).to_json(), Value::Object(ok).to_json());
        prop_assert_eq!(evaluate(&req).to_json(), evaluate(&req).to_json());
    }

    /// §14.2: an unapproved or rejected project entry is never started, and
    /// an edit to a running project server is never applied (pushed or
    /// restarted) before it is approved; a kept pending server runs a config
    /// that was approved.
    #[test]
    fn gated_never_starts_or_changes_unapproved(servers in servers(), now in 0..3000u64) {
        let w = world(&servers);
        for action in &run(&w, now).actions {
            let name = action.name().unwrap_or_default();
            match w.desired.get(name) {
                Some(entry) if entry.scope == LspScope::Project => {
                    let approved = admitted(&w, name, entry);
                    if action.applies() {
                        prop_assert!(approved, "{:?} applied unapproved", action);
                    }
                    if let LspAction::Keep { reason: Some(_), .. } = action {
                        let live = w.online.get(name).map(|o| o.config.object());
                        prop_assert!(!approved);
                        prop_assert!(live.is_some_and(|c| lsp_approval_state(&w.approvals, ROOT, name, c)
                            == ApprovalState::Approved));
                    }
                    if !approved {
                        prop_assert!(matches!(
                            action,
                            LspAction::Disconnect { .. } | LspAction::Keep { reason: Some(_), .. } | LspAction::Skip { .. }
                        ), "{:?} on an unapproved project entry", action);
                    }
                }
                Some(_) => {}
                None => prop_assert!(
                    matches!(action, LspAction::Disconnect { .. }),
                    "online-only name not disconnected: {:?}", action
                ),
            }
        }
    }

    /// §14.2: an edit confined to live fields never restarts; on a running
    /// server it reconfigures exactly the changed live fields, else keeps.
    #[test]
    fn live_only_edit_never_restarts(
        servers in servers(),
        edits in vec(live(), NAMES.len()),
        status in select(vec![Status::Connected, Status::Connecting]),
    ) {
        let mut w = world(&servers);
        // Everything admitted runs the desired seed with other live fields.
        let mut online = Online::new();
        let mut before = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            let Some((spec, _)) = &s.desired else { continue };
            let old = Spec { live: edits[i], ..*spec };
            let mut entry = OnlineEntry::connected(ServerConfig::new(build(&old)));
            entry.status = status;
            online.insert(s.name.to_owned(), entry);
            before.push((s.name, old, *spec));
        }
        w.online = online;
        let plan = run(&w, 0);
        for action in &plan.actions {
            prop_assert!(!matches!(action, LspAction::Restart { .. }), "{:?}", action);
        }
        for (name, old, new) in before {
            let Some(entry) = w.desired.get(name) else { continue };
            let action = plan.actions.iter().find(|a| a.name() == Some(name));
            if !admitted(&w, name, entry) {
                continue;
            }
            let changed = live_changes(&old, &new);
            match action {
                Some(LspAction::Reconfigure { changed: got, .. }) => prop_assert_eq!(got, &changed),
                Some(LspAction::Keep { reason: None, .. }) => prop_assert!(changed.is_empty()),
                other => prop_assert!(false, "{:?} for a live edit", other),
            }
        }
    }

    /// §14.2: a seed edit on an admitted online server always restarts, with
    /// exactly the changed seed fields and the two seed ids.
    #[test]
    fn seed_edit_always_restarts(
        servers in servers(),
        edits in vec(seed(), NAMES.len()),
        states in vec(state(), NAMES.len()),
    ) {
        let mut w = world(&servers);
        let mut online = Online::new();
        let mut before = Vec::new();
        for (i, s) in servers.iter().enumerate() {
            let Some((spec, _)) = &s.desired else { continue };
            let old = Spec { seed: edits[i], ..*spec };
            let (status, attempts, retry_at, crash_loop) = states[i];
            online.insert(s.name.to_owned(), OnlineEntry {
                config: ServerConfig::new(build(&old)),
                status, attempts, retry_at: retry_at.map(Millis), crash_loop,
                needs_auth: false,
            });
            before.push((s.name, old, *spec));
        }
        w.online = online;
        let plan = run(&w, 1000);
        for (name, old, new) in before {
            let Some(entry) = w.desired.get(name) else { continue };
            if !admitted(&w, name, entry) {
                continue;
            }
            let action = plan.actions.iter().find(|a| a.name() == Some(name));
            let changed = seed_changes(&old, &new);
            if changed.is_empty() {
                prop_assert!(!matches!(action, Some(LspAction::Restart { .. })), "{:?}", action);
            } else {
                let from = lsp_seed_id(name, &build(&old));
                let to = lsp_seed_id(name, &build(&new));
                prop_assert_ne!(&from, &to);
                prop_assert_eq!(
                    action,
                    Some(&LspAction::Restart { name: name.to_owned(), from, to, changed })
                );
            }
        }
    }

    /// Untrusted folder: exactly one noop, whatever else is going on.
    #[test]
    fn untrusted_is_noop(servers in servers()) {
        let w = world(&servers);
        let plan = lsp_plan(&w.desired, &w.online, ctx(&w.approvals, false, 0));
        prop_assert_eq!(plan.actions.len(), 1);
        prop_assert!(matches!(plan.actions[0], LspAction::Noop { .. }), "{:?}", plan);
    }

    /// The seed id moves iff a seed field's class moves; the approval hash
    /// ignores every live field but `settings`.
    #[test]
    fn identities_follow_the_field_classes(a in spec(), b in spec()) {
        let (ca, cb) = (build(&a), build(&b));
        prop_assert_eq!(
            lsp_seed_id("s", &ca) == lsp_seed_id("s", &cb),
            seed_changes(&a, &b).is_empty()
        );
        let only_policy = Spec { live: [a.live[0], b.live[1], b.live[2], b.live[3], b.live[4], b.live[5]], ..a };
        prop_assert_eq!(lsp_approval_hash(&ca), lsp_approval_hash(&build(&only_policy)));
    }
}

// ---------------------------------------------------------------------------
// Totality

fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        select(vec![0.0, -1.0, 1.5, 1e21, 65_536.0, 10_000.0]).prop_map(Value::Number),
        select(vec![
            "",
            "stdio",
            "tcp",
            "user",
            "project",
            "connected",
            "failed",
            "..",
            "/r"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        let keys = select(vec![
            "command",
            "args",
            "env",
            "transport",
            "socket",
            "workspaceFolder",
            "settings",
            "scope",
            "config",
            "status",
            "attempts",
            "retryAt",
            "crashLoop",
            "host",
            "port",
            "a",
        ]);
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            vec((keys, inner), 0..5).prop_map(|members| {
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

fn is_response(v: &Value) -> bool {
    let Some(o) = v.as_object() else { return false };
    o.len() == 1 && (o.contains_key("ok") || o.contains_key("error"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any request shape for the four ops answers ok or a typed error.
    #[test]
    fn ops_are_total(
        op in select(vec!["lspPlan", "lspSeedId", "lspApprovalHash", "parseLspJson"]),
        fields in vec((select(vec![
            "desired", "online", "approvals", "projectRoot", "trustedFolder", "now",
            "name", "config", "text", "env", "expand", "scope",
        ]), any_value()), 0..8),
    ) {
        let mut r = Object::new();
        r.insert("op".into(), op.into());
        for (k, v) in fields {
            r.insert(k.to_owned(), v);
        }
        prop_assert!(is_response(&evaluate(&Value::Object(r))));
    }

    /// A well-formed plan request with arbitrary entries answers ok or a
    /// typed error, never a panic.
    #[test]
    fn plan_is_total_on_odd_entries(
        desired in vec((select(NAMES.to_vec()), any_value()), 0..5),
        online in vec((select(NAMES.to_vec()), any_value()), 0..5),
        scopes in vec(scope(), 5),
    ) {
        let mut d = Object::new();
        for (i, (name, v)) in desired.into_iter().enumerate() {
            let v = match v {
                Value::Object(mut o) => {
                    o.insert("scope".into(), scopes[i].as_str().into());
                    Value::Object(o)
                }
                other => other,
            };
            d.insert(name.to_owned(), v);
        }
        let mut o = Object::new();
        for (name, v) in online {
            let mut entry = Object::new();
            entry.insert("config".into(), v);
            entry.insert("status".into(), "connected".into());
            o.insert(name.to_owned(), Value::Object(entry));
        }
        let mut r = Object::new();
        r.insert("op".into(), "lspPlan".into());
        r.insert("desired".into(), Value::Object(d));
        r.insert("online".into(), Value::Object(o));
        r.insert("projectRoot".into(), ROOT.into());
        r.insert("trustedFolder".into(), true.into());
        r.insert("now".into(), Value::Number(0.0));
        prop_assert!(is_response(&evaluate(&Value::Object(r))));
    }

    /// Parsing: an object file splits into kept entries and one error per
    /// skipped entry; a written scope never survives; any text is total.
    #[test]
    fn parse_accounts_for_every_entry(entries in vec((select(NAMES.to_vec()), any_value()), 0..6)) {
        let file: Object = entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        let text = Value::Object(file.clone()).to_json();
        let parsed = parse_lsp_json(&text, LspParseOptions::default());
        prop_assert_eq!(parsed.servers.len() + parsed.errors.len(), file.len());
        for (_, entry) in &parsed.servers {
            prop_assert!(entry.get("scope").is_none(), "a written scope survived");
        }
    }

    #[test]
    fn parse_is_total_on_any_text(text in ".{0,64}") {
        let mut r = Object::new();
        r.insert("op".into(), "parseLspJson".into());
        r.insert("text".into(), text.as_str().into());
        let response = evaluate(&Value::Object(r));
        let ok = response.as_object().and_then(|o| o.get("ok")).and_then(Value::as_object);
        prop_assert!(ok.is_some_and(|o| o.contains_key("servers") && o.contains_key("errors")));
    }
}
