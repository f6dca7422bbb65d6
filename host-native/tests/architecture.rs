//! Architecture invariants, checked on the source tree.
//!
//! The library (`host-native/src` except `main.rs` and `cli/`) never uses
//! clap: the command line is the binary's, and the library takes plain
//! options (`inputs::Options`). A `use clap…`, a `clap::` path or a clap
//! derive (`Parser`, `Args`, `Subcommand`, `ValueEnum`) or attribute
//! (`#[arg(…)]`, `#[command(…)]`, `#[value(…)]`) anywhere else fails here.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The clap uses on one line of code (comments are not code), if any.
fn clap_use(line: &str) -> Option<&'static str> {
    let code = line.split("//").next().unwrap_or("").trim();
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.contains("clap::") || compact.starts_with("useclap") || compact == "externcrateclap;"
    {
        return Some("a clap path");
    }
    if compact.starts_with("#[derive(") {
        let derives = compact
            .trim_start_matches("#[derive(")
            .trim_end_matches(")]")
            .split(',')
            .map(|d| d.rsplit("::").next().unwrap_or(d).to_owned())
            .collect::<Vec<_>>();
        for clap_derive in ["Parser", "Args", "Subcommand", "ValueEnum"] {
            if derives.iter().any(|d| d == clap_derive) {
                return Some("a clap derive");
            }
        }
    }
    for attribute in ["#[arg(", "#[command(", "#[clap(", "#[value(", "#[group("] {
        if compact.starts_with(attribute) {
            return Some("a clap attribute");
        }
    }
    None
}

#[test]
fn the_library_never_uses_clap() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let binary = |path: &Path| path == src.join("main.rs") || path.starts_with(src.join("cli"));
    let mut offences = Vec::new();
    let mut library_files = 0;
    for path in &files {
        if binary(path) {
            continue;
        }
        library_files += 1;
        let text = fs::read_to_string(path).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            if let Some(what) = clap_use(line) {
                offences.push(format!(
                    "{}:{}: {what}: {}",
                    path.strip_prefix(&src).unwrap_or(path).display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        library_files > 10,
        "found only {library_files} library files in {}",
        src.display()
    );
    assert!(
        offences.is_empty(),
        "the library must not use clap; move command-line types to src/cli/ (the binary) and \
         give the library a plain options struct:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_check_recognises_clap() {
    for line in [
        "use clap::Parser;",
        "use clap::{Args, Parser};",
        "#[derive(clap::Args, Clone, Debug, Default)]",
        "#[derive(Clone, ValueEnum)]",
        "#[derive(Parser)]",
        "    #[arg(long, value_name = \"PATH\")]",
        "#[command(next_help_heading = \"Files\")]",
        "    let x = clap::value_parser!(u32);",
    ] {
        assert!(clap_use(line).is_some(), "{line}");
    }
    for line in [
        "/// Parses the flags (clap is the binary's).",
        "#[derive(Clone, Debug, Default, PartialEq, Eq)]",
        "#[derive(Serialize, Deserialize)]",
        "let args = vec![];",
        "// use clap::Parser;",
    ] {
        assert!(clap_use(line).is_none(), "{line}");
    }
}

#[test]
fn the_binary_is_where_clap_lives() {
    // The check above is only meaningful if the binary really is where the
    // command line went.
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli/args.rs");
    let text = fs::read_to_string(&cli).expect("src/cli/args.rs exists");
    assert!(text.lines().any(|l| clap_use(l).is_some()));
}

/// No source file of the host grows past 600 lines: a file that does is doing more than one
/// thing and is split by concern (as `inputs/`, `approvals_store/`, `transport/` were).
#[test]
fn no_source_file_is_over_600_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = fs::read_to_string(path).ok()?.lines().count();
            (lines > 600).then(|| format!("{} ({lines} lines)", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by concern: {long:?}");
}

/// The code of `path` (comments dropped), line by line with numbers.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    fs::read_to_string(path)
        .expect("read a source file")
        .lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.split("//").next().unwrap_or("").to_owned()))
        .collect()
}

/// Whether `line` names the identifier `name` itself (not one that starts with it, such as
/// `START_GRACE_VAR`, the variable a client sets, which schedules nothing).
fn names_identifier(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + name.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

/// One session engine (issue 23): a daemon session is a session with another backend. Only the
/// engine (`src/host/`) names the reload scheduler and the start-pass and missing-file timers;
/// `src/inputs/files.rs` defines the grace. A second drive loop anywhere else fails here.
#[test]
fn only_the_session_engine_schedules_a_session() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut offences = Vec::new();
    for path in &files {
        if path.starts_with(src.join("host")) || *path == src.join("inputs/files.rs") {
            continue;
        }
        for (n, line) in code_lines(path) {
            for name in [
                "ReloadScheduler",
                "MISSING_GRACE",
                "STARTUP_WAIT",
                "START_GRACE",
            ] {
                let re_export = line.trim_start().starts_with("pub use files::");
                if names_identifier(&line, name) && !re_export {
                    offences.push(format!("{}:{n}: {name}", path.display()));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "outside the engine:\n{}",
        offences.join("\n")
    );
}

/// Everything a session schedules reads the session's [`Clock`]: no file of the engine, of a
/// daemon session or of the pool lease reads tokio's clock (I/O timeouts aside), so a test's
/// `ManualClock` moves all of it.
#[test]
fn sessions_read_only_their_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("host"), &mut files);
    files.push(src.join("daemon/attached.rs"));
    files.push(src.join("pool/lease.rs"));
    let mut offences = Vec::new();
    for path in &files {
        for (n, line) in code_lines(path) {
            if line.contains("tokio::time") && !line.contains("tokio::time::timeout") {
                offences.push(format!("{}:{n}: {}", path.display(), line.trim()));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "tokio's clock read:\n{}",
        offences.join("\n")
    );
}

/// Every `tests/*.rs` file is a module of the one test binary (`tests/suite.rs`): with
/// `autotests = false` a file it does not declare would never be compiled or run.
#[test]
fn every_test_file_is_a_module_of_the_suite() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let suite = fs::read_to_string(tests.join("suite.rs")).expect("tests/suite.rs");
    let declared: Vec<&str> = suite
        .lines()
        .filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in fs::read_dir(&tests).expect("tests/") {
        let path = entry.expect("directory entry").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let module = path.extension().is_some_and(|e| e == "rs") || path.join("mod.rs").is_file();
        if module && name != "suite" && !declared.contains(&name) {
            missing.push(name.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "declare these in tests/suite.rs: {missing:?}"
    );
}
