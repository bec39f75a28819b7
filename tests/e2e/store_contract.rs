//! The store contract: every `Store` method, on SQLite and on PostgreSQL,
//! with the clock passed in so lease and retry times are exact.

use std::collections::BTreeMap;
use std::time::Duration;

use hookline_core::access::{Capabilities, Capability};
use hookline_core::breaker::{BreakerPolicy, BreakerState, Signal};
use hookline_core::ids::{AppId, DeliveryId, EndpointId, EventId};
use hookline_core::model::{
    AttemptVerdict, DeadReason, DeliveryState, ReplayJobState, TransportError,
};
use hookline_core::retry::Next;
use hookline_core::time::Timestamp;
use hookline_core::transform::Transform;
use hookline_dispatch::turn::ClaimPolicy;
use hookline_store::*;

use crate::helpers::{
    attempts_of, both_engines, dlq_of, item, new_endpoint, raw, Claims, Engine, Publishes, TestDb,
};

const LEASE: Duration = Duration::from_secs(30);

fn t(secs: i64) -> Timestamp {
    Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
}

async fn open(engine: Engine) -> (Store, TestDb) {
    let db = TestDb::new(engine).await;
    let store = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (store, db)
}

fn new_event(event_type: &str) -> NewEvent {
    NewEvent {
        id: EventId::generate(),
        event_type: event_type.into(),
        ordering_key: None,
        body: br#"{"type":"x","timestamp":"t","data":{}}"#.to_vec(),
        only_endpoint: None,
    }
}

async fn app(store: &Store) -> AppId {
    store
        .apps()
        .create_app(
            NewApp {
                uid: None,
                name: "acme".into(),
                portal: Default::default(),
            },
            t(0),
        )
        .await
        .unwrap()
        .id
}

/// Publishes one event; returns its id.
/// A new app with one endpoint that takes every event type.
async fn app_with_an_endpoint(store: &Store) -> AppId {
    let app = app(store).await;
    store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    app
}

/// A new app with `n` endpoints that take every event type.
async fn app_with_endpoints(store: &Store, n: usize) -> AppId {
    let app = app(store).await;
    for n in 0..n {
        let url = format!("https://{n}.example");
        store
            .endpoints()
            .create_endpoint(&app, new_endpoint(&url, None), t(0))
            .await
            .unwrap();
    }
    app
}

async fn publish(store: &Store, app: &AppId, event_type: &str, now: Timestamp) -> EventId {
    let event = new_event(event_type);
    let id = event.id.clone();
    let outcome = store
        .events()
        .publish(item(app, event, None, now))
        .await
        .unwrap();
    assert!(matches!(outcome, PublishOutcome::Created(_)));
    id
}

/// The deliveries of an event, as its view lists them.
async fn event_deliveries(store: &Store, app: &AppId, event: &EventId) -> Vec<Delivery> {
    store
        .events()
        .get_event(app, event)
        .await
        .unwrap()
        .unwrap()
        .1
}

fn record(claimed: &ClaimedDelivery, next: Next, at: Timestamp) -> AttemptRecord {
    AttemptRecord {
        delivery_id: claimed.id.clone(),
        event_id: claimed.event_id.clone(),
        app_id: claimed.app_id.clone(),
        endpoint_id: claimed.endpoint_id.clone(),
        lease_token: claimed.lease_token.clone(),
        attempt_number: claimed.attempts + 1,
        started_at: at,
        duration: Duration::from_millis(12),
        status_code: Some(500),
        response_body: Some("oops".into()),
        error: None,
        destination: claimed.destination.clone(),
        signature: Some("v1,test".into()),
        response_headers: vec![("server".into(), "test".into())],
        response_truncated: false,
        endpoint_sequence: None,
        transformed: None,
        batch: None,
        trigger: hookline_core::model::AttemptTrigger::of(
            claimed.probe,
            claimed.attempts,
            claimed.replayed,
        ),
        next,
        signal: match next {
            Next::Succeeded => Signal::Healthy,
            _ => Signal::Failed,
        },
        disable_endpoint: false,
    }
}

/// The claim policy of a dispatcher with nothing in flight.
fn policy() -> ClaimPolicy {
    ClaimPolicy {
        probe_hold: LEASE,
        rate_lookahead: Duration::from_secs(1),
        ..ClaimPolicy::default()
    }
}

/// What one claim at `now` of up to `limit` sends, by such a dispatcher.
async fn lease_due(store: &Store, now: Timestamp, limit: u32) -> Vec<ClaimedDelivery> {
    store
        .claim_due_deliveries(now, LEASE, limit, &policy())
        .await
        .unwrap()
        .deliveries
}

both_engines!(
    notification_channels_are_the_endpoints_their_app_owns,
    apps_round_trip_by_id_and_uid,
    a_publish_goes_where_the_endpoints_say_now_whoever_changed_them,
    a_uid_names_the_app_that_holds_it_now,
    an_endpoints_config_version_moves_with_what_a_publish_reads_and_only_that,
    endpoints_round_trip_and_delete_dead_letters_what_they_owed,
    publish_fans_out_to_enabled_matching_endpoints,
    publish_skips_endpoints_whose_filter_drops_the_payload_and_counts_them,
    idempotency_key_replays_or_refuses,
    events_answered_from_their_key_take_no_sequence_number,
    endpoints_number_their_deliveries_without_gaps_in_commit_order,
    concurrent_publishes_with_one_key_write_one_event,
    claim_leases_due_work_and_reclaims_expired_leases,
    turns_give_back_expired_leases_from_where_the_last_left_off,
    completion_records_attempts_and_moves_deliveries_on,
    operational_notices_are_recorded_with_their_cause_and_published_once,
    stale_lease_cannot_overwrite_the_new_owner,
    both_owners_attempts_are_on_record_when_one_batch_holds_them,
    a_claim_takes_no_more_than_its_limit_of_one_events_deliveries,
    claims_of_every_size_stay_within_their_limit,
    claims_smaller_than_an_events_fan_out_still_take_it,
    rows_due_in_one_millisecond_are_leased_in_event_id_order,
    targets_a_claim_has_no_room_for_wait_in_a_part_of_their_event,
    two_parts_of_an_event_due_in_one_millisecond_are_leased_one_by_one,
    an_events_row_and_its_fanout_targets_leased_together_keep_apart,
    release_returns_work_unattempted,
    gone_disables_endpoint_and_parks_its_queue_until_enabled,
    pause_parks_new_and_queued_work_until_resumed,
    rotation_keeps_the_old_secret_signing_through_its_grace,
    replay_starts_one_new_round,
    dlq_lists_newest_first_with_cursor,
    listings_filter_and_page_newest_first,
    attempts_read_alike_whether_their_delivery_row_holds_them_or_not,
    a_deliverys_facts_are_its_events_type_and_its_newest_attempts_status,
    an_endpoints_timeline_counts_its_attempts_and_marks_its_changes,
    an_apps_troubles_are_its_failing_switched_off_and_refused_endpoints,
    bulk_replay_works_in_batches_resumes_and_stops_when_cancelled,
    api_keys_by_hash_and_scope,
    portal_settings_round_trip,
    portal_codes_open_one_session_until_they_expire,
    event_type_catalog_round_trips,
    idempotency_retention_purges_old_keys,
    retention_removes_old_delivered_history_and_keeps_the_dlq,
    a_dropped_store_ends_its_background_tasks,
);

/// An event with this payload (in the envelope the API builds).
fn event_with(payload: serde_json::Value) -> NewEvent {
    let body = serde_json::json!({"type": "order.paid", "timestamp": "t", "data": payload});
    NewEvent {
        body: serde_json::to_vec(&body).unwrap(),
        ..new_event("order.paid")
    }
}

async fn publish_skips_endpoints_whose_filter_drops_the_payload_and_counts_them(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let filtered = store
        .endpoints()
        .create_endpoint(
            &app,
            NewEndpoint {
                filter: Some("/amount > 100".into()),
                ..new_endpoint("https://a.example/hook", None)
            },
            t(0),
        )
        .await
        .unwrap();
    let plain = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://b.example/hook", None), t(0))
        .await
        .unwrap();
    assert_eq!(
        store
            .endpoints()
            .get_endpoint(&app, &filtered.id)
            .await
            .unwrap()
            .unwrap()
            .filter
            .as_deref(),
        Some("/amount > 100")
    );
    let targets = |outcome: PublishOutcome| -> Vec<EndpointId> {
        let PublishOutcome::Created(published) = outcome else {
            panic!("not created: {outcome:?}");
        };
        let mut ids: Vec<EndpointId> = published
            .deliveries
            .into_iter()
            .map(|d| d.endpoint_id)
            .collect();
        ids.sort();
        ids
    };
    let both = {
        let mut ids = vec![filtered.id.clone(), plain.id.clone()];
        ids.sort();
        ids
    };
    // Two drops in the minute of t(0), one in the next; one event passes.
    let group = [
        item(
            &app,
            event_with(serde_json::json!({"amount": 5})),
            None,
            t(0),
        ),
        item(
            &app,
            event_with(serde_json::json!({"amount": 500})),
            None,
            t(1),
        ),
        item(
            &app,
            event_with(serde_json::json!({"other": 1})),
            None,
            t(2),
        ),
    ];
    let outcomes = store.events().publish_group(&group).await.unwrap();
    let got: Vec<Vec<EndpointId>> = outcomes.into_iter().map(targets).collect();
    assert_eq!(
        got,
        vec![vec![plain.id.clone()], both.clone(), vec![plain.id.clone()]]
    );
    let later = store
        .events()
        .publish(item(
            &app,
            event_with(serde_json::json!({"amount": 1})),
            None,
            t(61),
        ))
        .await
        .unwrap();
    assert_eq!(targets(later), vec![plain.id.clone()]);
    // A test send (only this endpoint) goes whatever the filter, and counts as no drop.
    let test = NewEvent {
        only_endpoint: Some(filtered.id.clone()),
        ..event_with(serde_json::json!({"amount": 1}))
    };
    let sent = store
        .events()
        .publish(item(&app, test, None, t(62)))
        .await
        .unwrap();
    assert_eq!(targets(sent), vec![filtered.id.clone()]);

    let filtered_since = |since| {
        let store = store.clone();
        let id = filtered.id.clone();
        async move {
            store
                .endpoints()
                .endpoint_filtered_since(&id, since)
                .await
                .unwrap()
        }
    };
    // t(0) is the start of a minute (1_800_000_000 s is a multiple of 60).
    assert_eq!(filtered_since(t(0)).await, 3);
    assert_eq!(
        filtered_since(t(59)).await,
        3,
        "the minute of `since` counts whole"
    );
    assert_eq!(filtered_since(t(60)).await, 1);
    assert_eq!(filtered_since(t(120)).await, 0);
    assert_eq!(
        store
            .endpoints()
            .endpoint_filtered_since(&plain.id, t(0))
            .await
            .unwrap(),
        0
    );
    // Retention removes the counts of minutes before its cutoff.
    store.purge_history(t(60)).await.unwrap();
    assert_eq!(filtered_since(t(0)).await, 1);
}

async fn apps_round_trip_by_id_and_uid(engine: Engine) {
    let (store, _db) = open(engine).await;
    let created = store
        .apps()
        .create_app(
            NewApp {
                uid: Some("acme".into()),
                name: "Acme".into(),
                portal: Default::default(),
            },
            t(0),
        )
        .await
        .unwrap();
    assert_eq!(
        store.apps().find_app(created.id.as_str()).await.unwrap(),
        Some(created.clone())
    );
    assert_eq!(
        store.apps().find_app("acme").await.unwrap(),
        Some(created.clone())
    );
    assert_eq!(store.apps().find_app("nope").await.unwrap(), None);

    let taken = store
        .apps()
        .create_app(
            NewApp {
                uid: Some("acme".into()),
                name: "Other".into(),
                portal: Default::default(),
            },
            t(1),
        )
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");

    let second = store
        .apps()
        .create_app(
            NewApp {
                uid: None,
                name: "Beta".into(),
                portal: Default::default(),
            },
            t(2),
        )
        .await
        .unwrap();
    let page = store
        .apps()
        .list_apps(&Page {
            limit: 1,
            before: None,
        })
        .await
        .unwrap();
    assert_eq!(page, vec![second.clone()]);
    let next = store
        .apps()
        .list_apps(&Page {
            limit: 10,
            before: Some(second.id.to_string()),
        })
        .await
        .unwrap();
    assert_eq!(next, vec![created.clone()]);

    let renamed = store
        .apps()
        .update_app(
            &created.id,
            AppPatch {
                name: Some("Acme Inc".into()),
                uid: Some(None),
                portal: None,
            },
            t(3),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (renamed.name.as_str(), renamed.uid.as_deref()),
        ("Acme Inc", None)
    );
    assert_eq!(renamed.updated_at, t(3));

    assert!(store.apps().delete_app(&created.id).await.unwrap());
    assert!(!store.apps().delete_app(&created.id).await.unwrap());
    assert_eq!(
        store.apps().find_app(created.id.as_str()).await.unwrap(),
        None
    );
}

async fn endpoints_round_trip_and_delete_dead_letters_what_they_owed(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let created = store
        .endpoints()
        .create_endpoint(
            &app,
            new_endpoint("https://a.example/h", Some(vec!["a"])),
            t(0),
        )
        .await
        .unwrap();
    assert_eq!(
        store
            .endpoints()
            .get_endpoint(&app, &created.id)
            .await
            .unwrap(),
        Some(created.clone())
    );
    let other_app = self::app(&store).await;
    assert_eq!(
        store
            .endpoints()
            .get_endpoint(&other_app, &created.id)
            .await
            .unwrap(),
        None,
        "scoped to its app"
    );

    let patch = EndpointPatch {
        url: Some("https://b.example/h".into()),
        event_types: Some(None),
        enabled: Some(false),
        retry: Some(RetryOverrides {
            max_attempts: Some(3),
            ..Default::default()
        }),
        max_in_flight: Some(Some(7)),
        ..Default::default()
    };
    let updated = store
        .endpoints()
        .update_endpoint(&app, &created.id, patch, t(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.url, "https://b.example/h");
    assert_eq!(updated.event_types, None);
    assert!(!updated.enabled);
    assert_eq!(updated.retry.max_attempts, Some(3));
    assert_eq!(updated.max_in_flight, Some(7));
    assert_eq!(
        updated.secret, created.secret,
        "the secret survives updates"
    );
    assert_eq!(
        store
            .endpoints()
            .list_endpoints(
                &app,
                &Page {
                    limit: 10,
                    before: None
                }
            )
            .await
            .unwrap(),
        vec![updated.clone()]
    );

    store
        .endpoints()
        .update_endpoint(
            &app,
            &created.id,
            EndpointPatch {
                enabled: Some(true),
                ..Default::default()
            },
            t(2),
        )
        .await
        .unwrap();
    publish(&store, &app, "a", t(3)).await;
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&created.id, DeliveryState::Pending)
            .await
            .unwrap(),
        1
    );
    assert!(store
        .endpoints()
        .delete_endpoint(&app, &created.id, t(4))
        .await
        .unwrap());
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&created.id, DeliveryState::Pending)
            .await
            .unwrap(),
        0
    );
    // What it owed is dead-lettered, not forgotten, and stays dead: nowhere to send it.
    let dlq = dlq_of(&store, &app).await;
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].endpoint_id, created.id);
    assert_eq!(dlq[0].dead_reason, Some(DeadReason::EndpointDeleted));
    assert_eq!(dlq[0].dead_at, Some(t(4)));
    assert!(matches!(
        store.events().replay_delivery(&app, &dlq[0].id, t(5)).await.unwrap(),
        ReplayOutcome::EndpointDeleted(d) if d.state == DeliveryState::Dead
    ));
    assert!(lease_due(&store, t(5), 10).await.is_empty());
    assert!(!store
        .endpoints()
        .delete_endpoint(&app, &created.id, t(6))
        .await
        .unwrap());
    // Nothing can replay it, so retention removes it like delivered history.
    let purged = store.purge_history(t(100)).await.unwrap();
    assert_eq!(purged.deliveries, 1);
    assert!(dlq_of(&store, &app).await.is_empty());
}

