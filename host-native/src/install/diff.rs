//! What a change does, for a person (`--dry-run`): only the lines install touches, escaped,
//! with credentials masked.

use super::Change;

/// What `change` does, for a person (`--dry-run`): the lines it takes out (`-`) and puts in
/// (`+`), in the style of a unified diff without context — a client's file holds other
/// servers' secrets, and no line install did not touch is shown. A string value under a key
/// that names a credential is masked even there.
pub fn diff(change: &Change) -> String {
    let before = change.before.as_deref().unwrap_or("");
    let after = change.after.as_deref().unwrap_or("");
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_end, new_end) = (old.len() - suffix, new.len() - suffix);
    let path = crate::display::safe(&change.path.display().to_string()).into_owned();
    let mut out = format!("--- {path}\n+++ {path}\n@@ line {} @@\n", prefix + 1);
    for line in &old[prefix..old_end] {
        out.push_str(&format!("-{}\n", shown(line)));
    }
    for line in &new[prefix..new_end] {
        out.push_str(&format!("+{}\n", shown(line)));
    }
    out
}

/// A line of a client's file as a terminal may show it: escaped, and a credential's value
/// masked.
fn shown(line: &str) -> String {
    let masked = match line
        .trim_start()
        .strip_prefix('"')
        .and_then(|l| l.split_once('"'))
    {
        Some((key, rest))
            if crate::redact::is_secret_param(key)
                && rest.trim_start().starts_with(':')
                && rest.contains('"') =>
        {
            let indent = &line[..line.len() - line.trim_start().len()];
            format!("{indent}\"{key}\": \"****\"")
        }
        _ => line.to_owned(),
    };
    crate::display::safe(&masked).into_owned()
}
