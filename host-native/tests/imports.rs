//! The import graph stays a map (issue 38): no circle between files of `host-native/src` or
//! of `kernel/src`, and no arrow up the host's layers as ARCHITECTURE.md states them.
//!
//! The graph is built from the source text (`imports/`): every `use` (grouped, renamed,
//! `pub use`), every path written in code (`crate::x::y`, `super::pass::run`, a name a `use`
//! brought in), `mod` declarations for where each module's file is. A file *uses* another when
//! it names it; a module naming its own descendants (declaring, re-exporting, calling into its
//! children) is containment, not a use, and a child may use its parent's items — so a circle is
//! always between files neither of which contains the other. Comments and string literals are
//! not code; test code is (a unit test that reaches up a layer is an arrow up). Run with
//! `--nocapture` for the figures: files, edges, the longest chain.

// The checker: tokens, what one file imports, the graph (`imports/`).
mod graph;
mod lexer;
mod parse;

use std::collections::BTreeMap;
use std::path::Path;

use graph::{build, CrateRoot, Graph};

/// A layer rule: no file of module `from` (or below it) names a file of a module in `never`
/// (or below them).
struct Layer {
    from: &'static str,
    never: &'static [&'static str],
}

/// The host library's layer rules, as ARCHITECTURE.md states them.
const HOST_LAYERS: &[Layer] = &[
    // The one session engine is below every backend owner and front: a daemon session, the
    // pool's lease and a gateway drive a `Host`; the engine names none of them.
    Layer {
        from: "host",
        never: &["pool", "daemon", "gateway", "session"],
    },
    // The token file sits below `launch` and `tls` (`auth/file` re-exports it from there).
    Layer {
        from: "token_store_file",
        never: &["launch", "tls", "auth"],
    },
];

