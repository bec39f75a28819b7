//! The store's delivery-policy contract, on both engines, with an explicit clock:
//! breakers, ordered partitions, rate limits, lanes and per-endpoint caps.

use std::collections::BTreeSet;
use std::time::Duration;

use hookline_core::breaker::{BreakerPolicy, BreakerState, Signal};
use hookline_core::concurrency::{ConcurrencyPolicy, Pressure};
use hookline_core::ids::{AppId, EndpointId, EventId};
use hookline_core::model::{DeadReason, DeliveryState};
use hookline_core::ordering::OnDead;
use hookline_core::time::Timestamp;
use hookline_dispatch::room::{Handoff, Room};
use hookline_dispatch::turn::ClaimPolicy;
use hookline_store::*;

use crate::helpers::{
    attempts_of, both_engines, dlq_of, item, new_endpoint, Claims, Engine, Publishes, TestDb,
};

const LEASE: Duration = Duration::from_secs(30);

fn t(secs: i64) -> Timestamp {
    Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
}

fn breaker() -> BreakerPolicy {
    BreakerPolicy {
        failure_threshold: 3,
        cooldown: Duration::from_secs(10),
        max_cooldown: Duration::from_secs(60),
        disable_after: Duration::from_secs(3600),
        ..BreakerPolicy::default()
    }
}

fn policy() -> ClaimPolicy {
    ClaimPolicy {
        probe_hold: LEASE,
        rate_lookahead: Duration::from_secs(1),
        ..ClaimPolicy::default()
    }
}

/// A dispatcher's room with a fixed limit of `cap` requests per endpoint.
fn fixed_room(cap: u32) -> std::sync::Arc<Room> {
    Room::new(ConcurrencyPolicy::default().with_ceiling(Some(cap)))
}

/// A dispatcher's room with `count` requests in flight to `endpoint`, at most `cap` per endpoint.
fn room_with(endpoint: &EndpointId, count: usize, cap: u32) -> std::sync::Arc<Room> {
    let room = fixed_room(cap);
    for _ in 0..count {
        room.start(endpoint);
    }
    room
}

/// A finished attempt of `claimed`: 503 when it failed, 200 otherwise.
fn attempt(claimed: &ClaimedDelivery, next: Next, signal: Signal, at: Timestamp) -> AttemptRecord {
    AttemptRecord {
        delivery_id: claimed.id.clone(),
        event_id: claimed.event_id.clone(),
        app_id: claimed.app_id.clone(),
        endpoint_id: claimed.endpoint_id.clone(),
        lease_token: claimed.lease_token.clone(),
        attempt_number: claimed.attempts + 1,
        started_at: at,
        duration: Duration::from_millis(5),
        status_code: Some(if signal == Signal::Failed { 503 } else { 200 }),
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
        next,
        signal,
        disable_endpoint: false,
    }
}

struct Fixture {
    store: Store,
    app: AppId,
    endpoint: Endpoint,
    /// The dispatcher publishes hand fresh deliveries to, if any.
    handoff: Option<std::sync::Arc<Handoff>>,
    _db: TestDb,
}

async fn fixture(engine: Engine, configure: impl FnOnce(&mut NewEndpoint)) -> Fixture {
    let db = TestDb::new(engine).await;
    let store = Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let app = store
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
        .id;
    let mut new = new_endpoint("https://a.example", None);
    configure(&mut new);
    let endpoint = store
        .endpoints()
        .create_endpoint(&app, new, t(0))
        .await
        .unwrap();
    Fixture {
        store,
        app,
        endpoint,
        handoff: None,
        _db: db,
    }
}

impl Fixture {
    async fn publish(&self, key: Option<&str>, now: Timestamp) -> EventId {
        let event = new_event("a", key);
        let id = event.id.clone();

        let handoff = self
            .handoff
            .as_deref()
            .map(|h| h as &hookline_api::publish::DispatchHandoff);
        hookline_api::publish::publish_group(
            &self.store,
            handoff,
            &[item(&self.app, event, None, now)],
        )
        .await
        .unwrap();
        id
    }

    /// Another tenant beside the fixture's app.
    async fn another_app(&self) -> AppId {
        let new = NewApp {
            uid: None,
            name: "other".into(),
            portal: Default::default(),
        };
        self.store.apps().create_app(new, t(0)).await.unwrap().id
    }

    /// A new endpoint of `app` at `url`, for every event type.
    async fn endpoint_of(&self, app: &AppId, url: &str) -> Endpoint {
        let endpoints = self.store.endpoints();
        let new = new_endpoint(url, None);
        endpoints.create_endpoint(app, new, t(0)).await.unwrap()
    }

    /// Publishes one event of `app` straight to the store, due at `now`.
    async fn publish_in(&self, app: &AppId, now: Timestamp) -> EventId {
        let event = new_event("a", None);
        let id = event.id.clone();
        self.store
            .events()
            .publish(item(app, event, None, now))
            .await
            .unwrap();
        id
    }

    /// Publishes `count` events of `app` in one group, due at `now`; their ids.
    async fn publish_many(&self, app: &AppId, count: usize, now: Timestamp) -> Vec<EventId> {
        let items: Vec<PublishItem> = (0..count)
            .map(|_| item(app, new_event("a", None), None, now))
            .collect();
        self.store.events().publish_group(&items).await.unwrap();
        items.into_iter().map(|i| i.event.id).collect()
    }

    /// `count` more apps, each with an endpoint and `events` events due at
    /// `now`: tenants behind a backlog. Their apps and endpoints.
    async fn tenants(
        &self,
        count: usize,
        events: usize,
        now: Timestamp,
    ) -> Vec<(AppId, EndpointId)> {
        let mut tenants = Vec::new();
        for n in 0..count {
            let app = self.another_app().await;
            let endpoint = self
                .endpoint_of(&app, &format!("https://t{n}.example"))
                .await;
            self.publish_many(&app, events, now).await;
            tenants.push((app, endpoint.id));
        }
        tenants
    }

