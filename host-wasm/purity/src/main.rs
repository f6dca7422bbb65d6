//! `wasm-purity`: fail when a wasm module imports from anywhere but the
//! allowed modules.
//!
//! ```text
//! wasm-purity FILE.wasm [--allow MODULE]...
//! ```
//!
//! With no `--allow`, the module must import nothing at all (the kernel alone:
//! pure code needs no host). `MODULE` ending in `*` allows every module name
//! with that prefix (`__wbindgen_*`). On failure it prints every offending
//! import as `module.name (kind)` and exits 1.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use wasmparser::{Parser, Payload, TypeRef};

/// One import of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    module: String,
    name: String,
    kind: &'static str,
}

impl std::fmt::Display for Import {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{} ({})", self.module, self.name, self.kind)
    }
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wasm-purity: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut args: impl Iterator<Item = String>) -> anyhow::Result<()> {
    let mut file = None;
    let mut allowed = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--allow" => allowed.push(args.next().context("`--allow` needs a module name")?),
            _ if file.is_none() => file = Some(PathBuf::from(arg)),
            _ => bail!(
                "unexpected argument {arg:?}; usage: wasm-purity FILE.wasm [--allow MODULE]..."
            ),
        }
    }
    let file = file.context("usage: wasm-purity FILE.wasm [--allow MODULE]...")?;
    let bytes = std::fs::read(&file).with_context(|| {
        format!(
            "reading {} (build it first: scripts/wasm-build.sh)",
            file.display()
        )
    })?;
    let imports = imports(&bytes).with_context(|| format!("parsing {}", file.display()))?;
    let offending = disallowed(&imports, &allowed);
    if offending.is_empty() {
        println!(
            "{}: {} imports, all from allowed modules {allowed:?}",
            file.display(),
            imports.len()
        );
        return Ok(());
    }
    let list: Vec<String> = offending.iter().map(ToString::to_string).collect();
    bail!(
        "{} imports {} item(s) from outside {allowed:?}; the code behind them reaches for its host:\n  {}",
        file.display(),
        list.len(),
        list.join("\n  ")
    )
}

/// Every import of the module, in section order.
fn imports(bytes: &[u8]) -> anyhow::Result<Vec<Import>> {
    let mut out = Vec::new();
    for payload in Parser::new(0).parse_all(bytes) {
        if let Payload::ImportSection(section) = payload? {
            for import in section.into_imports() {
                let import = import?;
                out.push(Import {
                    module: import.module.to_owned(),
                    name: import.name.to_owned(),
                    kind: match import.ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => "function",
                        TypeRef::Table(_) => "table",
                        TypeRef::Memory(_) => "memory",
                        TypeRef::Global(_) => "global",
                        TypeRef::Tag(_) => "tag",
                    },
                });
            }
        }
    }
    Ok(out)
}

/// The imports whose module matches no allowed name or `prefix*` pattern.
fn disallowed<'a>(imports: &'a [Import], allowed: &[String]) -> Vec<&'a Import> {
    let ok = |module: &str| {
        allowed.iter().any(|a| match a.strip_suffix('*') {
            Some(prefix) => module.starts_with(prefix),
            None => module == a,
        })
    };
    imports.iter().filter(|i| !ok(&i.module)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{EntityType, ImportSection, Module, TypeSection, ValType};

    fn module_importing(imports: &[(&str, &str)]) -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32], []);
        let mut section = ImportSection::new();
        for (module, name) in imports {
            section.import(module, name, EntityType::Function(0));
        }
        let mut module = Module::new();
        module.section(&types).section(&section);
        module.finish()
    }

    #[test]
    fn a_module_without_imports_is_pure() {
        let bytes = module_importing(&[]);
        assert_eq!(imports(&bytes).expect("parses"), vec![]);
    }

    #[test]
    fn env_imports_are_listed_and_rejected() {
        let bytes = module_importing(&[
            ("env", "now"),
            ("./mcp_reconcile_wasm_bg.js", "__wbg_parse_1"),
            ("__wbindgen_placeholder__", "__wbindgen_describe"),
        ]);
        let all = imports(&bytes).expect("parses");
        assert_eq!(all.len(), 3);
        let allowed = [
            "./mcp_reconcile_wasm_bg.js".to_owned(),
            "__wbindgen_*".to_owned(),
        ];
        let bad = disallowed(&all, &allowed);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].to_string(), "env.now (function)");
        assert_eq!(disallowed(&all, &[]).len(), 3);
    }

    #[test]
    fn garbage_is_an_error_not_a_pass() {
        assert!(imports(b"not wasm").is_err());
    }
}