/// Every `.rs` file under `dir`, by its path relative to `dir` (`/`-separated).
fn sources(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(base, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(base).expect("under the base");
                let name = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.insert(name, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn host_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let roots = [
        CrateRoot {
            name: "mcp_reconcile",
            root: "lib.rs",
        },
        CrateRoot {
            name: "",
            root: "main.rs",
        },
    ];
    build(&sources(&src), &roots)
}

fn kernel_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel/src");
    let roots = [CrateRoot {
        name: "mcp_reconcile_kernel",
        root: "lib.rs",
    }];
    build(&sources(&src), &roots)
}

/// Fails naming every circle of `graph`, after checking the graph really was read.
fn assert_no_circles(name: &str, graph: &Graph) {
    assert!(
        graph.unreached.is_empty(),
        "{name}: no `mod` declaration reaches {:?} (or a `#[path]` moves a module), so the check \
         cannot see them",
        graph.unreached
    );
    assert!(
        graph.files.len() > 10 && graph.edges.len() > graph.files.len(),
        "{name}: only {} files and {} edges read: the resolver went blind",
        graph.files.len(),
        graph.edges.len()
    );
    let circles = graph.circles();
    let chain = graph.longest_chain();
    println!(
        "{name}: {} files, {} use edges, {} circles; longest chain ({} files): {}",
        graph.files.len(),
        graph.edges.len(),
        circles.len(),
        chain.len(),
        chain
            .iter()
            .map(|&f| graph.files[f].as_str())
            .collect::<Vec<_>>()
            .join(" → ")
    );
    let text = circle_texts(graph);
    assert!(
        text.is_empty(),
        "{name}: files import each other in a circle; move what both need into a file both \
         can import from below:\n{}",
        text.join("\n")
    );
}

/// Each circle of `graph`: a shortest cycle with the line of each arrow, and all the files
/// of the circle when there are more.
fn circle_texts(graph: &Graph) -> Vec<String> {
    graph
        .circles()
        .iter()
        .map(|(cycles, all)| {
            let names: Vec<&str> = all.iter().map(|&f| graph.files[f].as_str()).collect();
            let mut text = format!("circle of {}:", names.join(", "));
            for cycle in cycles {
                text.push_str(&format!("\n  {}", graph.describe_cycle(cycle)));
            }
            text
        })
        .collect()
}

/// The edges of `graph`'s crate 0 that go up one of `layers`, each with where it is written.
fn layer_offences(graph: &Graph, layers: &[Layer]) -> Vec<String> {
    let inside = |file: usize, module: &str| {
        let (krate, path) = &graph.modules[file];
        *krate == 0 && path.first().is_some_and(|first| first == module)
    };
    let mut out = Vec::new();
    for (&(from, to), evidence) in &graph.edges {
        for layer in layers {
            let above = layer.never.iter().find(|m| inside(to, m));
            if let (true, Some(above)) = (inside(from, layer.from), above) {
                out.push(format!(
                    "{} → {}: `{}` never imports `{above}` ({}:{} names {})",
                    graph.files[from],
                    graph.files[to],
                    layer.from,
                    graph.files[from],
                    evidence.line,
                    evidence.path
                ));
            }
        }
    }
    out
}

/// No two files of the host import each other, however indirectly.
#[test]
fn the_hosts_files_import_in_no_circle() {
    assert_no_circles("host-native/src", &host_graph());
}

/// No file of the host names a module above its layer.
#[test]
fn the_host_never_imports_up_its_layers() {
    let graph = host_graph();
    for layer in HOST_LAYERS {
        for module in std::iter::once(&layer.from).chain(layer.never) {
            assert!(
                graph
                    .modules
                    .iter()
                    .any(|(k, p)| *k == 0 && p == &[*module]),
                "the layer rules name `{module}`, which is no module of the library"
            );
        }
    }
    let offences = layer_offences(&graph, HOST_LAYERS);
    assert!(
        offences.is_empty(),
        "an arrow up the layers ARCHITECTURE.md states:\n{}",
        offences.join("\n")
    );
}

/// No two files of the kernel import each other, however indirectly.
#[test]
fn the_kernels_files_import_in_no_circle() {
    assert_no_circles("kernel/src", &kernel_graph());
}

// ---------------------------------------------------------------------------
// The check's own tests, on synthetic crates: it must be able to fail.

/// A synthetic crate's sources from `(path, text)` pairs.
fn synthetic(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

/// The graph's edges as `from → to` names.
fn edge_names(graph: &Graph) -> Vec<String> {
    let mut names: Vec<String> = graph
        .edges
        .keys()
        .map(|&(a, b)| format!("{} → {}", graph.files[a], graph.files[b]))
        .collect();
    names.sort();
    names
}

const LIB: [CrateRoot; 1] = [CrateRoot {
    name: "mylib",
    root: "lib.rs",
}];

/// The checker sees grouped, renamed and relative imports, names brought in by `use`, and
/// re-exports to where an item is defined; never a parent declaring its child, a comment or a
/// string.
#[test]
fn the_check_reads_grouped_relative_and_re_exported_paths() {
    let graph = build(
        &synthetic(&[
            ("lib.rs", "pub mod a;\nmod c;\nmod x;\nmod y;\nmod z;\n"),
            (
                "a.rs",
                "pub mod b;\npub use b::Inner;\npub struct Parent;\n",
            ),
            (
                "a/b.rs",
                "use super::Parent;\nuse super::super::c::{self as cc, Thing};\npub struct Inner;",
            ),
            ("c/mod.rs", "mod d;\npub use self::d::Thing;\n"),
            ("c/d.rs", "pub struct Thing;\n"),
            (
                "x.rs",
                "use crate::{a::{b::Inner, Parent as P}, c::Thing as T};\n\
                 fn f() { super::y::g(); }\n",
            ),
            (
                "y.rs",
                "use crate::a;\npub fn g() { let _ = a::b::Inner; }\n\
                 mod tests { use super::*; fn t() { let _ = a::Parent; } }\n",
            ),
            (
                "z.rs",
                "//! crate::x and super::y\n/* crate::c::Thing */\n\
                 const S: &str = \"crate::x::f\"; const R: &str = r#\"super::y\"#;\n\
                 fn h<'a>(s: &'a str) -> char { '\"' }\n\
                 pub(in crate::x) fn limited() {}\n",
            ),
        ]),
        &LIB,
    );
    assert!(graph.unreached.is_empty(), "{:?}", graph.unreached);
    let mut expected = vec![
        "a/b.rs → a.rs",     // a child uses its parent's item
        "a/b.rs → c/mod.rs", // `super::super::c::{self, …}`
        "a/b.rs → c/d.rs",   // `Thing`, re-exported by `c`, lives in `c/d.rs`
        "x.rs → a.rs",       // grouped: `crate::{a::{…, Parent as P}}`
        "x.rs → a/b.rs",     // grouped: `crate::{a::{b::Inner}}`
        "x.rs → c/mod.rs",   // `c::Thing as T`
        "x.rs → c/d.rs",     // … and where it lives
        "x.rs → y.rs",       // `super::y::g()` in code
        "y.rs → a.rs",       // `use crate::a`
        "y.rs → a/b.rs",     // `a::b::Inner` through the imported name `a`
    ];
    expected.sort();
    // No `a.rs → a/b.rs` (a parent declares its child), nothing from z.rs (only comments,
    // strings and a visibility name other files), nothing from `mod tests`' `use super::*` (its own file).
    assert_eq!(edge_names(&graph), expected);
}

/// A circle fails naming its files and the line of each arrow; a parent and its child are not one.
#[test]
fn the_check_names_a_circle_and_not_a_parent_and_its_child() {
    let graph = build(
        &synthetic(&[
            ("lib.rs", "mod p;\nmod q;\nmod r;\n"),
            ("p.rs", "use crate::q::f;\npub fn g() {}\n"),
            ("q.rs", "pub fn f() { crate::p::g() }\n"),
            (
                "r.rs",
                "mod s;\npub use s::S;\npub fn helper() { s::run() }\n",
            ),
            (
                "r/s.rs",
                "use super::helper;\npub struct S;\npub fn run() { helper() }\n",
            ),
        ]),
        &LIB,
    );
    let circles = circle_texts(&graph);
    assert_eq!(
        circles,
        [
            "circle of p.rs, q.rs:\n  p.rs → q.rs → p.rs\n    p.rs:1 names crate::q::f\n    \
          q.rs:1 names crate::p::g"
        ],
        "{:?}",
        edge_names(&graph)
    );
}

/// The binary reaches the library by its crate name, and an arrow up a layer is found.
#[test]
fn the_check_follows_the_binary_into_the_library_and_finds_an_upward_arrow() {
    let graph = build(
        &synthetic(&[
            ("lib.rs", "pub mod host;\npub mod pool;\n"),
            ("host/mod.rs", "mod pass;\n"),
            (
                "host/pass.rs",
                "pub fn run() { let _ = crate::pool::Pool::new(); }\n",
            ),
            ("pool.rs", "pub struct Pool;\n"),
            ("main.rs", "mod cli;\nfn main() { cli::go() }\n"),
            ("cli.rs", "use mylib::pool::Pool;\npub fn go() {}\n"),
        ]),
        &[
            CrateRoot {
                name: "mylib",
                root: "lib.rs",
            },
            CrateRoot {
                name: "",
                root: "main.rs",
            },
        ],
    );
    assert!(
        edge_names(&graph).contains(&"cli.rs → pool.rs".to_owned()),
        "{:?}",
        edge_names(&graph)
    );
    let offences = layer_offences(
        &graph,
        &[Layer {
            from: "host",
            never: &["pool"],
        }],
    );
    assert_eq!(offences.len(), 1, "{offences:?}");
    assert!(
        offences[0].starts_with("host/pass.rs → pool.rs"),
        "{offences:?}"
    );
}

/// Nested comments, raw and byte strings, character literals and lifetimes hide no path; a
/// raw identifier and a global path are read.
#[test]
fn the_lexer_reads_no_path_out_of_comments_literals_or_lifetimes() {
    let quiet = "/* outer /* crate::a */ still */ // super::b\n\
                 let s = r##\"crate::a \"# \"##; let b = b\"crate::a\"; let c = '\\'';\n\
                 let d = '\"'; fn f<'a>(x: &'a str) -> impl Sized + use<'a> { 1.5e3 }\n";
    let parsed = parse::parse(quiet);
    assert!(parsed.paths.is_empty(), "{:?}", parsed.paths);
    assert!(parsed.uses.is_empty(), "{:?}", parsed.uses);
    let loud = parse::parse("let x = r#type::f(); let y = ::mylib::a::B;");
    let paths: Vec<&[String]> = loud.paths.iter().map(|w| w.path.as_slice()).collect();
    assert_eq!(paths, [&["type", "f"][..], &["::", "mylib", "a", "B"][..]]);
    let moved = parse::parse("mod a;\n#[path = \"elsewhere.rs\"]\nmod b;\n");
    assert_eq!(
        moved.path_attributes,
        [2],
        "a #[path] the graph cannot follow is reported"
    );
}
