//! Keeps the generated TypeScript types honest against the kernel.
//!
//! The `.d.ts` comes from the Rust types in `mcp_reconcile_wasm::types`; they
//! describe the kernel's JSON API but are not the kernel's own code, so they
//! could drift. Here every conformance vector's request must fit its op's
//! declared request type, and every result the kernel actually gives for it
//! must fit the declared result type. And the op table must name exactly the
//! ops the kernel answers.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::json::{parse, Value};
use mcp_reconcile_kernel::{evaluate, json::Object};
use mcp_reconcile_wasm::op_types::{check_request, check_result, OPS};

/// Vectors that feed ill-typed input on purpose, to show the kernel tolerates
/// it; the TypeScript types rightly do not advertise such input. Their
/// results must still fit.
const ILL_TYPED_ON_PURPOSE: &[(&str, &str)] = &[
    ("adm-as-05", "an approvals store that is a string"),
    ("adm-pg-01", "`scope: \"Project\"` is no scope"),
    ("adm-seq-04", "a server map that is an array"),
    (
        "src-pmj-dollar-edges",
        "expansion variables: a number, null",
    ),
    (
        "src-pmj-expand-fields-only",
        "expansion variables: a number, null",
    ),
    (
        "src-pmj-expand-before-normalize",
        "expansion variables: a number, null",
    ),
    (
        "src-pmj-expand-false",
        "expansion variables: a number, null",
    ),
    (
        "src-ps-env-everywhere",
        "expansion variables: a number, null",
    ),
    ("src-rr-non-true", "schema values that are not booleans"),
    (
        "src-asm-precedence-by-source",
        "`scope: \"user\"` (assembly drops it)",
    ),
];

fn vector_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shared = std::env::var_os("MCP_RECONCILE_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/vectors"));
    let mut files = Vec::new();
    for (i, dir) in [shared, root.join("tests/vectors")].into_iter().enumerate() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // The repository's own vector folder is optional.
            Err(_) if i > 0 => continue,
            Err(e) => panic!("cannot read vector directory {}: {e}", dir.display()),
        };
        files.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl")),
        );
    }
    files.sort();
    files
}

/// `(file:line [id], request, expects an error)` of every vector.
fn vector_requests() -> Vec<(String, Value, bool)> {
    let mut out = Vec::new();
    for file in vector_files() {
        let text = std::fs::read_to_string(&file).expect("readable vector file");
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let vector = parse(line).expect("vector line is JSON");
            let vector = vector.as_object().expect("vector is an object");
            let expects_error = vector
                .get("expect")
                .and_then(Value::as_object)
                .is_some_and(|o| o.len() == 1 && o.get("error") == Some(&Value::Bool(true)));
            let request = vector
                .get("request")
                .cloned()
                .expect("vector has a request");
            let id = vector.get("id").and_then(Value::as_str).unwrap_or_default();
            out.push((
                format!("{}:{} [{id}]", file.display(), n + 1),
                request,
                expects_error,
            ));
        }
    }
    assert!(!out.is_empty(), "no vectors found");
    out
}

fn op_of(request: &Value) -> Option<&str> {
    request.as_object()?.get("op")?.as_str()
}

fn without_op(request: &Value) -> String {
    let mut fields = Object::new();
    for (k, v) in request.as_object().expect("request is an object").iter() {
        if k != "op" {
            fields.insert(k.clone(), v.clone());
        }
    }
    Value::Object(fields).to_json()
}

#[test]
fn every_vector_request_and_kernel_result_fits_the_declared_types() {
    let mut failures = Vec::new();
    for (at, request, expects_error) in vector_requests() {
        // Error vectors feed deliberately malformed requests.
        if expects_error {
            continue;
        }
        let Some(op) = op_of(&request) else {
            failures.push(format!("{at}: a vector that expects ok has no op"));
            continue;
        };
        let response = evaluate(&request);
        let ok = response
            .as_object()
            .and_then(|r| r.get("ok"))
            .map(Value::to_json);
        let ill_typed = ILL_TYPED_ON_PURPOSE
            .iter()
            .any(|(id, _)| at.ends_with(&format!("[{id}]")));
        let mut result = match (check_request(op, &without_op(&request)), ill_typed) {
            (Ok(()), true) => {
                Err("fits the request type: drop it from ILL_TYPED_ON_PURPOSE".into())
            }
            (Err(_), true) => Ok(()),
            (checked, false) => checked,
        };
        if let (Ok(()), Some(ok)) = (&result, &ok) {
            result = check_result(op, ok);
        }
        if let Err(why) = result {
            failures.push(format!("{at} {op}: {why}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} vectors do not fit the TypeScript types in host-wasm/src/types.rs (fix the \
         type there, or, for input that is ill-typed on purpose, list the vector in \
         ILL_TYPED_ON_PURPOSE):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_ill_typed_vector_exists() {
    let requests = vector_requests();
    let missing: Vec<&str> = ILL_TYPED_ON_PURPOSE
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| {
            !requests
                .iter()
                .any(|(at, _, _)| at.ends_with(&format!("[{id}]")))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ILL_TYPED_ON_PURPOSE names no vector {missing:?}"
    );
}

#[test]
fn the_op_table_covers_every_op_the_vectors_use() {
    let mut missing: Vec<String> = vector_requests()
        .iter()
        .filter(|(_, _, expects_error)| !expects_error)
        .filter_map(|(_, r, _)| op_of(r))
        .filter(|op| !OPS.contains(op))
        .map(str::to_owned)
        .collect();
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "ops without TypeScript types: {missing:?}"
    );
}

#[test]
fn the_kernel_answers_every_declared_op() {
    let unknown: Vec<&str> = OPS
        .iter()
        .copied()
        .filter(|op| {
            let response = mcp_reconcile_kernel::evaluate_str(&format!("{{\"op\":\"{op}\"}}"));
            response.contains("\"kind\":\"unknown-op\"")
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "the kernel answers unknown-op for declared ops {unknown:?}"
    );
}
