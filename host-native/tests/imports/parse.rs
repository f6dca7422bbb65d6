//! What one source file says about imports: the modules it declares (`mod x;` for a child
//! file, `mod x { … }` inline), every `use` tree expanded into its leaves (grouped uses
//! `use crate::{a::b, c::{d, e}}`, `self` in a group, `as` renames, globs), and every other path
//! written in code (`crate::x::y()`, `super::pass::run`, `dev::Paused`). Each carries the
//! inline module it sits in (`mod tests { use super::*; }` is one level below the file), so
//! `super::` and `self::` resolve as the compiler does.

use super::lexer::{tokens, Tok, Token};

/// The imports of one file.
#[derive(Debug, Default)]
pub struct Parsed {
    pub mods: Vec<ModDecl>,
    pub uses: Vec<UseLeaf>,
    pub paths: Vec<Written>,
    /// The lines of `#[path = "…"]` attributes.
    pub path_attributes: Vec<usize>,
}

/// A `mod` declaration.
#[derive(Debug)]
pub struct ModDecl {
    /// The inline modules it is declared in (empty: at the file's top level).
    pub ctx: Vec<String>,
    pub name: String,
    /// `mod x { … }` rather than `mod x;`.
    pub inline: bool,
}

/// One leaf of a `use` tree.
#[derive(Debug)]
pub struct UseLeaf {
    pub ctx: Vec<String>,
    /// The full path (`["super", "pass", "off_the_loop"]`); a leading `::` is its own segment.
    pub path: Vec<String>,
    /// The name it brings into scope (`None` for a glob or `as _`).
    pub bind: Option<String>,
    /// `path::*`.
    pub glob: bool,
    pub line: usize,
}

/// A path written in code outside `use`, at least two segments long.
#[derive(Debug)]
pub struct Written {
    pub ctx: Vec<String>,
    pub path: Vec<String>,
    pub line: usize,
}

/// What `source` declares, imports and names.
pub fn parse(source: &str) -> Parsed {
    let toks = tokens(source);
    let mut out = Parsed::default();
    // The inline modules we are in, each with the brace depth of its body.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let ctx: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        match &toks[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(word) if word == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct(end @ (';' | '{')))) =
                    (tok(&toks, i + 1), tok(&toks, i + 2))
                {
                    let is_inline = *end == '{';
                    out.mods.push(ModDecl {
                        ctx,
                        name: name.clone(),
                        inline: is_inline,
                    });
                    if is_inline {
                        depth += 1;
                        inline.push((name.clone(), depth));
                    }
                    i += 3;
                    continue;
                }
            }
            // `pub(in crate::a)` limits who sees an item; it names no dependency.
            Tok::Ident(word)
                if word == "pub"
                    && tok(&toks, i + 1) == Some(&Tok::Punct('('))
                    && ident(&toks, i + 2) == Some("in") =>
            {
                i = (i..toks.len())
                    .find(|&j| toks[j].tok == Tok::Punct(')'))
                    .unwrap_or(toks.len());
            }
            // `#[path = "…"]` puts a module's file elsewhere, which the graph does not follow.
            Tok::Punct('#')
                if tok(&toks, i + 1) == Some(&Tok::Punct('['))
                    && ident(&toks, i + 2) == Some("path") =>
            {
                out.path_attributes.push(toks[i].line);
            }
            // `use<'a>` is precise capturing in `impl Trait + use<'a>`, not an import.
            Tok::Ident(word) if word == "use" && tok(&toks, i + 1) != Some(&Tok::Punct('<')) => {
                let end = (i..toks.len())
                    .find(|&j| toks[j].tok == Tok::Punct(';'))
                    .unwrap_or(toks.len());
                use_tree(&toks[i + 1..end], &[], &ctx, toks[i].line, &mut out.uses);
                i = end + 1;
                continue;
            }
            _ => {
                if let Some((path, next)) = written_path(&toks, i) {
                    out.paths.push(Written {
                        ctx,
                        path,
                        line: toks[i].line,
                    });
                    i = next;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

fn tok(toks: &[Token], i: usize) -> Option<&Tok> {
    toks.get(i).map(|t| &t.tok)
}

fn ident(toks: &[Token], i: usize) -> Option<&str> {
    match tok(toks, i) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The path of two or more segments that starts at token `i`, and the index after it. A path
/// starts at an identifier not preceded by `::`, or at a leading `::` (a global path) that does
/// not follow a type (`<T as Trait>::f`, `f()::x` are not paths from the root).
fn written_path(toks: &[Token], i: usize) -> Option<(Vec<String>, usize)> {
    let before = i.checked_sub(1).and_then(|j| tok(toks, j));
    let mut path = Vec::new();
    let mut j = i;
    match tok(toks, i)? {
        Tok::Ident(first) if before != Some(&Tok::PathSep) => {
            path.push(first.clone());
            j += 1;
        }
        Tok::PathSep
            if !matches!(
                before,
                Some(Tok::Ident(_) | Tok::Punct('>' | ')' | ']' | '0'))
            ) =>
        {
            path.push("::".to_owned());
        }
        _ => return None,
    }
    while tok(toks, j) == Some(&Tok::PathSep) {
        let Some(segment) = ident(toks, j + 1) else {
            break;
        };
        path.push(segment.to_owned());
        j += 2;
    }
    (path.len() >= 2 && path.last() != Some(&"::".to_owned())).then_some((path, j))
}

/// Expands the use tree in `toks` (after `use`, before `;`) under `prefix` into `out`.
fn use_tree(
    toks: &[Token],
    prefix: &[String],
    ctx: &[String],
    line: usize,
    out: &mut Vec<UseLeaf>,
) {
    let mut path = prefix.to_vec();
    let mut bind_as: Option<Option<String>> = None;
    let mut k = 0;
    while let Some(t) = toks.get(k) {
        let line = t.line;
        match &t.tok {
            Tok::PathSep if path.is_empty() && k == 0 => path.push("::".to_owned()),
            Tok::Ident(word) if word == "as" => {
                let name = ident(toks, k + 1).filter(|n| *n != "_");
                bind_as = Some(name.map(str::to_owned));
                break;
            }
            Tok::Ident(word) => path.push(word.clone()),
            Tok::Punct('*') => {
                out.push(UseLeaf {
                    ctx: ctx.to_vec(),
                    path,
                    bind: None,
                    glob: true,
                    line,
                });
                return;
            }
            Tok::Punct('{') => {
                let close = matching_brace(toks, k);
                for item in split_top_level(&toks[k + 1..close]) {
                    use_tree(item, &path, ctx, line, out);
                }
                return;
            }
            _ => {}
        }
        k += 1;
    }
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if path.is_empty() || path == ["::"] {
        return;
    }
    let bind = bind_as.unwrap_or_else(|| path.last().cloned());
    let line = toks.first().map_or(line, |t| t.line);
    out.push(UseLeaf {
        ctx: ctx.to_vec(),
        path,
        bind,
        glob: false,
        line,
    });
}

/// The index of the `}` that closes the `{` at `open` (or the end).
fn matching_brace(toks: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// `toks` split at the commas outside braces, empty items dropped.
fn split_top_level(toks: &[Token]) -> Vec<&[Token]> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (j, t) in toks.iter().enumerate() {
        match t.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            Tok::Punct(',') if depth == 0 => {
                items.push(&toks[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    items.push(&toks[start..]);
    items.into_iter().filter(|item| !item.is_empty()).collect()
}