    async fn claim(&self, now: Timestamp, limit: u32) -> Vec<ClaimedDelivery> {
        self.claim_as(now, limit, &policy()).await.deliveries
    }

    /// A claim by a dispatcher with `policy` (its slots: what it has in flight).
    async fn claim_as(&self, now: Timestamp, limit: u32, policy: &ClaimPolicy) -> Claim {
        self.store
            .claim_due_deliveries(now, LEASE, limit, policy)
            .await
            .unwrap()
    }

    async fn finish(
        &self,
        claimed: &[ClaimedDelivery],
        next: Next,
        signal: Signal,
        now: Timestamp,
    ) {
        let records: Vec<AttemptRecord> = claimed
            .iter()
            .map(|c| attempt(c, next, signal, now))
            .collect();
        self.store
            .complete_attempts(&records, &breaker(), now)
            .await
            .unwrap();
    }

    async fn health(&self) -> EndpointHealth {
        self.store
            .endpoints()
            .endpoint_health(&self.app, &self.endpoint.id)
            .await
            .unwrap()
            .unwrap()
    }

    async fn delivery_of(&self, event: &EventId) -> Delivery {
        self.store
            .events()
            .get_event(&self.app, event)
            .await
            .unwrap()
            .unwrap()
            .1
            .remove(0)
    }
}

both_engines!(
    breaker_opens_defers_without_charging_and_admits_one_probe,
    failed_probe_reopens_with_a_longer_cooldown,
    failing_past_the_span_disables_and_parks,
    ordered_partition_releases_one_at_a_time,
    dead_head_skips_or_blocks_by_endpoint_option,
    rate_limit_hands_out_spaced_slots_cluster_wide,
    fresh_work_is_claimed_beside_a_retry_backlog,
    saturated_endpoints_are_skipped,
    an_endpoint_ceiling_bounds_a_claim_before_the_dispatcher_knows_it,
    deferral_past_max_age_dead_letters,
    a_saturated_endpoints_backlog_does_not_hide_other_work,
    a_tenants_backlog_does_not_hide_another_tenants_fresh_work,
    small_claims_send_another_tenants_whole_event_beside_a_backlog,
    the_app_pass_claims_a_tenants_event_buried_in_another_tenants_backlog,
    the_app_pass_lets_each_tenant_go_first_in_turn,
    small_app_passes_reach_every_tenant_in_turn,
    concurrent_groups_sharing_keys_neither_deadlock_nor_leave_gaps,
    one_turn_records_attempts_then_claims_what_they_released,
    the_breaker_moves_a_queue_larger_than_one_statement,
    publishes_hand_fresh_work_to_the_local_dispatcher_within_its_room,
    a_released_partition_successor_goes_ahead_of_later_work,
    a_turn_runs_while_the_last_commits_and_sees_what_it_wrote,
);