/// The endpoints of an event's deliveries, sorted.
async fn delivered_to(store: &Store, app: &AppId, event: &EventId) -> Vec<EndpointId> {
    let mut endpoints: Vec<EndpointId> = event_deliveries(store, app, event)
        .await
        .iter()
        .map(|d| d.endpoint_id.clone())
        .collect();
    endpoints.sort();
    endpoints
}

/// A publish routes and plans from its app's snapshot, kept in memory between
/// publishes; a change made anywhere — here by a second store on the same
/// database, as another node would — is found by the publish's write, which
/// then writes nothing, and the publish goes again from the endpoints as they
/// are now. A publish to an app deleted meanwhile writes nothing.
async fn a_publish_goes_where_the_endpoints_say_now_whoever_changed_them(engine: Engine) {
    let (store, db) = open(engine).await;
    let other = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    let app = app(&store).await;
    let a = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap()
        .id;
    let first = publish(&store, &app, "order.paid", t(1)).await;
    assert_eq!(delivered_to(&store, &app, &first).await, vec![a.clone()]);

    // Another node adds an endpoint: the next publish goes to both.
    let b = other
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://b.example", None), t(2))
        .await
        .unwrap()
        .id;
    // With an idempotency key: the receipt stored is that of the write that
    // went through (the second try), and the key answers with it.
    let key = IdempotencyKey {
        key: "k-second".into(),
        fingerprint: "f".into(),
    };
    let event = new_event("order.paid");
    let second = event.id.clone();
    let created = store
        .events()
        .publish(item(&app, event, Some(&key), t(3)))
        .await
        .unwrap();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(delivered_to(&store, &app, &second).await, both);
    let PublishOutcome::Created(created) = created else {
        panic!("created: {created:?}");
    };
    let again = store
        .events()
        .publish(item(&app, new_event("order.paid"), Some(&key), t(4)))
        .await
        .unwrap();
    assert_eq!(again, PublishOutcome::Replayed(created));

    // Another node changes an endpoint.
    let change = |endpoint: &EndpointId, patch: EndpointPatch, at: Timestamp| {
        let (other, app, endpoint) = (&other, &app, endpoint.clone());
        async move {
            other
                .endpoints()
                .update_endpoint(app, &endpoint, patch, at)
                .await
                .unwrap()
                .unwrap();
        }
    };

    // ...disables the first: only the second.
    let off = EndpointPatch {
        enabled: Some(false),
        ..Default::default()
    };
    change(&a, off, t(4)).await;
    // An ordered event: its write runs in the transaction that numbered it.
    let mut event = new_event("order.paid");
    event.ordering_key = Some("order_42".into());
    let third = event.id.clone();
    store
        .events()
        .publish(item(&app, event, None, t(5)))
        .await
        .unwrap();
    assert_eq!(delivered_to(&store, &app, &third).await, vec![b.clone()]);

    // ...narrows the second's event types: nothing for another type.
    let narrow = EndpointPatch {
        event_types: Some(Some(vec!["order.paid".into()])),
        ..Default::default()
    };
    change(&b, narrow, t(6)).await;
    let other_type = publish(&store, &app, "user.created", t(7)).await;
    assert_eq!(delivered_to(&store, &app, &other_type).await, vec![]);

    // ...pauses it: its new delivery is written parked, not due.
    let pause = EndpointPatch {
        paused: Some(true),
        ..Default::default()
    };
    change(&b, pause, t(8)).await;
    let paused = publish(&store, &app, "order.paid", t(9)).await;
    let deliveries = event_deliveries(&store, &app, &paused).await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].endpoint_id, b);
    assert_eq!(deliveries[0].state, DeliveryState::Pending);
    assert!(
        deliveries[0].due_at > t(9),
        "parked, not due at its publication"
    );

    // ...deletes the app: the publish writes nothing and says why.
    assert!(other.apps().delete_app(&app).await.unwrap());
    let key = IdempotencyKey {
        key: "k-gone".into(),
        fingerprint: "f".into(),
    };
    let gone = store
        .events()
        .publish(item(&app, new_event("order.paid"), Some(&key), t(10)))
        .await;
    assert!(
        matches!(gone, Err(StoreError::AppNotFound)),
        "a publish to a deleted app: {gone:?}"
    );
    for table in ["events", "fanout", "deliveries", "idempotency_keys"] {
        assert_eq!(
            raw(
                engine,
                &db,
                &format!("SELECT CAST(count(*) AS TEXT) FROM {table}")
            )
            .await,
            Some("0".into()),
            "{table}: the app's rows went with it, and the publish wrote none"
        );
    }
}

/// Which app a uid names can change: a publish by uid goes to the app that
/// holds the uid now, never to the one a kept snapshot says held it.
async fn a_uid_names_the_app_that_holds_it_now(engine: Engine) {
    let (store, _db) = open(engine).await;
    let first = app_with_an_endpoint(&store).await;
    let give_uid = |app: AppId, uid: &'static str, at: Timestamp| {
        let store = store.clone();
        async move {
            let patch = AppPatch {
                uid: Some(Some(uid.into())),
                ..Default::default()
            };
            store
                .apps()
                .update_app(&app, patch, at)
                .await
                .unwrap()
                .unwrap();
        }
    };
    give_uid(first.clone(), "acme", t(1)).await;
    let found = store.events().app_snapshot("acme").await.unwrap().unwrap();
    assert_eq!(found.app.id, first);
    give_uid(first.clone(), "acme-old", t(2)).await;
    let second = app_with_an_endpoint(&store).await;
    give_uid(second.clone(), "acme", t(3)).await;
    let found = store.events().app_snapshot("acme").await.unwrap().unwrap();
    assert_eq!(found.app.id, second, "the uid's app now, not the one kept");
    let found = store
        .events()
        .app_snapshot("acme-old")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.app.id, first);
}

/// The counters a publish's snapshot is checked by move with every column a
/// publish acts on, and not with those the hot path writes (the breaker's
/// failure count, the rate limiter's clock, the last error): those would
/// make every snapshot stale under failures.
async fn an_endpoints_config_version_moves_with_what_a_publish_reads_and_only_that(engine: Engine) {
    let (store, db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let version = |table: &'static str| {
        let db = &db;
        async move {
            raw(
                engine,
                db,
                &format!("SELECT CAST(config_version AS TEXT) FROM {table}"),
            )
            .await
            .unwrap()
            .parse::<i64>()
            .unwrap()
        }
    };
    let (true_, false_) = match engine {
        Engine::Sqlite => ("1", "0"),
        Engine::Postgres => ("true", "false"),
    };
    let hot = [
        "consecutive_failures = 3".to_owned(),
        "breaker_cooldown_ms = 60000".to_owned(),
        "failing_since = 1800000000000".to_owned(),
        "rate_tat_us = 12345".to_owned(),
        "last_error = 'HTTP 500'".to_owned(),
        "last_failure_at = 1800000000000".to_owned(),
    ];
    for change in &hot {
        raw(engine, &db, &format!("UPDATE endpoints SET {change}")).await;
        assert_eq!(version("endpoints").await, 0, "{change} moved the version");
    }
    let read = [
        "url = 'https://b.example'".to_owned(),
        "secret = 'other'".to_owned(),
        "previous_secret = 'old'".to_owned(),
        "previous_secret_until = 1800000000000".to_owned(),
        "headers = '[]'".to_owned(),
        "auth = '{}'".to_owned(),
        format!("enabled = {false_}"),
        format!("enabled = {true_}"),
        format!("paused = {true_}"),
        "retry_base_ms = 10".to_owned(),
        "retry_cap_ms = 100".to_owned(),
        "max_attempts = 3".to_owned(),
        "max_age_secs = 60".to_owned(),
        "rate_limit_per_sec = 5".to_owned(),
        "max_in_flight = 7".to_owned(),
        "ordering_on_dead = 'block'".to_owned(),
        "breaker_state = 'open'".to_owned(),
        "next_probe_at = 1800000000000".to_owned(),
        "probe_until = 1800000000000".to_owned(),
        "event_types = '[\"order.paid\"]'".to_owned(),
        "payload_filter = '{}'".to_owned(),
        // A transform, and the description its program's input names.
        "transform = '{a: 1}'".to_owned(),
        "description = 'orders'".to_owned(),
    ];
    for (n, change) in read.iter().enumerate() {
        raw(engine, &db, &format!("UPDATE endpoints SET {change}")).await;
        assert_eq!(
            version("endpoints").await,
            n as i64 + 1,
            "{change} left the version"
        );
    }
    // Setting a column to the value it has is no change.
    raw(engine, &db, "UPDATE endpoints SET max_in_flight = 7").await;
    assert_eq!(version("endpoints").await, read.len() as i64);

    assert_eq!(version("apps").await, 0);
    let patch = AppPatch {
        uid: Some(Some("acme".into())),
        ..Default::default()
    };
    store
        .apps()
        .update_app(&app, patch, t(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        version("apps").await,
        1,
        "an app's change moves its version"
    );
}

async fn publish_fans_out_to_enabled_matching_endpoints(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let all = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://all.example", None), t(0))
        .await
        .unwrap();
    let orders = store
        .endpoints()
        .create_endpoint(
            &app,
            new_endpoint("https://o.example", Some(vec!["order.paid"])),
            t(0),
        )
        .await
        .unwrap();
    let _users = store
        .endpoints()
        .create_endpoint(
            &app,
            new_endpoint("https://u.example", Some(vec!["user.created"])),
            t(0),
        )
        .await
        .unwrap();
    let mut disabled = new_endpoint("https://off.example", None);
    disabled.enabled = false;
    store
        .endpoints()
        .create_endpoint(&app, disabled, t(0))
        .await
        .unwrap();

    let mut event = new_event("order.paid");
    event.ordering_key = Some("order_42".into());
    let id = event.id.clone();
    store
        .events()
        .publish(item(&app, event, None, t(1)))
        .await
        .unwrap();

    let (stored, deliveries) = store.events().get_event(&app, &id).await.unwrap().unwrap();
    assert_eq!(stored.event_type, "order.paid");
    assert_eq!(stored.ordering_key.as_deref(), Some("order_42"));
    assert_eq!(stored.created_at, t(1));
    let mut targets: Vec<_> = deliveries.iter().map(|d| d.endpoint_id.clone()).collect();
    targets.sort();
    let mut expected = vec![all.id, orders.id];
    expected.sort();
    assert_eq!(targets, expected);
    assert!(deliveries
        .iter()
        .all(|d| d.state == DeliveryState::Pending && d.due_at == t(1) && d.attempts == 0));
    assert_eq!(
        store
            .events()
            .get_event(&self::app(&store).await, &id)
            .await
            .unwrap(),
        None,
        "scoped to its app"
    );
}

async fn idempotency_key_replays_or_refuses(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let key = IdempotencyKey {
        key: "k1".into(),
        fingerprint: "f1".into(),
    };

    let first = store
        .events()
        .publish(item(&app, new_event("a"), Some(&key), t(1)))
        .await
        .unwrap();
    let PublishOutcome::Created(answer) = first else {
        panic!("expected Created, got {first:?}")
    };
    let again = store
        .events()
        .publish(item(&app, new_event("a"), Some(&key), t(2)))
        .await
        .unwrap();
    assert_eq!(again, PublishOutcome::Replayed(answer));
    let other = IdempotencyKey {
        key: "k1".into(),
        fingerprint: "f2".into(),
    };
    assert_eq!(
        store
            .events()
            .publish(item(&app, new_event("a"), Some(&other), t(3)))
            .await
            .unwrap(),
        PublishOutcome::KeyReused
    );
    // Keys are per app.
    let app2 = self::app(&store).await;
    assert!(matches!(
        store
            .events()
            .publish(item(&app2, new_event("a"), Some(&other), t(3)))
            .await
            .unwrap(),
        PublishOutcome::Created(_)
    ));
    assert_eq!(store.listings().count_events(&app).await.unwrap(), 1);
}

/// Every delivery made for an endpoint gets the next of the endpoint's numbers,
/// from 1, in commit order, whichever node publishes: two stores on one
/// PostgreSQL database (two tasks of one store on SQLite) publishing groups at
/// once — one of them changing an endpoint meanwhile, so that publishes made
/// stale go again — give each endpoint 1..=N, no number twice, none skipped. A
/// claim sends each delivery with its number; a range of numbers finds its
/// deliveries; an event answered from its idempotency key takes none; a run of
/// a whole batch is found from any of its numbers; retention removes the runs
/// whose events it removed (a dead delivery keeps its run) and a deleted
/// endpoint's runs.
async fn endpoints_number_their_deliveries_without_gaps_in_commit_order(engine: Engine) {
    let (store, db) = open(engine).await;
    let other = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    let app = app(&store).await;
    let every = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap()
        .id;
    let paid = store
        .endpoints()
        .create_endpoint(
            &app,
            new_endpoint("https://b.example", Some(vec!["order.paid"])),
            t(0),
        )
        .await
        .unwrap()
        .id;
    let types = ["order.paid", "order.shipped", "order.paid"];
    let mut tasks = Vec::new();
    // Two nodes publish at once on PostgreSQL. A SQLite file has one writing
    // process (its deployment is one node): there, two tasks of one store do,
    // and the other store only changes an endpoint (two processes writing one
    // file can be refused SQLITE_BUSY_SNAPSHOT without waiting).
    let nodes = match engine {
        Engine::Postgres => [store.clone(), other.clone()],
        Engine::Sqlite => [store.clone(), store.clone()],
    };
    for node in nodes {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..8 {
                let items: Vec<PublishItem> = types
                    .iter()
                    .map(|event_type| item(&app, new_event(event_type), None, t(1 + round)))
                    .collect();
                let outcomes = node.events().publish_group(&items).await.unwrap();
                assert!(outcomes
                    .iter()
                    .all(|o| matches!(o, PublishOutcome::Created(_))));
            }
        }));
    }
    // Meanwhile another node changes an endpoint: publishes holding the old
    // snapshot write nothing and go again.
    other
        .endpoints()
        .update_endpoint(
            &app,
            &every,
            EndpointPatch {
                description: Some("changed".into()),
                ..Default::default()
            },
            t(1),
        )
        .await
        .unwrap()
        .unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // More runs than retention reads at once: one publish each.
    for _ in 0..110 {
        store
            .events()
            .publish(item(&app, new_event("order.shipped"), None, t(10)))
            .await
            .unwrap();
    }
    let (n_every, n_paid) = (2 * 8 * 3 + 110, 2 * 8 * 2);

    // Everything claimed, and recorded delivered so that rooms free up; one
    // delivery to `paid` is refused for good instead.
    let mut numbers: BTreeMap<EndpointId, Vec<(u64, DeliveryId)>> = BTreeMap::new();
    let mut dead: Option<(u64, DeliveryId)> = None;
    loop {
        let claimed = lease_due(&store, t(20), 100).await;
        if claimed.is_empty() {
            break;
        }
        for delivery in &claimed {
            let seq = delivery
                .endpoint_sequence
                .expect("every delivery is numbered");
            numbers
                .entry(delivery.endpoint_id.clone())
                .or_default()
                .push((seq, delivery.id.clone()));
        }
        let records: Vec<AttemptRecord> = claimed
            .iter()
            .map(|c| {
                let refuse = dead.is_none() && c.endpoint_id == paid;
                if refuse {
                    dead = Some((c.endpoint_sequence.unwrap(), c.id.clone()));
                }
                let next = match refuse {
                    true => Next::Dead(DeadReason::ClientError),
                    false => Next::Succeeded,
                };
                record(c, next, t(20))
            })
            .collect();
        store
            .complete_attempts(&records, &BreakerPolicy::default(), t(20))
            .await
            .unwrap();
    }
    for (endpoint, count) in [(&every, n_every), (&paid, n_paid)] {
        let mut got = numbers.remove(endpoint).unwrap_or_default();
        got.sort();
        let seqs: Vec<u64> = got.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(seqs, (1..=count).collect::<Vec<u64>>(), "{endpoint}");
        assert_eq!(store.events().last_sequence(endpoint).await.unwrap(), count);
        // Ranges name the deliveries the claims sent with those numbers (at
        // most MAX_SEQUENCE_RANGE a read).
        let mut found = Vec::new();
        for from in (1..=count).step_by(MAX_SEQUENCE_RANGE as usize) {
            let range = store
                .events()
                .numbered_deliveries(endpoint, from, count)
                .await
                .unwrap();
            assert!(range.len() as u64 <= MAX_SEQUENCE_RANGE);
            found.extend(range);
        }
        assert_eq!(found, got);
        let middle = store
            .events()
            .numbered_deliveries(endpoint, 5, 7)
            .await
            .unwrap();
        assert_eq!(middle, got[4..7].to_vec());
    }

    // A key's second use takes no number.
    let key = IdempotencyKey {
        key: "k".into(),
        fingerprint: "f".into(),
    };
    for at in [30, 31] {
        store
            .events()
            .publish(item(&app, new_event("order.shipped"), Some(&key), t(at)))
            .await
            .unwrap();
    }
    assert_eq!(
        store.events().last_sequence(&every).await.unwrap(),
        n_every + 1
    );
    assert_eq!(store.events().last_sequence(&paid).await.unwrap(), n_paid);

    // A batch bigger than a publish group is one run; any of its numbers finds it.
    let batch: Vec<PublishItem> = (0..600)
        .map(|_| item(&app, new_event("order.shipped"), None, t(32)))
        .collect();
    store.events().publish_group(&batch).await.unwrap();
    let base = n_every + 1;
    let late = store
        .events()
        .numbered_deliveries(&every, base + 550, base + 552)
        .await
        .unwrap();
    let late: Vec<u64> = late.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(late, [base + 550, base + 551, base + 552]);

    // Retention: a run goes with its events, once they are removed; the
    // numbers stay taken, and a dead delivery keeps its run.
    while store.purge_history(t(25)).await.unwrap().full() {}
    assert!(purge_runs(&store, t(25)).await > 100);
    let (dead_seq, dead_id) = dead.expect("one delivery to paid was refused");
    assert_eq!(
        store
            .events()
            .numbered_deliveries(&paid, dead_seq, dead_seq)
            .await
            .unwrap(),
        [(dead_seq, dead_id.clone())]
    );
    // Of `every`'s, only the run of the dead delivery's event is left (one
    // publish of three events): the event is kept for the DLQ.
    let left = store
        .events()
        .numbered_deliveries(&every, 1, n_every)
        .await
        .unwrap();
    assert!(!left.is_empty() && left.len() <= 3, "{left:?}");
    assert!(left
        .iter()
        .any(|(_, id)| id.target().0 == dead_id.target().0));
    assert_eq!(
        store
            .events()
            .numbered_deliveries(&every, n_every + 1, n_every + 1)
            .await
            .unwrap()
            .len(),
        1,
        "a run made after the cutoff stays"
    );
    assert_eq!(
        store.events().last_sequence(&every).await.unwrap(),
        n_every + 601
    );
    // A deleted endpoint's runs go whatever their age; its numbers stay taken.
    store
        .endpoints()
        .delete_endpoint(&app, &every, t(40))
        .await
        .unwrap();
    purge_runs(&store, t(0)).await;
    assert!(store
        .events()
        .numbered_deliveries(&every, n_every + 1, n_every + 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.events().last_sequence(&every).await.unwrap(),
        n_every + 601,
        "the counter stays"
    );
    assert_eq!(store.events().last_sequence(&paid).await.unwrap(), n_paid);
    assert!(store
        .endpoints_with_old_runs(t(100))
        .await
        .unwrap()
        .iter()
        .all(|e| e.id != every));
}

