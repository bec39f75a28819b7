//! Payload filters: which events an endpoint receives, by what their payload says.
//!
//! Besides its event types, an endpoint may carry a filter, a small expression
//! over the event's payload (the `data` of the envelope, the JSON the producer
//! published):
//!
//! ```text
//! /amount >= 100 and /currency in ["EUR", "USD"]
//! not /customer/test exists or /customer/tier = "gold"
//! ```
//!
//! A **test** names a value by its JSON Pointer (RFC 6901) — `/customer/tier`,
//! `/items/0/sku`, or a quoted pointer such as `"/line items/0"` when a key holds
//! a space or one of `()[],=!<>"` — and compares it:
//!
//! - `= v`, `!= v`: equal or not to the JSON value `v` (`1` equals `1.0`);
//! - `< v`, `<= v`, `> v`, `>= v`: both numbers, or both strings (in byte order,
//!   which orders RFC 3339 timestamps of one offset); otherwise false;
//! - `in [v, …]`: equal to one of the values;
//! - `exists`: the pointer names a value (`null` counts).
//!
//! A test of a pointer that names nothing is false, whatever its operator; ask
//! `not /x exists` for absence. Tests combine with `and`, `or` and `not`
//! (`not` binds tightest, then `and`, then `or`) and parentheses.
//!
//! The language has no loops and no functions: evaluation visits each test at
//! most once, and a filter is bounded in size ([`MAX_LEN`]), tests
//! ([`MAX_TESTS`]), nesting ([`MAX_DEPTH`]) and list length ([`MAX_LIST`]), so
//! its cost per event is bounded too. A filter is parsed and checked when an
//! endpoint is created or changed; an error names the character position.

use std::fmt;

use serde_json::Value;

/// The longest filter, in bytes.
pub const MAX_LEN: usize = 2048;
/// The most tests in one filter.
pub const MAX_TESTS: usize = 64;
/// The deepest nesting of parentheses and `not`.
pub const MAX_DEPTH: usize = 16;
/// The most values in one `in` list.
pub const MAX_LIST: usize = 100;

/// A parsed, checked filter.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    root: Node,
}

/// Why a filter was refused: what, and at which character (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    pub position: usize,
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at position {}: {}", self.position, self.message)
    }
}

impl std::error::Error for FilterError {}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Test { path: Vec<String>, test: Test },
}

