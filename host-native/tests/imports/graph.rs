//! The file-level import graph of one or more crates, built from their source text.
//!
//! * **Files and modules.** Each crate's modules are found from its root (`lib.rs`, `main.rs`)
//!   through its `mod` declarations: `mod x;` in `a.rs` is `a/x.rs` or `a/x/mod.rs`; in `mod.rs`,
//!   `lib.rs` or `main.rs` it sits beside the declaring file. An inline `mod x { … }` is a module
//!   of the file it is written in. A source file no declaration reaches is reported, so no file
//!   escapes the check.
//! * **Paths.** `crate::`, `self::`, `super::` (from the module the path is written in, inline
//!   modules included), a name a `use` brought into scope, a child module, and another crate of
//!   the graph by its name (`mcp_reconcile::…` from the binary). A path names the file of its
//!   longest prefix that is a module (`crate::a::b::Item` is `a/b.rs` when that file exists,
//!   else `a.rs`); when the next segment is a name that module imports or re-exports
//!   (`pub use self::backend::Backend`), the file where the name is defined (the end of the
//!   chain of re-exports; the files it passes through only pass it on) is named too. Glob
//!   re-exports (`pub use x::*`) are not followed: the path names the re-exporting file.
//! * **Edges.** A file uses a file when it names it. A parent module *declares* its children:
//!   a path from a module into one of its own descendants (a re-export, a call into a child) is
//!   containment, not a use, and is no edge. A child using its parent's items is a use edge. So
//!   a circle is always between files neither of which contains the other.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::parse::{parse, Parsed};

/// A crate of the graph: the name other crates of the graph use for it (`""` for a binary)
/// and its root file.
pub struct CrateRoot {
    pub name: &'static str,
    pub root: &'static str,
}

/// A module: its crate (index into the roots) and its path below the crate root.
pub type Module = (usize, Vec<String>);

/// Where a file names another: the first line and the path written there.
#[derive(Clone, Debug)]
pub struct Evidence {
    pub line: usize,
    pub path: String,
}

/// The graph: files (paths relative to the source directory), the module each file is, and
/// the use edges between files.
pub struct Graph {
    pub files: Vec<String>,
    pub modules: Vec<Module>,
    pub edges: BTreeMap<(usize, usize), Evidence>,
    /// Source files no `mod` declaration reaches, and `#[path]` attributes (`file:line`),
    /// which the graph does not follow.
    pub unreached: Vec<String>,
}

/// A path resolved to the crate it lives in and its segments below that crate's root.
struct Abs {
    krate: usize,
    segs: Vec<String>,
}

/// How deep a chain of `use` renames is followed (a guard against a malformed one).
const MAX_DEPTH: usize = 16;

struct Resolver<'a> {
    roots: &'a [CrateRoot],
    /// Every module (file-level and inline) and its file.
    modules: BTreeMap<Module, usize>,
    /// The names each module's `use` declarations bind: the leaf's path and the module it is
    /// written in.
    bindings: BTreeMap<Module, BTreeMap<String, Binding>>,
    /// The glob imports (`use super::*`) of each module.
    globs: BTreeMap<Module, Vec<Binding>>,
}

/// A `use` leaf's path and the module it is written in (where its `self` and `super` start).
type Binding = (Vec<String>, Vec<String>);