async fn breaker_opens_defers_without_charging_and_admits_one_probe(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let events: Vec<EventId> = {
        let mut ids = Vec::new();
        for _ in 0..5 {
            ids.push(f.publish(None, t(0)).await);
        }
        ids
    };
    // Three failures in a row open the breaker (threshold 3).
    let first = f.claim(t(1), 3).await;
    assert_eq!(first.len(), 3);
    f.finish(&first, Next::RetryAt(t(2)), Signal::Failed, t(1))
        .await;
    let health = f.health().await;
    assert_eq!(health.breaker.state, BreakerState::Open);
    assert_eq!(health.breaker.consecutive_failures, 3);
    assert_eq!(health.breaker.next_probe_at, Some(t(11)));
    assert_eq!(health.last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(health.recent_attempts, 3);

    // Open: everything waits for the probe time, uncharged.
    assert!(f.claim(t(5), 10).await.is_empty());
    for event in &events {
        let d = f.delivery_of(event).await;
        assert_eq!(d.due_at, t(11), "deferred to the probe time");
    }
    // The cool-down is over: two concurrent claims, exactly one probe between them.
    let (a, b) = tokio::join!(f.claim(t(11), 10), f.claim(t(11), 10));
    let probes: Vec<_> = a.iter().chain(b.iter()).collect();
    assert_eq!(probes.len(), 1, "exactly one probe");
    assert!(probes[0].probe);
    assert_eq!(f.health().await.breaker.state, BreakerState::HalfOpen);
    assert!(
        f.claim(t(12), 10).await.is_empty(),
        "nothing else while the probe is out"
    );

    let probe = vec![probes[0].clone()];
    f.finish(&probe, Next::Succeeded, Signal::Healthy, t(12))
        .await;
    let health = f.health().await;
    assert_eq!(
        (health.breaker.state, health.breaker.consecutive_failures),
        (BreakerState::Closed, 0)
    );
    // Closing brings the deferred deliveries back to now; none was charged for waiting.
    let rest = f.claim(t(12), 10).await;
    assert_eq!(rest.len(), 4);
    let charged: Vec<u32> = rest.iter().map(|d| d.attempts).collect();
    // Of the three that failed, those not sent as the probe: which of the five the
    // probe is depends on which of the two concurrent claims won it.
    let failed_left = if probe[0].attempts == 1 { 2 } else { 3 };
    assert_eq!(
        charged.iter().filter(|a| **a == 1).count(),
        failed_left,
        "only real attempts count: {charged:?}"
    );
    assert!(charged.iter().all(|a| *a <= 1));
}

async fn the_breaker_moves_a_queue_larger_than_one_statement(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    // More pending deliveries than one statement moves (the queue moves in chunks).
    let items: Vec<PublishItem> = (0..2_500)
        .map(|_| item(&f.app, new_event("a", None), None, t(0)))
        .collect();
    for group in items.chunks(500) {
        f.store.events().publish_group(group).await.unwrap();
    }
    let first = f.claim(t(1), 3).await;
    f.finish(&first, Next::RetryAt(t(2)), Signal::Failed, t(1))
        .await;
    assert_eq!(f.health().await.breaker.state, BreakerState::Open);
    // Opening moved the whole queue, retries included, to the probe time.
    assert_eq!(f.store.events().next_due_at().await.unwrap(), Some(t(11)));

    let probe = f.claim(t(11), 10).await;
    assert_eq!(probe.len(), 1);
    f.finish(&probe, Next::Succeeded, Signal::Healthy, t(12))
        .await;
    // Closing brought every deferred delivery back: all the rest are due now.
    let rest = f.claim(t(12), 5_000).await;
    assert_eq!(rest.len(), 2_499);
}

async fn failed_probe_reopens_with_a_longer_cooldown(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    for _ in 0..4 {
        f.publish(None, t(0)).await;
    }
    let first = f.claim(t(1), 3).await;
    f.finish(&first, Next::RetryAt(t(2)), Signal::Failed, t(1))
        .await;
    let probe = f.claim(t(11), 10).await;
    assert_eq!(probe.len(), 1);
    f.finish(&probe, Next::RetryAt(t(12)), Signal::Failed, t(12))
        .await;
    let health = f.health().await;
    assert_eq!(health.breaker.state, BreakerState::Open);
    assert_eq!(
        health.breaker.next_probe_at,
        Some(t(32)),
        "10 s doubled to 20 s"
    );
    assert!(f.claim(t(31), 10).await.is_empty());
    assert_eq!(f.claim(t(32), 10).await.len(), 1, "one probe again");
}

async fn failing_past_the_span_disables_and_parks(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let mut now = t(0);
    // Fail once per probe until the endpoint has failed for over an hour.
    while f.health().await.enabled {
        f.publish(None, now).await;
        let claimed = f.claim(now, 1).await;
        if let Some(d) = claimed.first() {
            f.finish(
                std::slice::from_ref(d),
                Next::RetryAt(now + Duration::from_secs(1)),
                Signal::Failed,
                now,
            )
            .await;
        }
        now = now + Duration::from_secs(61);
        assert!(now < t(3 * 3600), "never disabled");
    }
    let health = f.health().await;
    assert_eq!(health.disabled_reason.as_deref(), Some("failing"));
    assert!(
        f.claim(t(10 * 3600), 100).await.is_empty(),
        "its queue is parked"
    );
    assert!(
        f.store
            .endpoints()
            .count_deliveries(&f.endpoint.id, DeliveryState::Pending)
            .await
            .unwrap()
            > 0,
        "and kept"
    );
}

async fn ordered_partition_releases_one_at_a_time(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let a1 = f.publish(Some("order_1"), t(0)).await;
    let a2 = f.publish(Some("order_1"), t(0)).await;
    let a3 = f.publish(Some("order_1"), t(0)).await;
    let b1 = f.publish(Some("order_2"), t(0)).await;
    let free = f.publish(None, t(0)).await;
    assert_eq!(f.delivery_of(&a2).await.state, DeliveryState::Blocked);
    assert_eq!(f.delivery_of(&a3).await.sequence, Some(3));
    assert_eq!(
        f.delivery_of(&b1).await.sequence,
        Some(1),
        "sequences are per key"
    );

    let claimed = f.claim(t(1), 10).await;
    let mut got: Vec<_> = claimed.iter().map(|c| c.event_id.clone()).collect();
    got.sort();
    let mut expected = vec![a1.clone(), b1.clone(), free.clone()];
    expected.sort();
    assert_eq!(got, expected, "only partition heads and unordered events");
    let head = claimed.iter().find(|c| c.event_id == a1).unwrap().clone();
    assert_eq!(
        (head.ordering_key.as_deref(), head.sequence),
        (Some("order_1"), Some(1))
    );

    // A retry of the head keeps the partition waiting; other keys are unaffected.
    f.finish(
        std::slice::from_ref(&head),
        Next::RetryAt(t(5)),
        Signal::Neutral,
        t(2),
    )
    .await;
    assert!(f.claim(t(3), 10).await.is_empty());
    let retried = f.claim(t(5), 10).await;
    assert_eq!(
        retried.iter().map(|c| &c.event_id).collect::<Vec<_>>(),
        vec![&a1]
    );
    f.finish(&retried, Next::Succeeded, Signal::Healthy, t(6))
        .await;
    let next = f.claim(t(6), 10).await;
    assert_eq!(
        next.iter().map(|c| &c.event_id).collect::<Vec<_>>(),
        vec![&a2],
        "released in sequence order"
    );
    // A new event of the key queues behind the unfinished one.
    let a4 = f.publish(Some("order_1"), t(7)).await;
    assert_eq!(f.delivery_of(&a4).await.state, DeliveryState::Blocked);
}

/// The dispatcher's turn: finished attempts are written first, so the claim in
/// the same transaction already sees what they moved on (a released partition,
/// an opened breaker), and the attempts are recorded exactly as on their own.
async fn one_turn_records_attempts_then_claims_what_they_released(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let a1 = f.publish(Some("order_1"), t(0)).await;
    let a2 = f.publish(Some("order_1"), t(0)).await;
    let head = f.claim(t(1), 10).await;
    assert_eq!(
        head.iter().map(|c| &c.event_id).collect::<Vec<_>>(),
        vec![&a1]
    );

    let turn = f
        .store
        .complete_and_claim(
            &[attempt(&head[0], Next::Succeeded, Signal::Healthy, t(2))],
            &breaker(),
            t(2),
            LEASE,
            10,
            &policy(),
        )
        .await
        .unwrap();
    assert_eq!(
        turn.deliveries
            .iter()
            .map(|c| &c.event_id)
            .collect::<Vec<_>>(),
        vec![&a2],
        "the head's success released its successor, claimed in the same turn"
    );
    assert_eq!(f.delivery_of(&a1).await.state, DeliveryState::Succeeded);
    let attempts = attempts_of(&f.store, &f.app, &head[0].id).await;
    assert_eq!(
        attempts.iter().map(|a| a.status_code).collect::<Vec<_>>(),
        vec![Some(200)]
    );

    // Failures that open the breaker leave nothing for the same turn's claim.
    f.publish(None, t(3)).await;
    f.publish(None, t(3)).await;
    let mut in_flight = turn.deliveries;
    in_flight.extend(f.claim(t(3), 10).await);
    assert_eq!(in_flight.len(), 3);
    let d = f.publish(None, t(3)).await;
    let failed: Vec<AttemptRecord> = in_flight
        .iter()
        .map(|c| attempt(c, Next::RetryAt(t(4)), Signal::Failed, t(3)))
        .collect();
    let turn = f
        .store
        .complete_and_claim(&failed, &breaker(), t(3), LEASE, 10, &policy())
        .await
        .unwrap();
    assert!(
        turn.deliveries.is_empty(),
        "the third failure opened the breaker before this turn's claim"
    );
    assert_eq!(f.health().await.breaker.state, BreakerState::Open);
    assert_eq!(f.delivery_of(&d).await.state, DeliveryState::Pending);
    assert_eq!(f.delivery_of(&d).await.attempts, 0, "deferred, not charged");
}

async fn dead_head_skips_or_blocks_by_endpoint_option(engine: Engine) {
    for (on_dead, released) in [(OnDead::Skip, true), (OnDead::Block, false)] {
        let f = fixture(engine, |e| e.ordering_on_dead = on_dead).await;
        let first = f.publish(Some("k"), t(0)).await;
        let second = f.publish(Some("k"), t(0)).await;
        let head = f.claim(t(1), 10).await;
        f.finish(
            &head,
            Next::Dead(DeadReason::ClientError),
            Signal::Healthy,
            t(1),
        )
        .await;
        let next = f.claim(t(2), 10).await;
        assert_eq!(next.len() == 1, released, "{on_dead:?}");
        if !released {
            // Blocked until the dead one is replayed and delivered.
            let dead = f.delivery_of(&first).await;
            assert!(matches!(
                f.store
                    .events()
                    .replay_delivery(&f.app, &dead.id, t(3))
                    .await
                    .unwrap(),
                ReplayOutcome::Replayed(_)
            ));
            let replayed = f.claim(t(3), 10).await;
            assert_eq!(replayed[0].event_id, first);
            f.finish(&replayed, Next::Succeeded, Signal::Healthy, t(4))
                .await;
            let unblocked = f.claim(t(4), 10).await;
            assert_eq!(unblocked[0].event_id, second);
        }
    }
}

async fn rate_limit_hands_out_spaced_slots_cluster_wide(engine: Engine) {
    let f = fixture(engine, |e| e.rate_limit_per_sec = Some(4)).await;
    for _ in 0..10 {
        f.publish(None, t(0)).await;
    }
    // Two "nodes" claim: slots come from one shared sequence, 250 ms apart, one second ahead.
    let a = f.claim(t(1), 3).await;
    let b = f.claim(t(1), 10).await;
    let mut slots: Vec<i64> = a
        .iter()
        .chain(b.iter())
        .map(|d| d.send_at.unwrap().as_millis() - t(1).as_millis())
        .collect();
    slots.sort();
    assert_eq!(slots, [0, 250, 500, 750, 1000]);
    // The rest wait, pending and uncharged, until the next free slot.
    assert!(f.claim(t(1), 10).await.is_empty());
    let later = f.claim(t(1) + Duration::from_millis(1250), 10).await;
    assert!(!later.is_empty());
    assert!(later.iter().all(|d| d.attempts == 0));
}

async fn fresh_work_is_claimed_beside_a_retry_backlog(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    for _ in 0..8 {
        f.publish(None, t(0)).await;
    }
    let first = f.claim(t(0), 8).await;
    f.finish(&first, Next::RetryAt(t(1)), Signal::Neutral, t(0))
        .await;
    let fresh = f.publish(None, t(2)).await;
    // Eight retries are older, but a batch of 4 still takes the new event (retries get a quarter).
    let claimed = f.claim(t(2), 4).await;
    assert_eq!(claimed.len(), 4);
    assert!(
        claimed.iter().any(|d| d.event_id == fresh),
        "fresh work does not wait behind retries"
    );
    assert!(
        claimed.iter().filter(|d| d.attempts > 0).count() >= 1,
        "and retries are not starved"
    );
}

async fn an_endpoint_ceiling_bounds_a_claim_before_the_dispatcher_knows_it(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let mut fragile = new_endpoint("https://fragile.example", None);
    fragile.max_in_flight = Some(2);
    let fragile = f
        .store
        .endpoints()
        .create_endpoint(&f.app, fragile, t(0))
        .await
        .unwrap();
    for _ in 0..5 {
        f.publish(None, t(0)).await;
    }
    // The dispatcher has never sent to it: its room would be the default of 16.
    let room = fixed_room(16);
    let claiming = ClaimPolicy {
        room: Some(room.clone()),
        ..policy()
    };
    let claim = f.claim_as(t(1), 100, &claiming).await;
    let to = |endpoint: &EndpointId| {
        claim
            .deliveries
            .iter()
            .filter(|d| &d.endpoint_id == endpoint)
            .collect::<Vec<_>>()
    };
    assert_eq!(to(&fragile.id).len(), 2, "its own ceiling");
    assert!(to(&fragile.id).iter().all(|d| d.max_in_flight == Some(2)));
    assert_eq!(
        to(&f.endpoint.id).len(),
        5,
        "the other endpoint is not held back"
    );
    // The dispatcher now knows the ceiling: the endpoint has no room left.
    assert_eq!(room.in_flight(&fragile.id), 2);
    assert_eq!(room.limit(&fragile.id), 2);
    let again = f.claim_as(t(2), 100, &claiming).await;
    assert!(again.deliveries.iter().all(|d| d.endpoint_id != fragile.id));
}

async fn saturated_endpoints_are_skipped(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let other = f
        .store
        .endpoints()
        .create_endpoint(&f.app, new_endpoint("https://b.example", None), t(0))
        .await
        .unwrap();
    f.publish(None, t(0)).await;
    // This dispatcher already has one request out to the first endpoint, its cap.
    let busy = ClaimPolicy {
        room: Some(room_with(&f.endpoint.id, 1, 1)),
        ..policy()
    };
    let claimed = f.claim_as(t(1), 10, &busy).await.deliveries;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].endpoint_id, other.id);

    // A claim leases no more of an endpoint than its room: the rest stay pending, due now.
    for _ in 0..5 {
        f.publish(None, t(2)).await;
    }
    let capped = ClaimPolicy {
        room: Some(room_with(&f.endpoint.id, 1, 3)),
        ..policy()
    };
    let claim = f.claim_as(t(3), 10, &capped).await;
    let sent_to = |deliveries: &[ClaimedDelivery], endpoint: &EndpointId| {
        deliveries
            .iter()
            .filter(|d| &d.endpoint_id == endpoint && d.attempts == 0)
            .count()
    };
    assert_eq!(
        sent_to(&claim.deliveries, &f.endpoint.id),
        2,
        "one of three in flight"
    );
    assert_eq!(sent_to(&claim.deliveries, &other.id), 3, "the cap");
    assert_eq!(
        claim.rows,
        claim.deliveries.len(),
        "nothing leased only to be handed back"
    );
    let again = f.claim(t(3), 10).await;
    assert_eq!(sent_to(&again, &f.endpoint.id), 4);
    assert_eq!(sent_to(&again, &other.id), 2);
}

