//! Event type names and subscription patterns: never a panic; an exact
//! pattern matches only itself; `group.*` matches only types inside the group.
#![no_main]

use hookline_core::event_types::{check_name, check_pattern, matches};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str)| {
    let (pattern, event_type) = input;
    let _ = check_name(event_type);
    if check_pattern(pattern).is_err() {
        return;
    }
    let matched = matches(pattern, event_type);
    match pattern.strip_suffix('*') {
        Some(group) => {
            assert!(group.ends_with('.'), "{pattern:?} passed the check");
            assert_eq!(
                matched,
                event_type.starts_with(group) && event_type.len() > group.len()
            );
        }
        None => assert_eq!(matched, pattern == event_type),
    }
});
