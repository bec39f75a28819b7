//! The event type catalog: admins define types with a schema and an example;
//! publishes are checked against it (accepted with a warning, or refused where
//! the deployment says so); a test send delivers the example to one endpoint.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, Engine, Receiver, TestApp};

both_engines!(
    the_catalog_warns_about_publishes_it_does_not_know,
    a_refusing_deployment_refuses_them_and_writes_nothing,
    a_test_send_delivers_the_example_to_one_endpoint,
);

fn invoice_paid() -> Value {
    json!({
        "name": "invoice.paid",
        "description": "An invoice was paid in full.",
        "schema": {"type": "object", "required": ["amount"],
                   "properties": {"amount": {"type": "integer"}}},
        "example": {"amount": 1200}
    })
}

async fn publish(app: &TestApp, app_id: &str, event_type: &str, payload: Value) -> (u16, Value) {
    let response = app
        .request(
            Method::POST,
            &format!("/v1/apps/{app_id}/events"),
            Some(&json!({"event_type": event_type, "payload": payload})),
            &[],
        )
        .await;
    (response.status().as_u16(), response.json().await.unwrap())
}

fn warning_codes(answer: &Value) -> Vec<String> {
    answer["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["code"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn the_catalog_warns_about_publishes_it_does_not_know(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    // An empty catalog checks nothing.
    let (status, answer) = publish(&app, &app_id, "anything.goes", json!({})).await;
    assert_eq!((status, warning_codes(&answer)), (202, vec![]));

    let made = app
        .call(Method::POST, "/v1/event-types", Some(&invoice_paid()), 201)
        .await;
    assert_eq!(made["example"], json!({"amount": 1200}));
    for (bad, code) in [
        (json!({"name": "invoice.paid"}), 409),
        (json!({"name": "invoice.*"}), 422),
        (json!({"name": "x.y", "schema": {"type": 12}}), 422),
        (
            json!({"name": "x.y", "schema": {"type": "object"}, "example": [1]}),
            422,
        ),
    ] {
        app.call(Method::POST, "/v1/event-types", Some(&bad), code)
            .await;
    }
    let listed = app.get("/v1/event-types").await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);

    let (status, answer) = publish(&app, &app_id, "invoice.paid", json!({"amount": 5})).await;
    assert_eq!((status, warning_codes(&answer)), (202, vec![]));
    assert!(answer.get("warnings").is_none(), "no warnings, no field");
    let (status, answer) = publish(&app, &app_id, "invoice.paid", json!({"amount": "5"})).await;
    assert_eq!(
        (status, warning_codes(&answer)),
        (202, vec!["schema_violation".to_owned()])
    );
    assert!(
        answer["warnings"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("/amount"),
        "{answer}"
    );
    let (status, answer) = publish(&app, &app_id, "invoice.voided", json!({})).await;
    assert_eq!(
        (status, warning_codes(&answer)),
        (202, vec!["unknown_event_type".to_owned()])
    );

    app.call(
        Method::PATCH,
        "/v1/event-types/invoice.paid",
        Some(&json!({"deprecated": true})),
        200,
    )
    .await;
    let (_, answer) = publish(&app, &app_id, "invoice.paid", json!({"amount": 5})).await;
    assert_eq!(warning_codes(&answer), vec!["deprecated_event_type"]);
    // A schema change must keep the example valid.
    app.call(
        Method::PATCH,
        "/v1/event-types/invoice.paid",
        Some(&json!({"schema": {"type": "string"}})),
        422,
    )
    .await;

    app.call(Method::DELETE, "/v1/event-types/invoice.paid", None, 204)
        .await;
    app.call(Method::GET, "/v1/event-types/invoice.paid", None, 404)
        .await;
}

async fn a_refusing_deployment_refuses_them_and_writes_nothing(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.event_type_check = "refuse".into()).await;
    let app_id = app.create_app().await;
    app.call(Method::POST, "/v1/event-types", Some(&invoice_paid()), 201)
        .await;
    let (status, answer) = publish(&app, &app_id, "invoice.voided", json!({})).await;
    assert_eq!(
        (status, answer["code"].clone()),
        (422, json!("unknown_event_type"))
    );
    let (status, answer) = publish(&app, &app_id, "invoice.paid", json!({"amount": "5"})).await;
    assert_eq!(
        (status, answer["code"].clone()),
        (422, json!("schema_violation"))
    );
    let batch = app
        .request(
            Method::POST,
            &format!("/v1/apps/{app_id}/events/batch"),
            Some(&json!({"events": [
                {"event_type": "invoice.paid", "payload": {"amount": 1}},
                {"event_type": "invoice.paid", "payload": {}}
            ]})),
            &[],
        )
        .await;
    assert_eq!(batch.status(), 422);
    let batch: Value = batch.json().await.unwrap();
    assert!(
        batch["detail"].as_str().unwrap().starts_with("events[1]"),
        "{batch}"
    );
    let events = app.get(&format!("/v1/apps/{app_id}/events")).await;
    assert!(
        events["data"].as_array().unwrap().is_empty(),
        "nothing written"
    );
    let (status, _) = publish(&app, &app_id, "invoice.paid", json!({"amount": 5})).await;
    assert_eq!(status, 202);
}