async fn deferral_past_max_age_dead_letters(engine: Engine) {
    let f = fixture(engine, |e| e.retry.max_age_secs = Some(5)).await;
    for _ in 0..4 {
        f.publish(None, t(0)).await;
    }
    let first = f.claim(t(1), 3).await;
    f.finish(&first, Next::RetryAt(t(2)), Signal::Failed, t(1))
        .await;
    // The breaker would defer the fourth to t(11), beyond its 5 s max age: dead, not deferred.
    let claimed = f.claim(t(11), 10).await;
    assert_eq!(claimed.len(), 1, "the probe");
    let dlq = dlq_of(&f.store, &f.app).await;
    assert!(!dlq.is_empty());
    assert!(dlq
        .iter()
        .all(|d| d.dead_reason == Some(DeadReason::RetriesExhausted) && d.attempts <= 1));
}

/// An event of `event_type` with an empty JSON body.
fn new_event(event_type: &str, key: Option<&str>) -> NewEvent {
    NewEvent {
        id: EventId::generate(),
        event_type: event_type.into(),
        ordering_key: key.map(String::from),
        body: b"{}".to_vec(),
        only_endpoint: None,
    }
}

async fn a_tenants_backlog_does_not_hide_another_tenants_fresh_work(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    // One tenant's backlog, far more than a claim takes, all due before the other's event.
    f.publish_many(&f.app, 500, t(0)).await;
    let other = f.another_app().await;
    let other_endpoint = f.endpoint_of(&other, "https://other.example").await;
    let fresh = f.publish_in(&other, t(5)).await;

    // Nothing in flight anywhere: the claim is limited by its batch alone.
    let claim = f.claim_as(t(6), 16, &policy()).await;
    assert_eq!(claim.deliveries.len(), 16);
    let to_other: Vec<_> = claim
        .deliveries
        .iter()
        .filter(|d| d.endpoint_id == other_endpoint.id)
        .collect();
    assert_eq!(to_other.len(), 1, "the other tenant's event is sent now");
    assert_eq!(to_other[0].event_id, fresh);
    // The backlog still drains oldest first with the rest of the batch.
    let backlog_taken = claim
        .deliveries
        .iter()
        .filter(|d| d.endpoint_id == f.endpoint.id)
        .count();
    assert_eq!(backlog_taken, 15);
}

