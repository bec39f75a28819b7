//! Operational webhooks: webhooks about webhooks.
//!
//! Hookline tells the SaaS operator when an endpoint starts failing, recovers,
//! is disabled or enabled, when deliveries die, when a bulk replay ends, and
//! every change to an endpoint — as events of its own **internal app**
//! ([`APP_ID`], uid `hookline`), published through the same pipeline as any
//! other event: durable, signed, retried, ordered per endpoint, dead-lettered.
//! The operator subscribes by giving that app endpoints (admin keys only).
//!
//! What happens is recorded as a [`Notice`] in the transaction that made it
//! happen; a loop publishes the notices. Deliveries of the internal app itself
//! never make notices, so an operational endpoint that is down cannot feed
//! itself. Dead deliveries are counted per endpoint per window
//! (`operational_dead_window_secs`, a minute by default) and announced once per
//! window with the count, so a dead endpoint does not make one operational
//! event per delivery.

use serde_json::{json, Value};

use crate::ids::{AppId, EndpointId};
use crate::model::DeadReason;
use crate::time::Timestamp;

/// The internal app's id: the all-zero ULID, which no clock generates.
pub const APP_ID: &str = "app_00000000000000000000000000";
/// The internal app's uid: `/v1/apps/hookline/endpoints` are the operational endpoints.
pub const APP_UID: &str = "hookline";
/// The event types of operational events start with this; no one else's may.
pub const TYPE_PREFIX: &str = "hookline.";

/// The internal app's id.
pub fn app_id() -> AppId {
    AppId::parse(APP_ID).expect("the internal app's id is an app id")
}

/// Whether `app` is the internal app (whose deliveries make no notices).
pub fn is_internal(app: &AppId) -> bool {
    app.as_str() == APP_ID
}

/// What an operational event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    EndpointFailing,
    EndpointRecovered,
    EndpointDisabled,
    EndpointEnabled,
    DeliveryDead,
    ReplayFinished,
    EndpointCreated,
    EndpointUpdated,
    EndpointDeleted,
    EndpointSecretRotated,
}

impl Kind {
    pub const ALL: [Kind; 10] = [
        Kind::EndpointFailing,
        Kind::EndpointRecovered,
        Kind::EndpointDisabled,
        Kind::EndpointEnabled,
        Kind::DeliveryDead,
        Kind::ReplayFinished,
        Kind::EndpointCreated,
        Kind::EndpointUpdated,
        Kind::EndpointDeleted,
        Kind::EndpointSecretRotated,
    ];

