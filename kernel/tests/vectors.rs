//! Runs the conformance vectors (SPEC §10 "Vector files") through `evaluate`.
//!
//! Vectors come from `../shared/vectors/*.jsonl` beside the repository (or the
//! directory in `MCP_RECONCILE_VECTORS`) and from the repository's own
//! `tests/vectors/*.jsonl`. Every mismatch is listed before the test fails.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::evaluate;
use mcp_reconcile_kernel::gating::{gating_equal, Gating};
use mcp_reconcile_kernel::json::{parse, Value};

fn vector_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shared = std::env::var_os("MCP_RECONCILE_VECTORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/vectors"));
    vec![shared, root.join("tests/vectors")]
}

fn vector_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (i, dir) in vector_dirs().into_iter().enumerate() {
        // The shared directory must exist; the repository's own one may not yet.
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(_) if i > 0 => continue,
            Err(e) => panic!("cannot read vector directory {}: {e}", dir.display()),
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// One comparison rule set from a vector's `compare` field.
#[derive(Default)]
struct Rules {
    errors_by_length: bool,
    must_contain: Vec<String>,
    must_not_contain: Vec<String>,
    gating_paths: Vec<String>,
    ignore_paths: Vec<String>,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn rules(compare: Option<&Value>) -> Rules {
    let Some(Value::Object(c)) = compare else {
        return Rules::default();
    };
    Rules {
        errors_by_length: c.get("errors").and_then(Value::as_str) == Some("length"),
        must_contain: strings(c.get("mustContainCI")),
        must_not_contain: strings(c.get("mustNotContainCI")),
        gating_paths: strings(c.get("gatingEqual")),
        ignore_paths: strings(c.get("ignore")),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// Compares `got` with `want` at `path`; returns a description of the first difference.
fn compare(path: &str, got: &Value, want: &Value, rules: &Rules) -> Option<String> {
    if rules.ignore_paths.iter().any(|p| p == path) {
        return None;
    }
    if rules.gating_paths.iter().any(|p| p == path) {
        let g = Gating::from_value(got);
        let w = Gating::from_value(want);
        return match (g, w) {
            (Ok(g), Ok(w)) if gating_equal(&g, &w) => None,
            _ => Some(format!(
                "at `{path}`: gating {got} is not gatingEqual to {want}"
            )),
        };
    }
    if rules.errors_by_length && path == "errors" {
        let (g, w) = (got.as_array().map(Vec::len), want.as_array().map(Vec::len));
        return (g != w || g.is_none()).then(|| {
            format!(
                "at `errors`: {} errors, expected {}: {got}",
                g.unwrap_or(0),
                w.unwrap_or(0)
            )
        });
    }
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for (key, wv) in w {
                let p = join(path, key);
                match g.get(key) {
                    Some(gv) => {
                        if let Some(d) = compare(&p, gv, wv, rules) {
                            return Some(d);
                        }
                    }
                    None if rules.ignore_paths.contains(&p) => {}
                    None => return Some(format!("at `{p}`: missing, expected {wv}")),
                }
            }
            g.keys()
                .find(|k| !w.contains_key(k) && !rules.ignore_paths.contains(&join(path, k)))
                .map(|k| format!("at `{}`: unexpected member", join(path, k)))
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                return Some(format!("at `{path}`: got {got}, expected {want}"));
            }
            g.iter()
                .zip(w)
                .enumerate()
                .find_map(|(i, (gv, wv))| compare(&join(path, &i.to_string()), gv, wv, rules))
        }
        _ => (got != want).then(|| format!("at `{path}`: got {got}, expected {want}")),
    }
}

/// Checks one vector line; `Err` describes the mismatch.
fn check(line: &str) -> Result<(), String> {
    let vector = parse(line).map_err(|e| format!("vector is not JSON: {e}"))?;
    let v = vector.as_object().ok_or("vector is not an object")?;
    let request = v.get("request").ok_or("vector has no request")?;
    let expect = v.get("expect").ok_or("vector has no expect")?;
    let response = evaluate(request);
    let response = response.as_object().ok_or("response is not an object")?;
    let wants_error = expect
        .as_object()
        .is_some_and(|o| o.len() == 1 && o.get("error") == Some(&Value::Bool(true)));
    if wants_error {
        return match response.get("error") {
            Some(_) => Ok(()),
            None => Err(format!(
                "expected an error, got {}",
                Value::Object(response.clone())
            )),
        };
    }
    let Some(got) = response.get("ok") else {
        return Err(format!(
            "expected ok, got {}",
            Value::Object(response.clone())
        ));
    };
    let rules = rules(v.get("compare"));
    if !rules.must_contain.is_empty() || !rules.must_not_contain.is_empty() {
        let Some(message) = got.as_str() else {
            return Err(format!("expected a message, got {got}"));
        };
        let lower = message.to_lowercase();
        if let Some(missing) = rules
            .must_contain
            .iter()
            .find(|t| !lower.contains(&t.to_lowercase()))
        {
            return Err(format!("message lacks {missing:?}: {message}"));
        }
        if let Some(extra) = rules
            .must_not_contain
            .iter()
            .find(|t| lower.contains(&t.to_lowercase()))
        {
            return Err(format!("message must not contain {extra:?}: {message}"));
        }
        return Ok(());
    }
    compare("", got, expect, &rules).map_or(Ok(()), Err)
}

#[test]
fn every_vector_matches() {
    let mut failures = Vec::new();
    let mut total = 0;
    for file in vector_files() {
        let text = std::fs::read_to_string(&file).expect("readable vector file");
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            total += 1;
            if let Err(why) = check(line) {
                let id = parse(line)
                    .ok()
                    .and_then(|v| {
                        v.as_object()
                            .and_then(|o| o.get("id"))
                            .and_then(|i| i.as_str().map(str::to_owned))
                    })
                    .unwrap_or_default();
                failures.push(format!("{}:{} [{id}] {why}", file.display(), n + 1));
            }
        }
    }
    assert!(total > 0, "no vectors found in {:?}", vector_dirs());
    assert!(
        failures.is_empty(),
        "{} of {total} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