/// A dispatcher whose permits are nearly all sending claims a few at a time,
/// and an event's deliveries are leased together: under a backlog, one claim
/// in eight is the app pass, and another tenant's whole event fits its share;
/// the claims between give the backlog's head theirs.
async fn small_claims_send_another_tenants_whole_event_beside_a_backlog(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let mut ours = vec![f.endpoint.id.clone()];
    for n in 1..3 {
        let url = format!("https://a{n}.example");
        ours.push(f.endpoint_of(&f.app, &url).await.id);
    }
    // One tenant's backlog of events to three endpoints each, all due before the other's.
    let backlog = f.publish_many(&f.app, 200, t(0)).await;
    let first = backlog[0].clone();
    let other = f.another_app().await;
    let mut theirs = Vec::new();
    for n in 0..3 {
        let url = format!("https://other{n}.example");
        theirs.push(f.endpoint_of(&other, &url).await.id);
    }
    let fresh = f.publish_in(&other, t(5)).await;

    // Claims of eight (the dispatcher's free permits), the backlog's head due
    // for six seconds: the lane is a backlog, and the first claim under it
    // reads the newest first.
    let claiming = policy();
    let claim = f.claim_as(t(6), 8, &claiming).await;
    let to = |endpoints: &[EndpointId]| -> Vec<&ClaimedDelivery> {
        claim
            .deliveries
            .iter()
            .filter(|d| endpoints.contains(&d.endpoint_id))
            .collect()
    };
    let sent = |endpoints: &[EndpointId]| -> BTreeSet<(EndpointId, EventId)> {
        to(endpoints)
            .iter()
            .map(|d| (d.endpoint_id.clone(), d.event_id.clone()))
            .collect()
    };
    let each = |endpoints: &[EndpointId], event: &EventId| -> BTreeSet<(EndpointId, EventId)> {
        endpoints
            .iter()
            .map(|e| (e.clone(), event.clone()))
            .collect()
    };
    assert_eq!(
        sent(&theirs),
        each(&theirs, &fresh),
        "the other tenant's event goes to its three endpoints now"
    );
    // The rest of the batch: the backlog's oldest event, whole.
    assert_eq!(sent(&ours), each(&ours, &first));
    assert_eq!(claim.deliveries.len(), 6);

    // The next seven give the head their whole room: the next two events each.
    let next = f.claim_as(t(6), 8, &claiming).await;
    let events: BTreeSet<&EventId> = next.deliveries.iter().map(|d| &d.event_id).collect();
    assert_eq!(events, BTreeSet::from([&backlog[1], &backlog[2]]));
    assert_eq!(next.deliveries.len(), 6);
    assert_eq!(
        claiming
            .backlog_claims
            .load(std::sync::atomic::Ordering::Relaxed),
        2,
        "both claims counted under the backlog"
    );
}

