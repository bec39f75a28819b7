//! `Retry-After` as a receiver may send it: never a panic; delta-seconds are
//! read exactly; a date is never read as a wait longer than it is away.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookline_core::classify::parse_retry_after;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|value: &str| {
    let now = UNIX_EPOCH + Duration::from_secs(1_764_000_000);
    let parsed = parse_retry_after(value, now);
    if let Ok(seconds) = value.trim().parse::<u64>() {
        assert_eq!(parsed, Some(Duration::from_secs(seconds)));
    } else if let Some(wait) = parsed {
        // An HTTP-date: at most as far as the latest date it can name.
        let latest = SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799);
        assert!(now + wait <= latest, "{value:?} -> {wait:?}");
    }
});
