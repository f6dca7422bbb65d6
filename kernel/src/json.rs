//! JSON with ECMAScript semantics.
//!
//! Identities must equal what a TypeScript host computes with `JSON.parse` and
//! `JSON.stringify`, so this module models exactly what those two functions see:
//!
//! * every number is an IEEE double (`1e21` prints as `1e+21`, integers beyond
//!   2^53 are rounded on the way in);
//! * an object's members come out in ECMAScript property order: integer-like
//!   keys ("0" … "4294967294", no leading zeros) first in ascending numeric
//!   order, then the other keys in insertion order; a duplicate key keeps its
//!   first position and its last value;
//! * strings sort by UTF-16 code units, as `Array.prototype.sort` does.
//!
//! [`Object`] keeps its members in that order at all times, so iterating it is
//! iterating "map order" everywhere in the kernel.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use indexmap::IndexMap;
// Member lookups hash short keys from local config files, millions of times
// in a large plan: a fast non-keyed hash beats SipHash's flooding resistance,
// which buys nothing here. Iteration order never depends on the hasher.
use rustc_hash::FxBuildHasher;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// A JSON value as ECMAScript sees it after `JSON.parse`.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// Every JSON number is a double.
    Number(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, in ECMAScript property order.
    Object(Object),
}

/// An object whose iteration order is ECMAScript property order.
///
/// Generic over the member type so typed maps (e.g. name → server config)
/// keep the same order as the JSON they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Object<V = Value> {
    members: IndexMap<String, V, FxBuildHasher>,
    /// How many leading members have integer-like keys (they sort first).
    index_keys: usize,
}

/// Errors from reading JSON text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The text is not JSON (after comments were stripped, where allowed).
    #[error("{message}")]
    Syntax {
        /// What the parser reported, with line and column.
        message: String,
    },
}

impl<V> Default for Object<V> {
    fn default() -> Self {
        Object {
            members: IndexMap::default(),
            index_keys: 0,
        }
    }
}

impl<V> Object<V> {
    /// An empty object.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the object has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The value of own member `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.members.get(key)
    }

    /// Mutable access to own member `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.members.get_mut(key)
    }

    /// Whether `key` is an own member.
    pub fn contains_key(&self, key: &str) -> bool {
        self.members.contains_key(key)
    }

    /// `obj[key] = value` with ECMAScript ordering: an existing key keeps its
    /// position; a new integer-like key goes into numeric position; any other
    /// new key goes last.
    pub fn insert(&mut self, key: String, value: V) {
        if let Some(slot) = self.members.get_mut(&key) {
            *slot = value;
            return;
        }
        match array_index(&key) {
            Some(index) => {
                let keys = &self.members;
                let at = partition_point(self.index_keys, |i| {
                    keys.get_index(i)
                        .and_then(|(k, _)| array_index(k))
                        .is_some_and(|other| other < index)
                });
                self.members.shift_insert(at, key, value);
                self.index_keys += 1;
            }
            None => {
                self.members.insert(key, value);
            }
        }
    }

    /// `delete obj[key]`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        let removed = self.members.shift_remove(key)?;
        if array_index(key).is_some() {
            self.index_keys -= 1;
        }
        Some(removed)
    }

    /// Members in ECMAScript property order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &V)> + ExactSizeIterator + '_ {
        self.members.iter()
    }

    /// Keys in ECMAScript property order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator + '_ {
        self.members.keys()
    }

    /// Values in ECMAScript property order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> + '_ {
        self.members.values()
    }

    /// The position of `key` in property order.
    pub fn index_of(&self, key: &str) -> Option<usize> {
        self.members.get_index_of(key)
    }

    /// Applies `f` to every value, keeping keys and order.
    pub fn map_values<W>(self, mut f: impl FnMut(&str, V) -> W) -> Object<W> {
        Object {
            index_keys: self.index_keys,
            members: self
                .members
                .into_iter()
                .map(|(k, v)| {
                    let w = f(&k, v);
                    (k, w)
                })
                .collect(),
        }
    }

    /// Like [`Object::map_values`] with a fallible `f`.
    ///
    /// # Errors
    /// The first error `f` returns.
    pub fn try_map_values<W, E>(
        self,
        mut f: impl FnMut(&str, V) -> Result<W, E>,
    ) -> Result<Object<W>, E> {
        let mut members = IndexMap::with_capacity_and_hasher(self.members.len(), FxBuildHasher);
        for (k, v) in self.members {
            let w = f(&k, v)?;
            members.insert(k, w);
        }
        Ok(Object {
            index_keys: self.index_keys,
            members,
        })
    }
}

