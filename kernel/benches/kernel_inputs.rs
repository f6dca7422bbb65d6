//! Writes the kernel benchmark's requests as JSON files, so the wasm
//! benchmark (`bench/kernel-wasm.mjs`) times exactly the inputs the criterion
//! bench times natively.
//!
//! `cargo bench -p mcp-reconcile-kernel --bench kernel_inputs -- --out DIR`
//! writes `DIR/<op>-<n>.json`: one request object for `plan`, `settingsDiff`
//! and `hotReload`, an array of N request objects for `connectionId` and
//! `approvalHash`. The `op` member is included (the wasm bench drops it for
//! the typed exports).

mod support;

use std::path::PathBuf;

use mcp_reconcile_kernel::Value;
use support::{Scenario, SIZES};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(out) = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
    else {
        eprintln!("usage: cargo bench -p mcp-reconcile-kernel --bench kernel_inputs -- --out DIR");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&out).expect("create the output directory");
    for n in SIZES {
        let s = Scenario::new(n);
        let files = [
            ("plan", s.plan_request()),
            ("settingsDiff", s.settings_diff_request()),
            ("hotReload", s.hot_reload_request()),
            ("connectionId", Value::Array(s.connection_id_requests())),
            ("approvalHash", Value::Array(s.approval_hash_requests())),
        ];
        for (op, request) in files {
            let path = out.join(format!("{op}-{n}.json"));
            std::fs::write(&path, request.to_json()).expect("write a request file");
        }
        eprintln!(
            "wrote the requests for n = {n} ({} changed)",
            s.changed.len()
        );
    }
}
