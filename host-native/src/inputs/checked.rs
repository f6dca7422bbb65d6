//! Parse once: the completeness check of settle detection parses a changed file, and the pass
//! that follows reads it again — [`Checked`] hands that parse to the pass when the bytes are
//! the same, so a save costs one parse, not two.

use mcp_reconcile_kernel::json::{self, Value};

/// The text an input was last found complete with, and its JSON (settle detection): the pass
/// that follows reads the file again and, when it holds exactly these bytes, takes this value
/// instead of parsing them a second time. Taken by the first reader; the same bytes always
/// parse the same, so a value is never used for other text.
#[derive(Default)]
pub(super) struct Checked(Option<(String, Value)>);

impl Checked {
    /// Keeps `value`, the JSON of `text`, for the next reader of that text.
    pub(super) fn keep(&mut self, text: String, value: Value) {
        self.0 = Some((text, value));
    }

    /// Whether `text` parses as JSON (comments allowed); its parse is kept for the next
    /// reader. Text already kept is not parsed again: the events of one save in place (its
    /// writes, then its close) are each checked, and all but the first find the same text.
    pub(super) fn check(&mut self, text: String) -> bool {
        if self.0.as_ref().is_some_and(|(kept, _)| *kept == text) {
            return true;
        }
        match json::parse_jsonc(&text) {
            Ok(value) => {
                self.keep(text, value);
                true
            }
            Err(_) => false,
        }
    }

    /// `text`'s JSON (comments allowed): the kept value when it was parsed from exactly this
    /// text (taken), else parsed now (the kept one stays for its own file's reader).
    pub(super) fn parse(&mut self, text: &str) -> Result<Value, json::ParseError> {
        match self.0.take_if(|(kept, _)| kept == text) {
            Some((_, value)) => Ok(value),
            None => json::parse_jsonc(text),
        }
    }

    /// Forgets what is kept (a pass read every input it was for).
    pub(super) fn clear(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept value is what the reader gets for exactly the text it was kept for (here a
    /// value that text would never parse to, so a parse could not pass), once; other text is
    /// parsed, and leaves it for its own reader.
    #[test]
    fn a_kept_parse_serves_the_same_text_once_and_never_other_text() {
        let mut checked = Checked::default();
        checked.keep("{}".into(), Value::Bool(true));
        assert_eq!(
            checked.parse("[1]"),
            json::parse_jsonc("[1]"),
            "other text is parsed"
        );
        assert_eq!(
            checked.parse("{}"),
            Ok(Value::Bool(true)),
            "taken, not parsed"
        );
        assert_eq!(checked.parse("{}"), json::parse_jsonc("{}"), "taken once");
        assert!(checked.check("{}".into()), "checked");
        assert!(!checked.check("{".into()), "not JSON");
        checked.keep("{}".into(), Value::Bool(true));
        assert!(checked.check("{}".into()), "kept text is not parsed again");
        assert_eq!(checked.parse("{}"), Ok(Value::Bool(true)), "and stays kept");
        checked.keep("{}".into(), Value::Bool(true));
        checked.clear();
        assert_eq!(checked.parse("{}"), json::parse_jsonc("{}"), "cleared");
    }
}