/// Retention's walk of every endpoint's sequence runs, as the binary's loop
/// makes it; how many runs went.
async fn purge_runs(store: &Store, cutoff: Timestamp) -> u64 {
    let mut removed = 0;
    for endpoint in store.endpoints_with_old_runs(cutoff).await.unwrap() {
        let mut after = 0;
        loop {
            let (batch, next) = store
                .purge_sequence_runs(&endpoint, cutoff, after)
                .await
                .unwrap();
            removed += batch;
            match next {
                Some(next) => after = next,
                None => break,
            }
        }
    }
    removed
}

/// An ordered event answered from its idempotency key — an earlier publish's,
/// or an earlier item's in the same group — writes nothing, so the key's
/// sequence numbers have no gaps.
async fn events_answered_from_their_key_take_no_sequence_number(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let ordered = || NewEvent {
        ordering_key: Some("order_42".into()),
        ..new_event("a")
    };
    let key = |key: &str, fingerprint: &str| IdempotencyKey {
        key: key.into(),
        fingerprint: fingerprint.into(),
    };
    let sequence = |outcome: &PublishOutcome| match outcome {
        PublishOutcome::Created(published) => published.event.sequence,
        other => panic!("expected Created, got {other:?}"),
    };
    let (k1, k1_other, k2) = (key("k1", "f1"), key("k1", "f2"), key("k2", "f1"));
    let group = vec![
        item(&app, ordered(), Some(&k1), t(1)),
        item(&app, ordered(), Some(&k1), t(1)),
        item(&app, ordered(), Some(&k1_other), t(1)),
        item(&app, ordered(), None, t(1)),
    ];
    let outcomes = store.events().publish_group(&group).await.unwrap();
    assert_eq!(sequence(&outcomes[0]), Some(1));
    let PublishOutcome::Created(created) = &outcomes[0] else {
        unreachable!("checked above")
    };
    assert_eq!(
        outcomes[1],
        PublishOutcome::Replayed(created.clone()),
        "the same request, one event"
    );
    assert_eq!(outcomes[2], PublishOutcome::KeyReused);
    assert_eq!(sequence(&outcomes[3]), Some(2), "no number for either");

    let group = vec![
        item(&app, ordered(), Some(&k1), t(2)),
        item(&app, ordered(), Some(&k2), t(2)),
    ];
    let outcomes = store.events().publish_group(&group).await.unwrap();
    let PublishOutcome::Replayed(first) = &outcomes[0] else {
        panic!("expected Replayed, got {:?}", outcomes[0])
    };
    assert_eq!(first.event.sequence, Some(1));
    assert_eq!(sequence(&outcomes[1]), Some(3), "the next, with no gap");
    assert_eq!(store.listings().count_events(&app).await.unwrap(), 3);
}

async fn concurrent_publishes_with_one_key_write_one_event(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let key = IdempotencyKey {
        key: "same".into(),
        fingerprint: "f".into(),
    };
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (store, app, key) = (store.clone(), app.clone(), key.clone());
            tokio::spawn(async move {
                store
                    .events()
                    .publish(item(&app, new_event("a"), Some(&key), t(1)))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut bodies = Vec::new();
    let mut created = 0;
    for task in tasks {
        match task.await.unwrap() {
            PublishOutcome::Created(published) => {
                created += 1;
                bodies.push(published)
            }
            PublishOutcome::Replayed(published) => bodies.push(published),
            other => panic!("same fingerprint, no earlier release: {other:?}"),
        }
    }
    assert_eq!(created, 1);
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "every caller gets the one answer"
    );
    assert_eq!(store.listings().count_events(&app).await.unwrap(), 1);
    assert_eq!(
        lease_due(&store, t(2), 100).await.len(),
        1,
        "and one delivery"
    );
}

async fn claim_leases_due_work_and_reclaims_expired_leases(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    let early = publish(&store, &app, "a", t(1)).await;
    publish(&store, &app, "a", t(5)).await;

    assert!(
        lease_due(&store, t(0), 10).await.is_empty(),
        "nothing due yet"
    );
    assert_eq!(store.events().next_due_at().await.unwrap(), Some(t(1)));

    let claimed = lease_due(&store, t(2), 10).await;
    assert_eq!(claimed.len(), 1, "only the due one");
    let first = &claimed[0];
    assert_eq!(first.event_id, early);
    assert_eq!(first.destination.url, "https://a.example");
    assert_eq!(first.destination.signing.current, endpoint.secret);
    assert_eq!(&*first.body, br#"{"type":"x","timestamp":"t","data":{}}"#);
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&endpoint.id, DeliveryState::InFlight)
            .await
            .unwrap(),
        1
    );

    // Leased: not claimable again until the lease (30 s from t(2)) runs out.
    let second = lease_due(&store, t(10), 10).await;
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].id, first.id);
    assert!(lease_due(&store, t(31), 10).await.is_empty());
    let reclaimed = lease_due(&store, t(32), 10).await;
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].id, first.id);
    assert_ne!(
        reclaimed[0].lease_token, first.lease_token,
        "a reclaim is a new lease"
    );

    // Claims respect the limit.
    for n in 0..5 {
        publish(&store, &app, "a", t(40 + n)).await;
    }
    assert_eq!(lease_due(&store, t(50), 3).await.len(), 3);
}

/// A dispatcher's turns give back expired leases from where its last turn left
/// off: no more than a turn's limit at once (the next goes on after the last
/// given back, even within one millisecond), and not a lease that ended before
/// that mark — a new dispatcher, looking from the beginning, finds that one.
async fn turns_give_back_expired_leases_from_where_the_last_left_off(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(publish(&store, &app, "a", t(1)).await);
    }
    let claim_for = |lease, now, limit, policy: &ClaimPolicy| {
        let (store, policy) = (store.clone(), policy.clone());
        async move {
            store
                .claim_due_deliveries(now, lease, limit, &policy)
                .await
                .unwrap()
                .deliveries
        }
    };
    let claim = |now, limit, policy: &ClaimPolicy| claim_for(LEASE, now, limit, policy);
    // One dispatcher: its turns share the mark.
    let dispatcher = policy();
    let leased = claim(t(1), 10, &dispatcher).await;
    assert_eq!(leased.len(), 3, "all three leased until t(31)");
    assert!(claim(t(30), 10, &dispatcher).await.is_empty());

    let first = claim(t(31), 2, &dispatcher).await;
    assert_eq!(first.len(), 2, "the limit bounds what a turn gives back");
    let second = claim(t(31), 2, &dispatcher).await;
    assert_eq!(
        second.len(),
        1,
        "the next turn goes on after the last given back"
    );
    let mut again: Vec<EventId> = first
        .iter()
        .chain(&second)
        .map(|d| d.event_id.clone())
        .collect();
    again.sort();
    events.sort();
    assert_eq!(again, events, "each lease given back once");
    assert!(claim(t(32), 10, &dispatcher).await.is_empty());

    // A lease that had already ended before the mark when it was written (a
    // clock far behind this dispatcher's): not this dispatcher's to look for.
    publish(&store, &app, "a", t(20)).await;
    let late = claim_for(Duration::from_secs(1), t(20), 10, &policy()).await;
    assert_eq!(late.len(), 1, "leased until t(21)");
    assert!(claim(t(40), 10, &dispatcher).await.is_empty());
    let found = claim(t(40), 10, &policy()).await;
    assert_eq!(
        found.len(),
        1,
        "a dispatcher looking from the beginning finds it"
    );
    assert_eq!(found[0].id, late[0].id);
}

/// PostgreSQL: a completion locks only the endpoints its plan changes. A
/// success on an endpoint whose breaker has nothing to reset goes through
/// while another transaction holds the endpoint's row (two dispatchers' turns
/// do not queue on it); a failure, which counts on the breaker, waits for that
/// lock and is written once it is released.
#[tokio::test]
async fn a_completion_locks_only_the_endpoints_its_plan_changes() {
    let (store, db) = open(Engine::Postgres).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    publish(&store, &app, "a", t(1)).await;
    publish(&store, &app, "a", t(1)).await;
    let claimed = lease_due(&store, t(1), 10).await;
    assert_eq!(claimed.len(), 2);

    let other = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut holder = other.begin().await.unwrap();
    sqlx::query("SELECT id FROM endpoints WHERE id = $1 FOR UPDATE")
        .bind(endpoint.id.as_str())
        .execute(&mut *holder)
        .await
        .unwrap();

    let healthy = [record(&claimed[0], Next::Succeeded, t(2))];
    tokio::time::timeout(
        Duration::from_secs(30),
        store.complete_attempts(&healthy, &BreakerPolicy::default(), t(2)),
    )
    .await
    .expect("a success that changes nothing does not wait for the endpoint's row")
    .unwrap();

    let failing = tokio::spawn({
        let (store, failed) = (
            store.clone(),
            [record(&claimed[1], Next::RetryAt(t(60)), t(2))],
        );
        async move {
            store
                .complete_attempts(&failed, &BreakerPolicy::default(), t(2))
                .await
        }
    });
    crate::helpers::wait_until(
        Duration::from_secs(30),
        "the failure to wait for the endpoint's row",
        || {
            let other = other.clone();
            async move {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND wait_event_type = 'Lock'",
                )
                .fetch_one(&other)
                .await
                .unwrap();
                (waiting > 0).then_some(())
            }
        },
    )
    .await;
    assert!(!failing.is_finished(), "still waiting");
    holder.rollback().await.unwrap();
    failing.await.unwrap().unwrap();
    let health = store
        .endpoints()
        .endpoint_health(&app, &endpoint.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        health.breaker.consecutive_failures, 1,
        "the failure counted"
    );
}

/// Operational notices: an endpoint's creation is recorded with it; dead
/// deliveries are counted by second and come out as one `delivery.dead` per
/// closed window; what is published is gone.
/// Notices settled as told.
fn told(notices: &[hookline_store::PendingNotice]) -> Vec<(hookline_store::PendingNotice, bool)> {
    notices.iter().map(|n| (n.clone(), true)).collect()
}

