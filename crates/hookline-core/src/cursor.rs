//! The cursors of the listings that are not ordered by a single id: what a
//! page's `next_cursor` holds, and what `before` must be. (Every other listing's
//! cursor is the last row's id.)

use crate::ids::{DeliveryId, EventId};

/// A delivery listing (newest event first): `{event id}.{delivery id}`.
pub fn delivery(event: &EventId, delivery: &DeliveryId) -> String {
    format!("{event}.{delivery}")
}

/// The event and delivery of a [`delivery`] cursor.
pub fn parse_delivery(cursor: &str) -> Option<(EventId, DeliveryId)> {
    let (event, delivery) = cursor.split_once('.')?;
    Some((
        EventId::parse(event).ok()?,
        DeliveryId::parse(delivery).ok()?,
    ))
}

/// The DLQ (most recently dead first): `{dead_at in ms}_{delivery id}`.
pub fn dlq(dead_at_ms: i64, delivery: &DeliveryId) -> String {
    format!("{dead_at_ms}_{delivery}")
}

/// The time (1 to 15 digits of milliseconds) and delivery of a [`dlq`] cursor.
pub fn parse_dlq(cursor: &str) -> Option<(i64, DeliveryId)> {
    let (at, delivery) = cursor.split_once('_')?;
    if !(1..=15).contains(&at.len()) || !at.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((at.parse().ok()?, DeliveryId::parse(delivery).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_back_to_what_made_them() {
        let (event, id) = (EventId::generate(), DeliveryId::generate());
        assert_eq!(
            parse_delivery(&delivery(&event, &id)),
            Some((event, id.clone()))
        );
        assert_eq!(
            parse_dlq(&dlq(1_764_000_000_000, &id)),
            Some((1_764_000_000_000, id))
        );
    }

    #[test]
    fn anything_else_is_no_cursor() {
        let id = DeliveryId::generate();
        for bad in [
            String::new(),
            id.to_string(),
            format!("-1_{id}"),
            format!("+1_{id}"),
            format!("1234567890123456_{id}"),
            format!("1_{id}x"),
            format!("{id}.{id}"),
            "msg_x.dlv_y".into(),
        ] {
            assert_eq!(parse_dlq(&bad), None, "{bad}");
            assert_eq!(parse_delivery(&bad), None, "{bad}");
        }
    }
}
