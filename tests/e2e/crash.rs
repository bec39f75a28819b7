//! The real binary as a process: SIGKILL loses nothing; SIGTERM drains.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{
    both_engines, free_port, publish_concurrently, setup_remote, wait_until, Engine, Process,
    Receiver, Reply, TestDb,
};

both_engines!(
    sigkill_mid_delivery_loses_no_event,
    sigterm_finishes_or_releases_in_flight_work
);

async fn sigkill_mid_delivery_loses_no_event(engine: Engine) {
    let db = TestDb::new(engine).await;
    let port = free_port();
    let receiver = Receiver::start().await;
    // Slow answers keep many deliveries in flight when the process dies.
    receiver.answer_always(Reply::status(200).after(Duration::from_millis(300)));
    let lease = [("HOOKLINE_LEASE_MS", "1500")];
    let first = Process::serve(&db, port, &lease).await;
    let (app_id, _) = setup_remote(&first.base, &receiver.url, json!({})).await;
    let accepted = publish_concurrently(&first.base, &app_id, 200, 4).await;

    receiver.wait_for_requests(20).await;
    first.kill();
    let store = hookline_store::Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    let app = hookline_core::ids::AppId::parse(&app_id).unwrap();
    let page = hookline_store::Page {
        limit: 1,
        before: None,
    };
    let endpoint = store
        .endpoints()
        .list_endpoints(&app, &page)
        .await
        .unwrap()
        .remove(0)
        .id;
    let done = store
        .endpoints()
        .count_deliveries(&endpoint, hookline_core::model::DeliveryState::Succeeded)
        .await
        .unwrap();
    assert!(
        done < 200,
        "the kill happened mid-run ({done} of 200 already delivered)"
    );
    store.close().await;

    let second = Process::serve(&db, port, &lease).await;
    let delivered = wait_until(
        Duration::from_secs(60),
        "every accepted event to be delivered",
        || async {
            let ids: HashSet<String> = receiver
                .requests()
                .iter()
                .map(|r| r.header("webhook-id").to_owned())
                .collect();
            (ids == accepted).then_some(ids)
        },
    )
    .await;
    assert_eq!(delivered.len(), 200);
    second.terminate();
}

async fn sigterm_finishes_or_releases_in_flight_work(engine: Engine) {
    let db = TestDb::new(engine).await;
    let port = free_port();

    // Drain long enough: in-flight requests finish and are recorded.
    let quick = Receiver::start().await;
    quick.answer_always(Reply::status(200).after(Duration::from_millis(500)));
    let process = Process::serve(&db, port, &[("HOOKLINE_DRAIN_TIMEOUT_MS", "10000")]).await;
    let (app_id, _) = setup_remote(&process.base, &quick.url, json!({})).await;
    publish_concurrently(&process.base, &app_id, 10, 2).await;
    quick.wait_for_requests(10).await;
    assert!(process.terminate().success(), "a graceful stop exits 0");

    let store = hookline_store::Store::connect(&crate::helpers::store_config(&db.url))
        .await
        .unwrap();
    let app = hookline_core::ids::AppId::parse(&app_id).unwrap();
    let endpoint_of = |store: hookline_store::Store, app: hookline_core::ids::AppId| async move {
        let page = hookline_store::Page {
            limit: 10,
            before: None,
        };
        store
            .endpoints()
            .list_endpoints(&app, &page)
            .await
            .unwrap()
            .remove(0)
            .id
    };
    let endpoint = endpoint_of(store.clone(), app.clone()).await;
    use hookline_core::model::DeliveryState::*;
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&endpoint, Succeeded)
            .await
            .unwrap(),
        10
    );
    assert_eq!(quick.requests().len(), 10);

    // Drain too short for a 30 s answer: the leases are released, nothing is charged.
    let stuck = Receiver::start().await;
    stuck.answer_always(Reply::status(200).after(Duration::from_secs(30)));
    let process = Process::serve(
        &db,
        port,
        &[
            ("HOOKLINE_DRAIN_TIMEOUT_MS", "200"),
            ("HOOKLINE_REQUEST_TIMEOUT_MS", "60000"),
        ],
    )
    .await;
    let (app_id, _) = setup_remote(&process.base, &stuck.url, json!({})).await;
    publish_concurrently(&process.base, &app_id, 5, 1).await;
    stuck.wait_for_requests(5).await;
    assert!(process.terminate().success());
    let app = hookline_core::ids::AppId::parse(&app_id).unwrap();
    let endpoint = endpoint_of(store.clone(), app).await;
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&endpoint, Pending)
            .await
            .unwrap(),
        5,
        "released, not left in flight"
    );
    assert_eq!(
        store
            .endpoints()
            .count_deliveries(&endpoint, InFlight)
            .await
            .unwrap(),
        0
    );
    store.close().await;
}