/// Under a backlog the newest reads serve what became due last, and the
/// oldest-first reads reach another tenant's event only once the backlog ahead
/// of it has drained: an event published between two of another tenant's
/// bursts is neither. One claim in eight is the app pass, which leases each
/// tenant's oldest due work, an equal share each.
async fn the_app_pass_claims_a_tenants_event_buried_in_another_tenants_backlog(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let older = f.publish_many(&f.app, 300, t(0)).await;
    let other = f.another_app().await;
    let other_endpoint = f.endpoint_of(&other, "https://other.example").await;
    let buried = f.publish_in(&other, t(1)).await;
    f.publish_many(&f.app, 300, t(2)).await;

    // The backlog's head has waited six seconds: the first claim is the app
    // pass, and the other tenant's share holds its event.
    let claim = f.claim_as(t(6), 16, &policy()).await;
    let to_other: Vec<&EventId> = claim
        .deliveries
        .iter()
        .filter(|d| d.endpoint_id == other_endpoint.id)
        .map(|d| &d.event_id)
        .collect();
    assert_eq!(to_other, [&buried], "the other tenant's event is sent now");
    // The rest is the lanes': the backlog's 14 oldest, and the newest slice.
    let mut oldest: Vec<&EventId> = older.iter().collect();
    oldest.sort();
    let ours: BTreeSet<&EventId> = claim
        .deliveries
        .iter()
        .filter(|d| d.endpoint_id == f.endpoint.id)
        .map(|d| &d.event_id)
        .collect();
    assert_eq!(ours.len(), 15);
    assert!(oldest[..14].iter().all(|id| ours.contains(id)));
    assert_eq!(claim.deliveries.len(), 16);
}

/// Claims of one: one tenant's backlog at the lane's head, two others' behind
/// it. Each app pass (one claim in eight under a backlog) gives its one
/// delivery to the next of the tenants behind the head in turn; the claims
/// between serve the head.
async fn the_app_pass_lets_each_tenant_go_first_in_turn(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    f.publish_many(&f.app, 40, t(0)).await;
    let mut behind = f.tenants(2, 40, t(1)).await;
    behind.sort();

    let claiming = policy();
    let mut served = Vec::new();
    for n in 0..24 {
        let claim = f.claim_as(t(6), 1, &claiming).await;
        assert_eq!(claim.deliveries.len(), 1);
        let endpoint = &claim.deliveries[0].endpoint_id;
        let tenant = behind.iter().position(|(_, e)| e == endpoint);
        match n % 8 {
            0 => served.push(tenant.expect("an app pass serves a tenant behind the head")),
            _ => assert_eq!(endpoint, &f.endpoint.id, "claim {n} serves the head"),
        }
    }
    assert_eq!(
        served,
        [0, 1, 0],
        "each tenant behind the head first in turn"
    );
}

/// Claims of four, seventeen tenants behind the head: an app pass visits no
/// more tenants than it can serve, and the next goes on after the last it
/// served, so five passes reach all seventeen.
async fn small_app_passes_reach_every_tenant_in_turn(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    f.publish_many(&f.app, 200, t(0)).await;
    let behind: Vec<EndpointId> = f
        .tenants(17, 3, t(1))
        .await
        .into_iter()
        .map(|(_, endpoint)| endpoint)
        .collect();

    let claiming = policy();
    let mut served = BTreeSet::new();
    for n in 0..40 {
        let claim = f.claim_as(t(6), 4, &claiming).await;
        assert_eq!(claim.deliveries.len(), 4);
        if n % 8 == 0 {
            let tenants: BTreeSet<EndpointId> = claim
                .deliveries
                .iter()
                .map(|d| d.endpoint_id.clone())
                .filter(|e| behind.contains(e))
                .collect();
            assert_eq!(
                tenants.len(),
                4,
                "pass {}: one for each of four tenants",
                n / 8
            );
            served.extend(tenants);
        }
    }
    assert_eq!(served.len(), 17, "every tenant behind the head was served");
}

async fn a_saturated_endpoints_backlog_does_not_hide_other_work(engine: Engine) {
    let f = fixture(engine, |e| e.event_types = Some(vec!["busy".into()])).await;
    let quiet = f
        .store
        .endpoints()
        .create_endpoint(
            &f.app,
            new_endpoint("https://quiet.example", Some(vec!["quiet"])),
            t(0),
        )
        .await
        .unwrap();
    // A backlog larger than the claim's scan window, all due before the quiet endpoint's one event.
    let backlog: Vec<PublishItem> = (0..1500)
        .map(|_| item(&f.app, new_event("busy", None), None, t(0)))
        .collect();
    f.store.events().publish_group(&backlog).await.unwrap();
    let event = new_event("quiet", None);
    let quiet_event = event.id.clone();
    f.store
        .events()
        .publish(item(&f.app, event, None, t(1)))
        .await
        .unwrap();

    let busy = ClaimPolicy {
        room: Some(room_with(&f.endpoint.id, 1, 1)),
        ..policy()
    };
    let claim = f.claim_as(t(2), 10, &busy).await;
    assert_eq!(claim.deliveries.len(), 1);
    assert_eq!(
        (
            &claim.deliveries[0].endpoint_id,
            &claim.deliveries[0].event_id
        ),
        (&quiet.id, &quiet_event)
    );
}