/// Builds the graph of the crates `roots` from `sources` (relative path → text).
pub fn build(sources: &BTreeMap<String, String>, roots: &[CrateRoot]) -> Graph {
    let parsed: BTreeMap<&str, Parsed> = sources
        .iter()
        .map(|(file, text)| (file.as_str(), parse(text)))
        .collect();
    let (files, file_modules, all_modules) = discover(&parsed, roots);
    let mut resolver = Resolver {
        roots,
        modules: all_modules,
        bindings: BTreeMap::new(),
        globs: BTreeMap::new(),
    };
    for (index, file) in files.iter().enumerate() {
        let (krate, path) = &file_modules[index];
        for leaf in &parsed[file.as_str()].uses {
            let at = [path.as_slice(), &leaf.ctx].concat();
            let binding = (leaf.path.clone(), at.clone());
            match &leaf.bind {
                Some(name) => {
                    let names = resolver.bindings.entry((*krate, at)).or_default();
                    names.insert(name.clone(), binding);
                }
                None if leaf.glob => resolver
                    .globs
                    .entry((*krate, at))
                    .or_default()
                    .push(binding),
                None => {}
            }
        }
    }
    let mut edges = BTreeMap::new();
    for (from, file) in files.iter().enumerate() {
        let (krate, path) = &file_modules[from];
        let p = &parsed[file.as_str()];
        let named = p
            .uses
            .iter()
            .map(|u| (&u.ctx, &u.path, u.line))
            .chain(p.paths.iter().map(|w| (&w.ctx, &w.path, w.line)));
        for (ctx, segs, line) in named {
            let at = [path.as_slice(), ctx].concat();
            let Some(abs) = resolver.absolute(*krate, &at, segs, 0) else {
                continue;
            };
            for to in resolver.files_of(&abs, 0) {
                if to == from || contains(&file_modules[from], &file_modules[to]) {
                    continue;
                }
                edges.entry((from, to)).or_insert_with(|| Evidence {
                    line,
                    path: segs.join("::").replace("::::", "::"),
                });
            }
        }
    }
    let unreached = sources
        .keys()
        .filter(|f| !files.contains(f))
        .cloned()
        .chain(parsed.iter().flat_map(|(file, p)| {
            p.path_attributes
                .iter()
                .map(move |line| format!("{file}:{line}"))
        }))
        .collect();
    Graph {
        files,
        modules: file_modules,
        edges,
        unreached,
    }
}

/// Whether module `inner` lies strictly inside module `outer` (same crate).
fn contains(outer: &Module, inner: &Module) -> bool {
    outer.0 == inner.0 && inner.1.len() > outer.1.len() && inner.1.starts_with(&outer.1)
}

/// Every file reached from the roots, the module each one is, and every module (inline ones
/// too) with its file.
fn discover(
    parsed: &BTreeMap<&str, Parsed>,
    roots: &[CrateRoot],
) -> (Vec<String>, Vec<Module>, BTreeMap<Module, usize>) {
    let mut files = Vec::new();
    let mut file_modules = Vec::new();
    let mut modules = BTreeMap::new();
    // (crate, module path, file, the directory its child files are in)
    let mut queue: VecDeque<(usize, Vec<String>, String, String)> = roots
        .iter()
        .enumerate()
        .map(|(k, r)| (k, Vec::new(), r.root.to_owned(), parent_dir(r.root)))
        .collect();
    while let Some((krate, path, file, dir)) = queue.pop_front() {
        let Some(p) = parsed.get(file.as_str()) else {
            continue;
        };
        if files.contains(&file) {
            continue;
        }
        let index = files.len();
        files.push(file.clone());
        file_modules.push((krate, path.clone()));
        modules.insert((krate, path.clone()), index);
        for decl in &p.mods {
            let child: Vec<String> =
                [path.as_slice(), &decl.ctx, std::slice::from_ref(&decl.name)].concat();
            if decl.inline {
                modules.insert((krate, child), index);
                continue;
            }
            let base = join(&dir, &decl.ctx.join("/"));
            let flat = join(&base, &format!("{}.rs", decl.name));
            let nested = join(&base, &format!("{}/mod.rs", decl.name));
            let child_dir = join(&base, &decl.name);
            if parsed.contains_key(flat.as_str()) {
                queue.push_back((krate, child, flat, child_dir));
            } else if parsed.contains_key(nested.as_str()) {
                queue.push_back((krate, child, nested, child_dir));
            }
        }
    }
    (files, file_modules, modules)
}

fn parent_dir(file: &str) -> String {
    file.rsplit_once('/')
        .map_or(String::new(), |(d, _)| d.to_owned())
}

fn join(dir: &str, rest: &str) -> String {
    match (dir.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{dir}/{rest}"),
    }
}

