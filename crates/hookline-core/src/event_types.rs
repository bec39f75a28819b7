//! Event type names and the patterns an endpoint subscribes with.
//!
//! A name is 1 to 256 characters with no control characters (NUL among them:
//! PostgreSQL's `text` cannot hold it, and no producer means one). A pattern is
//! a name, or a group wildcard: `invoice.*` matches every type that starts with
//! `invoice.` (`invoice.paid`, `invoice.line.added`), and nothing else. A `*`
//! anywhere else is refused, so a pattern never silently matches only itself.

use std::fmt;

/// The longest event type name (and pattern).
pub const MAX_NAME: usize = 256;

/// Why a name or pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    Length,
    ControlCharacter,
    Wildcard,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameError::Length => "must be 1 to 256 characters",
            NameError::ControlCharacter => "must not contain control characters",
            NameError::Wildcard => {
                "may use `*` only as a whole last segment (`group.*`); null subscribes to every type"
            }
        })
    }
}

/// Checks a free-text name (event type, ordering key, app name): 1 to
/// [`MAX_NAME`] characters, none of them a control character.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(NameError::Length);
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter);
    }
    Ok(())
}

/// Checks a subscription pattern: a name, or `group.*`.
pub fn check_pattern(pattern: &str) -> Result<(), NameError> {
    check_name(pattern)?;
    let exact = pattern.strip_suffix(".*").unwrap_or(pattern);
    if exact.is_empty() || exact.contains('*') {
        return Err(NameError::Wildcard);
    }
    Ok(())
}

/// Whether `event_type` matches a (checked) pattern.
pub fn matches(pattern: &str, event_type: &str) -> bool {
    match pattern.strip_suffix('*') {
        // "group." is a prefix of the type, and the type goes on after it.
        Some(group) => event_type.len() > group.len() && event_type.starts_with(group),
        None => pattern == event_type,
    }
}

/// Whether an endpoint subscribed with `patterns` (`None`: every type) gets `event_type`.
pub fn subscribed(patterns: Option<&[String]>, event_type: &str) -> bool {
    patterns.is_none_or(|patterns| patterns.iter().any(|p| matches(p, event_type)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_wildcard_matches_the_group_at_any_depth_and_nothing_else() {
        assert!(matches("invoice.*", "invoice.paid"));
        assert!(matches("invoice.*", "invoice.line.added"));
        assert!(!matches("invoice.*", "invoice."));
        assert!(!matches("invoice.*", "invoice"));
        assert!(!matches("invoice.*", "invoices.paid"));
        assert!(!matches("invoice.*", "order.paid"));
    }

    #[test]
    fn an_exact_name_matches_only_itself() {
        assert!(matches("order.paid", "order.paid"));
        assert!(!matches("order.paid", "order.paid.v2"));
        assert!(!matches("order.paid", "order"));
    }

    #[test]
    fn no_patterns_subscribe_to_everything() {
        assert!(subscribed(None, "anything"));
        let some = vec!["a.*".to_owned(), "b".to_owned()];
        assert!(subscribed(Some(&some), "a.x"));
        assert!(subscribed(Some(&some), "b"));
        assert!(!subscribed(Some(&some), "c"));
        assert!(!subscribed(Some(&[]), "b"));
    }

    #[test]
    fn a_star_anywhere_but_a_whole_last_segment_is_refused() {
        for good in ["invoice.*", "a.b.*", "order.paid", "x"] {
            assert_eq!(check_pattern(good), Ok(()), "{good}");
        }
        for bad in [
            "*",
            ".*",
            "inv*",
            "in*.paid",
            "invoice.*.paid",
            "a.**",
            "a.*x",
        ] {
            assert_eq!(check_pattern(bad), Err(NameError::Wildcard), "{bad}");
        }
    }

    #[test]
    fn names_refuse_control_characters_and_bad_lengths() {
        assert_eq!(check_name("order.paid"), Ok(()));
        assert_eq!(check_name("ünïcödé ok"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Length));
        assert_eq!(check_name(&"x".repeat(257)), Err(NameError::Length));
        assert_eq!(check_name(&"x".repeat(256)), Ok(()));
        for bad in ["a\0b", "line\nbreak", "tab\there", "\u{7f}"] {
            assert_eq!(check_name(bad), Err(NameError::ControlCharacter), "{bad:?}");
        }
        assert_eq!(check_pattern("a\0.*"), Err(NameError::ControlCharacter));
    }
}
