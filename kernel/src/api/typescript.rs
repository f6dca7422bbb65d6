//! TypeScript declarations of the JSON API (feature `ts`, native only).
//!
//! [`declarations`] walks the op table: every op's request record and result
//! type, and every type they name, each declared from its own Rust type
//! (`ts-rs` derives whose attributes state the JSON spelling). The wasm
//! package's `.d.ts` is this text, so the TypeScript types cannot drift from
//! what the codecs decode and encode. A few JSON-shaped types have no fixed
//! Rust shape (a server entry, the approvals store, any JSON value); their
//! TypeScript is stated here.

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};

use ts_rs::{Config, TypeVisitor, TS};

use crate::approvals::{Approvals, Decision};
use crate::config::{ServerConfig, Servers};
use crate::json::{Object, Value};
use crate::lsp::{LspEntry, LspServers};
use crate::plan::Online;

/// The declaration file: every type the ops use, the `Ops` table, and the
/// `Request` / `Response` unions.
pub fn declarations() -> String {
    let mut out = Declarations::new();
    super::declare_ops(&mut out);
    out.alias::<Servers>("Servers", "Server entries by name, in map order.");
    out.alias::<Online>("Online", "Live connections by server name.");
    out.alias::<LspServers>(
        "LspServers",
        "Language-server entries by name, in map order.",
    );
    out.finish()
}

/// Collects declarations while walking the op table.
pub(crate) struct Declarations {
    cfg: Config,
    seen: HashSet<TypeId>,
    /// Declarations by type name: sorted, so the file does not depend on the
    /// order ts-rs visits a type's members in (which varies between builds).
    types: BTreeMap<String, String>,
    ops: Vec<String>,
}

impl Declarations {
    fn new() -> Self {
        Declarations {
            // JSON numbers: a `u64` (milliseconds, seeds) is a `number`, not a `bigint`.
            cfg: Config::new().with_large_int("number"),
            seen: HashSet::new(),
            types: BTreeMap::new(),
            ops: Vec::new(),
        }
    }

    /// Declares op `op`: request record `Q`, result `R`.
    pub(crate) fn op<Q: TS + 'static, R: TS + 'static>(&mut self, op: &str, docs: &[&str]) {
        self.visit::<Q>();
        Q::visit_generics(self);
        self.visit::<R>();
        R::visit_generics(self);
        let docs = indent(&ts_rs::format_docs(docs));
        let (request, result) = (Q::name(&self.cfg), R::name(&self.cfg));
        self.ops.push(format!(
            "{docs}    {op}: {{ request: {request}; result: {result} }};\n"
        ));
    }

    /// Declares `name` as another name of `T` (a Rust type alias).
    fn alias<T: TS + 'static>(&mut self, name: &str, doc: &str) {
        self.visit::<T>();
        T::visit_generics(self);
        let ty = T::name(&self.cfg);
        self.types.insert(
            name.to_owned(),
            format!("/** {doc} */\nexport type {name} = {ty};\n"),
        );
    }

    fn finish(mut self) -> String {
        self.visit::<super::ApiError>();
        let mut out = String::from(
            "// The kernel's JSON API (SPEC §10), generated from its op table and the Rust\n\
             // types its codecs decode into and encode from (mcp_reconcile_kernel::api::typescript).\n\
             // Do not edit; refresh with:\n\
             //   UPDATE_TYPES=1 cargo test -p mcp-reconcile-wasm --test typescript\n\n",
        );
        for declaration in self.types.values() {
            out.push_str(declaration);
            out.push('\n');
        }
        out.push_str(
            "/** Every op of the kernel's JSON API: its request fields and its `ok` result. */\n\
             export interface Ops {\n",
        );
        for op in &self.ops {
            out.push_str(op);
        }
        out.push_str(
            "}\n\n\
             /** Any request: `op` plus that op's fields. */\n\
             export type Request = { [K in keyof Ops]: { op: K } & Ops[K][\"request\"] }[keyof Ops];\n\n\
             /** A response: the op's result under `ok`, or an error. */\n\
             export type Response<K extends keyof Ops = keyof Ops> = { ok: Ops[K][\"result\"] } | { error: KernelError };\n",
        );
        out
    }
}

impl TypeVisitor for Declarations {
    /// Declares `T` (once) when it is a named type, then what it uses.
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_none() || !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        let docs = T::docs().unwrap_or_default();
        let decl = tidy(&T::decl(&self.cfg));
        self.types
            .insert(T::ident(&self.cfg), format!("{docs}export {decl}\n"));
        T::visit_dependencies(self);
    }
}

