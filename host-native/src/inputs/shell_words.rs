//! `mcp.serverCommand`: a command line split like a POSIX shell would, into
//! the `mcp` server it names.

use std::fmt::Write as _;
use std::path::Path;

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::ServerConfig;

/// The `mcp` server of `mcp.serverCommand`: the command string split like a
/// shell would (quotes, backslashes, `$VAR` from the environment), run in the
/// project directory.
pub(super) fn server_command_config(
    text: &str,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    let words = shell_words(text, env)
        .map_err(|e| format!("cannot parse mcp.serverCommand {text:?}: {e}"))?;
    let Some((command, args)) = words.split_first() else {
        return Err(format!("mcp.serverCommand {text:?} names no command"));
    };
    let mut entry = Object::new();
    entry.insert("command".into(), command.as_str().into());
    entry.insert(
        "args".into(),
        Value::Array(args.iter().map(|a| Value::from(a.as_str())).collect()),
    );
    entry.insert("cwd".into(), cwd.to_string_lossy().as_ref().into());
    Ok(ServerConfig::new(entry))
}

/// Splits a command line into words like a POSIX shell: whitespace
/// separates words, `'…'` is literal, `"…"` allows `\"`, `\\`, `\$` and
/// `$VAR`, a backslash outside quotes escapes the next character, and
/// `$NAME` / `${NAME}` expand from `env` (unknown → empty).
///
/// # Errors
/// Unterminated quotes, and what a shell would treat specially but a plain
/// command cannot express: operators (`| & ; < > ( )`, backticks), unquoted
/// wildcards (`*`, `?`) and comments.
pub fn shell_words(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek().copied() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => {
                                word.push(n);
                                chars.next();
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => word.push('\\'),
                        },
                        Some('$') => expand_var(&mut chars, &mut word, env),
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(ch) => word.push(ch),
                    None => word.push('\\'),
                }
            }
            '$' => {
                let before = word.len();
                expand_var(&mut chars, &mut word, env);
                in_word |= word.len() > before;
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '`' => {
                return Err(format!("the shell operator `{c}` is not supported"))
            }
            '*' | '?' => {
                return Err(format!(
                    "the unquoted wildcard `{c}` is not supported (quote it)"
                ))
            }
            '#' if !in_word => return Err("comments (`#`) are not supported".into()),
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

fn expand_var(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
    env: &dyn Fn(&str) -> Option<String>,
) {
    if chars.peek() == Some(&'{') {
        chars.next();
        let mut name = String::new();
        loop {
            match chars.next() {
                Some('}') => break,
                Some(ch) => name.push(ch),
                None => {
                    // Unterminated: literal text.
                    let _ = write!(out, "${{{name}");
                    return;
                }
            }
        }
        if name.is_empty() {
            out.push_str("${}");
        } else {
            out.push_str(&env(&name).unwrap_or_default());
        }
        return;
    }
    let mut name = String::new();
    while let Some(&ch) = chars.peek() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            name.push(ch);
            chars.next();
        } else {
            break;
        }
    }
    if name.is_empty() {
        out.push('$');
    } else {
        out.push_str(&env(&name).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Result<Vec<String>, String> {
        shell_words(text, &|name| (name == "HOME").then(|| "/home/u".to_owned()))
    }

    #[test]
    fn shell_words_split_like_a_shell() {
        assert_eq!(
            words(r#"node "my server.js" --flag='a b' x\ y $HOME/bin ${HOME}x "$HOME" $NOPE"#),
            Ok(vec![
                "node".into(),
                "my server.js".into(),
                "--flag=a b".into(),
                "x y".into(),
                "/home/u/bin".into(),
                "/home/ux".into(),
                "/home/u".into(),
            ])
        );
        assert_eq!(
            words(r#"a "" b"#),
            Ok(vec!["a".into(), "".into(), "b".into()])
        );
        assert_eq!(
            words(r#"say "\"hi\" \n""#),
            Ok(vec!["say".into(), r#""hi" \n"#.into()])
        );
        assert_eq!(words("  "), Ok(vec![]));
        assert_eq!(
            words("cost $ 5"),
            Ok(vec!["cost".into(), "$".into(), "5".into()])
        );
    }

    #[test]
    fn shell_words_refuse_what_a_command_cannot_express() {
        for bad in [
            "a | b", "a; b", "a > f", "a 'x", "a \"x", "ls *.js", "a `b`", "a #c", "(a)",
        ] {
            assert!(words(bad).is_err(), "{bad}");
        }
        assert_eq!(words("a#b"), Ok(vec!["a#b".into()]));
    }
}