impl Resolver<'_> {
    /// `segs`, written in module `at` of crate `krate`, as a path from a crate root; `None`
    /// for a path outside the graph (`std::…`, another crate, a local type's `Self::…`).
    fn absolute(&self, krate: usize, at: &[String], segs: &[String], depth: usize) -> Option<Abs> {
        let first = segs.first()?.as_str();
        if depth > MAX_DEPTH {
            return None;
        }
        let under = |k: usize, base: &[String], rest: &[String]| Abs {
            krate: k,
            segs: [base, rest].concat(),
        };
        match first {
            "::" => {
                let k = self.crate_named(segs.get(1)?)?;
                Some(under(k, &[], &segs[2..]))
            }
            "crate" => Some(under(krate, &[], &segs[1..])),
            "self" => Some(under(krate, at, &segs[1..])),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                let base = at.get(..at.len().checked_sub(ups)?)?;
                Some(under(krate, base, &segs[ups..]))
            }
            name => {
                if let Some(found) = self.lookup(krate, at, name, depth) {
                    return Some(under(found.krate, &found.segs, &segs[1..]));
                }
                let k = self.crate_named(name)?;
                Some(under(k, &[], &segs[1..]))
            }
        }
    }

    /// What a bare `name` written in module `at` stands for: a name a `use` of that module (or
    /// of an inline module around it in the same file) binds, a child module, or either of
    /// those in a module it glob-imports (`use super::*`).
    fn lookup(&self, krate: usize, at: &[String], name: &str, depth: usize) -> Option<Abs> {
        if depth > MAX_DEPTH {
            return None;
        }
        let scope = self.scope(krate, at);
        for module in &scope {
            if let Some((path, written_at)) = self.binding(krate, module, name) {
                if path.len() == 1 && path[0] == name {
                    return None; // `use serde;`: a crate, not a module of ours
                }
                return self.absolute(krate, written_at, path, depth + 1);
            }
        }
        let child = [at, &[name.to_owned()]].concat();
        if self.modules.contains_key(&(krate, child.clone())) {
            return Some(Abs { krate, segs: child });
        }
        for module in &scope {
            for (path, written_at) in self
                .globs
                .get(&(krate, module.clone()))
                .into_iter()
                .flatten()
            {
                let Some(glob) = self.absolute(krate, written_at, path, depth + 1) else {
                    continue;
                };
                if self.modules.contains_key(&(glob.krate, glob.segs.clone())) {
                    if let Some(found) = self.lookup(glob.krate, &glob.segs, name, depth + 1) {
                        return Some(found);
                    }
                }
            }
        }
        None
    }

    /// Module `at` and the inline modules around it within the same file, innermost first.
    fn scope(&self, krate: usize, at: &[String]) -> Vec<Vec<String>> {
        let file = self.modules.get(&(krate, at.to_vec()));
        let mut out = Vec::new();
        let mut module = at.to_vec();
        loop {
            if self.modules.get(&(krate, module.clone())) != file {
                return out;
            }
            out.push(module.clone());
            if module.pop().is_none() {
                return out;
            }
        }
    }

    fn binding(&self, krate: usize, module: &[String], name: &str) -> Option<&Binding> {
        self.bindings.get(&(krate, module.to_vec()))?.get(name)
    }

    /// The crate of the graph called `name` (never a binary's empty name).
    fn crate_named(&self, name: &str) -> Option<usize> {
        self.roots
            .iter()
            .position(|r| !r.name.is_empty() && r.name == name)
    }

    /// The files `abs` names: its longest module prefix's file, and, when that module imports
    /// or re-exports the next segment by name, the file that defines it.
    fn files_of(&self, abs: &Abs, depth: usize) -> Vec<usize> {
        let Some((k, file)) = (0..=abs.segs.len()).rev().find_map(|k| {
            self.modules
                .get(&(abs.krate, abs.segs[..k].to_vec()))
                .map(|f| (k, *f))
        }) else {
            return Vec::new();
        };
        let mut out = vec![file];
        let module = (abs.krate, abs.segs[..k].to_vec());
        let bound = abs
            .segs
            .get(k)
            .and_then(|name| self.binding(module.0, &module.1, name));
        if let Some((path, written_at)) = bound {
            if let Some(target) = self.absolute(abs.krate, written_at, path, depth + 1) {
                let next = Abs {
                    krate: target.krate,
                    segs: [&target.segs, &abs.segs[k + 1..]].concat(),
                };
                // Where the name is defined: the last file of the chain of re-exports.
                if let Some(&defined) = self.files_of(&next, depth + 1).last() {
                    out.push(defined);
                }
            }
        }
        out
    }
}

/// `cycle` (first file repeated at the end) started at its least file.
fn rotate_to_least(mut cycle: Vec<usize>) -> Vec<usize> {
    cycle.pop();
    let least = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
    cycle.rotate_left(least);
    if let Some(&first) = cycle.first() {
        cycle.push(first);
    }
    cycle
}