async fn operational_notices_are_recorded_with_their_cause_and_published_once(engine: Engine) {
    use hookline_core::operational::Kind;
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    const WINDOW: i64 = 60_000;
    let ops = store.operational();
    let created = ops.pending(t(0), WINDOW, 10).await.unwrap();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].kind, Kind::EndpointCreated);
    assert_eq!(created[0].data["endpoint_id"], endpoint.id.as_str());
    ops.settle(&told(&created), 0).await.unwrap();
    assert!(ops.pending(t(0), WINDOW, 10).await.unwrap().is_empty());

    for _ in 0..3 {
        publish(&store, &app, "a", t(1)).await;
    }
    let claimed = lease_due(&store, t(2), 10).await;
    let dead: Vec<AttemptRecord> = claimed
        .iter()
        .map(|c| {
            let mut r = record(c, Next::Dead(DeadReason::ClientError), t(2));
            r.status_code = Some(400);
            r
        })
        .collect();
    store
        .complete_attempts(&dead[..2], &BreakerPolicy::default(), t(3))
        .await
        .unwrap();
    store
        .complete_attempts(&dead[2..], &BreakerPolicy::default(), t(4))
        .await
        .unwrap();
    // t(0) starts a minute: until t(60) the window is open.
    assert!(ops.pending(t(59), WINDOW, 10).await.unwrap().is_empty());
    let closed = ops.pending(t(60), WINDOW, 10).await.unwrap();
    assert_eq!(closed.len(), 1, "{closed:?}");
    let notice = &closed[0];
    assert_eq!(notice.kind, Kind::DeliveryDead);
    assert_eq!(notice.data["count"], 3);
    assert_eq!(
        notice.data["reasons"],
        serde_json::json!({"client_error": 3})
    );
    assert_eq!(notice.data["last_status"], 400);
    assert_eq!(notice.data["window_start"], t(0).to_rfc3339());
    ops.settle(&told(&closed), 0).await.unwrap();
    assert!(ops.pending(t(120), WINDOW, 10).await.unwrap().is_empty());

    // A death counted in that window after it was told (its completion read the
    // clock at t(5)) comes out under the told window's key; carried over into
    // a later second, it is told with that second's window, and only there.
    publish(&store, &app, "a", t(5)).await;
    let late = lease_due(&store, t(5), 10).await;
    let mut late = record(&late[0], Next::Dead(DeadReason::ClientError), t(5));
    late.status_code = Some(404);
    store
        .complete_attempts(&[late], &BreakerPolicy::default(), t(5))
        .await
        .unwrap();
    let straggler = ops.pending(t(120), WINDOW, 10).await.unwrap();
    assert_eq!(straggler.len(), 1);
    assert_eq!(straggler[0].key, notice.key, "the told window's key");
    assert_eq!(straggler[0].data["count"], 1);
    let into = hookline_core::operational::window_of(t(121), 1000);
    ops.settle(&[(straggler[0].clone(), false)], into)
        .await
        .unwrap();
    assert!(ops.pending(t(179), WINDOW, 10).await.unwrap().is_empty());
    let carried = ops.pending(t(180), WINDOW, 10).await.unwrap();
    assert_eq!(carried.len(), 1, "{carried:?}");
    assert_eq!(carried[0].data["count"], 1);
    assert_eq!(carried[0].data["last_status"], 404);
    assert_eq!(carried[0].data["window_start"], t(120).to_rfc3339());
    ops.settle(&told(&carried), into).await.unwrap();
    assert!(ops.pending(t(600), WINDOW, 10).await.unwrap().is_empty());

    // A death that lands in a window between the loop's read and its settling
    // is not removed with what was told: it is told with the open window.
    die_at(&store, &app, t(200), 500).await;
    let read = ops.pending(t(240), WINDOW, 10).await.unwrap();
    assert_eq!(read[0].data["count"], 1);
    die_at(&store, &app, t(201), 503).await;
    let into = hookline_core::operational::window_of(t(241), 1000);
    ops.settle(&told(&read), into).await.unwrap();
    let rest = ops.pending(t(300), WINDOW, 10).await.unwrap();
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].data["count"], 1);
    assert_eq!(rest[0].data["window_start"], t(240).to_rfc3339());
    ops.settle(&told(&rest), into).await.unwrap();
    assert!(ops.pending(t(600), WINDOW, 10).await.unwrap().is_empty());
}

/// One delivery published, claimed and dead at `at` with `status`.
async fn die_at(store: &Store, app: &AppId, at: Timestamp, status: u16) {
    publish(store, app, "a", at).await;
    let claimed = lease_due(store, at, 10).await;
    let mut dead = record(&claimed[0], Next::Dead(DeadReason::RetriesExhausted), at);
    dead.status_code = Some(status);
    store
        .complete_attempts(&[dead], &BreakerPolicy::default(), at)
        .await
        .unwrap();
}

async fn completion_records_attempts_and_moves_deliveries_on(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    for _ in 0..3 {
        publish(&store, &app, "a", t(1)).await;
    }
    let claimed = lease_due(&store, t(2), 10).await;
    let mut ok = record(&claimed[0], Next::Succeeded, t(2));
    ok.status_code = Some(200);
    let retry = record(&claimed[1], Next::RetryAt(t(60)), t(2));
    let mut dead = record(&claimed[2], Next::Dead(DeadReason::ClientError), t(2));
    dead.status_code = None;
    dead.error = Some((TransportError::Connect, "refused".into()));
    store
        .complete_attempts(&[ok, retry, dead], &BreakerPolicy::default(), t(3))
        .await
        .unwrap();

    let state = |i: usize| {
        let (store, app, id) = (store.clone(), app.clone(), claimed[i].id.clone());
        async move {
            store
                .events()
                .get_delivery(&app, &id)
                .await
                .unwrap()
                .unwrap()
        }
    };
    let succeeded = state(0).await;
    assert_eq!(
        (
            succeeded.state,
            succeeded.attempts,
            succeeded.last_attempt_at
        ),
        (DeliveryState::Succeeded, 1, Some(t(2)))
    );
    let pending = state(1).await;
    assert_eq!(
        (pending.state, pending.due_at, pending.attempts),
        (DeliveryState::Pending, t(60), 1)
    );
    let dlq = state(2).await;
    assert_eq!(
        (dlq.state, dlq.dead_reason, dlq.dead_at),
        (
            DeliveryState::Dead,
            Some(DeadReason::ClientError),
            Some(t(3))
        )
    );

    let attempts = attempts_of(&store, &app, &claimed[2].id).await;
    assert_eq!(attempts.len(), 1);
    let attempt = &attempts[0];
    assert_eq!(attempt.error_kind, Some(TransportError::Connect));
    assert_eq!(attempt.error_message.as_deref(), Some("refused"));
    assert_eq!(attempt.dead_reason, Some(DeadReason::ClientError));
    assert_eq!((attempt.attempt_number, attempt.duration_ms), (1, 12));
    let retried = attempts_of(&store, &app, &claimed[1].id).await;
    assert_eq!(retried[0].next_attempt_at, Some(t(60)));
    assert_eq!(retried[0].response_body.as_deref(), Some("oops"));

    // The retry is claimable at its time, with its attempt count.
    assert!(lease_due(&store, t(59), 10).await.is_empty());
    assert_eq!(store.events().next_due_at().await.unwrap(), Some(t(60)));
    let again = lease_due(&store, t(60), 10).await;
    assert_eq!((again.len(), again[0].attempts), (1, 1));
}

async fn a_claim_takes_no_more_than_its_limit_of_one_events_deliveries(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    for url in [
        "https://a.example",
        "https://b.example",
        "https://c.example",
    ] {
        store
            .endpoints()
            .create_endpoint(&app, new_endpoint(url, None), t(0))
            .await
            .unwrap();
    }
    let event = publish(&store, &app, "a", t(0)).await;
    // One free send slot: at most one delivery, though the event has three
    // (a dispatcher never starts more sends than it has slots).
    let first = store
        .claim_due_deliveries(t(1), LEASE, 1, &policy())
        .await
        .unwrap();
    assert!(first.deliveries.len() <= 1);
    // The others wait, pending and due, and the next claim takes them.
    let deliveries = event_deliveries(&store, &app, &event).await;
    let states: Vec<DeliveryState> = deliveries.iter().map(|d| d.state).collect();
    assert_eq!(states.len(), 3);
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == DeliveryState::InFlight)
            .count(),
        first.deliveries.len()
    );
    assert_eq!(
        states
            .iter()
            .filter(|s| **s == DeliveryState::Pending)
            .count(),
        3 - first.deliveries.len()
    );
    let rest = store
        .claim_due_deliveries(t(2), LEASE, 10, &policy())
        .await
        .unwrap();
    let mut sent: Vec<DeliveryId> = rest
        .deliveries
        .iter()
        .chain(&first.deliveries)
        .map(|d| d.id.clone())
        .collect();
    sent.sort();
    let mut all: Vec<DeliveryId> = deliveries.iter().map(|d| d.id.clone()).collect();
    all.sort();
    assert_eq!(sent, all, "each delivery claimed once");
    // All three succeed: the event is done, nothing is left to claim.
    let records: Vec<AttemptRecord> = rest
        .deliveries
        .iter()
        .chain(&first.deliveries)
        .map(|d| record(d, Next::Succeeded, t(3)))
        .collect();
    store
        .complete_attempts(&records, &BreakerPolicy::default(), t(3))
        .await
        .unwrap();
    let deliveries = event_deliveries(&store, &app, &event).await;
    assert!(deliveries
        .iter()
        .all(|d| d.state == DeliveryState::Succeeded));
    assert!(lease_due(&store, t(100), 10).await.is_empty());
}

/// Claims of `claims` (when, limit) over `events` events, each to `endpoints`
/// endpoints: each within its limit, no delivery twice; the ones claimed.
async fn claim_fan_outs(
    engine: Engine,
    endpoints: usize,
    events: usize,
    claims: impl IntoIterator<Item = (Timestamp, u32)>,
) -> std::collections::HashSet<DeliveryId> {
    let (store, _db) = open(engine).await;
    let app = app_with_endpoints(&store, endpoints).await;
    for _ in 0..events {
        publish(&store, &app, "a", t(0)).await;
    }
    let mut claimed = std::collections::HashSet::new();
    for (at, limit) in claims {
        let claim = store
            .claim_due_deliveries(at, LEASE, limit, &policy())
            .await
            .unwrap();
        assert!(
            claim.deliveries.len() <= limit as usize,
            "{} claimed of {limit}",
            claim.deliveries.len()
        );
        for delivery in claim.deliveries {
            assert!(claimed.insert(delivery.id.clone()), "{} twice", delivery.id);
        }
    }
    claimed
}

async fn claims_of_every_size_stay_within_their_limit(engine: Engine) {
    let claims = (1..=40).cycle().take(200).map(|limit| (t(1), limit));
    let claimed = claim_fan_outs(engine, 10, 60, claims).await;
    assert_eq!(claimed.len(), 600, "every delivery claimed once");
}

async fn claims_smaller_than_an_events_fan_out_still_take_it(engine: Engine) {
    // Every claim has room for 3, every event has 5 deliveries: the events
    // still go, what a claim has no room for waiting as rows of their own.
    let claims = (1..=10).map(|second| (t(second), 3));
    let claimed = claim_fan_outs(engine, 5, 3, claims).await;
    assert_eq!(claimed.len(), 15, "every delivery claimed once");
}

/// Events published in the same millisecond are leased in the order of their
/// ids, whatever order their rows were written in. (On PostgreSQL the lane
/// locks the rows it counted without locks first, in the index's order,
/// which for equal due times is where the rows lie: counting only the rows
/// the lease takes, it once locked and leased a one-target event written
/// first in place of the ten-target one whose id comes first.)
async fn rows_due_in_one_millisecond_are_leased_in_event_id_order(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    // Ten endpoints take "wide" events, one takes "narrow" ones.
    let endpoints = (0..10)
        .map(|i| (format!("https://wide-{i}.example"), "wide"))
        .chain([("https://narrow.example".to_owned(), "narrow")]);
    for (url, event_type) in endpoints {
        let endpoint = new_endpoint(&url, Some(vec![event_type]));
        store
            .endpoints()
            .create_endpoint(&app, endpoint, t(0))
            .await
            .unwrap();
    }
    let mut ids: Vec<EventId> = (0..3).map(|_| EventId::generate()).collect();
    ids.sort();
    let [first, second, last] = [ids[0].clone(), ids[1].clone(), ids[2].clone()];
    // Written last id first: one target; then the two of ten targets.
    for (id, event_type) in [(&last, "narrow"), (&first, "wide"), (&second, "wide")] {
        let event = NewEvent {
            id: id.clone(),
            ..new_event(event_type)
        };
        let outcome = store
            .events()
            .publish(item(&app, event, None, t(0)))
            .await
            .unwrap();
        assert!(matches!(outcome, PublishOutcome::Created(_)));
    }
    // Before the lane counts as a backlog (which reads the newest first).
    let now = Timestamp::from_millis(t(0).as_millis() + 500);
    let claimed = lease_due(&store, now, 10).await;
    let events: Vec<&EventId> = claimed.iter().map(|d| &d.event_id).collect();
    assert_eq!(
        events,
        vec![&first; 10],
        "the first event by id, whole: its ten deliveries"
    );
}

/// A claim with room for three of an event's five targets sends three; the
/// other two wait in a part of the event's fan-out (no delivery row is
/// written before an outcome), under the ids the event and their places
/// give them, due now, and the next claims take them. A part's target that
/// finds no room again waits as a row of its own. Each part is a lease of its
/// own: when the first claim's holder is lost, its three come back and the
/// others stay with their holders; every delivery is recorded once.
async fn targets_a_claim_has_no_room_for_wait_in_a_part_of_their_event(engine: Engine) {
    let (store, db) = open(engine).await;
    let app = app_with_endpoints(&store, 5).await;
    let event = publish(&store, &app, "a", t(0)).await;
    let ids: Vec<DeliveryId> = (0..5)
        .map(|place| DeliveryId::of_target(&event, place))
        .collect();
    let count = |table: &'static str| {
        let db = &db;
        async move {
            raw(
                engine,
                db,
                &format!("SELECT CAST(count(*) AS TEXT) FROM {table}"),
            )
            .await
            .unwrap()
        }
    };
    let claim = |limit: u32, at: Timestamp| {
        let store = &store;
        async move { lease_due(store, at, limit).await }
    };
    let first = claim(3, t(1)).await;
    assert_eq!(
        first.iter().map(|d| &d.id).collect::<Vec<_>>(),
        ids[..3].iter().collect::<Vec<_>>(),
        "the first three places"
    );
    assert_eq!(
        count("deliveries").await,
        "0",
        "no delivery row before an outcome"
    );
    assert_eq!(
        count("fanout").await,
        "2",
        "the leased row and the waiting part"
    );
    let listed = event_deliveries(&store, &app, &event).await;
    let mut states: Vec<(&DeliveryId, DeliveryState)> =
        listed.iter().map(|d| (&d.id, d.state)).collect();
    states.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        states,
        vec![
            (&ids[0], DeliveryState::InFlight),
            (&ids[1], DeliveryState::InFlight),
            (&ids[2], DeliveryState::InFlight),
            (&ids[3], DeliveryState::Pending),
            (&ids[4], DeliveryState::Pending),
        ]
    );
    // A listing's pages, however small, hold each of them once.
    for limit in [1, 2, 10] {
        let (store, app) = (store.clone(), app.clone());
        let listed = pages(
            limit,
            hookline_store::Listings::delivery_cursor,
            move |page| {
                let (store, app) = (store.clone(), app.clone());
                async move {
                    store
                        .listings()
                        .list_deliveries(&app, &DeliveryFilter::default(), &page)
                        .await
                        .unwrap()
                }
            },
        )
        .await;
        assert_eq!(
            listed.iter().map(|d| &d.id).collect::<Vec<_>>(),
            ids.iter().rev().collect::<Vec<_>>(),
            "pages of {limit}"
        );
    }
    // Room for one, once the part (due when it was split off) has waited the
    // lane's patience: its first target goes, the other waits as a row.
    let second = claim(1, t(2)).await;
    assert_eq!(
        second.iter().map(|d| &d.id).collect::<Vec<_>>(),
        vec![&ids[3]],
        "the part"
    );
    assert_eq!(count("deliveries").await, "1", "the one without room again");
    let third = claim(10, t(2)).await;
    assert_eq!(
        third.iter().map(|d| &d.id).collect::<Vec<_>>(),
        vec![&ids[4]],
        "the last, at once"
    );
    // The first claim's holder is lost: its lease ends, its three come back;
    // the others' leases are their own and have not ended.
    let later = t(1) + LEASE + Duration::from_millis(1);
    let others: Vec<AttemptRecord> = second
        .iter()
        .chain(&third)
        .map(|d| record(d, Next::Succeeded, t(2)))
        .collect();
    store
        .complete_attempts(&others, &BreakerPolicy::default(), t(2))
        .await
        .unwrap();
    let again = claim(10, later).await;
    let mut taken: Vec<&DeliveryId> = again.iter().map(|d| &d.id).collect();
    taken.sort();
    assert_eq!(
        taken,
        ids[..3].iter().collect::<Vec<_>>(),
        "the lost three, once each"
    );
    let records: Vec<AttemptRecord> = again
        .iter()
        .map(|d| record(d, Next::Succeeded, later))
        .collect();
    store
        .complete_attempts(&records, &BreakerPolicy::default(), later)
        .await
        .unwrap();
    let listed = event_deliveries(&store, &app, &event).await;
    let mut states: Vec<(&DeliveryId, DeliveryState, u32)> = listed
        .iter()
        .map(|d| (&d.id, d.state, d.attempts))
        .collect();
    states.sort_by(|a, b| a.0.cmp(b.0));
    assert_eq!(
        states,
        ids.iter()
            .map(|id| (id, DeliveryState::Succeeded, 1))
            .collect::<Vec<_>>(),
        "each delivered once"
    );
    assert_eq!(count("fanout").await, "0", "every part done");
}