async fn concurrent_groups_sharing_keys_neither_deadlock_nor_leave_gaps(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let group = |keys: [&str; 2]| -> Vec<PublishItem> {
        keys.iter()
            .map(|key| item(&f.app, new_event("a", Some(key)), None, t(0)))
            .collect()
    };
    // Groups naming the same keys in opposite orders, concurrently: on PostgreSQL this
    // deadlocked while sequences were taken in group order.
    let mut tasks = Vec::new();
    for n in 0..20 {
        let keys = if n % 2 == 0 {
            ["k1", "k2"]
        } else {
            ["k2", "k1"]
        };
        let (store, items) = (f.store.clone(), group(keys));
        tasks.push(tokio::spawn(async move {
            store.events().publish_group(&items).await
        }));
    }
    let mut events = Vec::new();
    for task in tasks {
        let outcomes = task.await.unwrap().expect("no deadlock");
        assert_eq!(outcomes.len(), 2);
    }
    for delivery in f.claim(t(1), 100).await {
        events.push((
            delivery.ordering_key.clone().unwrap(),
            delivery.sequence.unwrap(),
        ));
    }
    // Only heads are claimable: sequence 1 of each key, and every number was used once.
    events.sort();
    assert_eq!(events, [("k1".to_string(), 1), ("k2".to_string(), 1)]);
    let blocked = f
        .store
        .endpoints()
        .count_deliveries(&f.endpoint.id, DeliveryState::Blocked)
        .await
        .unwrap();
    assert_eq!(blocked, 38);
}

async fn publishes_hand_fresh_work_to_the_local_dispatcher_within_its_room(engine: Engine) {
    let mut f = fixture(engine, |_| {}).await;
    let mut limited = new_endpoint("https://limited.example", None);
    limited.rate_limit_per_sec = Some(100);
    let limited = f
        .store
        .endpoints()
        .create_endpoint(&f.app, limited, t(0))
        .await
        .unwrap();
    // A dispatcher with 3 permits and room for 2 requests per endpoint.
    let room = fixed_room(2);
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
    let (handoff, mut inbox) = Handoff::new(room.clone(), permits.clone(), LEASE);
    f.handoff = Some(handoff.clone());
    let state_of = |event: EventId, endpoint: EndpointId| {
        let store = f.store.clone();
        let app = f.app.clone();
        async move {
            let (_, deliveries) = store
                .events()
                .get_event(&app, &event)
                .await
                .unwrap()
                .unwrap();
            deliveries
                .into_iter()
                .find(|d| d.endpoint_id == endpoint)
                .unwrap()
        }
    };

    // Unordered, to an endpoint with a closed breaker and no rate limit: written
    // leased and handed over after the commit, with what sending needs.
    let first = f.publish(None, t(0)).await;
    let handed = inbox.try_recv().unwrap();
    assert_eq!(handed.len(), 1);
    let delivery = &handed[0].delivery;
    assert_eq!(
        (&delivery.event_id, &delivery.endpoint_id, delivery.attempts),
        (&first, &f.endpoint.id, 0)
    );
    assert_eq!(
        (&*delivery.body, delivery.destination.url.as_str()),
        (&b"{}"[..], f.endpoint.url.as_str())
    );
    let row = state_of(first.clone(), f.endpoint.id.clone()).await;
    assert_eq!(
        (row.id.clone(), row.state),
        (delivery.id.clone(), DeliveryState::InFlight)
    );
    // The rate-limited endpoint's delivery is left to a claim (its send slot is stored).
    let row = state_of(first.clone(), limited.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Pending);

    // The head of an ordered partition goes with its key and sequence; it fills the room.
    let head = f.publish(Some("order_1"), t(0)).await;
    let handed_head = inbox.try_recv().unwrap();
    let delivery_head = &handed_head[0].delivery;
    assert_eq!(delivery_head.event_id, head);
    assert_eq!(
        (
            delivery_head.ordering_key.as_deref(),
            delivery_head.sequence
        ),
        (Some("order_1"), Some(1))
    );
    // Past the room, deliveries are written pending; behind the head, blocked.
    let unordered = f.publish(None, t(0)).await;
    let behind = f.publish(Some("order_1"), t(0)).await;
    assert!(inbox.try_recv().is_err());
    let row = state_of(unordered.clone(), f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Pending);
    let row = state_of(behind.clone(), f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Blocked);
    assert_eq!(room.in_flight(&f.endpoint.id), 2);
    assert_eq!(permits.available_permits(), 1);

    // A claim counts the hand-offs in the room: none of the full endpoint's work is leased.
    let claiming = ClaimPolicy {
        room: Some(room.clone()),
        ..policy()
    };
    let claim = f.claim_as(t(1), 1, &claiming).await;
    assert_eq!(claim.deliveries.len(), 1);
    assert_eq!(claim.deliveries[0].endpoint_id, limited.id);

    // A handed-off attempt's answer frees its room (as the dispatcher does when the
    // response arrives), and it completes like a claimed one.
    let answered = |room: &Room, endpoint: &EndpointId| {
        let epoch = room.epoch(endpoint);
        room.finish(
            endpoint,
            Pressure::Answered,
            Duration::from_millis(1),
            epoch,
        );
    };
    answered(&room, &f.endpoint.id);
    assert_eq!(room.in_flight(&f.endpoint.id), 1);
    let record = attempt(delivery, Next::Succeeded, Signal::Healthy, t(1));
    f.store
        .complete_and_claim(&[record], &breaker(), t(1), LEASE, 0, &claiming)
        .await
        .unwrap();
    let row = state_of(first, f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Succeeded);
    assert_eq!(room.in_flight(&f.endpoint.id), 1);
    // A handed-off partition head releases the delivery behind it when it succeeds.
    answered(&room, &f.endpoint.id);
    let record = attempt(delivery_head, Next::Succeeded, Signal::Healthy, t(1));
    f.store
        .complete_and_claim(&[record], &breaker(), t(1), LEASE, 0, &claiming)
        .await
        .unwrap();
    let row = state_of(behind, f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Pending);
    assert_eq!(room.in_flight(&f.endpoint.id), 0);

    // The last claim filled its batch (1 of 1): older due work may be waiting, so
    // fresh deliveries take permits of the fresh share (an eighth as many, at
    // least one), not the claims', and only while their endpoint has less than
    // an eighth of its limit (at least one) in flight: one is handed off, the
    // next queues behind the older work although a send permit is free
    // (`room::tests` tells the two rules apart).
    let shared = f.publish(None, t(2)).await;
    let handed_shared = inbox.try_recv().unwrap();
    assert_eq!(handed_shared[0].delivery.event_id, shared);
    let queued = f.publish(None, t(2)).await;
    assert!(inbox.try_recv().is_err());
    let row = state_of(queued, f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Pending);
    assert_eq!(room.in_flight(&f.endpoint.id), 1, "room for one more");
    assert_eq!(
        permits.available_permits(),
        1,
        "the claims' permit is left to them"
    );
    // Its answer frees its room and its permits.
    answered(&room, &f.endpoint.id);
    drop(handed_shared);
    // A claim that takes less than it asked for has caught up: hand-offs resume.
    let claim = f.claim_as(t(3), 100, &claiming).await;
    assert!(claim.rows < 100);
    for d in &claim.deliveries {
        answered(&room, &d.endpoint_id);
    }
    let records: Vec<AttemptRecord> = claim
        .deliveries
        .iter()
        .map(|d| attempt(d, Next::Succeeded, Signal::Healthy, t(3)))
        .collect();
    f.store
        .complete_and_claim(&records, &breaker(), t(3), LEASE, 0, &claiming)
        .await
        .unwrap();
    let caught_up = f.publish(None, t(4)).await;
    assert_eq!(inbox.try_recv().unwrap()[0].delivery.event_id, caught_up);

    // Once the dispatcher stops taking hand-offs, fresh deliveries are written pending.
    handoff.close();
    let fourth = f.publish(None, t(5)).await;
    assert!(inbox.try_recv().is_err());
    let row = state_of(fourth, f.endpoint.id.clone()).await;
    assert_eq!(row.state, DeliveryState::Pending);
}

