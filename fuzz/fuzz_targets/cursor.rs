//! Listing cursors and ids from a `before=` anyone can send: never a panic;
//! what parses is what the cursor of those values is.
#![no_main]

use hookline_core::cursor;
use hookline_core::ids::{DeliveryId, EventId};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Some((event, delivery)) = cursor::parse_delivery(text) {
        assert_eq!(cursor::delivery(&event, &delivery), text);
    }
    if let Some((at, delivery)) = cursor::parse_dlq(text) {
        assert!(at >= 0);
        assert_eq!(
            cursor::parse_dlq(&cursor::dlq(at, &delivery)),
            Some((at, delivery))
        );
    }
    if let Ok(id) = EventId::parse(text) {
        assert_eq!(id.as_str(), text);
    }
    if let Ok(id) = DeliveryId::parse(text) {
        assert_eq!(id.as_str(), text);
    }
});
