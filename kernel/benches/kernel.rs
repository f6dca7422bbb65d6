//! Kernel micro-benchmarks: `plan`, `connectionId`, `approvalHash`,
//! `settingsDiff`, `hotReload` for 10 … 100 000 servers with ~1 % changed
//! (inputs: `support/mod.rs`).
//!
//! Each op is timed twice per size:
//! * `native/N`: the typed kernel call on already-built inputs;
//! * `api/N`: `evaluate_str` on the request's JSON text, answering JSON text
//!   — the same text the wasm package marshals (see `bench/kernel-wasm.mjs`).
//!
//! For the per-server ops (`connectionId`, `approvalHash`) one iteration is
//! all N servers. Run: `cargo bench -p mcp-reconcile-kernel --bench kernel`
//! (`MCP_BENCH_SIZES=10,100` to limit the sizes); `node bench/kernel-summary.mjs`
//! prints ns per server and the growth exponents.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use mcp_reconcile_kernel::config::servers_to_value;
use mcp_reconcile_kernel::hot_reload::{hot_reload, Previous};
use mcp_reconcile_kernel::plan::{plan, Mode};
use mcp_reconcile_kernel::{approval_hash, connection_id, evaluate_str, settings_diff, Millis};
use support::{gating_for, Scenario, ROOT, SIZES};

fn sizes() -> Vec<usize> {
    match std::env::var("MCP_BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| s.trim().replace('_', "").parse().ok())
            .collect(),
        Err(_) => SIZES.to_vec(),
    }
}

/// Fewer, flat samples for the big sizes so a full run stays a few minutes.
fn configure(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    n: usize,
) {
    group.throughput(Throughput::Elements(n as u64));
    if n >= 10_000 {
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(if n >= 100_000 { 6 } else { 3 }));
    } else {
        group.sampling_mode(SamplingMode::Auto);
        group.sample_size(30);
        group.measurement_time(Duration::from_secs(2));
    }
}

fn benches(c: &mut Criterion) {
    for n in sizes() {
        let s = Scenario::new(n);
        check(&s);

        let mut group = c.benchmark_group("plan");
        configure(&mut group, n);
        group.bench_with_input(BenchmarkId::new("native", n), &s, |b, s| {
            b.iter(|| {
                plan(
                    black_box(&s.new_servers),
                    black_box(&s.online),
                    &s.new_gating,
                    true,
                    Mode::Session,
                    Millis(1_000),
                )
            })
        });
        let text = s.plan_request().to_json();
        group.bench_with_input(BenchmarkId::new("api", n), &text, |b, t| {
            b.iter(|| evaluate_str(black_box(t)))
        });
        group.finish();

        let mut group = c.benchmark_group("connectionId");
        configure(&mut group, n);
        group.bench_with_input(BenchmarkId::new("native", n), &s, |b, s| {
            b.iter(|| {
                for (name, config) in black_box(&s.new_servers) {
                    black_box(connection_id(name, config).ok());
                }
            })
        });
        let texts: Vec<String> = s
            .connection_id_requests()
            .iter()
            .map(|r| r.to_json())
            .collect();
        group.bench_with_input(BenchmarkId::new("api", n), &texts, |b, texts| {
            b.iter(|| {
                for t in texts {
                    black_box(evaluate_str(black_box(t)));
                }
            })
        });
        group.finish();

        let mut group = c.benchmark_group("approvalHash");
        configure(&mut group, n);
        group.bench_with_input(BenchmarkId::new("native", n), &s, |b, s| {
            b.iter(|| {
                for config in black_box(&s.new_servers).values() {
                    black_box(approval_hash(config));
                }
            })
        });
        let texts: Vec<String> = s
            .approval_hash_requests()
            .iter()
            .map(|r| r.to_json())
            .collect();
        group.bench_with_input(BenchmarkId::new("api", n), &texts, |b, texts| {
            b.iter(|| {
                for t in texts {
                    black_box(evaluate_str(black_box(t)));
                }
            })
        });
        group.finish();

        let mut group = c.benchmark_group("settingsDiff");
        configure(&mut group, n);
        group.bench_with_input(BenchmarkId::new("native", n), &s, |b, s| {
            b.iter(|| settings_diff(black_box(&s.old_settings), black_box(&s.new_settings)))
        });
        let text = s.settings_diff_request().to_json();
        group.bench_with_input(BenchmarkId::new("api", n), &text, |b, t| {
            b.iter(|| evaluate_str(black_box(t)))
        });
        group.finish();

        let mut group = c.benchmark_group("hotReload");
        configure(&mut group, n);
        let previous = previous(&s);
        group.bench_with_input(BenchmarkId::new("native", n), &s, |b, s| {
            b.iter(|| {
                hot_reload(
                    black_box(&previous),
                    black_box(&s.new_layers),
                    gating_for(s),
                    &s.approvals,
                    ROOT,
                    false,
                )
            })
        });
        let text = s.hot_reload_request().to_json();
        group.bench_with_input(BenchmarkId::new("api", n), &text, |b, t| {
            b.iter(|| evaluate_str(black_box(t)))
        });
        group.finish();
    }
}

fn previous(s: &Scenario) -> Previous {
    Previous {
        servers: servers_to_value(&s.old_servers),
        gating: s.old_gating.clone(),
        removed: Some(Vec::new()),
    }
}

/// The scenario is what the docs say: the plan reconnects exactly the
/// changed servers and keeps the rest; the reload decides to reconcile.
fn check(s: &Scenario) {
    let p = plan(
        &s.new_servers,
        &s.online,
        &s.new_gating,
        true,
        Mode::Session,
        Millis(1_000),
    )
    .expect("plan");
    let mut reconnects: Vec<&str> = p
        .actions
        .iter()
        .filter(|a| a.kind() == "reconnect")
        .filter_map(|a| a.name())
        .collect();
    reconnects.sort_unstable();
    let mut changed: Vec<&str> = s.changed.iter().map(String::as_str).collect();
    changed.sort_unstable();
    assert_eq!(reconnects, changed, "n = {}", s.n);
    let keeps = p.actions.iter().filter(|a| a.kind() == "keep").count();
    assert_eq!(keeps + reconnects.len(), s.n, "n = {}", s.n);
    let outcome = hot_reload(
        &previous(s),
        &s.new_layers,
        gating_for(s),
        &s.approvals,
        ROOT,
        false,
    )
    .expect("hot reload");
    assert!(
        outcome.reconcile && outcome.promptable.is_empty(),
        "n = {}",
        s.n
    );
    assert!(!settings_diff(&s.old_settings, &s.new_settings).is_empty());
    let response = evaluate_str(&s.plan_request().to_json());
    assert!(
        response.starts_with("{\"ok\""),
        "{}",
        &response[..200.min(response.len())]
    );
}

criterion_group! {
    name = kernel;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .without_plots();
    targets = benches
}
criterion_main!(kernel);
