//! Batching (docs/api.md, "Batching"): an HTTP endpoint with `batch` is sent
//! up to `max_events` of its deliveries in one signed request, a JSON array of
//! their envelopes, once it holds that many or `max_wait_ms` after the first.
//!
//! Each element is the envelope a single push would carry, with the event's
//! id (`id`) first and the endpoint's number (`seq`) before `data`: a batch's
//! members may differ between retries, so the request's id (`webhook-id`, new
//! for every request) is not what a receiver dedupes by — an element's `id` is.

use std::ops::RangeInclusive;
use std::time::Duration;

use crate::model;

/// How many deliveries one request may carry.
pub const MAX_EVENTS: RangeInclusive<u32> = 2..=100;
/// How long the first delivery of a batch may wait for company, in milliseconds.
pub const MAX_WAIT_MS: RangeInclusive<u32> = 0..=10_000;
/// The number of elements in a batch request.
pub const BATCH_SIZE_HEADER: &str = "hookline-batch-size";

/// An endpoint's batching: up to `max_events` deliveries in one request, sent
/// at most `max_wait_ms` after the first of them was ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Batching {
    #[cfg_attr(feature = "openapi", schema(minimum = 2, maximum = 100))]
    pub max_events: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 10_000))]
    pub max_wait_ms: u32,
}

impl Batching {
    /// Why these settings cannot be saved, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !MAX_EVENTS.contains(&self.max_events) {
            return Err(format!(
                "batch.max_events must be between {} and {}",
                MAX_EVENTS.start(),
                MAX_EVENTS.end()
            ));
        }
        if !MAX_WAIT_MS.contains(&self.max_wait_ms) {
            return Err(format!(
                "batch.max_wait_ms must be between {} and {}",
                MAX_WAIT_MS.start(),
                MAX_WAIT_MS.end()
            ));
        }
        Ok(())
    }

    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(u64::from(self.max_wait_ms))
    }

    /// As stored (the endpoint row's `batch` column).
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("batch settings serialize")
    }

    pub fn from_text(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("batch: {e}"))
    }
}

/// One element of a batch: `envelope` with `"id":"<event id>"` first and, when
/// the delivery is numbered, `seq` before `data` ([`model::numbered`]).
pub fn element(envelope: &[u8], event_id: &str, seq: Option<u64>) -> Vec<u8> {
    let numbered;
    let envelope = match seq {
        Some(seq) => {
            numbered = model::numbered(envelope, seq);
            &numbered[..]
        }
        None => envelope,
    };
    let id = serde_json::to_string(event_id).expect("a string serializes");
    let mut element = Vec::with_capacity(envelope.len() + id.len() + 6);
    match envelope.strip_prefix(b"{") {
        Some(rest) => {
            element.extend_from_slice(b"{\"id\":");
            element.extend_from_slice(id.as_bytes());
            if rest.first() != Some(&b'}') {
                element.push(b',');
            }
            element.extend_from_slice(rest);
        }
        // Not an object (never an envelope): sent as it is.
        None => element.extend_from_slice(envelope),
    }
    element
}

/// A batch request's body: its elements as one JSON array, in order.
pub fn body<'a>(elements: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = vec![b'['];
    for (i, element) in elements.into_iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(element);
    }
    body.push(b']');
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    #[test]
    fn an_element_is_the_numbered_envelope_with_its_event_id_first() {
        let envelope = model::envelope(
            "order.paid",
            Timestamp::from_millis(0),
            &serde_json::json!({"order": 42}),
        );
        let element = element(&envelope, "msg_1", Some(7));
        let value: serde_json::Value = serde_json::from_slice(&element).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"id": "msg_1", "type": "order.paid",
                "timestamp": Timestamp::from_millis(0).to_rfc3339(), "seq": 7,
                "data": {"order": 42}})
        );
        assert!(element.starts_with(b"{\"id\":\"msg_1\",\"type\""));
        let plain: serde_json::Value =
            serde_json::from_slice(&super::element(&envelope, "msg_2", None)).unwrap();
        assert_eq!(plain["id"], "msg_2");
        assert!(plain.get("seq").is_none());
        let array: serde_json::Value =
            serde_json::from_slice(&body([&element[..], &element[..]])).unwrap();
        assert_eq!(array.as_array().unwrap().len(), 2);
        assert_eq!(body([]), b"[]");
    }

    #[test]
    fn settings_outside_the_bounds_are_refused_by_name() {
        let ok = Batching {
            max_events: 10,
            max_wait_ms: 500,
        };
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(Batching::from_text(&ok.to_text()), Ok(ok));
        let one = Batching {
            max_events: 1,
            ..ok
        };
        assert!(one.check().unwrap_err().contains("max_events"));
        let slow = Batching {
            max_wait_ms: 10_001,
            ..ok
        };
        assert!(slow.check().unwrap_err().contains("max_wait_ms"));
    }
}