    /// The event type it is published as.
    pub fn event_type(self) -> &'static str {
        match self {
            Kind::EndpointFailing => "hookline.endpoint.failing",
            Kind::EndpointRecovered => "hookline.endpoint.recovered",
            Kind::EndpointDisabled => "hookline.endpoint.disabled",
            Kind::EndpointEnabled => "hookline.endpoint.enabled",
            Kind::DeliveryDead => "hookline.delivery.dead",
            Kind::ReplayFinished => "hookline.replay.finished",
            Kind::EndpointCreated => "hookline.endpoint.created",
            Kind::EndpointUpdated => "hookline.endpoint.updated",
            Kind::EndpointDeleted => "hookline.endpoint.deleted",
            Kind::EndpointSecretRotated => "hookline.endpoint.secret_rotated",
        }
    }

    pub fn parse(event_type: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.event_type() == event_type)
    }

    pub fn description(self) -> &'static str {
        match self {
            Kind::EndpointFailing => "An endpoint failed `operational_failing_after` attempts in a row (default 20).",
            Kind::EndpointRecovered => "An endpoint that was failing answered an attempt successfully again.",
            Kind::EndpointDisabled => "An endpoint was disabled: it answered 410 Gone, failed for `endpoint_disable_after_secs`, or by hand.",
            Kind::EndpointEnabled => "A disabled endpoint was enabled again.",
            Kind::DeliveryDead => "Deliveries to an endpoint went to the dead-letter queue: one event per endpoint per window, with the count.",
            Kind::ReplayFinished => "A bulk replay ended: completed or cancelled, with its counts.",
            Kind::EndpointCreated => "An endpoint was created.",
            Kind::EndpointUpdated => "An endpoint was changed.",
            Kind::EndpointDeleted => "An endpoint was deleted.",
            Kind::EndpointSecretRotated => "An endpoint's signing secret was rotated.",
        }
    }

    /// The JSON Schema of its payload (in the event type catalog).
    pub fn schema(self) -> Value {
        let id = json!({"type": "string"});
        let mut properties = json!({"app_id": id, "endpoint_id": id});
        let mut required = vec!["app_id", "endpoint_id"];
        let mut add = |name: &'static str, schema: Value, needed: bool| {
            properties[name] = schema;
            if needed {
                required.push(name);
            }
        };
        let count = json!({"type": "integer", "minimum": 1});
        let time = json!({"type": "string", "format": "date-time"});
        match self {
            Kind::EndpointFailing => {
                add("consecutive_failures", count.clone(), true);
                add("last_error", json!({"type": ["string", "null"]}), true);
            }
            Kind::EndpointRecovered => add("failures_before", count.clone(), true),
            Kind::EndpointDisabled => add(
                "reason",
                json!({"enum": ["gone", "failing", "manual"]}),
                true,
            ),
            Kind::DeliveryDead => {
                add("count", count.clone(), true);
                add(
                    "reasons",
                    json!({"type": "object", "additionalProperties": count}),
                    true,
                );
                add("last_reason", json!({"type": "string"}), true);
                add("last_status", json!({"type": ["integer", "null"]}), true);
                add("last_delivery_id", id.clone(), true);
                add("last_event_id", id.clone(), true);
                add("window_start", time.clone(), true);
            }
            Kind::ReplayFinished => {
                add("replay_id", id.clone(), true);
                add("state", json!({"enum": ["completed", "cancelled"]}), true);
                for name in ["total", "done", "replayed"] {
                    add(name, json!({"type": "integer", "minimum": 0}), true);
                }
                properties
                    .as_object_mut()
                    .expect("an object")
                    .remove("endpoint_id");
                required.retain(|r| *r != "endpoint_id");
            }
            Kind::EndpointEnabled
            | Kind::EndpointCreated
            | Kind::EndpointUpdated
            | Kind::EndpointDeleted
            | Kind::EndpointSecretRotated => {}
        }
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
        })
    }

    /// An example payload (valid against [`Kind::schema`]).
    pub fn example(self) -> Value {
        let (app, endpoint) = (
            "app_01J0000000000000000000000A",
            "ep_01J0000000000000000000000B",
        );
        match self {
            Kind::EndpointFailing => json!({"app_id": app, "endpoint_id": endpoint,
                "consecutive_failures": 20, "last_error": "503 Service Unavailable"}),
            Kind::EndpointRecovered => {
                json!({"app_id": app, "endpoint_id": endpoint, "failures_before": 37})
            }
            Kind::EndpointDisabled => {
                json!({"app_id": app, "endpoint_id": endpoint, "reason": "gone"})
            }
            Kind::DeliveryDead => json!({"app_id": app, "endpoint_id": endpoint, "count": 42,
                "reasons": {"retries_exhausted": 40, "client_error": 2},
                "last_reason": "client_error", "last_status": 400,
                "last_delivery_id": "dlv_01J0000000000000000000000C",
                "last_event_id": "msg_01J0000000000000000000000D",
                "window_start": "2026-12-03T10:00:00Z"}),
            Kind::ReplayFinished => {
                json!({"app_id": app, "replay_id": "rpl_01J0000000000000000000000E",
                "state": "completed", "total": 120, "done": 120, "replayed": 118})
            }
            _ => json!({"app_id": app, "endpoint_id": endpoint}),
        }
    }
}

/// Something to tell the operator, recorded where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: Kind,
    pub app: AppId,
    /// The payload (`app_id` and, for endpoint notices, `endpoint_id` included).
    pub data: Value,
}

impl Notice {
    fn about(kind: Kind, app: &AppId, endpoint: &EndpointId, extra: Value) -> Notice {
        let mut data = json!({"app_id": app.as_str(), "endpoint_id": endpoint.as_str()});
        if let (Value::Object(data), Value::Object(extra)) = (&mut data, extra) {
            data.extend(extra);
        }
        Notice {
            kind,
            app: app.clone(),
            data,
        }
    }

    pub fn endpoint(kind: Kind, app: &AppId, endpoint: &EndpointId) -> Notice {
        Notice::about(kind, app, endpoint, json!({}))
    }

    pub fn failing(
        app: &AppId,
        endpoint: &EndpointId,
        consecutive_failures: u32,
        last_error: Option<&str>,
    ) -> Notice {
        Notice::about(
            Kind::EndpointFailing,
            app,
            endpoint,
            json!({"consecutive_failures": consecutive_failures, "last_error": last_error}),
        )
    }

    pub fn recovered(app: &AppId, endpoint: &EndpointId, failures_before: u32) -> Notice {
        Notice::about(
            Kind::EndpointRecovered,
            app,
            endpoint,
            json!({"failures_before": failures_before}),
        )
    }

    /// `reason`: `gone`, `failing` or `manual`.
    pub fn disabled(app: &AppId, endpoint: &EndpointId, reason: &str) -> Notice {
        Notice::about(
            Kind::EndpointDisabled,
            app,
            endpoint,
            json!({"reason": reason}),
        )
    }

