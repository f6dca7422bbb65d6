//! The package's TypeScript types: generated from the kernel, and true to it.
//!
//! `generated/kernel.d.ts` is what `mcp_reconcile_kernel::api::typescript`
//! writes from the kernel's op table and the Rust types its codecs decode
//! into and encode from; the facade puts it into the package's `.d.ts`. Here
//! the committed file must equal a fresh one, the facade must export exactly
//! the kernel's ops, and every conformance vector's request and the result
//! the kernel really gives for it must type-check (`tsc`) against the
//! generated types.

use std::path::{Path, PathBuf};
use std::process::Command;

use mcp_reconcile_kernel::api::{typescript::declarations, OPS as KERNEL_OPS};
use mcp_reconcile_kernel::evaluate;
use mcp_reconcile_kernel::json::{parse, Object, Value};

/// Vectors that feed ill-typed input on purpose, to show the kernel tolerates
/// it; the TypeScript types rightly do not advertise such input. Their
/// requests must fail to type-check (`@ts-expect-error`); their results must
/// still fit.
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
        "cp-malformed-rules-left-out",
        "policy entries that are no rule",
    ),
    (
        "cp-malformed-deny-rule-left-out",
        "a `serverUrl` that is an array",
    ),
    (
        "cp-only-malformed-allow-rules-allow-none",
        "a rule with a misspelt key",
    ),
    (
        "cp-allow-list-not-an-array-allows-none",
        "a policy list that is an object",
    ),
    (
        "cp-deny-list-not-an-array-denies-nothing",
        "a policy list that is a string",
    ),
    (
        "cp-unknown-policy-keys-ignored",
        "the client's own key names in `policy`",
    ),
    (
        "src-asm-precedence-by-source",
        "`scope: \"user\"` (assembly drops it)",
    ),
];

const REFRESH: &str = "UPDATE_TYPES=1 cargo test -p mcp-reconcile-wasm --test typescript";

fn host_wasm() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_committed_declarations_are_fresh() {
    let path = host_wasm().join("generated/kernel.d.ts");
    let fresh = declarations();
    if std::env::var_os("UPDATE_TYPES").is_some() {
        std::fs::write(&path, &fresh).expect("writable generated/kernel.d.ts");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is stale: the kernel's request or result types changed. Refresh it with\n  {REFRESH}\n\
         and commit it.",
        path.display()
    );
}

#[test]
fn the_facade_exports_exactly_the_kernels_ops() {
    let mut facade = mcp_reconcile_wasm::OPS.to_vec();
    let mut kernel = KERNEL_OPS.to_vec();
    facade.sort_unstable();
    kernel.sort_unstable();
    assert_eq!(
        facade, kernel,
        "host-wasm/src/lib.rs `ops!` must list every kernel op once"
    );
}

#[test]
fn every_vector_and_kernel_result_type_checks() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("typescript-vectors");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    std::fs::write(dir.join("kernel.d.ts"), declarations()).expect("writable scratch file");
    std::fs::write(dir.join("vectors.ts"), vectors_module()).expect("writable scratch file");
    std::fs::write(
        dir.join("tsconfig.json"),
        r#"{
  "compilerOptions": {
    "target": "ES2022",
    "module": "Node16",
    "moduleResolution": "Node16",
    "strict": true,
    "noEmit": true,
    "skipLibCheck": false,
    "types": []
  },
  "files": ["kernel.d.ts", "vectors.ts"]
}
"#,
    )
    .expect("writable scratch file");
    let output = Command::new("node")
        .arg(tsc())
        .arg("-p")
        .arg(dir.join("tsconfig.json"))
        .output()
        .expect("node runs (Node.js is needed for this test)");
    assert!(
        output.status.success(),
        "vectors or kernel results do not fit the generated TypeScript types ({}).\n\
         Fix the kernel type's `ts` attributes (then {REFRESH}), or, for input that is\n\
         ill-typed on purpose, list the vector in ILL_TYPED_ON_PURPOSE:\n{}{}",
        dir.join("vectors.ts").display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

#[test]
fn every_ill_typed_vector_exists() {
    let requests = vector_requests();
    let missing: Vec<&str> = ILL_TYPED_ON_PURPOSE
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !requests.iter().any(|v| v.id == *id))
        .collect();
    assert!(
        missing.is_empty(),
        "ILL_TYPED_ON_PURPOSE names no vector {missing:?}"
    );
}