/// Lays out a multi-line declaration as a block: members indented, the
/// closing `};` on a line of its own (tools that indent the `.d.ts` by its
/// braces, such as wasm-bindgen, then keep it flat).
fn tidy(decl: &str) -> String {
    let lines: Vec<&str> = decl.lines().map(str::trim_end).collect();
    let [first, members @ .., last] = lines.as_slice() else {
        return decl.to_owned();
    };
    let mut out = format!("{first}\n");
    let last = last.strip_suffix("};").map_or(*last, str::trim_end);
    for line in members.iter().chain([&last]).filter(|l| !l.is_empty()) {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("};");
    out
}

fn indent(docs: &str) -> String {
    docs.lines().map(|line| format!("    {line}\n")).collect()
}

/// Implements [`TS`] for a named type whose TypeScript is stated, not derived.
macro_rules! stated {
    ($ty:ty, $name:literal, $doc:literal, $ts:expr $(, uses $dep:ty)*) => {
        impl TS for $ty {
            type WithoutGenerics = Self;
            type OptionInnerType = Self;

            fn docs() -> Option<String> {
                let lines: Vec<&str> = $doc.lines().collect();
                Some(ts_rs::format_docs(&lines))
            }

            fn name(_: &Config) -> String {
                $name.to_owned()
            }

            fn inline(_: &Config) -> String {
                $ts.to_owned()
            }

            fn decl(cfg: &Config) -> String {
                format!("type {} = {};", $name, Self::inline(cfg))
            }

            fn decl_concrete(cfg: &Config) -> String {
                Self::decl(cfg)
            }

            fn output_path() -> Option<std::path::PathBuf> {
                Some(concat!($name, ".ts").into())
            }

            #[allow(unused_variables)]
            fn visit_dependencies(v: &mut impl TypeVisitor)
            where
                Self: 'static,
            {
                $( v.visit::<$dep>(); )*
            }
        }
    };
}

/// Any JSON value.
impl TS for Value {
    type WithoutGenerics = Self;
    type OptionInnerType = Self;

    fn name(_: &Config) -> String {
        "unknown".to_owned()
    }

    fn inline(cfg: &Config) -> String {
        Self::name(cfg)
    }
}

/// A JSON object: member name → `V`.
impl<V: TS> TS for Object<V> {
    type WithoutGenerics = Object<ts_rs::Dummy>;
    type OptionInnerType = Self;

    fn name(cfg: &Config) -> String {
        format!("Record<string, {}>", V::name(cfg))
    }

    fn inline(cfg: &Config) -> String {
        format!("Record<string, {}>", V::inline(cfg))
    }

    fn visit_dependencies(v: &mut impl TypeVisitor)
    where
        Self: 'static,
    {
        V::visit_dependencies(v);
    }

    fn visit_generics(v: &mut impl TypeVisitor)
    where
        Self: 'static,
    {
        V::visit_generics(v);
        v.visit::<V>();
    }
}

stated!(
    ServerConfig,
    "ServerConfig",
    " One server entry (SPEC §1), as written: unknown keys are kept and feed the approval\n \
     hash. Known fields are typed `unknown` because the kernel passes entries through as\n \
     written (a file may say `\"command\": 5`); a host checks a field's type before using it.\n \
     `scope` is stamped by assembly, never trusted from a file.",
    "{\n\
     /** Executable of a stdio server (a string). */\ncommand?: unknown;\n\
     /** Its arguments, in order (strings). */\nargs?: unknown;\n\
     /** Its environment additions (string values). */\nenv?: unknown;\n\
     /** Its working directory (a string). */\ncwd?: unknown;\n\
     /** Legacy SSE endpoint (a string). */\nurl?: unknown;\n\
     /** Streamable HTTP endpoint (a string). */\nhttpUrl?: unknown;\n\
     /** HTTP / SSE headers (string values). */\nheaders?: unknown;\n\
     /** Websocket address (a string). */\ntcp?: unknown;\n\
     /** Tool-call timeout in ms (a number). */\ntimeout?: unknown;\n\
     /** Skip tool-call confirmation (a boolean; session view only). */\ntrust?: unknown;\n\
     /** Only these tools (strings; an entry `name(...)` names the tool `name`). */\nincludeTools?: unknown;\n\
     /** Never these tools (strings); beats `includeTools`. */\nexcludeTools?: unknown;\n\
     /** `\"sdk\"`: an in-process server; Claude-style kinds are normalized away. */\ntype?: unknown;\n\
     /** Handshake cap in ms (a number; clamped to [100, 300000]). */\ndiscoveryTimeoutMs?: unknown;\n\
     /** The extension that contributed the entry (a string). */\nextensionName?: unknown;\n\
     /** Provenance stamp set by `assemble` and `parseMcpJson`. */\nscope?: \"project\" | \"workspace\" | \"system\";\n\
     [key: string]: unknown;\n}"
);

stated!(
    Approvals,
    "Approvals",
    " The approvals file: project root → server name → `{hash, status}`, the `Decision` about\n \
     the config whose `approvalHash` is `hash`. Any JSON is accepted: a malformed part counts\n \
     as no decision.",
    "Record<string, unknown>",
    uses Decision
);

stated!(
    LspEntry,
    "LspEntry",
    " A `.lsp.json` entry (SPEC §14.1): known fields typed for editors; every other key\n \
     (`startupTimeout`, `shutdownTimeout`, `restartOnCrash`, `maxRestarts`, `trustRequired`,\n \
     unknown keys) is kept and counts in the approval hash.",
    "{\n\
     command?: unknown;\n\
     args?: string[] | null;\n\
     env?: Record<string, string> | null;\n\
     /** `\"stdio\"` (default), `\"tcp\"` or `\"socket\"`. */\ntransport?: \"stdio\" | \"tcp\" | \"socket\" | null;\n\
     /** A path, or `{host, port}`. */\nsocket?: string | { host: string; port: number } | null;\n\
     workspaceFolder?: string | null;\n\
     initializationOptions?: unknown;\n\
     /** Pushed live with `workspace/didChangeConfiguration`. */\nsettings?: Record<string, unknown> | null;\n\
     /** `\".ext\"` → language id; routes files (live). */\nextensionToLanguage?: Record<string, string> | null;\n\
     /** `\"user\"` or `\"project\"` (stamped by the host; a file's own is dropped). */\nscope?: LspScope;\n\
     [key: string]: unknown;\n}",
    uses crate::lsp::LspScope
);

/// Variables for `$VAR` / `${VAR}` expansion: any JSON object of strings
/// (`process.env` fits); the kernel never reads the real environment.
pub(crate) struct Environment;

stated!(
    Environment,
    "Environment",
    " Variables for `$VAR` / `${VAR}` expansion (`process.env` fits); the kernel never reads\n \
     the real environment.",
    "Record<string, string | undefined>"
);
