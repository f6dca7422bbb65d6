//! What a language tool hands the MCP client, bounded: a language server's answer can be as
//! large as a message may be (64 MiB), and a client — often a model with a small context —
//! should get a useful part of it with a note of what was left out, not all of it.
//!
//! * at most [`MAX_ITEMS`] diagnostics, locations or symbols (a nested symbol counts with its
//!   children), then an item `{"truncated": "… truncated: N more …"}`;
//! * no text field of an item over [`MAX_FIELD_BYTES`], hover text within the output budget,
//!   each cut marked `… truncated: N more bytes`;
//! * the whole text at most [`MAX_OUTPUT_BYTES`]: items are left out (and counted in the note)
//!   until it fits.

use serde_json::{json, Value};

/// The most text one language tool call returns (1 MiB).
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// The most diagnostics, locations or symbols one call returns.
pub const MAX_ITEMS: usize = 2000;
/// The longest text field of one item (a message, a name, a path): 8 KiB.
pub const MAX_FIELD_BYTES: usize = 8 * 1024;

/// A list answer: the items kept so far, each with how many things it holds (a symbol and
/// its children), and how many there were in all.
pub(super) struct Listed {
    pub(super) items: Vec<(Value, usize)>,
    pub(super) total: usize,
    /// What the items are, for the note: "diagnostics", "locations", "symbols".
    pub(super) what: &'static str,
}

impl Listed {
    /// The first [`MAX_ITEMS`] of `all`, each made by `item`.
    pub(super) fn of<T>(all: &[T], what: &'static str, item: impl Fn(&T) -> Value) -> Listed {
        Listed {
            items: all.iter().take(MAX_ITEMS).map(|t| (item(t), 1)).collect(),
            total: all.len(),
            what,
        }
    }

    /// The JSON text: as many items as fit in [`MAX_OUTPUT_BYTES`], then the note when any
    /// was left out.
    pub(super) fn render(&self) -> String {
        let mut keep = self.items.len();
        loop {
            let kept = &self.items[..keep];
            let shown: usize = kept.iter().map(|(_, n)| n).sum();
            let mut out: Vec<Value> = kept.iter().map(|(item, _)| item.clone()).collect();
            let more = self.total.saturating_sub(shown);
            if more > 0 {
                out.push(json!({"truncated": format!(
                    "… truncated: {more} more {} not shown (a language tool returns at most \
                     {MAX_ITEMS} and {} MiB of text)",
                    self.what,
                    MAX_OUTPUT_BYTES / (1024 * 1024)
                )}));
            }
            let text = pretty(&Value::Array(out));
            if text.len() <= MAX_OUTPUT_BYTES || keep == 0 {
                return text;
            }
            keep = shrink(keep, text.len());
        }
    }
}

/// The JSON text of `{"contents": text}`, the text cut to fit [`MAX_OUTPUT_BYTES`].
pub(super) fn hover(text: Option<&str>) -> String {
    let Some(text) = text else {
        return pretty(&json!({"contents": null}));
    };
    let mut budget = MAX_OUTPUT_BYTES - 1024;
    loop {
        let out = pretty(&json!({"contents": clip(text, budget)}));
        // Escapes (`\"`, `\u0001`) can make the text longer than what it holds.
        if out.len() <= MAX_OUTPUT_BYTES || budget == 0 {
            return out;
        }
        budget = shrink(budget, out.len());
    }
}

/// `text` cut to at most `max` bytes (at a character boundary) and marked, or whole.
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… truncated: {} more bytes",
        &text[..end],
        text.len() - end
    )
}

/// A text field of an item, at most [`MAX_FIELD_BYTES`].
pub(super) fn field(text: &str) -> Value {
    Value::String(clip(text, MAX_FIELD_BYTES))
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A smaller `count` for a text of `len` bytes to fit [`MAX_OUTPUT_BYTES`]: in proportion,
/// with a margin, and always smaller.
fn shrink(count: usize, len: usize) -> usize {
    let fitted = (count as u128 * MAX_OUTPUT_BYTES as u128 * 9 / 10 / len.max(1) as u128) as usize;
    fitted.min(count.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_text_and_fields_are_cut_with_a_note() {
        let many: Vec<usize> = (0..5000).collect();
        let text = Listed::of(&many, "locations", |i| json!({"line": i})).render();
        let items: Vec<Value> = serde_json::from_str(&text).expect("JSON");
        assert_eq!(items.len(), MAX_ITEMS + 1);
        let note = items[MAX_ITEMS]["truncated"].as_str().unwrap_or_default();
        assert!(note.contains("3000 more locations"), "{note}");

        // Items that are large together: as many as fit, the rest counted.
        let big = "é".repeat(MAX_FIELD_BYTES);
        let text = Listed::of(&many, "diagnostics", |_| json!({"message": field(&big)})).render();
        assert!(text.len() <= MAX_OUTPUT_BYTES, "{}", text.len());
        let items: Vec<Value> = serde_json::from_str(&text).expect("JSON");
        let kept = items.len() - 1;
        assert!(kept > 50, "{kept}");
        let note = items[kept]["truncated"].as_str().unwrap_or_default();
        assert!(
            note.contains(&format!("{} more diagnostics", 5000 - kept)),
            "{note}"
        );
        let message = items[0]["message"].as_str().unwrap_or_default();
        assert!(message.len() < MAX_FIELD_BYTES + 64 && message.contains("… truncated: "));

        let small = Listed::of(&many[..3], "symbols", |i| json!(i)).render();
        assert_eq!(
            serde_json::from_str::<Value>(&small).ok(),
            Some(json!([0, 1, 2]))
        );

        for text in [
            "x".repeat(3 * MAX_OUTPUT_BYTES),
            "\u{1}".repeat(MAX_OUTPUT_BYTES),
        ] {
            let out = hover(Some(&text));
            assert!(out.len() <= MAX_OUTPUT_BYTES, "{}", out.len());
            assert!(out.contains("… truncated: "));
        }
        assert_eq!(hover(Some("short")), pretty(&json!({"contents": "short"})));
    }
}
