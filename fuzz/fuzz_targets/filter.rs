//! Payload filters (`hookline_core::filter`), which customers write: never a
//! panic; a refusal names a position inside the text (or just past its end);
//! an accepted filter evaluates the same way twice, `not (F)` is its negation,
//! and `(F) and (F)` and `(F) or (F)` are F, whatever the payload.
#![no_main]

use hookline_core::filter::Filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str)| {
    let (source, payload) = input;
    let filter = match Filter::parse(source) {
        Ok(filter) => filter,
        Err(error) => {
            let chars = source.chars().count();
            assert!(
                (1..=chars + 1).contains(&error.position),
                "{source:?}: position {} of {chars} characters",
                error.position
            );
            return;
        }
    };
    let payload: serde_json::Value = serde_json::from_str(payload)
        .unwrap_or_else(|_| serde_json::json!({"a": 1, "b": "x", "c": [true, null], "d": {"e": 2.5}}));
    let passes = filter.matches(&payload);
    assert_eq!(filter.matches(&payload), passes, "{source:?}: twice, two answers");
    if let Ok(negated) = Filter::parse(&format!("not ({source})")) {
        assert_eq!(negated.matches(&payload), !passes, "{source:?}: not");
    }
    for joined in [format!("({source}) and ({source})"), format!("({source}) or ({source})")] {
        if let Ok(twice) = Filter::parse(&joined) {
            assert_eq!(twice.matches(&payload), passes, "{joined:?}");
        }
    }
});