impl<V> FromIterator<(String, V)> for Object<V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(iter: I) -> Self {
        let mut object = Object::new();
        for (key, value) in iter {
            object.insert(key, value);
        }
        object
    }
}

impl<V> Extend<(String, V)> for Object<V> {
    /// Inserts each member as [`Object::insert`] does: a key already present keeps its place
    /// and takes the new value (`Object.assign` semantics).
    fn extend<I: IntoIterator<Item = (String, V)>>(&mut self, iter: I) {
        for (key, value) in iter {
            self.insert(key, value);
        }
    }
}

impl<'a, V> IntoIterator for &'a Object<V> {
    type Item = (&'a String, &'a V);
    type IntoIter = indexmap::map::Iter<'a, String, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.iter()
    }
}

impl<V> IntoIterator for Object<V> {
    type Item = (String, V);
    type IntoIter = indexmap::map::IntoIter<String, V>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.into_iter()
    }
}

fn partition_point(len: usize, mut pred: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The numeric value of an ECMAScript array index key ("0" … "4294967294",
/// canonical decimal form), or `None` for any other key.
pub fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    u32::try_from(n).ok().filter(|&n| n != u32::MAX)
}

impl Value {
    /// The object inside, if this is an object.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The array inside, if this is an array.
    pub fn as_array(&self) -> Option<&Vec<Value>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number inside, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The boolean inside, if this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// ECMAScript `ToBoolean`: `false`, `0`, `NaN`, `""` and `null` are falsy.
    pub fn truthy(&self) -> bool {
        match self {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => *n != 0.0 && !n.is_nan(),
            Value::String(s) => !s.is_empty(),
            Value::Array(_) | Value::Object(_) => true,
        }
    }

    /// ECMAScript `ToString`, as `Array.prototype.sort` uses it to compare.
    pub fn to_js_string(&self) -> String {
        let mut out = String::new();
        self.write_js_string(&mut out);
        out
    }

    fn write_js_string(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => write_number(out, *n, "NaN"),
            Value::String(s) => out.push_str(s),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    // `null` elements join as the empty string.
                    if !item.is_null() {
                        item.write_js_string(out);
                    }
                }
            }
            Value::Object(_) => out.push_str("[object Object]"),
        }
    }

    /// `JSON.stringify(value)` cut to at most `max` bytes (on a character
    /// boundary) with `...` appended when cut: for error messages.
    pub fn preview(&self, max: usize) -> String {
        let text = self.to_json();
        if text.len() <= max {
            return text;
        }
        let cut = (0..=max)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}...", text.get(..cut).unwrap_or(""))
    }

    /// Exactly `JSON.stringify(value)`.
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        write_json(&mut out, self);
        out
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Number(n)
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Value::Object(o)
    }
}