/// Two parts of one event due in the same millisecond (a lease given back
/// beside the part split off it) are counted one after the other: a claim
/// with room for the first takes it. (Summed together as one tie, neither
/// fitted the claim nor was the lane's head alone, and the lane stalled.)
async fn two_parts_of_an_event_due_in_one_millisecond_are_leased_one_by_one(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_endpoints(&store, 5).await;
    let event = publish(&store, &app, "a", t(0)).await;
    let ids: Vec<DeliveryId> = (0..5)
        .map(|place| DeliveryId::of_target(&event, place))
        .collect();
    let first = lease_due(&store, t(1), 3).await;
    assert_eq!(first.len(), 3);
    // Given back at t(1), the millisecond the part was split off in.
    store
        .events()
        .release_deliveries(&[(first[0].id.clone(), first[0].lease_token.clone())], t(1))
        .await
        .unwrap();
    let soon = Timestamp::from_millis(t(1).as_millis() + 500);
    let again = lease_due(&store, soon, 3).await;
    let mut taken: Vec<&DeliveryId> = again.iter().map(|d| &d.id).collect();
    taken.sort();
    assert_eq!(
        taken,
        ids[..3].iter().collect::<Vec<_>>(),
        "the publish row's three"
    );
}

/// One turn can lease an event's delivery that has a row of its own (a retry)
/// beside the same event's fan-out row: each outcome moves only its own.
async fn an_events_row_and_its_fanout_targets_leased_together_keep_apart(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    for url in ["https://a.example", "https://b.example"] {
        store
            .endpoints()
            .create_endpoint(&app, new_endpoint(url, None), t(0))
            .await
            .unwrap();
    }
    let event = publish(&store, &app, "a", t(0)).await;
    let first = lease_due(&store, t(1), 10).await;
    assert_eq!(first.len(), 2);
    // One fails (a retry of its own, due at t(2)); the other is lost with its
    // dispatcher, so the event's fan-out row comes back when the lease ends.
    store
        .complete_attempts(
            &[record(&first[0], Next::RetryAt(t(2)), t(1))],
            &BreakerPolicy::default(),
            t(1),
        )
        .await
        .unwrap();
    let later = t(1) + LEASE + std::time::Duration::from_secs(1);
    let again = lease_due(&store, later, 10).await;
    let mut ids: Vec<&DeliveryId> = again.iter().map(|d| &d.id).collect();
    ids.sort();
    let mut expected = vec![&first[0].id, &first[1].id];
    expected.sort();
    assert_eq!(ids, expected, "the retry and the lost one, each once");
    // The retry's outcome first, then the lost one's: both are recorded.
    let (retry, lost): (Vec<&ClaimedDelivery>, Vec<&ClaimedDelivery>) =
        again.iter().partition(|d| d.id == first[0].id);
    for claimed in [retry[0], lost[0]] {
        store
            .complete_attempts(
                &[record(claimed, Next::Succeeded, later)],
                &BreakerPolicy::default(),
                later,
            )
            .await
            .unwrap();
    }
    let deliveries = event_deliveries(&store, &app, &event).await;
    assert_eq!(
        deliveries.iter().map(|d| d.state).collect::<Vec<_>>(),
        vec![DeliveryState::Succeeded, DeliveryState::Succeeded]
    );
    assert!(lease_due(&store, later + LEASE * 2, 10).await.is_empty());
}

/// One delivery claimed twice: at t(1), and again at t(40) once that lease
/// ended. Returns the store, its app, the old owner's claim and the new one's.
async fn two_owners(engine: Engine) -> (Store, TestDb, AppId, ClaimedDelivery, ClaimedDelivery) {
    let (store, db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    publish(&store, &app, "a", t(0)).await;
    let old = lease_due(&store, t(1), 1).await.remove(0);
    let new = lease_due(&store, t(40), 1).await.remove(0);
    assert_eq!(old.id, new.id);
    assert_ne!(old.lease_token, new.lease_token);
    (store, db, app, old, new)
}

async fn stale_lease_cannot_overwrite_the_new_owner(engine: Engine) {
    let (store, _db, app, old, new) = two_owners(engine).await;
    // The first owner finishes late: its attempt is on record, but the state stays the new owner's.
    store
        .complete_attempts(
            &[record(&old, Next::Dead(DeadReason::ClientError), t(41))],
            &BreakerPolicy::default(),
            t(41),
        )
        .await
        .unwrap();
    let delivery = store
        .events()
        .get_delivery(&app, &new.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(delivery.state, DeliveryState::InFlight);
    store
        .complete_attempts(
            &[record(&new, Next::Succeeded, t(42))],
            &BreakerPolicy::default(),
            t(42),
        )
        .await
        .unwrap();
    let delivery = store
        .events()
        .get_delivery(&app, &new.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(delivery.state, DeliveryState::Succeeded);
    assert_eq!(attempts_of(&store, &app, &new.id).await.len(), 2);
}

/// An expired lease's holder and the new owner finish the same delivery, and
/// both records reach one batch: the new owner's writes the delivery (its
/// attempt in the row), and the old one's attempt is on record all the same.
async fn both_owners_attempts_are_on_record_when_one_batch_holds_them(engine: Engine) {
    let (store, _db, app, old, new) = two_owners(engine).await;
    let mut late = record(&old, Next::RetryAt(t(100)), t(2));
    late.status_code = Some(503);
    let mut ok = record(&new, Next::Succeeded, t(41));
    ok.status_code = Some(200);
    store
        .complete_attempts(&[late, ok], &BreakerPolicy::default(), t(42))
        .await
        .unwrap();
    let delivery = store
        .events()
        .get_delivery(&app, &new.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(delivery.state, DeliveryState::Succeeded);
    let attempts = attempts_of(&store, &app, &new.id).await;
    let mut seen: Vec<(Timestamp, Option<u16>)> = attempts
        .iter()
        .map(|a| (a.started_at, a.status_code))
        .collect();
    seen.sort();
    assert_eq!(seen, [(t(2), Some(503)), (t(41), Some(200))]);
}

async fn release_returns_work_unattempted(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    publish(&store, &app, "a", t(0)).await;
    let claimed = lease_due(&store, t(1), 1).await.remove(0);
    store
        .events()
        .release_deliveries(&[(claimed.id.clone(), claimed.lease_token.clone())], t(2))
        .await
        .unwrap();
    let delivery = store
        .events()
        .get_delivery(&app, &claimed.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (delivery.state, delivery.attempts, delivery.due_at),
        (DeliveryState::Pending, 0, t(2))
    );
    assert_eq!(lease_due(&store, t(2), 1).await.len(), 1);
}

async fn pause_parks_new_and_queued_work_until_resumed(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let mut spec = new_endpoint("https://a.example", None);
    spec.headers = vec![("x-tenant".into(), "acme".into())];
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, spec, t(0))
        .await
        .unwrap();
    let queued = publish(&store, &app, "a", t(0)).await;
    let pause = EndpointPatch {
        paused: Some(true),
        ..EndpointPatch::default()
    };
    let paused = store
        .endpoints()
        .update_endpoint(&app, &endpoint.id, pause, t(1))
        .await
        .unwrap()
        .unwrap();
    assert!(paused.paused && paused.enabled);
    // Unlike a disabled endpoint, a paused one still gets new deliveries: parked.
    let fresh = publish(&store, &app, "a", t(2)).await;
    for event in [&queued, &fresh] {
        let (_, deliveries) = store
            .events()
            .get_event(&app, event)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (deliveries.len(), deliveries[0].state, deliveries[0].due_at),
            (1, DeliveryState::Pending, PARKED)
        );
    }
    assert!(lease_due(&store, t(1000), 10).await.is_empty());

    let resume = EndpointPatch {
        paused: Some(false),
        ..EndpointPatch::default()
    };
    store
        .endpoints()
        .update_endpoint(&app, &endpoint.id, resume, t(3))
        .await
        .unwrap()
        .unwrap();
    let claimed = lease_due(&store, t(3), 10).await;
    assert_eq!(
        claimed.len(),
        2,
        "both held deliveries are due at the resume"
    );
    assert_eq!(
        claimed[0].destination.headers,
        vec![("x-tenant".to_owned(), "acme".to_owned())]
    );
}

async fn rotation_keeps_the_old_secret_signing_through_its_grace(engine: Engine) {
    use hookline_core::signing::EndpointSecret;
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    let first = endpoint.secret.clone();
    let second = EndpointSecret::generate();
    let rotated = store
        .endpoints()
        .rotate_endpoint_secret(
            &app,
            &endpoint.id,
            second.clone(),
            Duration::from_secs(60),
            t(10),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.secret, second);
    assert_eq!(
        rotated
            .previous_secret
            .as_ref()
            .map(|p| (&p.secret, p.until)),
        Some((&first, t(70)))
    );
    let stored = store
        .endpoints()
        .get_endpoint(&app, &endpoint.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, rotated);

    // A claim signs with both during the grace.
    publish(&store, &app, "a", t(20)).await;
    let claimed = lease_due(&store, t(20), 10).await;
    let signing = &claimed[0].destination.signing;
    assert_eq!(signing.current, second);
    assert_eq!(signing.previous_at(t(69)), Some(&first));
    assert_eq!(signing.previous_at(t(70)), None);

    // Rotating with no grace drops the old one at once.
    let third = EndpointSecret::generate();
    let again = store
        .endpoints()
        .rotate_endpoint_secret(&app, &endpoint.id, third.clone(), Duration::ZERO, t(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.secret, again.previous_secret), (third, None));
    assert!(store
        .endpoints()
        .rotate_endpoint_secret(
            &app,
            &"ep_01J00000000000000000000000".parse().unwrap(),
            EndpointSecret::generate(),
            Duration::ZERO,
            t(31)
        )
        .await
        .unwrap()
        .is_none());
}

async fn gone_disables_endpoint_and_parks_its_queue_until_enabled(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    publish(&store, &app, "a", t(0)).await;
    let queued = publish(&store, &app, "a", t(10)).await;
    let first = lease_due(&store, t(1), 10).await.remove(0);
    let mut gone = record(&first, Next::Dead(DeadReason::Gone), t(1));
    gone.disable_endpoint = true;
    store
        .complete_attempts(&[gone], &BreakerPolicy::default(), t(1))
        .await
        .unwrap();
    let disabled = store
        .endpoints()
        .get_endpoint(&app, &endpoint.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!disabled.enabled);
    assert_eq!(disabled.disabled_reason.as_deref(), Some("gone"));

    // The queued delivery is kept, pending but parked: never claimed while disabled.
    assert!(lease_due(&store, t(1000), 10).await.is_empty());
    let (_, deliveries) = store
        .events()
        .get_event(&app, &queued)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (deliveries[0].state, deliveries[0].due_at),
        (DeliveryState::Pending, PARKED)
    );
    let dlq = dlq_of(&store, &app).await;
    assert_eq!(dlq.len(), 1, "only the 410 itself is dead");
    // New events are not fanned out to it.
    publish(&store, &app, "a", t(12)).await;
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&endpoint.id, DeliveryState::Pending)
            .await
            .unwrap(),
        1
    );

    // Enabling resumes the parked delivery at once.
    let enable = EndpointPatch {
        enabled: Some(true),
        ..Default::default()
    };
    let enabled = store
        .endpoints()
        .update_endpoint(&app, &endpoint.id, enable, t(2000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((enabled.enabled, enabled.disabled_reason), (true, None));
    let resumed = lease_due(&store, t(2000), 10).await;
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].event_id, queued);
}