async fn a_released_partition_successor_goes_ahead_of_later_work(engine: Engine) {
    let f = fixture(engine, |_| {}).await;
    let head = f.publish(Some("order_1"), t(0)).await;
    let successor = f.publish(Some("order_1"), t(1)).await;
    for _ in 0..3 {
        f.publish(None, t(2)).await;
    }
    let first = f.claim(t(3), 1).await;
    assert_eq!(first[0].event_id, head);
    f.finish(&first, Next::Succeeded, Signal::Healthy, t(4))
        .await;
    // Released at t(4), it has waited since its publish at t(1): older than the
    // unordered work published at t(2), so the next claim takes it first.
    let next = f.claim(t(5), 1).await;
    assert_eq!(next[0].event_id, successor);
}

/// A dispatcher begins its next turn while the last commits
/// (`hookline_dispatch::turn::Prepared`): here both dead-letter failures on one
/// endpoint, so both write its breaker and its dead count. The second waits
/// for the first's locks (PostgreSQL) or its writer (SQLite) and no longer:
/// both commit, and the second counts on top of what the first wrote.
async fn a_turn_runs_while_the_last_commits_and_sees_what_it_wrote(engine: Engine) {
    use hookline_core::operational::Kind;
    let f = fixture(engine, |_| {}).await;
    let mut events = Vec::new();
    for _ in 0..4 {
        events.push(f.publish(None, t(0)).await);
    }
    let claimed = f.claim(t(1), 4).await;
    assert_eq!(claimed.len(), 4);
    let dead: Vec<AttemptRecord> = claimed
        .iter()
        .map(|c| {
            attempt(
                c,
                Next::Dead(DeadReason::RetriesExhausted),
                Signal::Failed,
                t(1),
            )
        })
        .collect();
    let turn = |records: Vec<AttemptRecord>| {
        let store = f.store.clone();
        async move {
            hookline_dispatch::turn::prepare(
                &store,
                &records,
                &breaker(),
                t(2),
                LEASE,
                10,
                &policy(),
            )
            .await
        }
    };
    let first = turn(dead[..2].to_vec()).await.unwrap();
    // Two failures leave the breaker closed (threshold 3): the next turn may run beside this commit.
    assert!(first.lets_next_overlap());
    let second = tokio::spawn(turn(dead[2..].to_vec()));
    first.commit().await.unwrap();
    let second = second.await.unwrap().unwrap();
    // The second counts on top of the first's two and opens the breaker: the turn
    // after it must wait for its commit to see that.
    assert!(!second.lets_next_overlap());
    assert!(second.commit().await.unwrap().deliveries.is_empty());

    for event in &events {
        assert_eq!(f.delivery_of(event).await.state, DeliveryState::Dead);
    }
    let health = f.health().await;
    assert_eq!(health.breaker.consecutive_failures, 4, "{health:?}");
    assert_eq!(health.breaker.state, BreakerState::Open);
    let told: Vec<_> = f
        .store
        .operational()
        .pending(t(60), 60_000, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|n| n.kind == Kind::DeliveryDead)
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].data["count"], 4);
}