impl From<Vec<Value>> for Value {
    fn from(a: Vec<Value>) -> Self {
        Value::Array(a)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// The `fast-deep-equal` package threw: an object has an own `valueOf` or
/// `toString` member that is not a function, and the package calls it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an object member named `{0}` is not a function, so it cannot be compared")]
pub struct DeepEqualError(pub &'static str);

/// Exactly the `fast-deep-equal` package (v3) over parsed JSON, quirks
/// included, since the TypeScript host decides "did anything change" with it:
///
/// * objects compare their `constructor` by identity first, so an object with
///   an own `constructor` member holding an object or array (say, a server
///   named `constructor`) never equals a separate copy of itself;
/// * an own `valueOf` / `toString` member is called, which throws;
/// * members and elements are visited last to first, which decides whether
///   a difference or a throw is met first.
///
/// # Errors
/// [`DeepEqualError`] where the package throws.
pub fn fast_deep_equal(a: &Value, b: &Value) -> Result<bool, DeepEqualError> {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (p, q) in x.iter().zip(y).rev() {
                if !fast_deep_equal(p, q)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        (Value::Object(x), Value::Object(y)) => {
            fast_deep_equal_objects(x, y, fast_deep_equal, |q| Some(q))
        }
        (Value::Array(_), Value::Object(_)) | (Value::Object(_), Value::Array(_)) => Ok(false),
        _ => Ok(strict_equal(a, b)),
    }
}

/// The object case of [`fast_deep_equal`], for an `y` whose members are any
/// JSON-like type: `member` compares a member of `x` with one of `y`, and
/// `primitive` is the member of `y` as a primitive value (`None` for an object
/// or array). Lets a typed map (name → server config) be compared with a
/// parsed one without first copying it into a [`Value`].
///
/// # Errors
/// [`DeepEqualError`] where the package throws.
pub fn fast_deep_equal_objects<V>(
    x: &Object,
    y: &Object<V>,
    member: impl Fn(&Value, &V) -> Result<bool, DeepEqualError>,
    primitive: impl Fn(&V) -> Option<&Value>,
) -> Result<bool, DeepEqualError> {
    // `a.constructor !== b.constructor`: an own member shadows Object.
    match (x.get("constructor"), y.get("constructor").map(&primitive)) {
        (None, None) => {}
        (Some(p), Some(Some(q))) if is_primitive(p) && is_primitive(q) => {
            if !strict_equal(p, q) {
                return Ok(false);
            }
        }
        _ => return Ok(false),
    }
    for name in ["valueOf", "toString"] {
        if x.contains_key(name) {
            return Err(DeepEqualError(if name == "valueOf" {
                "valueOf"
            } else {
                "toString"
            }));
        }
    }
    if x.len() != y.len() || x.keys().rev().any(|k| !y.contains_key(k)) {
        return Ok(false);
    }
    for (key, p) in x.iter().rev() {
        match y.get(key) {
            Some(q) => {
                if !member(p, q)? {
                    return Ok(false);
                }
            }
            // Unreachable after the key check; `undefined` would not equal a member.
            None => return Ok(false),
        }
    }
    Ok(true)
}

fn is_primitive(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

/// `===` on primitives (`-0 === 0`); distinct objects are never identical.
fn strict_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y,
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => false,
        _ => a == b,
    }
}

/// ECMAScript `String.prototype.trim`: its whitespace set differs from
/// Rust's (`U+FEFF` is whitespace, `U+0085` is not).
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// Compares two strings by UTF-16 code units (ECMAScript `<` on strings).
pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    // UTF-8 byte order equals code point order, which differs from UTF-16
    // order only when a supplementary character meets one in U+E000..=U+FFFF.
    if a.is_ascii() && b.is_ascii() {
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Sorts like `Array.prototype.sort()` with no comparator: by `ToString`
/// of each element, compared by UTF-16 code units; stable.
pub fn js_sort(items: &mut [Value]) {
    if items.iter().all(|v| matches!(v, Value::String(_))) {
        items.sort_by(|a, b| cmp_utf16(a.as_str().unwrap_or(""), b.as_str().unwrap_or("")));
        return;
    }
    let mut keyed: Vec<(String, Value)> = items
        .iter_mut()
        .map(|v| (v.to_js_string(), std::mem::take(v)))
        .collect();
    keyed.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
    for (slot, (_, v)) in items.iter_mut().zip(keyed) {
        *slot = v;
    }
}

/// Sorts strings by UTF-16 code units.
pub fn sort_strings(items: &mut [String]) {
    items.sort_by(|a, b| cmp_utf16(a, b));
}

fn write_number(out: &mut String, n: f64, non_finite: &str) {
    if n.is_finite() {
        // ryu-js prints ECMAScript Number::toString, including "0" for -0.
        out.push_str(ryu_js::Buffer::new().format_finite(n));
    } else if non_finite == "NaN" {
        out.push_str(if n.is_nan() {
            "NaN"
        } else if n > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
    } else {
        out.push_str(non_finite);
    }
}

/// Appends `JSON.stringify(value)` to `out`.
pub fn write_json(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, *n, "null"),
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(object) => {
            out.push('{');
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                write_json(out, item);
            }
            out.push('}');
        }
    }
}

/// Appends a string literal the way `JSON.stringify` quotes it.
pub fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// `JSON.parse(text)`: strict JSON, numbers as doubles, object members in
/// ECMAScript order with duplicate keys keeping their first position.
///
/// # Errors
/// [`ParseError::Syntax`] when the text is not one JSON value.
pub fn parse(text: &str) -> Result<Value, ParseError> {
    // serde_json stops at 128 levels of nesting, which bounds the recursion of
    // every walk over a parsed value as well.
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Value::deserialize(&mut de).map_err(syntax)?;
    de.end().map_err(syntax)?;
    Ok(value)
}

fn syntax(e: serde_json::Error) -> ParseError {
    ParseError::Syntax {
        message: e.to_string(),
    }
}

/// `JSON.parse(stripJsonComments(text))` after removing a leading UTF-8 BOM:
/// the syntax of settings files and `.mcp.json`.
///
/// # Errors
/// [`ParseError::Syntax`] for empty text or anything but one JSON value.
pub fn parse_jsonc(text: &str) -> Result<Value, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    parse(&strip_comments(text))
}

