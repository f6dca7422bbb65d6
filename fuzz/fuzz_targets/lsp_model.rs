//! Model-based language-server plan fuzzing (SPEC §14.2): desired entries,
//! live servers and approval records from a small vocabulary (so names
//! overlap and edits touch one seed or live field), then the invariants:
//!
//! * an untrusted folder is exactly one `noop`; otherwise exactly one action
//!   per name in desired ∪ online;
//! * a project entry that is not approved for its current entry is never
//!   started, restarted, retried or reconfigured;
//! * an edit confined to live fields never restarts; a seed edit of a running,
//!   admitted server always does;
//! * planning the admitted desired set against itself is quiet;
//! * same input, same plan.
#![no_main]

use std::collections::HashSet;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use mcp_reconcile_kernel::approvals::{ApprovalState, Approvals};
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::lsp::{
    lsp_approval_hash, lsp_approval_state, lsp_online_of, lsp_plan, lsp_seed_id, LspAction,
    LspEntry, LspPlanContext, LspScope, LspServers,
};
use mcp_reconcile_kernel::plan::{Online, OnlineEntry, Status};
use mcp_reconcile_kernel::{Millis, ServerConfig};

const NAMES: [&str; 5] = ["json", "yaml", "py", "0", "a::b"];
const ROOT: &str = "/home/dev/repo";

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Entry {
    name: u8,
    project: bool,
    command: u8,
    args: u8,
    settings: u8,
    extensions: u8,
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
struct Record {
    entry: Entry,
    approved: bool,
}

#[derive(Arbitrary, Debug)]
struct Input {
    desired: Vec<Entry>,
    online: Vec<Live>,
    records: Vec<Record>,
    trusted: bool,
    now: u16,
}

fn name(e: &Entry) -> String {
    NAMES[usize::from(e.name) % NAMES.len()].to_owned()
}

fn entry(e: &Entry) -> Object {
    let mut o = Object::new();
    o.insert(
        "command".into(),
        ["node", "pylsp", "yaml-language-server"][usize::from(e.command) % 3].into(),
    );
    if e.args % 3 != 0 {
        let args = (0..e.args % 3)
            .map(|i| Value::from(format!("--a{i}")))
            .collect();
        o.insert("args".into(), Value::Array(args));
    }
    if e.settings % 3 != 0 {
        let mut inner = Object::new();
        inner.insert("enable".into(), (e.settings % 3 == 1).into());
        let mut settings = Object::new();
        settings.insert("json".into(), Value::Object(inner));
        o.insert("settings".into(), Value::Object(settings));
    }
    if e.extensions % 2 == 1 {
        let mut map = Object::new();
        map.insert(".json".into(), "json".into());
        o.insert("extensionToLanguage".into(), Value::Object(map));
    }
    o
}

fn scope(e: &Entry) -> LspScope {
    if e.project {
        LspScope::Project
    } else {
        LspScope::User
    }
}

fn status(s: u8) -> Status {
    [
        Status::Connecting,
        Status::Connected,
        Status::Failed,
        Status::Disconnected,
    ][usize::from(s) % 4]
}

fuzz_target!(|input: Input| {
    let mut desired = LspServers::new();
    for e in &input.desired {
        desired.insert(
            name(e),
            LspEntry {
                config: entry(e),
                scope: scope(e),
            },
        );
    }
    let mut online = Online::new();
    for l in &input.online {
        let mut live = OnlineEntry::connected(ServerConfig::new(entry(&l.entry)));
        live.status = status(l.status);
        live.attempts = u32::from(l.attempts % 10);
        live.retry_at = (l.retry_at % 3 != 0).then_some(Millis(u64::from(l.retry_at)));
        live.crash_loop = l.crash_loop;
        online.insert(name(&l.entry), live);
    }
    let mut records = Object::new();
    for r in &input.records {
        let mut record = Object::new();
        record.insert(
            "hash".into(),
            lsp_approval_hash(&entry(&r.entry)).0.into(),
        );
        record.insert(
            "status".into(),
            if r.approved { "approved" } else { "rejected" }.into(),
        );
        records.insert(name(&r.entry), Value::Object(record));
    }
    let mut store = Object::new();
    store.insert(ROOT.into(), Value::Object(records));
    let approvals = Approvals::new(Value::Object(store));
    let ctx = LspPlanContext {
        approvals: &approvals,
        project_root: ROOT,
        trusted_folder: input.trusted,
        now: Millis(u64::from(input.now)),
    };

    let plan = lsp_plan(&desired, &online, ctx);
    assert_eq!(plan, lsp_plan(&desired, &online, ctx), "deterministic");
    if !input.trusted {
        assert!(matches!(plan.actions.as_slice(), [LspAction::Noop { .. }]));
        return;
    }

    let names: HashSet<&str> = desired
        .keys()
        .chain(online.keys())
        .map(String::as_str)
        .collect();
    let planned: Vec<&str> = plan.actions.iter().filter_map(LspAction::name).collect();
    assert_eq!(planned.len(), names.len(), "{plan:?}");
    assert_eq!(planned.iter().copied().collect::<HashSet<_>>(), names);

    for action in &plan.actions {
        let Some(n) = action.name() else { continue };
        let Some(want) = desired.get(n) else { continue };
        let approved = want.scope == LspScope::User
            || lsp_approval_state(&approvals, ROOT, n, &want.config) == ApprovalState::Approved;
        let changes = matches!(
            action,
            LspAction::Connect { .. }
                | LspAction::Restart { .. }
                | LspAction::Retry { .. }
                | LspAction::Reconfigure { .. }
        );
        assert!(approved || !changes, "unapproved {n} changed: {action:?}");
        if let (LspAction::Restart { .. }, Some(live)) = (action, online.get(n)) {
            assert_ne!(
                lsp_seed_id(n, &live.config.object()),
                lsp_seed_id(n, &want.config),
                "a live-only edit restarted {n}"
            );
        }
    }

    // Planning the admitted set against itself is quiet.
    let settled = lsp_online_of(&desired, &approvals, ROOT);
    let again = lsp_plan(&desired, &settled, ctx);
    for action in &again.actions {
        assert!(
            matches!(action, LspAction::Keep { .. } | LspAction::Skip { .. }),
            "not quiet: {action:?}"
        );
    }
});
