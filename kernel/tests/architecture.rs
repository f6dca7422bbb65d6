//! Architecture invariants, checked by reading the kernel's own sources.
//!
//! 1. The JSON API is a layer on top of the domain: no file outside
//!    `src/api/` imports or names `crate::api` (the domain never decodes a
//!    request or encodes a response).
//! 2. The kernel is pure: no source uses `std::fs`, `std::net`,
//!    `std::thread`, `std::process`, `std::env`, `std::time::SystemTime` or
//!    `std::time::Instant` (time comes in as `Millis`, files as text).
//!
//! Comments, string and character literals are ignored; grouped imports
//! (`use std::{env, fmt};`, `use crate::{api::Request, json};`) are expanded
//! before they are checked.

use std::path::{Path, PathBuf};

/// Paths the pure kernel must not use (matched segment by segment).
const IMPURE: [&str; 7] = [
    "std::fs",
    "std::net",
    "std::thread",
    "std::process",
    "std::env",
    "std::time::SystemTime",
    "std::time::Instant",
];

/// The API layer, which only `src/api/` may name.
const API: &str = "crate::api";

#[test]
fn no_module_outside_api_imports_the_api() {
    let src = src_dir();
    let api_dir = src.join("api");
    assert!(api_dir.is_dir(), "{} is missing", api_dir.display());
    let mut violations = Vec::new();
    for file in rust_files(&src) {
        if file.starts_with(&api_dir) {
            continue;
        }
        for path in referenced_paths(&read(&file)) {
            if has_prefix(&path, API) {
                violations.push(format!("{}: {path}", relative(&file)));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "only src/api/ may use the API layer; found:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_kernel_does_no_io() {
    let mut violations = Vec::new();
    let files = rust_files(&src_dir());
    assert!(files.len() > 10, "too few kernel sources found: {files:?}");
    for file in files {
        for path in referenced_paths(&read(&file)) {
            for banned in IMPURE {
                if has_prefix(&path, banned) {
                    violations.push(format!("{}: {path}", relative(&file)));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the kernel must stay pure (no IO, clock, threads, processes or environment); found:\n{}",
        violations.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The checker's own tests: it must see through grouping and ignore comments.

#[test]
fn the_checker_expands_grouped_imports() {
    let paths = referenced_paths(
        "use std::{fmt, env::{self, var}};\npub(crate) use crate::{json, api::Request as R};",
    );
    assert!(
        paths.contains(&"crate::api::Request".to_owned()),
        "{paths:?}"
    );
    assert!(paths.iter().any(|p| has_prefix(p, "std::env")), "{paths:?}");
    assert!(paths.iter().any(|p| has_prefix(p, API)), "{paths:?}");
    assert!(!paths.iter().any(|p| has_prefix(p, "std::fs")), "{paths:?}");
}

#[test]
fn the_checker_finds_inline_paths_and_ignores_comments_and_strings() {
    let code = "fn f() { let _ = ::std::time::Instant::now(); crate::api::evaluate_str(x); }";
    let paths = referenced_paths(code);
    assert!(
        paths.iter().any(|p| has_prefix(p, "std::time::Instant")),
        "{paths:?}"
    );
    assert!(paths.iter().any(|p| has_prefix(p, API)), "{paths:?}");
    let quiet = "//! never reads std::env\n/* std::fs */ fn g<'a>(s: &'a str) -> &'a str { \"crate::api::x\"; 'c'; s }";
    assert_eq!(referenced_paths(quiet), Vec::<String>::new());
    // A segment prefix, not a string prefix.
    assert!(!has_prefix("std::environment", "std::env"));
    assert!(!has_prefix("crate::api_types", API));
}

// ---------------------------------------------------------------------------

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn relative(file: &Path) -> String {
    file.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(file)
        .display()
        .to_string()
}

fn read(file: &Path) -> String {
    std::fs::read_to_string(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Whether `path` is `prefix` or lies under it (`a::b` is under `a`, but
/// `a_b` is not).
fn has_prefix(path: &str, prefix: &str) -> bool {
    let path = path.strip_prefix("::").unwrap_or(path);
    path == prefix || path.starts_with(&format!("{prefix}::"))
}

/// Every path the code names: each `use` tree expanded into full paths, and
/// every other `a::b::c` path written inline.
fn referenced_paths(source: &str) -> Vec<String> {
    let code = code_only(source);
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    // `use` declarations (possibly `pub use`, `pub(crate) use`).
    let mut inline = String::new();
    while let Some(at) = find_keyword(rest, "use") {
        inline.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let end = after.find(';').unwrap_or(after.len());
        expand_use("", &squeeze(&after[..end]), &mut paths);
        rest = after.get(end + 1..).unwrap_or("");
    }
    inline.push_str(rest);
    paths.extend(inline_paths(&inline));
    paths
}

/// The byte offset of `word` as a whole identifier in `text`.
fn find_keyword(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = at.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(at + word.len()).copied();
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `text` with whitespace runs collapsed to one space, and dropped next to
/// `:`, `{`, `}` and `,` (so `a :: { b , c }` reads `a::{b,c}`).
fn squeeze(text: &str) -> String {
    let punct = |c: char| matches!(c, ':' | '{' | '}' | ',');
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && !punct(c) && !out.ends_with(punct) && !out.is_empty() {
            out.push(' ');
        }
        pending_space = false;
        out.push(c);
    }
    out
}

/// Expands a squeezed use tree (`a::{b,c::{d,self}}`) under `base`.
fn expand_use(base: &str, tree: &str, out: &mut Vec<String>) {
    let join = |tail: &str| match (base.is_empty(), tail) {
        (true, _) => tail.to_owned(),
        (false, "self") => base.to_owned(),
        (false, _) => format!("{base}::{tail}"),
    };
    match tree.find('{') {
        None => {
            let path = tree.split(" as ").next().unwrap_or(tree).trim();
            if !path.is_empty() {
                out.push(join(path.trim_end_matches("::")));
            }
        }
        Some(open) => {
            let prefix = join(tree[..open].trim_end_matches("::"));
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            for item in split_top_level(inner) {
                expand_use(&prefix, item, out);
            }
        }
    }
}

/// Splits `a,b::{c,d},e` at the commas outside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&text[start..]);
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Every `seg::seg::…` path written in `code` (at least two segments).
fn inline_paths(code: &str) -> Vec<String> {
    let squeezed = squeeze(code);
    let is_path_char = |c: char| c.is_alphanumeric() || c == '_' || c == ':';
    squeezed
        .split(|c: char| !is_path_char(c))
        .map(|token| token.trim_matches(':'))
        .filter(|token| token.contains("::"))
        .map(str::to_owned)
        .collect()
}

/// `source` with comments removed and string and character literals emptied.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !prev_is_ident(&chars, i)
        {
            // A raw string: r"…" or r#"…"#.
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match chars.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some(_) => j += 1,
                }
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i.checked_sub(1)
        .and_then(|j| chars.get(j))
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
}
