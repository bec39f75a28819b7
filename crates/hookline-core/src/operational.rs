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
        let text = json!({"type": "string"});
        // Added when it is told, for people (`crate::notify`): a link into the
        // app's portal and, while the endpoint exists, its URL and description.
        add("portal_url", text.clone(), false);
        if self != Kind::ReplayFinished {
            add("endpoint_url", text.clone(), false);
            add("endpoint_description", text.clone(), false);
        }
        match self {
            Kind::EndpointFailing => {
                add("consecutive_failures", count.clone(), true);
                add("last_error", json!({"type": ["string", "null"]}), true);
                add("since", time.clone(), false);
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

/// The second a death is counted in: the store counts deaths by the second,
/// and the notices add seconds up into windows ([`dead_windows`]).
pub fn second_of(at: Timestamp) -> i64 {
    window_of(at, 1000)
}

/// The shortest window dead counts are told in.
pub const MIN_WINDOW_MS: i64 = 1000;

/// The first second of the window `now` is in: seconds before it belong to
/// windows that have closed.
pub fn open_window_first_second(now: Timestamp, window_ms: i64) -> i64 {
    let window_ms = window_ms.max(MIN_WINDOW_MS);
    window_of(now, window_ms) * window_ms / 1000
}

/// Adds `count` to its reason's in `counts` (the details are the latest death's).
pub fn merge_count(counts: &mut Vec<DeadCount>, count: DeadCount) {
    match counts.iter_mut().find(|c| c.reason == count.reason) {
        Some(same) => {
            let total = same.count + count.count;
            if count.last_at >= same.last_at {
                *same = count;
            }
            same.count = total;
        }
        None => counts.push(count),
    }
}

/// One endpoint's dead counts in one closed window, its reasons together: one
/// `delivery.dead` notice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadWindow {
    pub endpoint: EndpointId,
    pub app: AppId,
    /// Its index, in windows of `window_ms` from the epoch.
    pub index: i64,
    pub window_ms: i64,
    pub counts: Vec<DeadCount>,
}

impl DeadWindow {
    pub fn start(&self) -> Timestamp {
        Timestamp::from_millis(self.index * self.window_ms)
    }

    /// The notice's idempotency key: one notice per endpoint and window, however
    /// often it is read before it is told.
    pub fn key(&self) -> String {
        format!("dead:{}:{}", self.endpoint, self.start().as_millis())
    }

    /// The first and last second it counts.
    pub fn seconds(&self) -> (i64, i64) {
        (
            self.index * self.window_ms / 1000,
            (self.index + 1) * self.window_ms / 1000 - 1,
        )
    }

    /// When its last death was (its start if it has none).
    pub fn last_at(&self) -> Timestamp {
        self.counts
            .iter()
            .map(|c| c.last_at)
            .max()
            .unwrap_or_else(|| self.start())
    }
}

/// Adds counted seconds up into windows of `window_ms`, one per endpoint and
/// window, in the order of `seconds` (which come in second order, so one
/// endpoint's window may be interleaved with another's). `cut`: the read of
/// the seconds stopped at its limit, so the last window may have more reasons
/// than were read — it is left for next time, unless it is the only one.
pub fn dead_windows(
    seconds: impl IntoIterator<Item = (EndpointId, i64, AppId, DeadCount)>,
    window_ms: i64,
    cut: bool,
) -> Vec<DeadWindow> {
    let window_ms = window_ms.max(MIN_WINDOW_MS);
    let mut windows: Vec<DeadWindow> = Vec::new();
    for (endpoint, second, app, count) in seconds {
        let index = window_of(Timestamp::from_millis(second * 1000), window_ms);
        match windows
            .iter_mut()
            .find(|w| w.endpoint == endpoint && w.index == index)
        {
            Some(window) => merge_count(&mut window.counts, count),
            None => windows.push(DeadWindow {
                endpoint,
                app,
                index,
                window_ms,
                counts: vec![count],
            }),
        }
    }
    if cut && windows.len() > 1 {
        windows.pop();
    }
    windows
}

/// What of a window's `counts`, as they are when its notice is settled, the
/// notice did not tell: all of them if it was not told (`told`: the payload it
/// was told with), else what reached the window after it was read.
pub fn untold(counts: &[DeadCount], told: Option<&Value>) -> Vec<DeadCount> {
    let mut untold = Vec::new();
    for count in counts {
        merge_count(&mut untold, count.clone());
    }
    if let Some(payload) = told {
        for count in &mut untold {
            let said = payload["reasons"][count.reason.as_str()]
                .as_u64()
                .unwrap_or(0);
            count.count = count.count.saturating_sub(said);
        }
        untold.retain(|count| count.count > 0);
    }
    untold
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(reason: DeadReason, n: u64, at_ms: i64) -> DeadCount {
        DeadCount {
            reason,
            count: n,
            last_status: Some(400),
            last_delivery: format!("dlv_{at_ms}"),
            last_event: format!("msg_{at_ms}"),
            last_at: Timestamp::from_millis(at_ms),
        }
    }

    #[test]
    fn dead_seconds_add_up_into_one_window_per_endpoint_with_the_latest_details() {
        let app = AppId::generate();
        let (a, b) = (EndpointId::generate(), EndpointId::generate());
        let minute = 60_000;
        // Seconds in second order: a's and b's first window interleaved, then a's second.
        let seconds = vec![
            (
                a.clone(),
                1,
                app.clone(),
                count(DeadReason::ClientError, 2, 1_500),
            ),
            (
                b.clone(),
                2,
                app.clone(),
                count(DeadReason::RetriesExhausted, 1, 2_100),
            ),
            (
                a.clone(),
                30,
                app.clone(),
                count(DeadReason::ClientError, 3, 30_200),
            ),
            (
                a.clone(),
                31,
                app.clone(),
                count(DeadReason::RetriesExhausted, 1, 31_000),
            ),
            (
                a.clone(),
                61,
                app.clone(),
                count(DeadReason::ClientError, 1, 61_000),
            ),
        ];
        let windows = dead_windows(seconds.clone(), minute, false);
        assert_eq!(windows.len(), 3);
        let first = &windows[0];
        assert_eq!((first.endpoint.clone(), first.index), (a.clone(), 0));
        assert_eq!(
            first.counts,
            vec![
                DeadCount {
                    count: 5,
                    ..count(DeadReason::ClientError, 0, 30_200)
                },
                count(DeadReason::RetriesExhausted, 1, 31_000),
            ],
            "a reason's counts add up and keep the latest death's details"
        );
        assert_eq!(first.last_at(), Timestamp::from_millis(31_000));
        assert_eq!(first.seconds(), (0, 59));
        assert_eq!(first.key(), format!("dead:{a}:0"));
        assert_eq!((windows[1].endpoint.clone(), windows[1].index), (b, 0));
        assert_eq!((windows[2].endpoint.clone(), windows[2].index), (a, 1));
        assert_eq!(windows[2].seconds(), (60, 119));
        assert_eq!(windows[2].start(), Timestamp::from_millis(minute));

        // A read cut at its limit leaves its last window for next time ...
        assert_eq!(dead_windows(seconds.clone(), minute, true), windows[..2]);
        // ... unless it is the only one.
        assert_eq!(dead_windows(seconds[..1].to_vec(), minute, true).len(), 1);
        // Windows are never shorter than a second.
        let seconds = dead_windows(seconds, 10, false);
        assert_eq!(seconds[0].window_ms, MIN_WINDOW_MS);
        assert_eq!(
            seconds.iter().map(|w| w.index).collect::<Vec<_>>(),
            vec![1, 2, 30, 31, 61]
        );
    }

    #[test]
    fn closed_windows_end_before_the_first_second_of_the_open_one() {
        let minute = 60_000;
        assert_eq!(
            open_window_first_second(Timestamp::from_millis(59_999), minute),
            0
        );
        assert_eq!(
            open_window_first_second(Timestamp::from_millis(60_000), minute),
            60
        );
        assert_eq!(
            open_window_first_second(Timestamp::from_millis(61_500), 10),
            61
        );
        assert_eq!(second_of(Timestamp::from_millis(61_999)), 61);
    }

    #[test]
    fn a_settled_notice_leaves_what_it_did_not_tell() {
        let counts = vec![
            count(DeadReason::ClientError, 3, 1_000),
            count(DeadReason::ClientError, 2, 2_000),
            count(DeadReason::RetriesExhausted, 1, 1_500),
        ];
        // Not told (its window was told before under the same key): all of it.
        let all = untold(&counts, None);
        assert_eq!(
            all,
            vec![
                DeadCount {
                    count: 5,
                    ..count(DeadReason::ClientError, 0, 2_000)
                },
                count(DeadReason::RetriesExhausted, 1, 1_500),
            ]
        );
        // Told with four client errors and one exhausted: one client error came later.
        let told = json!({"reasons": {"client_error": 4, "retries_exhausted": 1}});
        assert_eq!(
            untold(&counts, Some(&told)),
            vec![DeadCount {
                count: 1,
                ..count(DeadReason::ClientError, 0, 2_000)
            }]
        );
    }

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