async fn a_test_send_delivers_the_example_to_one_endpoint(engine: Engine) {
    let tested = Receiver::start().await;
    let other = Receiver::start().await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    app.call(Method::POST, "/v1/event-types", Some(&invoice_paid()), 201)
        .await;
    // Subscribed to something else entirely: a test goes to it anyway.
    let endpoint = app
        .create_endpoint_with(&app_id, &tested.url, json!({"event_types": ["order.*"]}))
        .await;
    app.create_endpoint(&app_id, &other.url).await;
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}/test",
        endpoint["id"].as_str().unwrap()
    );

    let sent = app
        .call(
            Method::POST,
            &path,
            Some(&json!({"event_type": "invoice.paid"})),
            202,
        )
        .await;
    let got = tested.wait_for_requests(1).await;
    assert_eq!(
        got[0].json()["data"],
        json!({"amount": 1200}),
        "the catalog's example"
    );
    assert_eq!(got[0].json()["type"], "invoice.paid");
    assert_eq!(got[0].header("webhook-id"), sent["event_id"]);
    assert!(
        standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap())
            .unwrap()
            .verify(&got[0].body, &got[0].headers)
            .is_ok()
    );
    let delivery = sent["delivery_id"].as_str().unwrap();
    app.wait_for_delivery_state(&app_id, delivery, "succeeded")
        .await;
    let event = app
        .get(&format!(
            "/v1/apps/{app_id}/events/{}",
            sent["event_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        event["deliveries"].as_array().unwrap().len(),
        1,
        "to the tested endpoint only"
    );

    let custom = app
        .call(
            Method::POST,
            &path,
            Some(&json!({"event_type": "order.shipped", "payload": {"id": 7}})),
            202,
        )
        .await;
    assert_eq!(warning_codes(&custom), vec!["unknown_event_type"]);
    assert_eq!(
        tested.wait_for_requests(2).await[1].json()["data"],
        json!({"id": 7})
    );
    app.call(
        Method::POST,
        &path,
        Some(&json!({"event_type": "order.shipped"})),
        409,
    )
    .await;
    assert!(
        other.requests().is_empty(),
        "the other endpoint got no test"
    );

    // A key that manages endpoints but may not publish sends only the example.
    let key = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "portal", "app": app_id, "capabilities": ["endpoints"]})),
            201,
        )
        .await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let as_portal = |body: Value| {
        app.http
            .post(format!("{}{path}", app.base))
            .bearer_auth(key.clone())
            .json(&body)
            .send()
    };
    let forged = as_portal(json!({"event_type": "invoice.paid", "payload": {"amount": 1}}))
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let forged: Value = forged.json().await.unwrap();
    assert_eq!(forged["code"], "missing_capability_publish");
    let example = as_portal(json!({"event_type": "invoice.paid"}))
        .await
        .unwrap();
    assert_eq!(example.status(), 202);
}