impl Graph {
    /// The circles: each strongly connected set of two or more files, with the shortest
    /// cycle through each of its files (`a.rs → b.rs → a.rs`, each cycle once).
    pub fn circles(&self) -> Vec<(Vec<Vec<usize>>, Vec<usize>)> {
        let sccs = self.strongly_connected();
        sccs.into_iter()
            .filter(|scc| scc.len() > 1)
            .map(|scc| {
                let mut cycles: Vec<Vec<usize>> = Vec::new();
                for &file in &scc {
                    let cycle = rotate_to_least(self.shortest_cycle(file, &scc));
                    if !cycles.contains(&cycle) {
                        cycles.push(cycle);
                    }
                }
                (cycles, scc)
            })
            .collect()
    }

    fn successors(&self, node: usize) -> impl Iterator<Item = usize> + '_ {
        self.edges
            .range((node, 0)..(node + 1, 0))
            .map(|((_, to), _)| *to)
    }

    /// Tarjan's strongly connected components, each sorted.
    fn strongly_connected(&self) -> Vec<Vec<usize>> {
        struct State {
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<usize>,
            next: usize,
            out: Vec<Vec<usize>>,
        }
        fn visit(g: &Graph, v: usize, s: &mut State) {
            s.index[v] = Some(s.next);
            s.low[v] = s.next;
            s.next += 1;
            s.stack.push(v);
            s.on_stack[v] = true;
            for w in g.successors(v).collect::<Vec<_>>() {
                match s.index[w] {
                    None => {
                        visit(g, w, s);
                        s.low[v] = s.low[v].min(s.low[w]);
                    }
                    Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(s.low[v]) == s.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = s.stack.pop() {
                    s.on_stack[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                scc.sort();
                s.out.push(scc);
            }
        }
        let n = self.files.len();
        let mut s = State {
            index: vec![None; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in 0..n {
            if s.index[v].is_none() {
                visit(self, v, &mut s);
            }
        }
        s.out.sort();
        s.out
    }

    /// A shortest cycle from `start` back to it inside `within` (breadth first).
    fn shortest_cycle(&self, start: usize, within: &[usize]) -> Vec<usize> {
        let allowed: BTreeSet<usize> = within.iter().copied().collect();
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for w in self.successors(v) {
                if w == start {
                    // Walk back from `v` to `start`, which has no predecessor recorded.
                    let mut cycle = vec![v];
                    let mut at = v;
                    while let Some(&p) = came_from.get(&at) {
                        cycle.push(p);
                        at = p;
                    }
                    cycle.reverse();
                    cycle.push(start);
                    return cycle;
                }
                if allowed.contains(&w) && !came_from.contains_key(&w) && w != start {
                    came_from.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        vec![start]
    }

    /// `a.rs → b.rs → a.rs`, and under it the line of each arrow.
    pub fn describe_cycle(&self, cycle: &[usize]) -> String {
        let names: Vec<&str> = cycle.iter().map(|&f| self.files[f].as_str()).collect();
        let mut text = names.join(" → ");
        for pair in cycle.windows(2) {
            if let Some(e) = self.edges.get(&(pair[0], pair[1])) {
                text.push_str(&format!(
                    "\n    {}:{} names {}",
                    self.files[pair[0]], e.line, e.path
                ));
            }
        }
        text
    }

    /// The longest chain of use edges (in files), when the graph has no circle.
    pub fn longest_chain(&self) -> Vec<usize> {
        fn longest(g: &Graph, v: usize, memo: &mut BTreeMap<usize, Vec<usize>>) -> Vec<usize> {
            if let Some(found) = memo.get(&v) {
                return found.clone();
            }
            memo.insert(v, vec![v]); // a circle, if any, ends the walk here
            let best = g
                .successors(v)
                .collect::<Vec<_>>()
                .into_iter()
                .map(|w| longest(g, w, memo))
                .max_by_key(Vec::len)
                .unwrap_or_default();
            let chain = [vec![v], best].concat();
            memo.insert(v, chain.clone());
            chain
        }
        let mut memo = BTreeMap::new();
        (0..self.files.len())
            .map(|v| longest(self, v, &mut memo))
            .max_by_key(Vec::len)
            .unwrap_or_default()
    }
}
