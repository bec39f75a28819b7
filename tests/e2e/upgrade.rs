//! Upgrades: a database written by the previous release migrates forward with
//! every pending delivery and all history kept, and drains.

use std::time::Duration;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::ids::{AppId, AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::model::{AttemptVerdict, DeliveryState};
use hookline_core::signing::EndpointSecret;
use hookline_core::time::Timestamp;
use hookline_store::*;

use crate::helpers::{attempts_of, both_engines, dlq_of, Claims, Engine, Publishes, TestDb};
use hookline_core::model::DeadReason;

/// The newest migration of each earlier release: `bd24c4a` (3) and `d979ff1` (4).
const EARLIER_SCHEMAS: [i64; 2] = [3, 4];

both_engines!(a_database_of_an_earlier_release_migrates_and_drains);

fn t(secs: i64) -> Timestamp {
    Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
}

/// A pool of the engine's native driver on the database at `url`, with the
/// migrations up to and including `version` applied (as that release did).
macro_rules! pool_at_version {
    ($pool:ty, $migrator:expr, $url:expr, $version:expr) => {{
        let pool = <$pool>::connect($url).await.unwrap();
        let mut migrator = $migrator;
        migrator.migrations = migrator
            .migrations
            .iter()
            .filter(|m| m.version <= $version)
            .cloned()
            .collect::<Vec<_>>()
            .into();
        migrator.run(&pool).await.unwrap();
        pool
    }};
}

/// Migrates the database at `url` to `version`, then runs `statements`,
/// inserts `events` (id, app, body, created_at) and one stored answer of an
/// idempotency key (app, key, fingerprint, body, created_at), through the
/// engine's native driver.
macro_rules! old_release {
    ($pool:ty, $migrator:expr, $url:expr, $version:expr, $statements:expr, $events:expr, $answer:expr) => {{
        use sqlx::Executor;
        let pool = pool_at_version!($pool, $migrator, $url, $version);
        pool.execute($statements).await.unwrap();
        for (id, app, body, at) in $events {
            sqlx::query(
                "INSERT INTO events (id, app_id, event_type, body, created_at) \
                 VALUES ($1, $2, 'order.paid', $3, $4)",
            )
            .bind(id)
            .bind(app)
            .bind(body)
            .bind(at)
            .execute(&pool)
            .await
            .unwrap();
        }
        let (app, key, fingerprint, body, at) = $answer;
        sqlx::query(
            "INSERT INTO idempotency_keys (app_id, key, fingerprint, status, response, created_at) \
             VALUES ($1, $2, $3, 202, $4, $5)",
        )
        .bind(app)
        .bind(key)
        .bind(fingerprint)
        .bind(body)
        .bind(at)
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }};
}

async fn a_database_of_an_earlier_release_migrates_and_drains(engine: Engine) {
    for version in EARLIER_SCHEMAS {
        migrates_and_drains_from(engine, version).await;
    }
}

async fn migrates_and_drains_from(engine: Engine, version: i64) {
    let db = TestDb::new(engine).await;
    // Rows exactly as the previous release wrote them: an app, an endpoint, an event
    // still pending delivery, and an event delivered with its attempt.
    let (app, endpoint) = (AppId::generate(), EndpointId::generate());
    let (pending_event, done_event) = (EventId::generate(), EventId::generate());
    let (pending, done) = (DeliveryId::generate(), DeliveryId::generate());
    let attempt = AttemptId::generate();
    let secret = EndpointSecret::generate();
    let body = br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{}}"#;
    let (at, ms) = (t(0).as_millis(), t(1).as_millis());
    let statements = format!(
        "INSERT INTO apps (id, uid, name, created_at, updated_at) VALUES ('{app}', 'acme', 'Acme', {at}, {at}); \
         INSERT INTO endpoints (id, app_id, url, description, enabled, secret, created_at, updated_at) \
           VALUES ('{endpoint}', '{app}', 'https://hooks.example/in', '', 1, '{secret}', {at}, {at}); \
         INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts, round_started_at, created_at, updated_at) \
           VALUES ('{pending}', '{app}', '{pending_event}', '{endpoint}', 'pending', {at}, 0, {at}, {at}, {at}), \
                  ('{done}', '{app}', '{done_event}', '{endpoint}', 'succeeded', {ms}, 1, {at}, {at}, {ms}); \
         INSERT INTO attempts (id, delivery_id, app_id, endpoint_id, attempt_number, started_at, duration_ms, status_code, verdict) \
           VALUES ('{attempt}', '{done}', '{app}', '{endpoint}', 1, {ms}, 12, 200, 'delivered');;",
        secret = secret.expose(),
    );
    let events = [&pending_event, &done_event].map(|e| (e.as_str(), app.as_str(), &body[..], at));
    // The previous releases stored the API's rendered answer under a key.
    let answer = format!(r#"{{"id":"{done_event}"}}"#);
    let stored = (app.as_str(), "order-41", "fp-41", answer.as_bytes(), at);
    match engine {
        Engine::Sqlite => old_release!(
            sqlx::SqlitePool,
            sqlx::migrate!("../migrations/sqlite"),
            &format!("{}?mode=rwc", db.url),
            version,
            statements.as_str(),
            events,
            stored
        ),
        Engine::Postgres => old_release!(
            sqlx::PgPool,
            sqlx::migrate!("../migrations/postgres"),
            &db.url,
            version,
            statements.as_str(),
            events,
            stored
        ),
    }

    // Today's Hookline opens it and migrates forward.
    let store = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let migrated = store
        .endpoints()
        .get_endpoint(&app, &endpoint)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(migrated.secret, secret);
    assert_eq!(
        migrated.max_in_flight, None,
        "new settings start at their default"
    );
    // The history is all there.
    let (_, deliveries) = store
        .events()
        .get_event(&app, &done_event)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(deliveries[0].state, DeliveryState::Succeeded);
    let attempts = attempts_of(&store, &app, &done).await;
    assert_eq!(
        attempts
            .iter()
            .map(|a| (a.verdict, a.status_code))
            .collect::<Vec<_>>(),
        [(AttemptVerdict::Delivered, Some(200))]
    );
    // The pending delivery is claimed with what sending needs, and completes.
    let claimed = store
        .claim_due_deliveries(
            t(2),
            Duration::from_secs(30),
            10,
            &hookline_dispatch::turn::ClaimPolicy::default(),
        )
        .await
        .unwrap()
        .deliveries;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (
            &claimed[0].id,
            claimed[0].destination.url.as_str(),
            &*claimed[0].body
        ),
        (&pending, "https://hooks.example/in", &body[..])
    );
    let record = success(&claimed[0], t(2));
    assert_eq!(
        (record.attempt_number, record.trigger),
        (1, hookline_core::model::AttemptTrigger::First)
    );
    store
        .complete_attempts(&[record], &BreakerPolicy::default(), t(2))
        .await
        .unwrap();
    let drained = store
        .events()
        .get_delivery(&app, &pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(drained.state, DeliveryState::Succeeded);
    // A key answered by the earlier release gets that answer again, byte for byte,
    // and no second event.
    let again = PublishItem {
        app: app.clone(),
        event: NewEvent {
            id: EventId::generate(),
            event_type: "order.paid".into(),
            ordering_key: None,
            body: body.to_vec(),
            only_endpoint: None,
        },
        key: Some(IdempotencyKey {
            key: "order-41".into(),
            fingerprint: "fp-41".into(),
        }),
        now: t(3),
    };
    assert_eq!(
        store.events().publish(again).await.unwrap(),
        PublishOutcome::ReplayedAnswer(StoredResponse {
            status: 202,
            body: answer.into_bytes(),
        })
    );
    assert_eq!(store.listings().count_events(&app).await.unwrap(), 2);
}

/// The newest migration at `d55b255` (engine v3), the base engine v4 migrates
/// from: PostgreSQL's `0017_leases_apart`, SQLite's `0015_leases_apart`.
const ENGINE_V3_SCHEMA: (i64, i64) = (15, 17);

both_engines!(a_database_of_engine_v3_carries_every_delivery_state_forward);

/// One delivery in each state engine v3 leaves behind, written as `d55b255`
/// wrote them (raw rows, so this arrangement stays what that release wrote
/// while the engine changes; the secrets sealed by `Keyring::seal`, whose
/// format is that release's): after today's migrations each ends as it would
/// have — pending and leased work is sent (a lease that ended is taken back,
/// one still running is left to its holder until it ends),
/// a retry waits for its time and is attempt 2, a parked delivery waits for its
/// endpoint, a dead one stays in the DLQ until replayed, a succeeded one keeps
/// its history, and an ordered successor waits for its head.
async fn a_database_of_engine_v3_carries_every_delivery_state_forward(engine: Engine) {
    let db = TestDb::new(engine).await;
    let keyring = crate::helpers::store_config(&db.url).keyring;
    let app = AppId::generate();
    let (live, off) = (EndpointId::generate(), EndpointId::generate());
    let [pending, leased, live_lease, retrying, parked, dead, done, head, successor] =
        std::array::from_fn(|_| DeliveryId::generate());
    let events: [EventId; 9] = std::array::from_fn(|_| EventId::generate());
    let [e_pending, e_leased, e_live_lease, e_retrying, e_parked, e_dead, e_done, e_head, e_successor] =
        events.clone();
    let (retry_attempt, dead_attempt, done_attempt) = (
        AttemptId::generate(),
        AttemptId::generate(),
        AttemptId::generate(),
    );
    let secret = EndpointSecret::generate();
    let (sealed_live, sealed_off) = (
        keyring.seal(secret.expose(), live.as_str()),
        keyring.seal(secret.expose(), off.as_str()),
    );
    let key_id = keyring.current().id().to_owned();
    let body = br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{}}"#;
    let [t0, t10, t20, t30, t200, t250] = [0, 10, 20, 30, 200, 250].map(|s| t(s).as_millis());
    let parked_at = PARKED.as_millis();
    let statements = format!(
        "INSERT INTO sealing (id, key_id) VALUES (1, '{key_id}'); \
         INSERT INTO apps (id, uid, name, created_at, updated_at) VALUES ('{app}', 'acme', 'Acme', {t0}, {t0}); \
         INSERT INTO endpoints (id, app_id, url, description, enabled, secret, created_at, updated_at) \
           VALUES ('{live}', '{app}', 'https://hooks.example/live', '', TRUE, '{sealed_live}', {t0}, {t0}); \
         INSERT INTO endpoints (id, app_id, url, description, enabled, secret, created_at, updated_at, disabled_reason) \
           VALUES ('{off}', '{app}', 'https://hooks.example/off', '', FALSE, '{sealed_off}', {t0}, {t0}, 'manual'); \
         INSERT INTO ordering_keys (app_id, ordering_key, last_sequence) VALUES ('{app}', 'order-7', 2); \
         INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, lease_token, attempts, \
             round_started_at, last_attempt_at, dead_reason, dead_at, created_at, updated_at, ordering_key, sequence) VALUES \
           ('{pending}', '{app}', '{e_pending}', '{live}', 'pending', {t0}, NULL, 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, NULL, NULL), \
           ('{leased}', '{app}', '{e_leased}', '{live}', 'in_flight', {t30}, 'lease-of-a-dead-process', 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, NULL, NULL), \
           ('{live_lease}', '{app}', '{e_live_lease}', '{live}', 'in_flight', {t250}, 'lease-of-a-live-process', 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, NULL, NULL), \
           ('{retrying}', '{app}', '{e_retrying}', '{live}', 'pending', {t200}, NULL, 1, {t0}, {t10}, NULL, NULL, {t0}, {t10}, NULL, NULL), \
           ('{parked}', '{app}', '{e_parked}', '{off}', 'pending', {parked_at}, NULL, 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, NULL, NULL), \
           ('{dead}', '{app}', '{e_dead}', '{live}', 'dead', {t20}, NULL, 1, {t0}, {t20}, 'client_error', {t20}, {t0}, {t20}, NULL, NULL), \
           ('{done}', '{app}', '{e_done}', '{live}', 'succeeded', {t10}, NULL, 1, {t0}, {t10}, NULL, NULL, {t0}, {t10}, NULL, NULL), \
           ('{head}', '{app}', '{e_head}', '{live}', 'pending', {t0}, NULL, 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, 'order-7', 1), \
           ('{successor}', '{app}', '{e_successor}', '{live}', 'blocked', {t0}, NULL, 0, {t0}, NULL, NULL, NULL, {t0}, {t0}, 'order-7', 2); \
         INSERT INTO attempts (id, delivery_id, app_id, endpoint_id, attempt_number, started_at, duration_ms, \
             status_code, response_body, verdict, next_attempt_at, dead_reason) VALUES \
           ('{retry_attempt}', '{retrying}', '{app}', '{live}', 1, {t10}, 9, 503, 'busy', 'retry', {t200}, NULL), \
           ('{dead_attempt}', '{dead}', '{app}', '{live}', 1, {t20}, 7, 400, 'bad request', 'dead', NULL, 'client_error'), \
           ('{done_attempt}', '{done}', '{app}', '{live}', 1, {t10}, 5, 200, 'ok', 'delivered', NULL, NULL);"
    );
    let ordered = |e: &EventId| match e {
        e if *e == e_head => (Some("order-7"), Some(1i64)),
        e if *e == e_successor => (Some("order-7"), Some(2)),
        _ => (None, None),
    };
    macro_rules! engine_v3_database {
        ($pool:ty, $migrator:expr, $url:expr, $version:expr) => {{
            use sqlx::Executor;
            let pool = pool_at_version!($pool, $migrator, $url, $version);
            pool.execute(statements.as_str()).await.unwrap();
            for event in &events {
                let (key, sequence) = ordered(event);
                sqlx::query(
                    "INSERT INTO events (id, app_id, event_type, ordering_key, sequence, body, created_at) \
                     VALUES ($1, $2, 'order.paid', $3, $4, $5, $6)",
                )
                .bind(event.as_str())
                .bind(app.as_str())
                .bind(key)
                .bind(sequence)
                .bind(&body[..])
                .bind(t0)
                .execute(&pool)
                .await
                .unwrap();
            }
            pool.close().await;
        }};
    }
    match engine {
        Engine::Sqlite => engine_v3_database!(
            sqlx::SqlitePool,
            sqlx::migrate!("../migrations/sqlite"),
            &format!("{}?mode=rwc", db.url),
            ENGINE_V3_SCHEMA.0
        ),
        Engine::Postgres => engine_v3_database!(
            sqlx::PgPool,
            sqlx::migrate!("../migrations/postgres"),
            &db.url,
            ENGINE_V3_SCHEMA.1
        ),
    }

    // Today's Hookline opens it and migrates forward.
    let store = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let state_of = |id: &DeliveryId| {
        let (store, app, id) = (&store, &app, id.clone());
        async move {
            let delivery = store
                .events()
                .get_delivery(app, &id)
                .await
                .unwrap()
                .unwrap();
            (delivery.state, delivery.attempts)
        }
    };
    let policy = hookline_dispatch::turn::ClaimPolicy::default();
    let lease = Duration::from_secs(30);
    let claim = |now| {
        let (store, policy) = (&store, &policy);
        async move {
            let mut claimed = store
                .claim_due_deliveries(now, lease, 100, policy)
                .await
                .unwrap()
                .deliveries;
            claimed.sort_by(|a, b| a.id.cmp(&b.id));
            claimed
        }
    };
    let succeed = |claimed: &[ClaimedDelivery], at| {
        let records: Vec<AttemptRecord> = claimed.iter().map(|c| success(c, at)).collect();
        let store = &store;
        async move {
            store
                .complete_attempts(&records, &BreakerPolicy::default(), at)
                .await
                .unwrap();
        }
    };
    let ids = |claimed: &[ClaimedDelivery]| -> Vec<DeliveryId> {
        claimed.iter().map(|c| c.id.clone()).collect()
    };
    let sorted = |mut v: Vec<DeliveryId>| {
        v.sort();
        v
    };

    // The history is all there: the succeeded delivery with its attempt, the
    // dead one in the DLQ with its reason.
    assert_eq!(state_of(&done).await, (DeliveryState::Succeeded, 1));
    assert_eq!(
        attempts_of(&store, &app, &done)
            .await
            .iter()
            .map(|a| (a.verdict, a.status_code))
            .collect::<Vec<_>>(),
        [(AttemptVerdict::Delivered, Some(200))]
    );
    let dlq = dlq_of(&store, &app).await;
    assert_eq!(
        dlq.iter()
            .map(|d| (d.id.clone(), d.dead_reason))
            .collect::<Vec<_>>(),
        [(dead.clone(), Some(DeadReason::ClientError))]
    );

    // At t(100): the pending delivery, the leased one whose lease ended at
    // t(30), and the partition's head — not the one whose lease runs to t(250),
    // not the retry (due at t(200)), not the parked one, not the successor
    // behind its head.
    let first = claim(t(100)).await;
    assert_eq!(
        ids(&first),
        sorted(vec![pending.clone(), leased.clone(), head.clone()])
    );
    assert!(first.iter().all(|c| c.attempts == 0 && &*c.body == body));
    assert_eq!(state_of(&successor).await, (DeliveryState::Blocked, 0));
    assert_eq!(state_of(&parked).await, (DeliveryState::Pending, 0));
    succeed(&first, t(101)).await;
    for id in [&pending, &leased, &head] {
        assert_eq!(state_of(id).await, (DeliveryState::Succeeded, 1));
    }

    // The head's success releases its successor.
    let second = claim(t(102)).await;
    assert_eq!(ids(&second), vec![successor.clone()]);
    succeed(&second, t(103)).await;
    assert_eq!(state_of(&successor).await, (DeliveryState::Succeeded, 1));

    // The retry is due at t(200), and is its second attempt.
    assert_eq!(claim(t(150)).await.len(), 0);
    let third = claim(t(200)).await;
    assert_eq!(ids(&third), vec![retrying.clone()]);
    assert_eq!(third[0].attempts, 1, "one attempt made before the upgrade");
    succeed(&third, t(201)).await;
    assert_eq!(state_of(&retrying).await, (DeliveryState::Succeeded, 2));
    assert_eq!(attempts_of(&store, &app, &retrying).await.len(), 2);

    // The parked delivery goes once its endpoint is enabled; the live lease,
    // once it has ended.
    store
        .endpoints()
        .update_endpoint(
            &app,
            &off,
            EndpointPatch {
                enabled: Some(true),
                ..EndpointPatch::default()
            },
            t(300),
        )
        .await
        .unwrap()
        .unwrap();
    let fourth = claim(t(300)).await;
    assert_eq!(
        ids(&fourth),
        sorted(vec![parked.clone(), live_lease.clone()])
    );
    let urls = |claimed: &[ClaimedDelivery]| -> Vec<(DeliveryId, String)> {
        claimed
            .iter()
            .map(|c| (c.id.clone(), c.destination.url.to_string()))
            .collect()
    };
    assert!(urls(&fourth).contains(&(parked.clone(), "https://hooks.example/off".into())));
    succeed(&fourth, t(301)).await;
    assert_eq!(state_of(&parked).await, (DeliveryState::Succeeded, 1));
    assert_eq!(state_of(&live_lease).await, (DeliveryState::Succeeded, 1));

    // The dead delivery waits in the DLQ until replayed, then goes with its event id.
    assert_eq!(claim(t(400)).await.len(), 0);
    assert!(matches!(
        store
            .events()
            .replay_delivery(&app, &dead, t(400))
            .await
            .unwrap(),
        ReplayOutcome::Replayed(_)
    ));
    let fifth = claim(t(400)).await;
    assert_eq!(
        fifth
            .iter()
            .map(|c| (&c.id, &c.event_id))
            .collect::<Vec<_>>(),
        [(&dead, &e_dead)]
    );
    succeed(&fifth, t(401)).await;
    assert_eq!(state_of(&dead).await, (DeliveryState::Succeeded, 1));
    assert_eq!(attempts_of(&store, &app, &dead).await.len(), 2);
    assert_eq!(claim(t(500)).await.len(), 0, "nothing left, nothing twice");
}

/// A 200 for `claimed`, answered at `at`.
fn success(claimed: &ClaimedDelivery, at: Timestamp) -> AttemptRecord {
    AttemptRecord {
        delivery_id: claimed.id.clone(),
        event_id: claimed.event_id.clone(),
        app_id: claimed.app_id.clone(),
        endpoint_id: claimed.endpoint_id.clone(),
        lease_token: claimed.lease_token.clone(),
        attempt_number: claimed.attempts + 1,
        started_at: at,
        duration: Duration::from_millis(3),
        status_code: Some(200),
        response_body: None,
        error: None,
        destination: claimed.destination.clone(),
        signature: Some("v1,test".into()),
        response_headers: Vec::new(),
        response_truncated: false,
        endpoint_sequence: None,
        transformed: None,
        batch: None,
        trigger: hookline_core::model::AttemptTrigger::of(
            claimed.probe,
            claimed.attempts,
            claimed.replayed,
        ),
        next: Next::Succeeded,
        signal: hookline_core::breaker::Signal::Healthy,
        disable_endpoint: false,
    }
}
