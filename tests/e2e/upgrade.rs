//! Upgrades: a database written by the previous release migrates forward with
//! every pending delivery and all history kept, and drains.

use std::time::Duration;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::ids::{AppId, AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::model::{AttemptVerdict, DeliveryState};
use hookline_core::signing::EndpointSecret;
use hookline_core::time::Timestamp;
use hookline_store::*;

use crate::helpers::{attempts_of, both_engines, Claims, Engine, Publishes, TestDb};

/// The newest migration of each earlier release: `bd24c4a` (3) and `d979ff1` (4).
const EARLIER_SCHEMAS: [i64; 2] = [3, 4];

both_engines!(a_database_of_an_earlier_release_migrates_and_drains);

fn t(secs: i64) -> Timestamp {
    Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
}

/// Applies the migrations up to and including `version` (as that release did)
/// to the database at `url`, then runs `statements`, inserts `events` (id, app,
/// body, created_at) and one stored answer of an idempotency key (app, key,
/// fingerprint, body, created_at), through the engine's native driver.
macro_rules! old_release {
    ($pool:ty, $migrator:expr, $url:expr, $version:expr, $statements:expr, $events:expr, $answer:expr) => {{
        use sqlx::Executor;
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
    let record = AttemptRecord {
        delivery_id: claimed[0].id.clone(),
        event_id: claimed[0].event_id.clone(),
        app_id: claimed[0].app_id.clone(),
        endpoint_id: claimed[0].endpoint_id.clone(),
        lease_token: claimed[0].lease_token.clone(),
        attempt_number: 1,
        started_at: t(2),
        duration: Duration::from_millis(3),
        status_code: Some(200),
        response_body: None,
        error: None,
        destination: claimed[0].destination.clone(),
        signature: Some("v1,test".into()),
        response_headers: Vec::new(),
        response_truncated: false,
        trigger: hookline_core::model::AttemptTrigger::First,
        next: Next::Succeeded,
        signal: hookline_core::breaker::Signal::Healthy,
        disable_endpoint: false,
    };
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
