//! Edits of a JSON (with comments) file that touch only the member they change: every other
//! byte — comments, formatting, key order — stays as the client or the user wrote it, so an
//! edit can be undone exactly and a diff shows only what `install` did.

use anyhow::{bail, Context as _};

/// Where a member sits in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    /// From the key's opening quote…
    start: usize,
    /// …to the end of the value.
    end: usize,
    /// The value's first byte.
    value: usize,
}

/// A scanner over JSON with comments: positions only, no values built.
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn skip_blank(&mut self) {
        loop {
            match self.text.get(self.at..) {
                Some([b' ' | b'\t' | b'\n' | b'\r', ..]) => self.at += 1,
                Some([b'/', b'/', ..]) => {
                    while self.text.get(self.at).is_some_and(|b| *b != b'\n') {
                        self.at += 1;
                    }
                }
                Some([b'/', b'*', ..]) => {
                    self.at += 2;
                    while self.at < self.text.len() && !self.text[self.at..].starts_with(b"*/") {
                        self.at += 1;
                    }
                    self.at = (self.at + 2).min(self.text.len());
                }
                _ => return,
            }
        }
    }

    /// Skips one string; returns its content's span.
    fn string(&mut self) -> anyhow::Result<(usize, usize)> {
        if self.text.get(self.at) != Some(&b'"') {
            bail!("expected a string at byte {}", self.at);
        }
        self.at += 1;
        let start = self.at;
        while let Some(b) = self.text.get(self.at) {
            match b {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Ok((start, self.at - 1));
                }
                _ => self.at += 1,
            }
        }
        bail!("a string is not terminated")
    }

    /// Skips one value.
    fn value(&mut self) -> anyhow::Result<()> {
        self.skip_blank();
        match self.text.get(self.at) {
            Some(b'"') => self.string().map(|_| ()),
            Some(open @ (b'{' | b'[')) => {
                let close = if *open == b'{' { b'}' } else { b']' };
                self.at += 1;
                loop {
                    self.skip_blank();
                    match self.text.get(self.at) {
                        Some(b) if *b == close => {
                            self.at += 1;
                            return Ok(());
                        }
                        Some(b',' | b':') => self.at += 1,
                        Some(_) => self.value()?,
                        None => bail!("an object or array is not closed"),
                    }
                }
            }
            Some(_) => {
                let start = self.at;
                while self.text.get(self.at).is_some_and(|b| {
                    !matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t' | b'/')
                }) {
                    self.at += 1;
                }
                // A stray `]`, `}` or `/` is no value: scanning on from it never ends.
                if self.at == start {
                    bail!("unexpected byte {} where a value should be", self.at);
                }
                Ok(())
            }
            None => bail!("a value is missing"),
        }
    }

    /// The members of the object starting at `self.at`, and the position of its `}`.
    fn members(&mut self) -> anyhow::Result<(Vec<(String, Member)>, usize)> {
        self.skip_blank();
        if self.text.get(self.at) != Some(&b'{') {
            bail!("expected an object at byte {}", self.at);
        }
        self.at += 1;
        let mut members = Vec::new();
        loop {
            self.skip_blank();
            match self.text.get(self.at) {
                Some(b'}') => return Ok((members, self.at)),
                Some(b',') => self.at += 1,
                Some(b'"') => {
                    let start = self.at;
                    let (k0, k1) = self.string()?;
                    let key: String = serde_json::from_slice(&self.text[k0 - 1..=k1])
                        .context("a key is not valid JSON")?;
                    self.skip_blank();
                    if self.text.get(self.at) != Some(&b':') {
                        bail!("expected ':' after key {key:?}");
                    }
                    self.at += 1;
                    self.skip_blank();
                    let value = self.at;
                    self.value()?;
                    members.push((
                        key,
                        Member {
                            start,
                            end: self.at,
                            value,
                        },
                    ));
                }
                _ => bail!("unexpected byte {} in an object", self.at),
            }
        }
    }
}

/// An object's members, the position of its `{` and of its `}`.
type Object = (Vec<(String, Member)>, usize, usize);

/// The object at `path` (the top level for `[]`).
fn object_at(text: &str, path: &[&str]) -> anyhow::Result<Option<Object>> {
    let mut scan = Scan {
        text: text.as_bytes(),
        at: 0,
    };
    scan.skip_blank();
    let mut open = scan.at;
    let (mut members, mut close) = scan.members()?;
    for key in path {
        let Some((_, member)) = members.iter().find(|(k, _)| k == key).cloned() else {
            return Ok(None);
        };
        scan.at = member.value;
        if text.as_bytes().get(member.value) != Some(&b'{') {
            bail!("\"{key}\" is not an object");
        }
        open = member.value;
        (members, close) = scan.members()?;
    }
    Ok(Some((members, open, close)))
}