#[derive(Debug, Clone, PartialEq)]
enum Test {
    Exists,
    Compare(Op, Value),
    In(Vec<Value>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Filter {
    /// Parses and checks a filter.
    pub fn parse(source: &str) -> Result<Filter, FilterError> {
        if source.len() > MAX_LEN {
            return Err(FilterError {
                position: 1,
                message: format!("a filter is at most {MAX_LEN} bytes"),
            });
        }
        let mut parser = Parser {
            source,
            at: 0,
            depth: 0,
            tests: 0,
        };
        parser.skip_space();
        if parser.at == source.len() {
            return Err(parser.error("a filter needs at least one test, such as `/type exists`"));
        }
        let root = parser.or()?;
        parser.skip_space();
        if parser.at < source.len() {
            return Err(parser.error("expected `and`, `or` or the end of the filter"));
        }
        Ok(Filter { root })
    }

    /// Whether an event with this payload passes.
    pub fn matches(&self, payload: &Value) -> bool {
        self.root.matches(payload)
    }
}

impl Node {
    fn matches(&self, payload: &Value) -> bool {
        match self {
            Node::And(all) => all.iter().all(|n| n.matches(payload)),
            Node::Or(any) => any.iter().any(|n| n.matches(payload)),
            Node::Not(node) => !node.matches(payload),
            Node::Test { path, test } => {
                let Some(found) = resolve(payload, path) else {
                    return false;
                };
                match test {
                    Test::Exists => true,
                    Test::Compare(op, value) => compare(*op, found, value),
                    Test::In(values) => values.iter().any(|v| equal(found, v)),
                }
            }
        }
    }
}

/// The value a pointer's segments name, if any.
fn resolve<'v>(mut value: &'v Value, path: &[String]) -> Option<&'v Value> {
    for segment in path {
        value = match value {
            Value::Object(map) => map.get(segment)?,
            Value::Array(items) => {
                // RFC 6901: decimal digits, no leading zero.
                if segment.is_empty()
                    || (segment.len() > 1 && segment.starts_with('0'))
                    || !segment.bytes().all(|b| b.is_ascii_digit())
                {
                    return None;
                }
                items.get(segment.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(value)
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn compare(op: Op, found: &Value, value: &Value) -> bool {
    use std::cmp::Ordering;
    let order = match (found, value) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().partial_cmp(&y.as_f64()),
        (Value::String(x), Value::String(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    };
    match op {
        Op::Eq => equal(found, value),
        Op::Ne => !equal(found, value),
        Op::Lt => order == Some(Ordering::Less),
        Op::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
        Op::Gt => order == Some(Ordering::Greater),
        Op::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
    }
}

/// Characters that end a bare pointer (besides white space).
const DELIMITERS: &[char] = &['(', ')', '[', ']', ',', '=', '!', '<', '>', '"'];

struct Parser<'s> {
    source: &'s str,
    /// Byte offset of the next character.
    at: usize,
    depth: usize,
    tests: usize,
}

impl<'s> Parser<'s> {
    fn rest(&self) -> &'s str {
        &self.source[self.at..]
    }

    fn error(&self, message: impl Into<String>) -> FilterError {
        self.error_at(self.at, message)
    }

    fn error_at(&self, at: usize, message: impl Into<String>) -> FilterError {
        FilterError {
            position: self.source[..at].chars().count() + 1,
            message: message.into(),
        }
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    /// Consumes `word` if it comes next as a whole word.
    fn keyword(&mut self, word: &str) -> bool {
        self.skip_space();
        let rest = self.rest();
        let whole = rest.starts_with(word)
            && !rest[word.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if whole {
            self.at += word.len();
        }
        whole
    }

    fn symbol(&mut self, symbol: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(symbol) {
            self.at += symbol.len();
            true
        } else {
            false
        }
    }

    fn nested(&mut self) -> Result<(), FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!(
                "nested deeper than {MAX_DEPTH} parentheses and `not`s"
            )));
        }
        Ok(())
    }

    fn or(&mut self) -> Result<Node, FilterError> {
        let mut any = vec![self.and()?];
        while self.keyword("or") {
            any.push(self.and()?);
        }
        Ok(if any.len() == 1 {
            any.remove(0)
        } else {
            Node::Or(any)
        })
    }

    fn and(&mut self) -> Result<Node, FilterError> {
        let mut all = vec![self.not()?];
        while self.keyword("and") {
            all.push(self.not()?);
        }
        Ok(if all.len() == 1 {
            all.remove(0)
        } else {
            Node::And(all)
        })
    }

    fn not(&mut self) -> Result<Node, FilterError> {
        if self.keyword("not") {
            self.nested()?;
            let node = self.not()?;
            self.depth -= 1;
            return Ok(Node::Not(Box::new(node)));
        }
        if self.symbol("(") {
            self.nested()?;
            let node = self.or()?;
            if !self.symbol(")") {
                return Err(self.error("expected `)`"));
            }
            self.depth -= 1;
            return Ok(node);
        }
        self.test()
    }

    fn test(&mut self) -> Result<Node, FilterError> {
        self.skip_space();
        let start = self.at;
        let path = self.path()?;
        self.tests += 1;
        if self.tests > MAX_TESTS {
            return Err(self.error_at(start, format!("a filter has at most {MAX_TESTS} tests")));
        }
        let test = if self.keyword("exists") {
            Test::Exists
        } else if self.keyword("in") {
            Test::In(self.list()?)
        } else {
            let op = self.op()?;
            Test::Compare(op, self.value()?)
        };
        Ok(Node::Test { path, test })
    }

    /// A JSON Pointer, bare (`/a/b`) or quoted (`"/a b"`), as its unescaped segments.
    fn path(&mut self) -> Result<Vec<String>, FilterError> {
        let start = self.at;
        let pointer = if self.rest().starts_with('"') {
            self.string()?
        } else if self.rest().starts_with('/') {
            let rest = self.rest();
            let len = rest
                .find(|c: char| c.is_whitespace() || DELIMITERS.contains(&c))
                .unwrap_or(rest.len());
            self.at += len;
            rest[..len].to_owned()
        } else {
            return Err(self.error(
                "expected a JSON Pointer into the payload (such as `/customer/id`), `not` or `(`",
            ));
        };
        let Some(pointer) = pointer.strip_prefix('/') else {
            return Err(self.error_at(start, "a JSON Pointer starts with `/`"));
        };
        pointer
            .split('/')
            .map(|segment| {
                unescape(segment).ok_or_else(|| {
                    self.error_at(
                        start,
                        "in a JSON Pointer `~` is followed by 0 (for ~) or 1 (for /)",
                    )
                })
            })
            .collect()
    }

    fn op(&mut self) -> Result<Op, FilterError> {
        for (symbol, op) in [
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("=", Op::Eq),
            ("<", Op::Lt),
            (">", Op::Gt),
        ] {
            if self.symbol(symbol) {
                return Ok(op);
            }
        }
        Err(self.error("expected `=`, `!=`, `<`, `<=`, `>`, `>=`, `in` or `exists`"))
    }

    fn list(&mut self) -> Result<Vec<Value>, FilterError> {
        if !self.symbol("[") {
            return Err(self.error("expected `[` to open the list after `in`"));
        }
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            if values.len() > MAX_LIST {
                return Err(self.error(format!("a list holds at most {MAX_LIST} values")));
            }
            if self.symbol("]") {
                return Ok(values);
            }
            if !self.symbol(",") {
                return Err(self.error("expected `,` or `]`"));
            }
        }
    }

    /// A JSON scalar: a string, a number, `true`, `false` or `null`.
    fn value(&mut self) -> Result<Value, FilterError> {
        self.skip_space();
        let rest = self.rest();
        if rest.starts_with('"') {
            return self.string().map(Value::String);
        }
        for (word, value) in [
            ("true", Value::Bool(true)),
            ("false", Value::Bool(false)),
            ("null", Value::Null),
        ] {
            if self.keyword(word) {
                return Ok(value);
            }
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
            .unwrap_or(rest.len());
        match serde_json::from_str::<serde_json::Number>(&rest[..len]) {
            Ok(number) if len > 0 => {
                self.at += len;
                Ok(Value::Number(number))
            }
            _ => Err(self.error("expected a JSON value: a string, a number, true, false or null")),
        }
    }

    /// A JSON string literal, with its escapes.
    fn string(&mut self) -> Result<String, FilterError> {
        let rest = self.rest();
        let mut escaped = false;
        let end = rest
            .char_indices()
            .skip(1)
            .find(|&(_, c)| {
                let closes = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            })
            .map(|(i, _)| i + 1);
        let Some(end) = end else {
            return Err(self.error("this string has no closing `\"`"));
        };
        match serde_json::from_str::<String>(&rest[..end]) {
            Ok(text) => {
                self.at += end;
                Ok(text)
            }
            Err(error) => Err(self.error(format!("not a JSON string: {error}"))),
        }
    }
}

/// A pointer segment with `~1` and `~0` replaced (`None` for any other `~`).
fn unescape(segment: &str) -> Option<String> {
    if !segment.contains('~') {
        return Some(segment.to_owned());
    }
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload() -> Value {
        json!({
            "amount": 250,
            "currency": "EUR",
            "customer": {"id": "cus_1", "tier": "gold", "test": false, "note": null},
            "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
            "paid_at": "2026-12-03T10:00:00Z",
            "a/b": 1,
            "m~n": 2,
            "line items": ["x"]
        })
    }

    #[test]
    fn tests_compare_what_the_pointer_names() {
        let p = payload();
        for (filter, expected) in [
            ("/amount = 250", true),
            ("/amount = 250.0", true),
            ("/amount != 250", false),
            ("/amount > 100", true),
            ("/amount >= 250", true),
            ("/amount < 250", false),
            ("/amount <= 250", true),
            ("/amount > 1e3", false),
            ("/currency = \"EUR\"", true),
            ("/currency in [\"USD\", \"EUR\"]", true),
            ("/currency in [\"USD\"]", false),
            ("/amount in [1, 250]", true),
            ("/customer/tier = \"gold\"", true),
            ("/customer/test = false", true),
            ("/customer/note = null", true),
            ("/customer/note exists", true),
            ("/customer/missing exists", false),
            ("/items/1/sku = \"B-2\"", true),
            ("/items/01/sku exists", false),
            ("/items/2/sku exists", false),
            ("/items/x exists", false),
            ("/paid_at > \"2026-12-01T00:00:00Z\"", true),
            ("/a~1b = 1", true),
            ("/m~0n = 2", true),
            ("\"/line items/0\" = \"x\"", true),
            // Strings and numbers do not order against each other.
            ("/currency > 1", false),
            ("/amount < \"z\"", false),
            // An object or an array equals no scalar.
            ("/customer = 1", false),
            ("/items exists", true),
        ] {
            let parsed = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
            assert_eq!(parsed.matches(&p), expected, "{filter}");
        }
    }

    #[test]
    fn a_missing_value_fails_every_comparison() {
        let p = payload();
        for filter in [
            "/nope = 1",
            "/nope != 1",
            "/nope < 1",
            "/nope in [1]",
            "/amount/deeper = 1",
        ] {
            assert!(!Filter::parse(filter).unwrap().matches(&p), "{filter}");
        }
        assert!(Filter::parse("not /nope exists").unwrap().matches(&p));
    }

    #[test]
    fn not_binds_tightest_then_and_then_or() {
        let p = payload();
        for (filter, expected) in [
            ("/amount > 100 and /currency = \"EUR\"", true),
            ("/amount > 100 and /currency = \"USD\"", false),
            ("/amount > 1000 or /currency = \"EUR\"", true),
            // or(false, and(true, true))
            (
                "/amount > 1000 or /amount > 1 and /currency = \"EUR\"",
                true,
            ),
            // and(or(false, true), false)
            (
                "(/amount > 1000 or /amount > 1) and /currency = \"USD\"",
                false,
            ),
            ("not /amount > 1000 and /currency = \"EUR\"", true),
            ("not (/amount > 1 and /currency = \"EUR\")", false),
            ("not not /amount exists", true),
            ("(((/amount exists)))", true),
            // Space is needed only where a word would run into another.
            ("/amount>100and/currency=\"EUR\"", true),
            (
                "/amount>100 and(/currency=\"USD\"or/currency=\"EUR\")",
                true,
            ),
        ] {
            let parsed = Filter::parse(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
            assert_eq!(parsed.matches(&p), expected, "{filter}");
        }
    }

    #[test]
    fn refusals_name_the_position() {
        for (filter, position, says) in [
            ("", 1, "at least one test"),
            ("   ", 4, "at least one test"),
            ("amount = 1", 1, "JSON Pointer"),
            ("/amount", 8, "expected `=`"),
            ("/amount == 1", 10, "JSON value"),
            ("/amount = ", 11, "JSON value"),
            ("/amount = 1 and", 16, "JSON Pointer"),
            ("/amount = 1 /b = 2", 13, "`and`, `or`"),
            ("(/amount = 1", 13, "`)`"),
            ("/amount in 1", 12, "`[`"),
            ("/amount in [1 2]", 15, "`,` or `]`"),
            ("/a = \"open", 6, "closing"),
            ("/a = \"\\q\"", 6, "JSON string"),
            ("/a~2 exists", 1, "`~`"),
            ("/é = x", 6, "JSON value"),
            ("/a = 1 and not", 15, "JSON Pointer"),
        ] {
            let error = Filter::parse(filter).expect_err(filter);
            assert_eq!(error.position, position, "{filter}: {error}");
            assert!(error.message.contains(says), "{filter}: {error}");
        }
    }

    #[test]
    fn size_tests_nesting_and_lists_are_bounded() {
        let long = format!("/a = \"{}\"", "x".repeat(MAX_LEN));
        assert!(Filter::parse(&long).unwrap_err().message.contains("bytes"));

        let at_most = vec!["/a exists"; MAX_TESTS].join(" or ");
        assert!(Filter::parse(&at_most).is_ok());
        let too_many = vec!["/a exists"; MAX_TESTS + 1].join(" or ");
        assert!(Filter::parse(&too_many)
            .unwrap_err()
            .message
            .contains("tests"));

        let deep = |n: usize| format!("{}/a exists{}", "(".repeat(n), ")".repeat(n));
        assert!(Filter::parse(&deep(MAX_DEPTH)).is_ok());
        assert!(Filter::parse(&deep(MAX_DEPTH + 1))
            .unwrap_err()
            .message
            .contains("nested"));
        let nots = |n: usize| format!("{}/a exists", "not ".repeat(n));
        assert!(Filter::parse(&nots(MAX_DEPTH)).is_ok());
        assert!(Filter::parse(&nots(MAX_DEPTH + 1)).is_err());

        let list = |n: usize| {
            let values: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            format!("/a in [{}]", values.join(","))
        };
        assert!(Filter::parse(&list(MAX_LIST)).is_ok());
        assert!(Filter::parse(&list(MAX_LIST + 1))
            .unwrap_err()
            .message
            .contains("at most"));
    }

    #[test]
    fn a_payload_that_is_not_an_object_names_nothing() {
        let filter = Filter::parse("/a exists").unwrap();
        for payload in [json!(null), json!(1), json!("a"), json!([1])] {
            assert!(!filter.matches(&payload), "{payload}");
        }
        assert!(Filter::parse("/0 = 1").unwrap().matches(&json!([1])));
    }
}