/// The TypeScript compiler the repository pins (root `package.json`, or the
/// package's own).
fn tsc() -> PathBuf {
    let root = host_wasm().join("..");
    [root.join("node_modules"), host_wasm().join("node_modules")]
        .iter()
        .map(|modules| modules.join("typescript/bin/tsc"))
        .find(|tsc| tsc.exists())
        .unwrap_or_else(|| {
            panic!("no TypeScript compiler: run `npm ci` at the repository root (or bash scripts/setup.sh)")
        })
}

/// One typed constant per vector request and per kernel result.
fn vectors_module() -> String {
    let mut out = String::from("import type { Ops } from \"./kernel.js\";\n\n");
    for (n, vector) in vector_requests().into_iter().enumerate() {
        // Error vectors feed deliberately malformed requests.
        if vector.expects_error {
            continue;
        }
        let Some(op) = vector
            .request
            .as_object()
            .and_then(|r| r.get("op"))
            .and_then(Value::as_str)
        else {
            out.push_str(&format!(
                "// {}: a vector that expects ok has no op\nnull as never as 1;\n",
                vector.at
            ));
            continue;
        };
        let op_type = format!("Ops[{}]", Value::from(op).to_json());
        out.push_str(&format!("// {}\n", vector.at));
        if let Some((_, why)) = ILL_TYPED_ON_PURPOSE.iter().find(|(id, _)| *id == vector.id) {
            out.push_str(&format!(
                "// @ts-expect-error ill-typed on purpose: {why}\n"
            ));
        }
        out.push_str(&format!(
            "export const request{n}: {op_type}[\"request\"] = {};\n",
            literal(&without_op(&vector.request))
        ));
        let response = evaluate(&vector.request);
        if let Some(ok) = response.as_object().and_then(|r| r.get("ok")) {
            out.push_str(&format!(
                "export const result{n}: {op_type}[\"result\"] = {};\n",
                literal(ok)
            ));
        }
    }
    out
}

/// JSON text as a TypeScript expression. Keys named after `Object.prototype`
/// members are renamed: TypeScript types an object literal's `__proto__` as
/// the prototype and loses the contextual type of a `constructor` member (the
/// kernel keeps both as plain members, as `JSON.parse` does).
fn literal(value: &Value) -> String {
    ["__proto__", "constructor"]
        .iter()
        .fold(value.to_json(), |text, key| {
            text.replace(&format!("\"{key}\":"), &format!("\"{key} (renamed)\":"))
        })
}

struct VectorRequest {
    at: String,
    id: String,
    request: Value,
    expects_error: bool,
}

fn vector_files() -> Vec<PathBuf> {
    let root = host_wasm().join("..");
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

fn vector_requests() -> Vec<VectorRequest> {
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
            let id = vector.get("id").and_then(Value::as_str).unwrap_or_default();
            out.push(VectorRequest {
                at: format!("{}:{} [{id}]", file.display(), n + 1),
                id: id.to_owned(),
                request: vector
                    .get("request")
                    .cloned()
                    .expect("vector has a request"),
                expects_error,
            });
        }
    }
    assert!(!out.is_empty(), "no vectors found");
    out
}

fn without_op(request: &Value) -> Value {
    let mut fields = Object::new();
    for (k, v) in request.as_object().expect("request is an object").iter() {
        if k != "op" {
            fields.insert(k.clone(), v.clone());
        }
    }
    Value::Object(fields)
}