/// The indentation of the line `at` is on.
fn indent_of(text: &str, at: usize) -> &str {
    let line = text[..at].rfind('\n').map_or(0, |n| n + 1);
    let rest = &text[line..];
    &rest[..rest.len() - rest.trim_start_matches([' ', '\t']).len()]
}

/// `value` as pretty JSON whose continuation lines are indented by `indent`.
fn pretty(value: &serde_json::Value, indent: &str) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".into());
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            if i == 0 {
                line.to_owned()
            } else {
                format!("{indent}{line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The member `key` of the object at `path` set to `value`: replaced in place when it exists,
/// else added as the object's last member; objects on `path` that do not exist are made. An
/// empty text is `{}`.
///
/// # Errors
/// The text is not a JSON object, or something on `path` is not an object.
pub fn set(
    text: &str,
    path: &[&str],
    key: &str,
    value: &serde_json::Value,
) -> anyhow::Result<String> {
    let edited = set_in_place(text, path, key, value)?;
    // Text that is not valid JSON with comments around the member can mislead the member
    // scan: an edit is kept only when the member reads back as what was set.
    if get(&edited, path, key).as_ref() != Some(value) {
        anyhow::bail!(
            "cannot set {key:?}: the text around it is not valid JSON with comments; fix the file"
        );
    }
    Ok(edited)
}

/// [`set`]'s edit, before it is read back.
fn set_in_place(
    text: &str,
    path: &[&str],
    key: &str,
    value: &serde_json::Value,
) -> anyhow::Result<String> {
    let base = if text.trim().is_empty() { "{}\n" } else { text };
    // Make the missing objects on the path, outermost first.
    for depth in 0..path.len() {
        if object_at(base, &path[..=depth])?.is_none() {
            let mut nested = serde_json::Value::Object(serde_json::Map::new());
            for inner in path[depth + 1..].iter().rev() {
                nested = serde_json::json!({ *inner: nested });
            }
            let made = set(base, &path[..depth], path[depth], &nested)?;
            return set(&made, path, key, value);
        }
    }
    let (members, open, close) = object_at(base, path)?.context("the object was just made")?;
    if let Some((_, member)) = members.iter().find(|(k, _)| k == key) {
        let indent = indent_of(base, member.start);
        return Ok(format!(
            "{}{}{}",
            &base[..member.value],
            pretty(value, indent),
            &base[member.end..]
        ));
    }
    let key_json = serde_json::to_string(key)?;
    match members.last() {
        Some((_, last)) => {
            let indent = indent_of(base, last.start).to_owned();
            Ok(format!(
                "{},\n{indent}{key_json}: {}{}",
                &base[..last.end],
                pretty(value, &indent),
                &base[last.end..]
            ))
        }
        None => {
            let outer = indent_of(base, open).to_owned();
            let indent = format!("{outer}  ");
            // What the empty object held (comments) stays, on its own line: a line comment
            // would otherwise swallow the closing brace.
            let inner = match base[open + 1..close].trim_matches([' ', '\t', '\n', '\r']) {
                "" => String::new(),
                inner => format!("{indent}{inner}\n"),
            };
            Ok(format!(
                "{}{{\n{indent}{key_json}: {}\n{inner}{outer}}}{}",
                &base[..open],
                pretty(value, &indent),
                &base[close + 1..]
            ))
        }
    }
}

/// The text without the member `key` of the object at `path` (and the comma that joined it);
/// unchanged when there is none.
///
/// # Errors
/// The text is not a JSON object, or something on `path` is not an object.
pub fn remove(text: &str, path: &[&str], key: &str) -> anyhow::Result<String> {
    let Some((members, open, close)) = object_at(text, path)? else {
        return Ok(text.to_owned());
    };
    let Some(index) = members.iter().position(|(k, _)| k == key) else {
        return Ok(text.to_owned());
    };
    let member = members[index].1;
    let (from, to) = if index > 0 {
        // From the end of the previous member (its comma goes with this one).
        (members[index - 1].1.end, member.end)
    } else if let Some((_, next)) = members.get(1) {
        (member.start, next.start)
    } else {
        // The only member: the line it is on goes — or, in an object written on one line,
        // everything between the braces.
        match text[..member.start].rfind('\n') {
            Some(line) if line > open => (line, member.end),
            _ => (open + 1, close),
        }
    };
    Ok(format!("{}{}", &text[..from], &text[to..]))
}

/// The member names of the object at `path`, in file order (none when there is no such object).
pub fn keys(text: &str, path: &[&str]) -> Vec<String> {
    match object_at(text, path) {
        Ok(Some((members, _, _))) => members.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}

/// The value of the member `key` of the object at `path`, parsed (comments allowed).
pub fn get(text: &str, path: &[&str], key: &str) -> Option<serde_json::Value> {
    let (members, _, _) = object_at(text, path).ok()??;
    let (_, member) = members.into_iter().find(|(k, _)| k == key)?;
    let raw = &text[member.value..member.end];
    let value = mcp_reconcile_kernel::json::parse_jsonc(raw).ok()?;
    serde_json::from_str(&value.to_json()).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Fuzz finding (`jsonc_edit`, crash-e9b28a8b): in text that is not JSON around a member,
    /// `set` reported success for an edit that did not read back; it refuses it now.
    #[test]
    fn an_edit_that_does_not_read_back_is_refused() {
        let bytes: &[u8] = &[
            123, 34, 97, 34, 58, 91, 49, 44, 32, 50, 101, 32, 44, 123, 109, 99, 34, 58, 34, 32, 34,
            47, 42, 32, 110, 111, 0, 82, 0, 0, 32, 99, 34, 58, 34, 32, 34, 47, 42, 32, 34, 98, 34,
            58, 32, 42, 47, 34, 125, 32, 91, 49, 44, 32, 50, 44, 93, 34, 97, 34, 58, 32, 49, 44,
            32, 34, 91, 34, 58, 32, 91, 49, 44, 32, 50, 93, 125, 44, 93, 34, 97, 34, 58, 32, 245,
            34, 99, 125, 99, 100, 43, 32, 34, 0, 36, 89, 125,
        ];
        let text = String::from_utf8_lossy(bytes);
        if let Ok(edited) = set(&text, &[], "a", &json!(null)) {
            assert_eq!(get(&edited, &[], "a"), Some(json!(null)), "{edited}");
        }
    }

    const CLAUDE: &str = "{\n  \"numStartups\": 4,\n  // a comment\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"npx\"\n    }\n  },\n  \"tipsHistory\": {}\n}\n";

    #[test]
    fn a_member_is_added_and_removed_without_touching_the_rest() {
        let added = set(
            CLAUDE,
            &["mcpServers"],
            "reconcile",
            &json!({"command": "m", "args": ["serve"]}),
        )
        .expect("set");
        assert!(added.contains("// a comment"));
        assert!(
            added.contains("    \"reconcile\": {\n      \"command\": \"m\","),
            "{added}"
        );
        assert_eq!(
            get(&added, &["mcpServers"], "reconcile"),
            Some(json!({"command": "m", "args": ["serve"]}))
        );
        assert_eq!(
            remove(&added, &["mcpServers"], "reconcile").expect("remove"),
            CLAUDE
        );
    }

    #[test]
    fn missing_objects_and_files_are_made() {
        let made = set("", &["mcp"], "allowed", &json!(["reconcile"])).expect("set");
        assert_eq!(get(&made, &["mcp"], "allowed"), Some(json!(["reconcile"])));
        let made = set("{}", &["mcpServers"], "a", &json!({"command": "x"})).expect("set");
        assert_eq!(
            get(&made, &["mcpServers"], "a"),
            Some(json!({"command": "x"}))
        );
        let first = set("{\"mcpServers\": {}}", &["mcpServers"], "a", &json!(1)).expect("set");
        assert_eq!(get(&first, &["mcpServers"], "a"), Some(json!(1)));
        assert_eq!(
            remove(&first, &["mcpServers"], "a")
                .expect("remove")
                .replace(['\n', ' '], ""),
            "{\"mcpServers\":{}}"
        );
    }

    #[test]
    fn a_member_is_replaced_in_place() {
        let text = "{\"a\": 1, \"b\": [1, 2], \"c\": \"x\"}";
        assert_eq!(
            set(text, &[], "b", &json!(3)).expect("set"),
            "{\"a\": 1, \"b\": 3, \"c\": \"x\"}"
        );
        assert_eq!(
            remove(text, &[], "a").expect("rm"),
            "{\"b\": [1, 2], \"c\": \"x\"}"
        );
        assert_eq!(
            remove(text, &[], "c").expect("rm"),
            "{\"a\": 1, \"b\": [1, 2]}"
        );
        assert!(set("[1]", &[], "a", &json!(1)).is_err());
        assert!(set("{\"a\": 1}", &["a"], "b", &json!(1)).is_err());
    }

    /// The only member of an object written on one line goes with nothing else: the text
    /// stays valid (an editor's `"mcpServers": { "a": {...} }` handed over by install).
    #[test]
    fn the_only_member_of_a_one_line_object_is_removed() -> anyhow::Result<()> {
        let text = "{\n  // mine\n  \"mcpServers\": { \"first\": { \"command\": \"f\" } }\n}\n";
        let removed = remove(text, &["mcpServers"], "first")?;
        assert_eq!(removed, "{\n  // mine\n  \"mcpServers\": {}\n}\n");
        assert_eq!(keys(&removed, &["mcpServers"]), Vec::<String>::new());
        assert_eq!(remove("{\"a\": 1}", &[], "a")?, "{}");
        Ok(())
    }
}
