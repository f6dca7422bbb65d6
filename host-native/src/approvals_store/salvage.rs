//! What survives of an approvals file that is not JSON: whole project entries, or whole
//! server records of a truncated entry, found by splitting the text at top-level commas.

use mcp_reconcile_kernel::json::{self, Object, Value};

/// The records that still parse in approvals `text` that is not JSON as a
/// whole (truncated, or damaged in the middle): every top-level member that
/// parses on its own with an object value, and of a project entry that does
/// not, every server record that does. Returns them with their count of
/// server records. Comments are ignored as in [`json::parse_jsonc`].
pub fn salvage(text: &str) -> (Object, usize) {
    let text = json::strip_comments(text.strip_prefix('\u{feff}').unwrap_or(text));
    let mut kept = Object::new();
    let mut records = 0;
    let Some(body) = object_body(&text) else {
        return (kept, 0);
    };
    for member in split_members(body) {
        if let Some((key, Value::Object(project))) = parse_member(member) {
            records += project.len();
            kept.insert(key, Value::Object(project));
            continue;
        }
        // A damaged project entry: keep its whole server records.
        let Some((key, value)) = split_key(member) else {
            continue;
        };
        let Some(inner) = object_body(value) else {
            continue;
        };
        let mut project = Object::new();
        for record in split_members(inner) {
            if let Some((name, record @ Value::Object(_))) = parse_member(record) {
                project.insert(name, record);
            }
        }
        if !project.is_empty() {
            records += project.len();
            kept.insert(key, Value::Object(project));
        }
    }
    (kept, records)
}

/// The text after the `{` that `text` starts with (after whitespace).
fn object_body(text: &str) -> Option<&str> {
    text.trim_start().strip_prefix('{')
}

/// Splits an object's body at its own commas, up to its closing brace or the
/// end of the text (a truncated object). Brackets and strings nest.
fn split_members(body: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' if depth == 0 => {
                members.push(&body[start..i]);
                return members;
            }
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    members.push(&body[start..]);
    members
}

/// `"key": value` parsed on its own.
fn parse_member(member: &str) -> Option<(String, Value)> {
    if member.trim().is_empty() {
        return None;
    }
    match json::parse(&format!("{{{member}}}")) {
        Ok(Value::Object(object)) if object.len() == 1 => object.into_iter().next(),
        _ => None,
    }
}

/// The key of `"key": rest` and the text of `rest`, when the key is whole.
fn split_key(member: &str) -> Option<(String, &str)> {
    let member = member.trim_start();
    let body = member.strip_prefix('"')?;
    let mut escaped = false;
    let end = body.char_indices().find_map(|(i, c)| {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(i),
            _ => {}
        }
        None
    })?;
    let key = match json::parse(&member[..end + 2]) {
        Ok(Value::String(key)) => key,
        _ => return None,
    };
    let rest = body[end + 1..].trim_start().strip_prefix(':')?;
    Some((key, rest))
}