async fn replay_starts_one_new_round(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    publish(&store, &app, "a", t(0)).await;
    let claimed = lease_due(&store, t(1), 1).await.remove(0);
    let mut attempt = record(&claimed, Next::Dead(DeadReason::RetriesExhausted), t(1));
    attempt.attempt_number = 5;
    store
        .complete_attempts(&[attempt], &BreakerPolicy::default(), t(1))
        .await
        .unwrap();

    // Two concurrent replays: exactly one starts the round.
    let replays: Vec<_> = (0..2)
        .map(|_| {
            let (store, app, id) = (store.clone(), app.clone(), claimed.id.clone());
            tokio::spawn(async move {
                store
                    .events()
                    .replay_delivery(&app, &id, t(100))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for replay in replays {
        outcomes.push(replay.await.unwrap());
    }
    let replayed: Vec<_> = outcomes
        .iter()
        .filter(|o| matches!(o, ReplayOutcome::Replayed(_)))
        .collect();
    assert_eq!(replayed.len(), 1, "{outcomes:?}");
    let ReplayOutcome::Replayed(delivery) = replayed[0] else {
        unreachable!()
    };
    assert_eq!(
        (
            delivery.state,
            delivery.attempts,
            delivery.round_started_at,
            delivery.due_at
        ),
        (DeliveryState::Pending, 0, t(100), t(100))
    );
    assert_eq!(delivery.dead_reason, None);
    assert!(outcomes
        .iter()
        .any(|o| matches!(o, ReplayOutcome::Unchanged(d) if d.state == DeliveryState::Pending)));

    let again = lease_due(&store, t(100), 1).await.remove(0);
    assert_eq!(
        (again.event_id, again.attempts),
        (claimed.event_id, 0),
        "same event, fresh budget"
    );
    assert_eq!(
        store
            .events()
            .replay_delivery(&app, &hookline_core::ids::DeliveryId::generate(), t(101))
            .await
            .unwrap(),
        ReplayOutcome::NotFound
    );
    let other_app = self::app(&store).await;
    assert_eq!(
        store
            .events()
            .replay_delivery(&other_app, &claimed.id, t(101))
            .await
            .unwrap(),
        ReplayOutcome::NotFound
    );
}

async fn dlq_lists_newest_first_with_cursor(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    for _ in 0..5 {
        publish(&store, &app, "a", t(0)).await;
    }
    let claimed = lease_due(&store, t(1), 10).await;
    // Dead at t(10), t(11), t(11), t(12), and one succeeded.
    for (i, claim) in claimed.iter().enumerate() {
        let completion = if i == 4 {
            Next::Succeeded
        } else {
            Next::Dead(DeadReason::ClientError)
        };
        let at = t(10 + [0, 1, 1, 2, 3][i]);
        store
            .complete_attempts(
                &[record(claim, completion, at)],
                &BreakerPolicy::default(),
                at,
            )
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut page = Page {
        limit: 2,
        before: None,
    };
    loop {
        let rows = store
            .listings()
            .list_dlq(&app, &DlqFilter::default(), &page)
            .await
            .unwrap();
        if rows.is_empty() {
            break;
        }
        page.before = Some(hookline_store::Listings::dlq_cursor(rows.last().unwrap()));
        seen.extend(rows);
    }
    assert_eq!(
        seen.len(),
        4,
        "every dead delivery once, the succeeded one not at all"
    );
    assert!(
        seen.windows(2)
            .all(|w| (w[0].dead_at, &w[0].id) > (w[1].dead_at, &w[1].id)),
        "newest first"
    );
    assert!(dlq_of(&store, &self::app(&store).await).await.is_empty());
}

async fn api_keys_by_hash_and_scope(engine: Engine) {
    let (store, _db) = open(engine).await;
    assert!(!store.apps().has_admin_key().await.unwrap());
    let app = app(&store).await;
    let portal = KeyScope::App {
        app: app.clone(),
        capabilities: [Capability::Read, Capability::Replay].into_iter().collect(),
    };
    let made = store
        .apps()
        .create_api_key("hash-app", &portal, "portal", Some(t(5_000)), t(0))
        .await
        .unwrap();
    assert!(!store.apps().has_admin_key().await.unwrap());
    store
        .apps()
        .insert_admin_key("hash-admin", "ops", t(0))
        .await
        .unwrap();
    // The bootstrap key is inserted on every start: the second time changes nothing.
    store
        .apps()
        .insert_admin_key("hash-admin", "ops", t(1))
        .await
        .unwrap();
    assert!(store.apps().has_admin_key().await.unwrap());
    let admin = store
        .apps()
        .find_api_key("hash-admin")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((admin.scope, admin.expires_at), (KeyScope::Admin, None));
    let found = store
        .apps()
        .find_api_key("hash-app")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, made);
    assert_eq!(found.scope, portal);
    assert!(!found.expired(t(4_999)));
    assert!(found.expired(t(5_000)));
    assert_eq!(store.apps().find_api_key("other").await.unwrap(), None);

    // Listing by app, and revoking every key of the app at once.
    let page = Page {
        limit: 10,
        before: None,
    };
    let other = store
        .apps()
        .create_app(
            hookline_store::NewApp {
                uid: None,
                name: "other".into(),
                portal: Default::default(),
            },
            t(0),
        )
        .await
        .unwrap();
    let other_scope = KeyScope::App {
        app: other.id.clone(),
        capabilities: Capabilities::all(),
    };
    store
        .apps()
        .create_api_key("hash-other", &other_scope, "o", None, t(0))
        .await
        .unwrap();
    let listed = store.apps().list_api_keys(Some(&app), &page).await.unwrap();
    assert_eq!(listed, vec![made]);
    assert_eq!(
        store.apps().list_api_keys(None, &page).await.unwrap().len(),
        3
    );
    assert_eq!(
        store.apps().revoke_app_keys(&app).await.unwrap(),
        vec!["hash-app".to_owned()]
    );
    assert_eq!(store.apps().find_api_key("hash-app").await.unwrap(), None);
    assert!(store
        .apps()
        .find_api_key("hash-other")
        .await
        .unwrap()
        .is_some());
    assert!(store
        .apps()
        .find_api_key("hash-admin")
        .await
        .unwrap()
        .is_some());
    assert!(store.apps().revoke_app_keys(&app).await.unwrap().is_empty());
}

/// A notification channel is an endpoint of the internal app that another
/// app owns (`hookline_core::notify`): its owner and chat format read back, and
/// an app's channels are listed by their owner, oldest first, up to a limit.
async fn notification_channels_are_the_endpoints_their_app_owns(engine: Engine) {
    use hookline_core::chat::Format;
    let (store, _db) = open(engine).await;
    store.operational().ensure_internal_app(t(0)).await.unwrap();
    let internal = hookline_core::operational::app_id();
    let acme = store
        .apps()
        .create_app(
            NewApp {
                uid: None,
                name: "Acme".into(),
                portal: Default::default(),
            },
            t(0),
        )
        .await
        .unwrap()
        .id;
    let other = store
        .apps()
        .create_app(
            NewApp {
                uid: None,
                name: "Other".into(),
                portal: Default::default(),
            },
            t(0),
        )
        .await
        .unwrap()
        .id;
    let mut made = Vec::new();
    for (owner, url, transform) in [
        (
            &acme,
            "https://hooks.slack.example/a",
            Some(Transform::Preset(Format::Slack)),
        ),
        (&other, "mailto:ops@other.example", None),
        (&acme, "mailto:ops@acme.example", None),
    ] {
        let endpoint = store
            .endpoints()
            .create_endpoint(
                &internal,
                NewEndpoint {
                    owner_app: Some(owner.clone()),
                    transform,
                    ..new_endpoint(url, Some(vec!["hookline.endpoint.failing"]))
                },
                t(1),
            )
            .await
            .unwrap();
        made.push(endpoint);
    }
    // An ordinary endpoint of the internal app is no one's channel.
    store
        .endpoints()
        .create_endpoint(
            &internal,
            new_endpoint("https://ops.example/hook", None),
            t(1),
        )
        .await
        .unwrap();
    let owned = store.endpoints().owned_endpoints(&acme, 20).await.unwrap();
    let seen: Vec<_> = owned
        .iter()
        .map(|e| (e.url.as_str(), e.transform.clone(), e.owner_app.clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "https://hooks.slack.example/a",
                Some(Transform::Preset(Format::Slack)),
                Some(acme.clone())
            ),
            ("mailto:ops@acme.example", None, Some(acme.clone())),
        ]
    );
    assert_eq!(
        store
            .endpoints()
            .owned_endpoints(&acme, 1)
            .await
            .unwrap()
            .len(),
        1
    );
    let found = store
        .endpoints()
        .get_endpoint(&internal, &made[1].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.owner_app, Some(other.clone()));
    assert!(store
        .endpoints()
        .owned_endpoints(&internal, 20)
        .await
        .unwrap()
        .is_empty());
}

async fn portal_settings_round_trip(engine: Engine) {
    use hookline_core::portal::{PortalSettings, Theme};
    let (store, _db) = open(engine).await;
    let settings = PortalSettings {
        display_name: Some("Acme Webhooks".into()),
        brand_color: Some("#0a7cff".into()),
        brand_color_dark: Some("#8ab4f8".into()),
        font: hookline_core::portal::Font::Rounded,
        language: Some(hookline_core::language::Language::He),
        logo_url: Some("https://cdn.example.com/acme.svg".into()),
        theme: Theme::Dark,
        frame_origins: vec!["https://app.acme.example".into()],
        sign_in_url: Some("https://app.acme.example/webhooks/sign-in".into()),
    };
    let created = store
        .apps()
        .create_app(
            NewApp {
                uid: None,
                name: "Acme".into(),
                portal: settings.clone(),
            },
            t(0),
        )
        .await
        .unwrap();
    let found = store
        .apps()
        .find_app(created.id.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.portal, settings);

    // A patch without settings keeps them; with settings replaces them whole.
    let renamed = store
        .apps()
        .update_app(
            &created.id,
            AppPatch {
                name: Some("Acme Inc".into()),
                ..Default::default()
            },
            t(1),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(renamed.portal, settings);
    let reset = store
        .apps()
        .update_app(
            &created.id,
            AppPatch {
                portal: Some(PortalSettings::default()),
                ..Default::default()
            },
            t(2),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reset.portal, PortalSettings::default());
    assert_eq!(
        store
            .apps()
            .find_app(created.id.as_str())
            .await
            .unwrap()
            .unwrap(),
        reset
    );
}

async fn portal_codes_open_one_session_until_they_expire(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let capabilities: Capabilities = [Capability::Read, Capability::Replay].into_iter().collect();
    store
        .apps()
        .create_portal_code(
            "code-1",
            &app,
            capabilities,
            t(3_600),
            Duration::from_secs(3_600),
            t(0),
        )
        .await
        .unwrap();
    store
        .apps()
        .create_portal_code(
            "code-2",
            &app,
            capabilities,
            t(60),
            Duration::from_secs(3_600),
            t(0),
        )
        .await
        .unwrap();

    // The first exchange makes the session: an app key with the code's
    // capabilities, ending when the code would have.
    let PortalExchange::Session(session, renewable_until) = store
        .apps()
        .exchange_portal_code("code-1", "session-1", t(10))
        .await
        .unwrap()
    else {
        panic!("the first exchange opens a session");
    };
    assert_eq!(
        session.scope,
        KeyScope::App {
            app: app.clone(),
            capabilities
        }
    );
    // It lasts its own span from sign-in (an hour), not the link's end, and
    // renews up to 12 hours after sign-in.
    assert_eq!(session.expires_at, Some(t(3_610)));
    assert_eq!(renewable_until, Some(t(10 + 12 * 3_600)));
    assert_eq!(session.name, SESSION_KEY_NAME);
    assert_eq!(
        store.apps().find_api_key("session-1").await.unwrap(),
        Some(session.clone())
    );
    // The code never becomes a key itself.
    assert_eq!(store.apps().find_api_key("code-1").await.unwrap(), None);

    // A second use, an expired code, an unknown one: no session, and why.
    assert_eq!(
        store
            .apps()
            .exchange_portal_code("code-1", "session-again", t(11))
            .await
            .unwrap(),
        PortalExchange::Used
    );
    assert_eq!(
        store
            .apps()
            .exchange_portal_code("code-2", "session-2", t(60))
            .await
            .unwrap(),
        PortalExchange::Expired
    );
    assert_eq!(
        store
            .apps()
            .exchange_portal_code("nope", "session-3", t(11))
            .await
            .unwrap(),
        PortalExchange::Unknown
    );
    for hash in ["session-again", "session-2", "session-3"] {
        assert_eq!(
            store.apps().find_api_key(hash).await.unwrap(),
            None,
            "{hash}"
        );
    }

    // Renewed while in use: its span again from the renewal, never past 12 h
    // after sign-in; a key that is no session, or a session over, is not.
    let renewed = store
        .apps()
        .renew_portal_session("session-1", t(1_000))
        .await
        .unwrap();
    assert_eq!(
        renewed,
        Some(Renewed {
            expires_at: t(4_600),
            renewable_until: t(10 + 12 * 3_600)
        })
    );
    assert_eq!(
        store
            .apps()
            .find_api_key("session-1")
            .await
            .unwrap()
            .unwrap()
            .expires_at,
        Some(t(4_600))
    );
    let late = t(10 + 12 * 3_600 - 60);
    store
        .apps()
        .renew_portal_session("session-1", t(4_000))
        .await
        .unwrap();
    let mut at = t(4_000);
    while at < late {
        at = store
            .apps()
            .renew_portal_session("session-1", at)
            .await
            .unwrap()
            .unwrap()
            .expires_at
            - Duration::from_secs(60);
    }
    let capped = store
        .apps()
        .renew_portal_session("session-1", late)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        capped.expires_at,
        t(10 + 12 * 3_600),
        "capped 12 h after sign-in"
    );
    assert_eq!(
        store
            .apps()
            .renew_portal_session("session-1", t(10 + 12 * 3_600))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .apps()
            .renew_portal_session("nope", t(20))
            .await
            .unwrap(),
        None
    );
    // An app key that is no session (even one named like one) is not renewed
    // (keys of another app, so this app's revocation below counts its sessions).
    let scope = KeyScope::App {
        app: crate::store_contract::app(&store).await,
        capabilities,
    };
    for (hash, name) in [
        ("backend-key", "backend"),
        ("named-like-one", SESSION_KEY_NAME),
    ] {
        store
            .apps()
            .create_api_key(hash, &scope, name, Some(t(3_600)), t(0))
            .await
            .unwrap();
        assert_eq!(
            store
                .apps()
                .renew_portal_session(hash, t(20))
                .await
                .unwrap(),
            None,
            "{name}"
        );
    }

    // Racing exchanges of one code open one session.
    store
        .apps()
        .create_portal_code(
            "code-3",
            &app,
            capabilities,
            t(3_600),
            Duration::from_secs(3_600),
            t(0),
        )
        .await
        .unwrap();
    let races: Vec<_> = (0..8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .apps()
                    .exchange_portal_code("code-3", &format!("race-{i}"), t(20))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for race in races {
        outcomes.push(race.await.unwrap());
    }
    let sessions = outcomes
        .iter()
        .filter(|o| matches!(o, PortalExchange::Session(..)))
        .count();
    assert_eq!(sessions, 1, "{outcomes:?}");
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, PortalExchange::Session(..) | PortalExchange::Used)));

    // Revoking the app's keys ends its sessions and the links not yet opened.
    store
        .apps()
        .create_portal_code(
            "code-4",
            &app,
            capabilities,
            t(3_600),
            Duration::from_secs(3_600),
            t(0),
        )
        .await
        .unwrap();
    let revoked = store.apps().revoke_app_keys(&app).await.unwrap();
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    assert_eq!(store.apps().find_api_key("session-1").await.unwrap(), None);
    assert_eq!(
        store
            .apps()
            .exchange_portal_code("code-4", "session-4", t(30))
            .await
            .unwrap(),
        PortalExchange::Unknown
    );
}

async fn event_type_catalog_round_trips(engine: Engine) {
    let (store, _db) = open(engine).await;
    let paid = EventType {
        name: "invoice.paid".into(),
        description: "paid".into(),
        schema: Some(serde_json::json!({"type": "object"})),
        example: Some(serde_json::json!({"amount": 1})),
        deprecated: false,
        created_at: t(1),
        updated_at: t(1),
    };
    store.catalog().create_event_type(&paid).await.unwrap();
    let taken = store.catalog().create_event_type(&paid).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    let older = EventType {
        name: "account.closed".into(),
        schema: None,
        example: None,
        ..paid.clone()
    };
    store.catalog().create_event_type(&older).await.unwrap();
    assert_eq!(
        store
            .catalog()
            .get_event_type("invoice.paid")
            .await
            .unwrap(),
        Some(paid.clone())
    );
    assert_eq!(
        store.catalog().list_event_types().await.unwrap(),
        vec![older.clone(), paid.clone()],
        "by name"
    );
    let patch = EventTypePatch {
        deprecated: Some(true),
        schema: Some(None),
        ..EventTypePatch::default()
    };
    let changed = store
        .catalog()
        .update_event_type("invoice.paid", patch, t(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            changed.deprecated,
            changed.schema.clone(),
            changed.example.clone(),
            changed.updated_at
        ),
        (true, None, paid.example.clone(), t(2))
    );
    assert_eq!(
        store
            .catalog()
            .get_event_type("invoice.paid")
            .await
            .unwrap(),
        Some(changed)
    );
    assert!(store
        .catalog()
        .update_event_type("nope", EventTypePatch::default(), t(3))
        .await
        .unwrap()
        .is_none());
    assert!(store
        .catalog()
        .delete_event_type("invoice.paid")
        .await
        .unwrap());
    assert!(!store
        .catalog()
        .delete_event_type("invoice.paid")
        .await
        .unwrap());
    assert_eq!(
        store.catalog().list_event_types().await.unwrap(),
        vec![older]
    );
}

async fn idempotency_retention_purges_old_keys(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let key = |k: &str| IdempotencyKey {
        key: k.into(),
        fingerprint: "f".into(),
    };
    store
        .events()
        .publish(item(&app, new_event("a"), Some(&key("old")), t(0)))
        .await
        .unwrap();
    store
        .events()
        .publish(item(&app, new_event("a"), Some(&key("new")), t(100)))
        .await
        .unwrap();
    assert_eq!(store.purge_idempotency_keys(t(50)).await.unwrap(), 1);
    // The old key is free again; the new one still replays.
    assert!(matches!(
        store
            .events()
            .publish(item(&app, new_event("a"), Some(&key("old")), t(101)))
            .await
            .unwrap(),
        PublishOutcome::Created(_)
    ));
    assert!(matches!(
        store
            .events()
            .publish(item(&app, new_event("a"), Some(&key("new")), t(101)))
            .await
            .unwrap(),
        PublishOutcome::Replayed(_)
    ));
    store.ping().await.unwrap();
}

async fn retention_removes_old_delivered_history_and_keeps_the_dlq(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let events: Vec<EventId> = [
        publish(&store, &app, "a", t(1)).await,
        publish(&store, &app, "a", t(1)).await,
        publish(&store, &app, "a", t(1)).await,
    ]
    .into();
    // An event nobody subscribed to (its app has no endpoint) has no delivery at all.
    let quiet_app = self::app(&store).await;
    let unsubscribed = publish(&store, &quiet_app, "a", t(1)).await;
    let mut claimed = lease_due(&store, t(2), 10).await;
    claimed.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    let (succeeded, dead, retrying) = (&claimed[0], &claimed[1], &claimed[2]);
    store
        .complete_attempts(
            &[
                record(succeeded, Next::Succeeded, t(2)),
                record(dead, Next::Dead(DeadReason::ClientError), t(2)),
                record(retrying, Next::RetryAt(t(60)), t(2)),
            ],
            &BreakerPolicy::default(),
            t(3),
        )
        .await
        .unwrap();
    // Ids carry their creation time: a cutoff before it removes nothing.
    let real_now = Timestamp::from_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64,
    );
    let before = real_now - Duration::from_secs(3600);
    assert_eq!(
        store.purge_history(before).await.unwrap(),
        Purged::default()
    );

    let after = real_now + Duration::from_secs(3600);
    let purged = store.purge_history(after).await.unwrap();
    assert_eq!(
        purged,
        Purged {
            deliveries: 1,
            attempts: 1,
            events: 2,
        },
        "the succeeded delivery, its attempt, its event and the unsubscribed event"
    );
    assert!(!purged.full());
    assert_eq!(
        store.events().get_event(&app, &events[0]).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .events()
            .get_event(&quiet_app, &unsubscribed)
            .await
            .unwrap(),
        None
    );
    // The dead-letter entry, with its event and its attempt, and the retrying delivery stay.
    let (_, kept) = store
        .events()
        .get_event(&app, &events[1])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept[0].state, DeliveryState::Dead);
    let attempts = attempts_of(&store, &app, &dead.id).await;
    assert_eq!(attempts.len(), 1);
    let (_, kept) = store
        .events()
        .get_event(&app, &events[2])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept[0].state, DeliveryState::Pending);
    // Nothing is left to remove.
    assert_eq!(store.purge_history(after).await.unwrap(), Purged::default());
    // Reclaiming the removed rows' space (a VACUUM on PostgreSQL) keeps what stays.
    store.reclaim_space().await.unwrap();
    let (_, kept) = store
        .events()
        .get_event(&app, &events[1])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept[0].state, DeliveryState::Dead);
    assert_eq!(attempts_of(&store, &app, &dead.id).await.len(), 1);
}