/// Replaces `//` and `/* */` comments outside strings with spaces (keeping
/// newlines), as the `strip-json-comments` package does by default.
pub fn strip_comments(text: &str) -> String {
    #[derive(PartialEq)]
    enum State {
        Code,
        Str,
        Line,
        Block,
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut state = State::Code;
    let mut copied = 0; // bytes[..copied] are in `out` already
    let mut i = 0;
    // strip-json-comments replaces every non-whitespace character of a
    // comment with a space and keeps JS whitespace (`\s`) as it is — which
    // JSON.parse then rejects unless it is a space, tab, CR or LF.
    let blank = |out: &mut String, from: usize, to: usize| {
        for c in text[from..to].chars() {
            out.push(if is_js_whitespace(c) { c } else { ' ' });
        }
    };
    while i < bytes.len() {
        let b = bytes[i];
        match state {
            State::Code => {
                if b == b'"' {
                    state = State::Str;
                } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
                    out.push_str(&text[copied..i]);
                    copied = i;
                    state = State::Line;
                    i += 2;
                    continue;
                } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
                    out.push_str(&text[copied..i]);
                    copied = i;
                    state = State::Block;
                    i += 2;
                    continue;
                }
            }
            State::Str => {
                if b == b'\\' {
                    i += 2;
                    continue;
                }
                if b == b'"' {
                    state = State::Code;
                }
            }
            State::Line => {
                if b == b'\n' || (b == b'\r' && bytes.get(i + 1) == Some(&b'\n')) {
                    blank(&mut out, copied, i);
                    copied = i;
                    state = State::Code;
                    continue;
                }
            }
            State::Block => {
                if b == b'*' && bytes.get(i + 1) == Some(&b'/') {
                    blank(&mut out, copied, i + 2);
                    i += 2;
                    copied = i;
                    state = State::Code;
                    continue;
                }
            }
        }
        i += 1;
    }
    let end = bytes.len();
    match state {
        State::Code | State::Str => out.push_str(&text[copied.min(end)..]),
        State::Line | State::Block => blank(&mut out, copied, end),
    }
    out
}

