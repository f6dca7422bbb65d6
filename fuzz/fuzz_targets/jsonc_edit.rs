//! `install`'s JSON-with-comments edits on arbitrary text: no panic, and when an edit applies,
//! it did what it says — the member set reads back as set, setting it again changes nothing,
//! removing a member it added leaves it absent, and a file that parsed still parses.
#![no_main]

use mcp_reconcile::install::jsonc;
use mcp_reconcile_kernel::json::parse_jsonc;
use serde_json::json;

/// Names from a small vocabulary, so edits meet the members a text has.
const NAMES: [&str; 6] = ["mcpServers", "reconcile", "mcp", "allowed", "a", "é \"q\""];

// The first 5 bytes: how deep the path is (0–3), its names, and the key (low 4 bits) and the
// value (the next 2 bits); the rest: the file.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<5>() else {
        return;
    };
    let [depth, a, b, c, which] = *head;
    let name = |i: u8| NAMES[usize::from(i) % NAMES.len()];
    let path: Vec<&str> = [a, b, c][..usize::from(depth % 4)]
        .iter()
        .map(|&i| name(i))
        .collect();
    let key = name(which % 16);
    let text = String::from_utf8_lossy(rest);
    let value = match which / 16 % 4 {
        0 => json!({"command": "mcp-reconcile", "args": ["serve"]}),
        1 => json!(["reconcile"]),
        2 => json!("text // not a comment /* */"),
        _ => json!(null),
    };
    let _ = jsonc::keys(&text, &path);
    let _ = jsonc::get(&text, &path, key);
    let parsed = text.trim().is_empty() || parse_jsonc(&text).is_ok();
    let had = jsonc::keys(&text, &path).iter().any(|k| k == key);
    if let Ok(set) = jsonc::set(&text, &path, key, &value) {
        assert_eq!(jsonc::get(&set, &path, key), Some(value.clone()), "{set}");
        assert!(jsonc::keys(&set, &path).iter().any(|k| k == key), "{set}");
        let again = jsonc::set(&set, &path, key, &value).expect("set again");
        assert_eq!(again, set, "setting it again changes nothing");
        if parsed {
            assert!(parse_jsonc(&set).is_ok(), "still parses: {set}");
        }
        let removed = jsonc::remove(&set, &path, key).expect("remove what was set");
        if !had {
            // A member it added (a text may name a member twice: the first one is set).
            assert_eq!(jsonc::get(&removed, &path, key), None, "{removed}");
        }
    }
    let _ = jsonc::remove(&text, &path, key);
});