/// Every page of a listing, `limit` at a time, the cursor being the last id.
async fn pages<T, F, Fut>(limit: u32, id: impl Fn(&T) -> String, mut fetch: F) -> Vec<T>
where
    F: FnMut(Page) -> Fut,
    Fut: std::future::Future<Output = Vec<T>>,
{
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let rows = fetch(Page { limit, before }).await;
        assert!(rows.len() <= limit as usize);
        let full = rows.len() == limit as usize;
        before = rows.last().map(&id);
        all.extend(rows);
        if !full {
            return all;
        }
    }
}

async fn listings_filter_and_page_newest_first(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let a = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://b.example", None), t(0))
        .await
        .unwrap();
    let mut events = Vec::new();
    for n in 0..5 {
        let event_type = if n % 2 == 0 { "x" } else { "y" };
        events.push((publish(&store, &app, event_type, t(n)).await, event_type));
    }
    let deliveries = |filter: DeliveryFilter| {
        let (store, app) = (store.clone(), app.clone());
        pages(2, hookline_store::Listings::delivery_cursor, move |page| {
            let (store, app, filter) = (store.clone(), app.clone(), filter.clone());
            async move {
                store
                    .listings()
                    .list_deliveries(&app, &filter, &page)
                    .await
                    .unwrap()
            }
        })
    };

    let all = deliveries(DeliveryFilter::default()).await;
    assert_eq!(all.len(), 10);
    assert!(
        all.windows(2)
            .all(|w| (&w[0].event_id, &w[0].id) > (&w[1].event_id, &w[1].id)),
        "newest event first"
    );
    let of_a = deliveries(DeliveryFilter {
        endpoint: Some(a.id.clone()),
        ..Default::default()
    })
    .await;
    assert_eq!(of_a.len(), 5);
    assert!(of_a.iter().all(|d| d.endpoint_id == a.id));
    let of_x = deliveries(DeliveryFilter {
        event_type: Some("x".into()),
        ..Default::default()
    })
    .await;
    assert_eq!(of_x.len(), 6);
    let x_events: Vec<&EventId> = events.iter().filter(|e| e.1 == "x").map(|e| &e.0).collect();
    assert!(of_x.iter().all(|d| x_events.contains(&&d.event_id)));
    let of_one = deliveries(DeliveryFilter {
        event: Some(events[1].0.clone()),
        ..Default::default()
    })
    .await;
    assert_eq!(of_one.len(), 2);
    assert!(of_one.iter().all(|d| d.event_id == events[1].0));

    // One attempt answered 500 (retry later), one 200: states and last status filter.
    let claimed = lease_due(&store, t(10), 2).await;
    assert_eq!(claimed.len(), 2);
    let failed = record(&claimed[0], Next::RetryAt(t(60)), t(10));
    let mut ok = record(&claimed[1], Next::Succeeded, t(10));
    ok.status_code = Some(200);
    store
        .complete_attempts(&[failed, ok], &BreakerPolicy::default(), t(11))
        .await
        .unwrap();
    let with = |state: Option<StateFilter>, last_status: Option<StatusFilter>| DeliveryFilter {
        state,
        last_status,
        ..Default::default()
    };
    let ids = |rows: Vec<Delivery>| rows.into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(
        ids(deliveries(with(Some(StateFilter::Succeeded), None)).await),
        [claimed[1].id.clone()]
    );
    assert_eq!(
        deliveries(with(Some(StateFilter::Pending), None))
            .await
            .len(),
        9
    );
    assert!(deliveries(with(Some(StateFilter::Parked), None))
        .await
        .is_empty());
    assert_eq!(
        ids(deliveries(with(None, Some(StatusFilter::Class(5)))).await),
        [claimed[0].id.clone()]
    );
    assert_eq!(
        ids(deliveries(with(None, Some(StatusFilter::Exact(200)))).await),
        [claimed[1].id.clone()]
    );

    // The attempts of the endpoint that got the failed one, by verdict and status.
    let failed_endpoint = claimed[0].endpoint_id.clone();
    let attempts = |filter: AttemptFilter| {
        let (store, app, endpoint) = (store.clone(), app.clone(), failed_endpoint.clone());
        async move {
            store
                .listings()
                .list_endpoint_attempts(
                    &app,
                    &endpoint,
                    &filter,
                    &Page {
                        limit: 10,
                        before: None,
                    },
                )
                .await
                .unwrap()
        }
    };
    let retried = attempts(AttemptFilter {
        verdict: Some(AttemptVerdict::Retry),
        status: Some(StatusFilter::Exact(500)),
        ..Default::default()
    })
    .await;
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].delivery_id, claimed[0].id);
    assert!(attempts(AttemptFilter {
        verdict: Some(AttemptVerdict::Delivered),
        ..Default::default()
    })
    .await
    .iter()
    .all(|a| a.endpoint_id == failed_endpoint && a.status_code == Some(200)));
    assert!(attempts(AttemptFilter {
        started: TimeRange {
            since: Some(t(11)),
            until: None
        },
        ..Default::default()
    })
    .await
    .is_empty());

    // Events: newest first, by type.
    let of_y = pages(
        1,
        |e: &Event| e.id.to_string(),
        |page| {
            let (store, app) = (store.clone(), app.clone());
            async move {
                store
                    .listings()
                    .list_events(
                        &app,
                        &EventFilter {
                            event_type: Some("y".into()),
                            ..Default::default()
                        },
                        &page,
                    )
                    .await
                    .unwrap()
            }
        },
    )
    .await;
    assert_eq!(
        of_y.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        [events[3].0.clone(), events[1].0.clone()]
    );
}

/// What a delivery's view shows beside its row: its event's type, and the
/// status of its newest attempt wherever that attempt is kept (in the row, or
/// in `attempts`), none when the newest got no answer or there was none yet
/// (a `fanout` target); another app's delivery is not answered.
async fn a_deliverys_facts_are_its_events_type_and_its_newest_attempts_status(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let other = app_with_an_endpoint(&store).await;
    let (ok, timed_out, recovered) = (
        publish(&store, &app, "order.paid", t(1)).await,
        publish(&store, &app, "order.shipped", t(1)).await,
        publish(&store, &app, "order.refunded", t(1)).await,
    );
    let first = lease_due(&store, t(1), 10).await;
    assert_eq!(first.len(), 3);
    let of = |claims: &[ClaimedDelivery], event: &EventId| {
        claims
            .iter()
            .find(|c| c.event_id == *event)
            .unwrap()
            .clone()
    };
    let mut answered = record(&of(&first, &ok), Next::Succeeded, t(2));
    answered.status_code = Some(200);
    let records = [
        answered,
        record(&of(&first, &timed_out), Next::RetryAt(t(60)), t(2)),
        record(&of(&first, &recovered), Next::RetryAt(t(60)), t(2)),
    ];
    store
        .complete_attempts(&records, &BreakerPolicy::default(), t(3))
        .await
        .unwrap();
    let second = lease_due(&store, t(60), 10).await;
    assert_eq!(second.len(), 2);
    let mut no_answer = record(&of(&second, &timed_out), Next::RetryAt(t(120)), t(61));
    no_answer.status_code = None;
    no_answer.response_body = None;
    no_answer.error = Some((TransportError::Timeout, "timed out".into()));
    let mut answered = record(&of(&second, &recovered), Next::Succeeded, t(61));
    answered.status_code = Some(204);
    store
        .complete_attempts(&[no_answer, answered], &BreakerPolicy::default(), t(62))
        .await
        .unwrap();
    let waiting = publish(&store, &app, "invoice.created", t(63)).await;
    publish(&store, &other, "order.paid", t(63)).await;

    let page = Page {
        limit: 10,
        before: None,
    };
    let every = |app: AppId| {
        let (store, page) = (store.clone(), page.clone());
        async move {
            store
                .listings()
                .list_deliveries(&app, &DeliveryFilter::default(), &page)
                .await
                .unwrap()
        }
    };
    let (listed, theirs) = (every(app.clone()).await, every(other.clone()).await);
    assert_eq!((listed.len(), theirs.len()), (4, 1));
    let asked: Vec<Delivery> = listed.iter().chain(&theirs).cloned().collect();
    let facts = store.listings().delivery_facts(&app, &asked).await.unwrap();
    let got: BTreeMap<String, (String, Option<u16>)> = listed
        .iter()
        .map(|d| {
            let f = &facts[&d.id];
            (
                d.event_id.to_string(),
                (
                    f.event_type.clone(),
                    f.newest.as_ref().and_then(|a| a.status_code),
                ),
            )
        })
        .collect();
    let want = |event: &EventId, event_type: &str, status: Option<u16>| {
        (event.to_string(), (event_type.to_owned(), status))
    };
    assert_eq!(
        got,
        BTreeMap::from([
            want(&ok, "order.paid", Some(200)),
            want(&timed_out, "order.shipped", None),
            want(&recovered, "order.refunded", Some(204)),
            want(&waiting, "invoice.created", None),
        ])
    );
    assert_eq!(facts.len(), 4, "the other app's delivery is not answered");
    // The newest attempt is the whole attempt, of either half (the timed-out
    // delivery's second is an `attempts` row, the others' first is in theirs).
    let newest = |event: &EventId| {
        let d = listed.iter().find(|d| d.event_id == *event).unwrap();
        facts[&d.id].newest.clone()
    };
    let late = newest(&timed_out).unwrap();
    assert_eq!(
        (late.attempt_number, late.error_kind, late.status_code),
        (2, Some(TransportError::Timeout), None)
    );
    assert_eq!(newest(&ok).unwrap().verdict, AttemptVerdict::Delivered);
    assert_eq!(newest(&waiting), None);
    // The endpoint's gate comes along: enabled, not paused, breaker closed.
    for d in &listed {
        let gate = facts[&d.id].endpoint.as_ref().expect("the endpoint exists");
        assert!(gate.enabled && !gate.paused, "{gate:?}");
        assert_eq!(gate.breaker.state, BreakerState::Closed);
    }
    assert!(store
        .listings()
        .delivery_facts(&app, &[])
        .await
        .unwrap()
        .is_empty());
}

/// The id of `app`'s one endpoint.
async fn only_endpoint(store: &Store, app: &AppId) -> EndpointId {
    store
        .endpoints()
        .list_endpoints(
            app,
            &Page {
                limit: 1,
                before: None,
            },
        )
        .await
        .unwrap()
        .remove(0)
        .id
}

/// An endpoint's timeline: its attempts counted in their buckets (the latest
/// `cap` at most, saying from when the counts are whole), and the marks its
/// breaker and switches left in the transactions that changed them; retention
/// removes old marks.
async fn an_endpoints_timeline_counts_its_attempts_and_marks_its_changes(engine: Engine) {
    use hookline_core::timeline::{MarkKind, Window};
    let (store, _db) = open(engine).await;
    let app = app_with_an_endpoint(&store).await;
    let endpoint = only_endpoint(&store, &app).await;
    let breaker = BreakerPolicy {
        failure_threshold: 2,
        ..BreakerPolicy::default()
    };
    for _ in 0..3 {
        publish(&store, &app, "order.paid", t(1)).await;
    }
    let claimed = lease_due(&store, t(1), 10).await;
    assert_eq!(claimed.len(), 3);
    // Two failures open the breaker; a success later closes it.
    store
        .complete_attempts(
            &[
                record(&claimed[0], Next::RetryAt(t(600)), t(2)),
                record(&claimed[1], Next::RetryAt(t(600)), t(2)),
            ],
            &breaker,
            t(3),
        )
        .await
        .unwrap();
    let mut delivered = record(&claimed[2], Next::Succeeded, t(64));
    delivered.status_code = Some(200);
    store
        .complete_attempts(&[delivered], &breaker, t(65))
        .await
        .unwrap();
    // Paused, resumed, disabled by hand.
    for (at, patch) in [
        (
            70,
            EndpointPatch {
                paused: Some(true),
                ..Default::default()
            },
        ),
        (
            80,
            EndpointPatch {
                paused: Some(false),
                ..Default::default()
            },
        ),
        (
            90,
            EndpointPatch {
                enabled: Some(false),
                ..Default::default()
            },
        ),
    ] {
        store
            .endpoints()
            .update_endpoint(&app, &endpoint, patch, t(at))
            .await
            .unwrap()
            .unwrap();
    }

    let layout = Window::Hour.layout(t(100));
    let timeline = store
        .endpoints()
        .endpoint_timeline(&app, &endpoint, &layout, 1000)
        .await
        .unwrap();
    let buckets = layout.fill(&timeline.counts);
    let busy: Vec<(Timestamp, u64, u64)> = buckets
        .iter()
        .filter(|b| b.delivered + b.failed > 0)
        .map(|b| (b.start, b.delivered, b.failed))
        .collect();
    assert_eq!(busy, vec![(t(0), 0, 2), (t(60), 1, 0)]);
    assert_eq!(timeline.complete_since, None, "every attempt is counted");
    let marks: Vec<(Timestamp, MarkKind, Option<&str>)> = timeline
        .marks
        .iter()
        .map(|m| (m.at, m.kind, m.reason.as_deref()))
        .collect();
    assert_eq!(
        marks,
        vec![
            (t(3), MarkKind::BreakerOpened, None),
            (t(65), MarkKind::BreakerClosed, None),
            (t(70), MarkKind::Paused, None),
            (t(80), MarkKind::Resumed, None),
            (t(90), MarkKind::Disabled, Some("manual")),
        ]
    );

    // Capped: the latest two attempts, whole from the older's start.
    let capped = store
        .endpoints()
        .endpoint_timeline(&app, &endpoint, &layout, 2)
        .await
        .unwrap();
    let counted: u64 = capped.counts.iter().map(|(_, d, f)| d + f).sum();
    assert_eq!((counted, capped.complete_since), (2, Some(t(2))));

    // Another endpoint's timeline is its own.
    let other = app_with_an_endpoint(&store).await;
    let theirs = only_endpoint(&store, &other).await;
    let empty = store
        .endpoints()
        .endpoint_timeline(&other, &theirs, &layout, 1000)
        .await
        .unwrap();
    assert!(
        empty.counts.is_empty() && empty.marks.is_empty(),
        "{empty:?}"
    );

    // Retention takes the marks older than its cut-off.
    store.purge_history(t(75)).await.unwrap();
    let kept: Vec<MarkKind> = store
        .endpoints()
        .endpoint_timeline(&app, &endpoint, &layout, 1000)
        .await
        .unwrap()
        .marks
        .iter()
        .map(|m| m.kind)
        .collect();
    assert_eq!(kept, vec![MarkKind::Resumed, MarkKind::Disabled]);
}

