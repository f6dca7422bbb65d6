//! Text a repository (or a server) controls, made safe to print.
//!
//! Server names, env and header keys, values, URLs, tool names and stderr
//! tails come from files a repository writes or from processes it names.
//! Printed raw, a control character can clear the screen, move the cursor or
//! draw a fake prompt. Everything such goes through [`safe`] before it reaches
//! a terminal or a log, and through [`shell_arg`] when it is part of a command
//! the user is told to run.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is: C0 and C1 controls, DEL,
/// and the characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width joiners and the like, line and paragraph separators).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        )
}

/// `text` with every [`is_unsafe`] character written as an escape (`\n`,
/// `\t`, `\r`, `\e` for ESC, otherwise `\u{…}`); unchanged (borrowed) when
/// there is none.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The most characters of a repository-chosen name (a server's) that text for a model or a
/// log shows ([`short_name`]): enough to tell names apart, too few to carry instructions.
pub const NAME_SHOWN: usize = 64;

/// `text` through [`safe`], cut to at most `max` characters (on a character boundary) with
/// `…` as the last one when it was longer.
pub fn short(text: &str, max: usize) -> String {
    let text = safe(text);
    if text.chars().count() <= max {
        return text.into_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A server name as a model or a log is shown it: [`short`] to [`NAME_SHOWN`].
pub fn short_name(name: &str) -> String {
    short(name, NAME_SHOWN)
}

/// [`safe`] for text that may span lines (a stderr tail, an error report):
/// newlines and tabs stay, every other unsafe character is escaped.
pub fn safe_multiline(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && c != '\t' && is_unsafe(c)) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.split('\n')
            .map(|line| {
                line.split('\t')
                    .map(|part| safe(part).into_owned())
                    .collect::<Vec<_>>()
                    .join("\t")
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// `word` quoted so that a POSIX shell (bash, zsh, dash) reads it back as
/// exactly one word, and safe to print: as it is when it holds only
/// characters no shell treats specially, in single quotes otherwise, and as
/// bash's `$'…'` with escapes when it holds an [`is_unsafe`] character.
pub fn shell_arg(word: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) && !word.starts_with('-') {
        return Cow::Borrowed(word);
    }
    if !word.chars().any(is_unsafe) {
        return Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => {
                let code = u32::from(c);
                if code < 0x100 {
                    let _ = write!(out, "\\x{code:02x}");
                } else {
                    let _ = write!(out, "\\u{code:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    Cow::Owned(out)
}

/// The command that decides about `name`: `mcp-reconcile approve <name>`
/// with the name quoted for the shell (see [`shell_arg`]); a name that
/// starts with `-` goes after `--`.
pub fn decide_command(verb: &str, name: &str) -> String {
    if name.starts_with('-') {
        format!("mcp-reconcile {verb} -- {}", shell_arg(name))
    } else {
        format!("mcp-reconcile {verb} {}", shell_arg(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_and_controls_are_escaped() {
        assert!(matches!(safe("github"), Cow::Borrowed("github")));
        assert_eq!(safe("a\u{1b}[2Jb"), "a\\e[2Jb");
        assert_eq!(safe("x\ny\r\t"), "x\\ny\\r\\t");
        assert_eq!(safe("\u{7f}\u{9b}"), "\\u{7f}\\u{9b}");
        assert_eq!(safe("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(safe("ünïcödé ✓"), "ünïcödé ✓");
        assert_eq!(safe_multiline("a\nb\u{1b}c\td"), "a\nb\\ec\td");
    }

    #[test]
    fn short_text_is_escaped_then_cut_on_a_character_boundary() {
        assert_eq!(short("abc", 3), "abc");
        assert_eq!(short("äöüß", 3), "äö…");
        assert_eq!(short("a\u{1b}[2J", 4), "a\\e…");
        let name = short_name(&"\u{202e}x".repeat(1000));
        assert_eq!(name.chars().count(), NAME_SHOWN);
        assert!(!name.chars().any(is_unsafe), "{name}");
    }

    #[test]
    fn shell_args_read_back_as_one_word() {
        assert_eq!(shell_arg("fs_tools"), "fs_tools");
        assert_eq!(shell_arg("my server"), "'my server'");
        assert_eq!(shell_arg("lint $(curl x|sh)"), "'lint $(curl x|sh)'");
        assert_eq!(shell_arg("it's"), r"'it'\''s'");
        assert_eq!(shell_arg(""), "''");
        assert_eq!(shell_arg("a\u{1b}[2J'"), r"$'a\x1b[2J\''");
        assert_eq!(shell_arg("-rf"), "'-rf'");
        assert_eq!(
            decide_command("approve", "-x"),
            "mcp-reconcile approve -- '-x'"
        );
        assert_eq!(
            decide_command("approve", "lint; rm"),
            "mcp-reconcile approve 'lint; rm'"
        );
    }

    /// The quoted forms really are one word for a shell (bash, when present).
    #[test]
    fn bash_reads_the_quoted_word_back() {
        let Ok(bash) = which("bash") else { return };
        for word in ["a b", "x'y", "$(id)", "a\u{1b}b\nc\\d'", "-n", "ü `x`"] {
            let script = format!("printf %s {}", shell_arg(word));
            let out = std::process::Command::new(&bash)
                .args(["-c", &script])
                .output()
                .expect("bash runs");
            assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{script}");
        }
    }

    fn which(name: &str) -> Result<std::path::PathBuf, ()> {
        let path = std::env::var_os("PATH").ok_or(())?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
            .ok_or(())
    }
}