/// ECMAScript `\s`: WhiteSpace and LineTerminator code points.
fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        // u64 -> f64 rounds to nearest, ties to even: the same double that
        // parsing the decimal text gives.
        Ok(Value::Number(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Number(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Object::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => {
                if !n.is_finite() {
                    s.serialize_unit()
                } else if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
                    // Integral doubles go out as integers so hosts that read
                    // them as JS numbers see `1`, not `1.0`.
                    s.serialize_i64(*n as i64)
                } else {
                    s.serialize_f64(*n)
                }
            }
            Value::String(v) => s.serialize_str(v),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Object(object) => {
                let mut map = s.serialize_map(Some(object.len()))?;
                for (k, v) in object {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// A JSON number that is a whole number in `0..=max` (and below 2^64, so the
/// conversion is exact); `-0` counts as 0.
pub fn whole_number(value: &Value, max: u64) -> Option<u64> {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    let n = value.as_f64()?;
    if !((0.0..TWO_POW_64).contains(&n) && n.fract() == 0.0) {
        return None;
    }
    let n = n as u64;
    (n <= max).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(text: &str) -> String {
        parse(text).expect("valid JSON").to_json()
    }

    #[test]
    fn numbers_print_as_ecmascript_does() {
        assert_eq!(roundtrip("1.0"), "1");
        assert_eq!(roundtrip("-0"), "0");
        assert_eq!(roundtrip("1e21"), "1e+21");
        assert_eq!(roundtrip("1e-7"), "1e-7");
        assert_eq!(
            roundtrip("123456789012345678901234"),
            "1.2345678901234569e+23"
        );
        assert_eq!(roundtrip("9007199254740993"), "9007199254740992");
        assert_eq!(roundtrip("0.1"), "0.1");
        assert_eq!(roundtrip("100"), "100");
        assert_eq!(roundtrip("18446744073709551616"), "18446744073709552000");
    }

    #[test]
    fn integer_like_keys_come_first_in_numeric_order() {
        assert_eq!(
            roundtrip(r#"{"b":1,"10":2,"a":3,"2":4,"01":5,"-1":6,"4294967295":7,"4294967294":8}"#),
            r#"{"2":4,"10":2,"4294967294":8,"b":1,"a":3,"01":5,"-1":6,"4294967295":7}"#
        );
    }

    #[test]
    fn duplicate_key_keeps_first_position_and_last_value() {
        assert_eq!(roundtrip(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn strings_escape_as_json_stringify() {
        assert_eq!(
            roundtrip(r#""a\"\\\/\b\f\n\r\t\u0001\u001f\u007f\u2028é😀""#),
            "\"a\\\"\\\\/\\b\\f\\n\\r\\t\\u0001\\u001f\u{7f}\u{2028}é😀\""
        );
    }

    #[test]
    fn utf16_order_differs_from_utf8_order() {
        // U+FF61 (one unit 0xFF61) sorts after U+1F600 (lead unit 0xD83D) in UTF-16.
        assert_eq!(cmp_utf16("\u{1F600}", "\u{FF61}"), Ordering::Less);
        assert_eq!("\u{1F600}".cmp("\u{FF61}"), Ordering::Greater);
    }

    #[test]
    fn js_sort_compares_to_string_forms() {
        let mut v = parse(r#"[10, 9, 1, "b", null, true, [2, null, 3], {}]"#)
            .expect("valid")
            .as_array()
            .cloned()
            .expect("array");
        js_sort(&mut v);
        assert_eq!(
            Value::Array(v).to_json(),
            r#"[1,10,[2,null,3],9,{},"b",null,true]"#
        );
    }

    #[test]
    fn comments_are_stripped_outside_strings_only() {
        let text = "// c\n{\"a\": \"//x\" /* y */, \"b\": \"/*z*/\\\"//\"} // end";
        assert_eq!(
            roundtrip(&strip_comments(text)),
            r#"{"a":"//x","b":"/*z*/\"//"}"#
        );
        assert!(parse_jsonc("\u{feff}{}").is_ok());
        assert!(parse_jsonc("").is_err());
        assert!(parse_jsonc("{\"a\":1,}").is_err());
        assert!(parse_jsonc("/* unterminated").is_err());
        assert!(parse_jsonc("{} /* unterminated").is_ok());
        // A non-breaking space inside a comment survives stripping and then
        // fails JSON.parse, as in the TypeScript host.
        assert!(parse_jsonc("// a\u{a0}b\n{}").is_err());
        assert!(parse_jsonc("/* a\tb\r\n */{}").is_ok());
    }

    #[test]
    fn depth_is_bounded_without_overflowing_the_stack() {
        let deep = "[".repeat(100_000);
        assert!(parse(&deep).is_err());
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn whole_numbers() {
        assert_eq!(whole_number(&Value::Number(-0.0), 5), Some(0));
        assert_eq!(whole_number(&Value::Number(5.0), 5), Some(5));
        assert_eq!(whole_number(&Value::Number(6.0), 5), None);
        assert_eq!(whole_number(&Value::Number(1.5), 5), None);
        assert_eq!(whole_number(&Value::Number(-1.0), 5), None);
        assert_eq!(whole_number(&Value::Number(1e300), u64::MAX), None);
        assert_eq!(whole_number(&Value::String("1".into()), 5), None);
    }
}