/// The endpoints in trouble: failing (its breaker open), refused (deliveries
/// dead since the asked time, the newest named), paused with a delivery held,
/// disabled; each with what waits, and when it was switched. A healthy
/// endpoint, and a paused one with nothing held, are in no trouble.
async fn an_apps_troubles_are_its_failing_switched_off_and_refused_endpoints(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let mut ids = Vec::new();
    for types in [
        vec!["order.paid"],
        vec!["invoice.paid"],
        vec!["user.created"],
        vec!["user.deleted"],
        vec!["order.paid"],
        vec!["nothing.ever"],
    ] {
        ids.push(
            store
                .endpoints()
                .create_endpoint(&app, new_endpoint("https://a.example", Some(types)), t(0))
                .await
                .unwrap()
                .id,
        );
    }
    let (failing, refused, paused, disabled, healthy, idle) =
        (&ids[0], &ids[1], &ids[2], &ids[3], &ids[4], &ids[5]);
    let switch = |id: &EndpointId, patch: EndpointPatch, at: Timestamp| {
        let (store, app, id) = (store.clone(), app.clone(), id.clone());
        async move {
            store
                .endpoints()
                .update_endpoint(&app, &id, patch, at)
                .await
                .unwrap()
                .unwrap();
        }
    };
    let pause = || EndpointPatch {
        paused: Some(true),
        ..Default::default()
    };
    switch(paused, pause(), t(5)).await;
    switch(idle, pause(), t(5)).await;
    switch(
        disabled,
        EndpointPatch {
            enabled: Some(false),
            ..Default::default()
        },
        t(6),
    )
    .await;
    for event_type in [
        "order.paid",
        "order.paid",
        "invoice.paid",
        "invoice.paid",
        "user.created",
    ] {
        publish(&store, &app, event_type, t(10)).await;
    }
    let claimed = lease_due(&store, t(10), 20).await;
    let of = |endpoint: &EndpointId| -> Vec<ClaimedDelivery> {
        claimed
            .iter()
            .filter(|c| c.endpoint_id == *endpoint)
            .cloned()
            .collect()
    };
    let breaker = BreakerPolicy {
        failure_threshold: 2,
        ..BreakerPolicy::default()
    };
    let mut records: Vec<AttemptRecord> = of(failing)
        .iter()
        .map(|c| record(c, Next::RetryAt(t(600)), t(11)))
        .collect();
    for (n, c) in of(refused).iter().enumerate() {
        let mut refusal = record(c, Next::Dead(DeadReason::ClientError), t(11 + n as i64));
        refusal.status_code = Some(401);
        // A 4xx is an answer: the breaker counts it healthy (`classify::breaker_signal`).
        refusal.signal = Signal::Healthy;
        records.push(refusal);
    }
    for c in of(healthy) {
        let mut ok = record(&c, Next::Succeeded, t(11));
        ok.status_code = Some(200);
        records.push(ok);
    }
    assert_eq!(records.len(), 6);
    store
        .complete_attempts(&records, &breaker, t(12))
        .await
        .unwrap();

    let troubles = store.endpoints().troubles(&app, t(0)).await.unwrap();
    let got: Vec<(&EndpointId, bool, bool, bool, u64, u64)> = troubles
        .iter()
        .map(|t| (&t.id, t.enabled, t.paused, t.failing(), t.waiting, t.dead))
        .collect();
    let mut want = vec![
        (failing, true, false, true, 2, 0),
        (refused, true, false, false, 0, 2),
        (paused, true, true, false, 1, 0),
        (disabled, false, false, false, 0, 0),
    ];
    want.sort_by_key(|w| w.0.to_string());
    assert_eq!(
        got, want,
        "in id order; the healthy and the idle paused endpoint are not in trouble"
    );
    let find = |id: &EndpointId| troubles.iter().find(|t| t.id == *id).unwrap();
    assert_eq!(find(failing).breaker.state, BreakerState::Open);
    assert_eq!(find(failing).breaker.failing_since, Some(t(12)));
    let newest = find(refused).newest_dead.as_ref().unwrap();
    assert_eq!(
        (newest.endpoint_id.clone(), newest.dead_reason),
        (refused.clone(), Some(DeadReason::ClientError))
    );
    assert_eq!(find(refused).first_dead_at, Some(t(12)));
    assert_eq!(find(paused).switched_at, Some(t(5)));
    assert_eq!(find(disabled).switched_at, Some(t(6)));
    let _ = (healthy, idle);
    // Deaths before the asked time do not count: the refusing endpoint is fine then.
    let later = store.endpoints().troubles(&app, t(13)).await.unwrap();
    assert!(later.iter().all(|t| t.id != *refused), "{later:?}");
}

/// A delivery written at its first attempt's outcome holds that attempt in
/// its row; its later attempts are rows of their own. Every read of attempts
/// sees both alike: by delivery, by id, by endpoint, the newest attempt's
/// status, the endpoint's health and stats.
async fn attempts_read_alike_whether_their_delivery_row_holds_them_or_not(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    publish(&store, &app, "x", t(1)).await;
    publish(&store, &app, "x", t(1)).await;
    let mut first = lease_due(&store, t(1), 10).await;
    first.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(first.len(), 2);
    // One answers 503 (a retry at t(60)), the other 200: one batch.
    let mut failed = record(&first[0], Next::RetryAt(t(60)), t(2));
    failed.status_code = Some(503);
    let mut ok = record(&first[1], Next::Succeeded, t(2));
    ok.status_code = Some(200);
    store
        .complete_attempts(&[failed, ok], &BreakerPolicy::default(), t(3))
        .await
        .unwrap();
    let retry = lease_due(&store, t(60), 10).await;
    assert_eq!(retry.len(), 1);
    assert_eq!(retry[0].id, first[0].id);
    let mut again = record(&retry[0], Next::Succeeded, t(61));
    again.status_code = Some(200);
    store
        .complete_attempts(&[again], &BreakerPolicy::default(), t(62))
        .await
        .unwrap();

    // By delivery: newest first, each as it was recorded, on every page size.
    let retried = attempts_of(&store, &app, &first[0].id).await;
    let fields = |a: &Attempt| {
        (
            a.attempt_number,
            a.started_at,
            a.status_code,
            a.verdict,
            a.next_attempt_at,
            a.duration_ms,
            a.response_body.clone(),
            a.url.clone(),
            a.sent
                .as_ref()
                .map(|s| (s.signature.clone(), s.event_id.clone())),
            a.response_headers.clone(),
        )
    };
    let expect = |n, at, status, verdict, next| {
        (
            n,
            at,
            Some(status),
            verdict,
            next,
            12,
            Some("oops".to_owned()),
            Some("https://a.example".to_owned()),
            Some(("v1,test".to_owned(), first[0].event_id.clone())),
            vec![("server".to_owned(), "test".to_owned())],
        )
    };
    assert_eq!(
        retried.iter().map(fields).collect::<Vec<_>>(),
        [
            expect(2, t(61), 200, AttemptVerdict::Delivered, None),
            expect(1, t(2), 503, AttemptVerdict::Retry, Some(t(60))),
        ]
    );
    let paged = pages(
        1,
        |a: &Attempt| a.id.to_string(),
        |page| {
            let (store, app, id) = (store.clone(), app.clone(), first[0].id.clone());
            async move {
                store
                    .listings()
                    .list_attempts(&app, &id, &page)
                    .await
                    .unwrap()
            }
        },
    )
    .await;
    assert_eq!(paged, retried);
    let once = attempts_of(&store, &app, &first[1].id).await;
    assert_eq!(once.len(), 1);
    assert_eq!(
        (once[0].attempt_number, once[0].status_code),
        (1, Some(200))
    );

    // By id, each of the three.
    let every: Vec<Attempt> = retried.iter().chain(&once).cloned().collect();
    for attempt in &every {
        assert_eq!(
            store
                .events()
                .get_attempt(&app, &attempt.id)
                .await
                .unwrap()
                .as_ref(),
            Some(attempt)
        );
    }

    // By endpoint: all three once, newest first, a page at a time.
    let by_endpoint = pages(
        1,
        |a: &Attempt| a.id.to_string(),
        |page| {
            let (store, app, endpoint) = (store.clone(), app.clone(), endpoint.id.clone());
            async move {
                store
                    .listings()
                    .list_endpoint_attempts(&app, &endpoint, &AttemptFilter::default(), &page)
                    .await
                    .unwrap()
            }
        },
    )
    .await;
    assert_eq!(by_endpoint.len(), 3);
    assert!(
        by_endpoint.windows(2).all(|w| w[0].id > w[1].id),
        "newest first"
    );
    let mut sorted = every.clone();
    sorted.sort_by(|a, b| b.id.cmp(&a.id));
    assert_eq!(by_endpoint, sorted);
    let first_tries = store
        .listings()
        .list_endpoint_attempts(
            &app,
            &endpoint.id,
            &AttemptFilter {
                started: TimeRange {
                    since: None,
                    until: Some(t(3)),
                },
                ..Default::default()
            },
            &Page {
                limit: 10,
                before: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(first_tries.len(), 2);

    // The newest attempt's status: the retried delivery's is now 200.
    let by_status = |status| {
        let (store, app) = (store.clone(), app.clone());
        async move {
            let mut ids: Vec<DeliveryId> = store
                .listings()
                .list_deliveries(
                    &app,
                    &DeliveryFilter {
                        last_status: Some(status),
                        ..Default::default()
                    },
                    &Page {
                        limit: 10,
                        before: None,
                    },
                )
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect();
            ids.sort();
            ids
        }
    };
    assert!(by_status(StatusFilter::Class(5)).await.is_empty());
    assert_eq!(
        by_status(StatusFilter::Exact(200)).await,
        [first[0].id.clone(), first[1].id.clone()]
    );

    // The endpoint's health and stats count all three.
    let health = store
        .endpoints()
        .endpoint_health(&app, &endpoint.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((health.recent_attempts, health.recent_delivered), (3, 2));
    let sample = store
        .endpoints()
        .endpoint_attempt_sample(&app, &endpoint.id, t(0), 10)
        .await
        .unwrap();
    assert_eq!(sample.len(), 3);
    assert_eq!(sample.iter().filter(|s| s.delivered).count(), 2);
}

async fn bulk_replay_works_in_batches_resumes_and_stops_when_cancelled(engine: Engine) {
    let (store, _db) = open(engine).await;
    let app = app(&store).await;
    let a = store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://a.example", None), t(0))
        .await
        .unwrap();
    store
        .endpoints()
        .create_endpoint(&app, new_endpoint("https://b.example", None), t(0))
        .await
        .unwrap();
    for _ in 0..5 {
        publish(&store, &app, "a", t(1)).await;
    }
    let claimed = lease_due(&store, t(2), 10).await;
    let dead: Vec<AttemptRecord> = claimed
        .iter()
        .map(|c| record(c, Next::Dead(DeadReason::ClientError), t(2)))
        .collect();
    store
        .complete_attempts(&dead, &BreakerPolicy::default(), t(3))
        .await
        .unwrap();
    let of_a = DlqFilter {
        endpoint: Some(a.id.clone()),
        ..Default::default()
    };
    assert_eq!(
        store
            .replays()
            .count_dlq(&app, &DlqFilter::default())
            .await
            .unwrap(),
        10
    );
    assert_eq!(store.replays().count_dlq(&app, &of_a).await.unwrap(), 5);

    let StartedReplay::Started(job) = store
        .replays()
        .start_replay_job(&app, &of_a, t(10))
        .await
        .unwrap()
    else {
        panic!("a new replay starts");
    };
    assert_eq!(
        (job.state, job.total, job.done, job.replayed),
        (ReplayJobState::Running, 5, 0, 0)
    );
    assert_eq!(
        store
            .replays()
            .start_replay_job(&app, &of_a, t(10))
            .await
            .unwrap(),
        StartedReplay::AlreadyRunning(job.clone()),
        "the same replay while it runs is that job"
    );
    assert_eq!(
        store.replays().take_replay_job(t(10), LEASE).await.unwrap(),
        Some(job.id.clone())
    );
    assert_eq!(
        store.replays().take_replay_job(t(10), LEASE).await.unwrap(),
        None,
        "leased"
    );

    let first = store
        .replays()
        .work_replay_job(&job.id, t(11), 2, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (first.state, first.done, first.replayed),
        (ReplayJobState::Running, 2, 2)
    );
    // A single replay of one the job has not reached yet: the job skips it.
    let dlq = store
        .listings()
        .list_dlq(
            &app,
            &of_a,
            &Page {
                limit: 10,
                before: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(dlq.len(), 3);
    assert!(matches!(
        store
            .events()
            .replay_delivery(&app, &dlq[0].id, t(12))
            .await
            .unwrap(),
        ReplayOutcome::Replayed(_)
    ));
    // Its worker stopped: after the lease another one resumes at the cursor.
    assert_eq!(
        store.replays().take_replay_job(t(12), LEASE).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .replays()
            .take_replay_job(t(11) + LEASE + Duration::from_secs(1), LEASE)
            .await
            .unwrap(),
        Some(job.id.clone())
    );
    let second = store
        .replays()
        .work_replay_job(&job.id, t(50), 2, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (second.state, second.done, second.replayed),
        (ReplayJobState::Running, 4, 4)
    );
    let last = store
        .replays()
        .work_replay_job(&job.id, t(51), 2, LEASE)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            last.state,
            last.total,
            last.done,
            last.replayed,
            last.skipped(),
            last.finished_at
        ),
        (ReplayJobState::Completed, 5, 5, 4, 1, Some(t(51)))
    );
    assert_eq!(
        store
            .replays()
            .work_replay_job(&job.id, t(52), 2, LEASE)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&a.id, DeliveryState::Pending)
            .await
            .unwrap(),
        5,
        "every one of a's is pending again, once"
    );
    assert_eq!(store.replays().count_dlq(&app, &of_a).await.unwrap(), 0);
    assert_eq!(
        store
            .replays()
            .cancel_replay_job(&app, &job.id, t(53))
            .await
            .unwrap()
            .unwrap()
            .state,
        ReplayJobState::Completed,
        "a finished replay stays finished"
    );

    // Another replay, cancelled before any batch: it replays nothing.
    let StartedReplay::Started(other) = store
        .replays()
        .start_replay_job(&app, &DlqFilter::default(), t(60))
        .await
        .unwrap()
    else {
        panic!("a new replay starts");
    };
    assert_eq!(other.total, 5, "b's");
    let cancelled = store
        .replays()
        .cancel_replay_job(&app, &other.id, t(61))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (cancelled.state, cancelled.finished_at),
        (ReplayJobState::Cancelled, Some(t(61)))
    );
    assert_eq!(
        store
            .replays()
            .work_replay_job(&other.id, t(62), 10, LEASE)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .replays()
            .take_replay_job(t(1000), LEASE)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .replays()
            .count_dlq(&app, &DlqFilter::default())
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        store
            .replays()
            .get_replay_job(&app, &other.id)
            .await
            .unwrap(),
        Some(cancelled)
    );
}

/// The store's background tasks — the publish committers and, on PostgreSQL, the
/// wake relay with its `LISTEN` connection — end when the last clone is dropped:
/// a process (or a test) that lets go of its store leaves nothing running.
async fn a_dropped_store_ends_its_background_tasks(engine: Engine) {
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = alive();
    let (store, _db) = open(engine).await;
    store.start_wake_relay().await.unwrap();
    let app = app(&store).await;
    let clone = store.clone();
    publish(&clone, &app, "a.b", t(0)).await;
    assert!(alive() > before, "committers (and the relay) run");
    drop(store);
    assert!(alive() > before, "a clone keeps them");
    drop(clone);
    crate::helpers::wait_until(
        Duration::from_secs(10),
        "the store's tasks to end",
        || async { (alive() == before).then_some(()) },
    )
    .await;
}