    /// A bulk replay ended (`state`: `completed` or `cancelled`).
    pub fn replay_finished(
        app: &AppId,
        replay: &str,
        state: &str,
        (total, done, replayed): (u64, u64, u64),
    ) -> Notice {
        Notice {
            kind: Kind::ReplayFinished,
            app: app.clone(),
            data: json!({"app_id": app.as_str(), "replay_id": replay, "state": state,
                "total": total, "done": done, "replayed": replayed}),
        }
    }
}

/// Deliveries of one endpoint that died for one reason in one window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadCount {
    pub reason: DeadReason,
    pub count: u64,
    /// The last one's: its attempt's status, its id and its event's, and when.
    pub last_status: Option<u16>,
    pub last_delivery: String,
    pub last_event: String,
    pub last_at: Timestamp,
}

/// The payload of a window's `delivery.dead`: the counts of every reason added
/// up, and the last death's details.
pub fn dead_payload(
    app: &AppId,
    endpoint: &EndpointId,
    counts: &[DeadCount],
    window_start: Timestamp,
) -> Value {
    let reasons: serde_json::Map<String, Value> = counts
        .iter()
        .map(|c| (c.reason.as_str().to_owned(), json!(c.count)))
        .collect();
    let last = counts.iter().max_by_key(|c| c.last_at);
    json!({
        "app_id": app.as_str(),
        "endpoint_id": endpoint.as_str(),
        "count": counts.iter().map(|c| c.count).sum::<u64>(),
        "reasons": reasons,
        "last_reason": last.map(|c| c.reason.as_str()),
        "last_status": last.and_then(|c| c.last_status),
        "last_delivery_id": last.map(|c| c.last_delivery.as_str()),
        "last_event_id": last.map(|c| c.last_event.as_str()),
        "window_start": window_start.to_rfc3339(),
    })
}

/// The window a death at `at` is counted in (windows of `window` ms from the epoch).
pub fn window_of(at: Timestamp, window_ms: i64) -> i64 {
    at.as_millis().div_euclid(window_ms.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_internal_app_is_a_valid_reserved_id() {
        assert_eq!(app_id().as_str(), APP_ID);
        assert!(is_internal(&app_id()));
        assert!(!is_internal(&AppId::generate()));
    }

    #[test]
    fn every_kind_has_a_prefixed_type_and_an_example_its_schema_describes() {
        for kind in Kind::ALL {
            let name = kind.event_type();
            assert!(name.starts_with(TYPE_PREFIX), "{name}");
            assert_eq!(Kind::parse(name), Some(kind));
            let schema = kind.schema();
            let example = kind.example();
            for required in schema["required"].as_array().unwrap() {
                let field = required.as_str().unwrap();
                assert!(
                    example.get(field).is_some(),
                    "{name}: example lacks {field}"
                );
            }
            for field in example.as_object().unwrap().keys() {
                assert!(
                    schema["properties"].get(field).is_some(),
                    "{name}: {field} is not in the schema"
                );
            }
        }
    }

    #[test]
    fn notices_carry_their_app_and_endpoint() {
        let (app, endpoint) = (AppId::generate(), EndpointId::generate());
        let failing = Notice::failing(&app, &endpoint, 20, Some("503"));
        assert_eq!(failing.kind, Kind::EndpointFailing);
        assert_eq!(failing.data["app_id"], app.as_str());
        assert_eq!(failing.data["endpoint_id"], endpoint.as_str());
        assert_eq!(failing.data["consecutive_failures"], 20);
        let disabled = Notice::disabled(&app, &endpoint, "gone");
        assert_eq!(disabled.data["reason"], "gone");
    }

    #[test]
    fn a_windows_dead_counts_add_up_and_the_last_one_is_named() {
        let (app, endpoint) = (AppId::generate(), EndpointId::generate());
        let count = |reason, n, at: i64, status| DeadCount {
            reason,
            count: n,
            last_status: status,
            last_delivery: format!("dlv_{at}"),
            last_event: format!("msg_{at}"),
            last_at: Timestamp::from_millis(at),
        };
        let payload = dead_payload(
            &app,
            &endpoint,
            &[
                count(DeadReason::RetriesExhausted, 40, 5, Some(503)),
                count(DeadReason::ClientError, 2, 9, Some(400)),
            ],
            Timestamp::from_millis(0),
        );
        assert_eq!(payload["count"], 42);
        assert_eq!(
            payload["reasons"],
            json!({"retries_exhausted": 40, "client_error": 2})
        );
        assert_eq!(payload["last_reason"], "client_error");
        assert_eq!(payload["last_status"], 400);
        assert_eq!(payload["last_event_id"], "msg_9");
        assert_eq!(payload["window_start"], "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn windows_split_time_evenly() {
        let at = |ms| Timestamp::from_millis(ms);
        assert_eq!(window_of(at(59_999), 60_000), 0);
        assert_eq!(window_of(at(60_000), 60_000), 1);
        assert_eq!(
            window_of(at(5), 0),
            5,
            "a zero window counts every millisecond"
        );
    }
}
