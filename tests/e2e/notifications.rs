//! Customer notifications (docs/api.md#notifications): an app's own channels —
//! a mailbox at the test's real SMTP server, a Slack or Teams incoming webhook
//! at a real HTTP receiver — told when the app's endpoints break, through the
//! same pipeline as every delivery (the internal app's endpoints).

use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, switchable, wait_until, Engine, Receiver, TestApp};
use crate::smtp::SmtpServer;

both_engines!(
    a_failing_endpoint_is_told_to_its_apps_mailbox_and_chat_and_to_no_one_elses,
    a_refused_mailbox_makes_the_notice_dead_and_other_refusals_are_retried,
    channels_are_checked_listed_masked_and_removed_by_their_app_only,
    an_app_whose_portal_speaks_hebrew_is_told_in_hebrew,
);

/// Twenty failures in a row make `endpoint.failing`; one attempt per delivery,
/// the breaker kept closed, mail through `smtp`.
async fn spawn(engine: Engine, smtp: &SmtpServer) -> TestApp {
    let url = smtp.url.clone();
    TestApp::spawn_with(engine, move |c| {
        c.max_attempts = 1;
        c.breaker_failure_threshold = 1_000;
        c.smtp_url = Some(url);
        c.smtp_from = Some("Acme webhooks <webhooks@acme.example>".into());
    })
    .await
}

async fn channel(app: &TestApp, app_id: &str, body: Value) -> Value {
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/notifications"),
        Some(&body),
        201,
    )
    .await
}

async fn fail_twenty_five_times(app: &TestApp, app_id: &str, customer: &Receiver) {
    for n in 0..25 {
        app.publish(app_id, "order.paid", json!({"n": n})).await;
    }
    customer.wait_for_requests(25).await;
}

async fn a_failing_endpoint_is_told_to_its_apps_mailbox_and_chat_and_to_no_one_elses(
    engine: Engine,
) {
    let smtp = SmtpServer::start().await;
    let app = spawn(engine, &smtp).await;
    let chat = Receiver::start().await;
    let acme = app.create_app().await;
    let other = app.create_app().await;
    // Acme signs its customers in on its own page: links go there.
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{acme}"),
        Some(&json!({"portal": {"sign_in_url": "https://acme.example/webhooks/sign-in"}})),
        200,
    )
    .await;
    // (Not `delivery.dead`: every failed delivery here dies after its one attempt.)
    let events = json!(["endpoint.failing", "endpoint.recovered"]);
    channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "ops@acme.example", "events": events}),
    )
    .await;
    channel(
        &app,
        &acme,
        json!({"kind": "slack", "to": chat.url, "events": events}),
    )
    .await;
    let others = channel(
        &app,
        &other,
        json!({"kind": "email", "to": "ops@other.example"}),
    )
    .await;

    let (customer, status) = switchable(503).await;
    let endpoint = app
        .create_endpoint_with(&acme, &customer.url, json!({"description": "Orders"}))
        .await;
    let endpoint_id = endpoint["id"].as_str().unwrap();
    fail_twenty_five_times(&app, &acme, &customer).await;

    let mails = smtp.wait_for_mails(1).await;
    let link = format!("https://acme.example/webhooks/sign-in?screen=/endpoints/{endpoint_id}");
    let mail = &mails[0];
    assert_eq!(mail.to, vec!["ops@acme.example"]);
    assert_eq!(mail.from, "webhooks@acme.example");
    assert_eq!(mail.header("subject").unwrap(), "Orders is failing");
    let body = mail.body();
    assert!(
        body.contains(
            "20 attempts to it have failed in a row, the last with 503 Service Unavailable."
        ),
        "{body}"
    );
    assert!(
        body.contains(&format!("Open the endpoint: {link}")),
        "{body}"
    );
    assert!(
        !body.contains("hookline") && !body.contains("Hookline"),
        "{body}"
    );
    // The Message-ID is the notice event's: a resent mail is the same message.
    let failing = app
        .get("/v1/apps/hookline/events?event_type=hookline.endpoint.failing")
        .await;
    let events = failing["data"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{failing}");
    assert_eq!(
        mail.header("message-id").unwrap(),
        format!("<{}@acme.example>", events[0]["id"].as_str().unwrap())
    );

    let posted = chat.wait_for_requests(1).await;
    let slack = posted[0].json();
    assert_eq!(slack["text"], "Orders is failing");
    let section = slack["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(
        section.starts_with("*Orders is failing*\nSince "),
        "{section}"
    );
    assert!(
        section.ends_with(&format!("<{link}|Open the endpoint>")),
        "{section}"
    );
    // Signed like any POST, over the Slack body that was sent.
    assert!(posted[0].header("webhook-signature").starts_with("v1,"));

    // Recovered: told to both of Acme's channels, once.
    status.store(200, Ordering::SeqCst);
    app.publish(&acme, "order.paid", json!({"n": 99})).await;
    let mails = smtp.wait_for_mails(2).await;
    assert_eq!(mails[1].header("subject").unwrap(), "Orders recovered");
    let posted = chat.wait_for_requests(2).await;
    assert_eq!(posted[1].json()["text"], "Orders recovered");

    // The other app's mailbox heard nothing, and no one got anything twice.
    wait_until(
        Duration::from_secs(10),
        "the four notices to succeed",
        || async {
            let delivered = app
                .get("/v1/apps/hookline/deliveries?state=succeeded&limit=250")
                .await;
            (delivered["data"].as_array().unwrap().len() == 4).then_some(())
        },
    )
    .await;
    assert_eq!(smtp.mails().len(), 2);
    assert!(smtp
        .recipients()
        .iter()
        .all(|(mailbox, _)| mailbox == "ops@acme.example"));
    // Its channel got no delivery at all (they are made when a notice is published).
    let theirs = app
        .get(&format!(
            "/v1/apps/hookline/deliveries?endpoint_id={}",
            others["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(theirs["data"], json!([]));
    assert_eq!(chat.requests().len(), 2);
}

async fn a_refused_mailbox_makes_the_notice_dead_and_other_refusals_are_retried(engine: Engine) {
    let smtp = SmtpServer::start().await;
    let app = spawn(engine, &smtp).await;
    let acme = app.create_app().await;
    let refused = channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "refused@acme.example", "events": ["endpoint.disabled"]}),
    )
    .await;
    let busy = channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "busy@acme.example", "events": ["endpoint.disabled"]}),
    )
    .await;
    let policy = channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "policy@acme.example", "events": ["endpoint.disabled"]}),
    )
    .await;
    let (customer, _) = switchable(410).await;
    app.create_endpoint(&acme, &customer.url).await;
    app.publish(&acme, "order.paid", json!({})).await;

    // 550: dead at once, with what the server said.
    let dead = wait_until(
        Duration::from_secs(30),
        "the refused notice to die",
        || async {
            let dlq = app
                .get(&format!(
                    "/v1/apps/hookline/dlq?endpoint_id={}",
                    refused["id"].as_str().unwrap()
                ))
                .await;
            dlq["data"].as_array().unwrap().first().cloned()
        },
    )
    .await;
    assert_eq!(dead["dead_reason"], "client_error");
    let attempts = app.attempts("hookline", dead["id"].as_str().unwrap()).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["status_code"], Value::Null);
    let said = attempts[0]["response_body"].as_str().unwrap();
    assert!(
        said.contains("550") && said.contains("No such user here"),
        "{said}"
    );

    // 451 (busy for now), and 554 (a policy of the server's: permanent, but
    // not about the mailbox, so the operator's to fix): retried, so with one
    // attempt per round each round runs out of attempts, never refused.
    for (channel, mailbox, code) in [
        (&busy, "busy@acme.example", 451),
        (&policy, "policy@acme.example", 554),
    ] {
        let ended = wait_until(
            Duration::from_secs(30),
            "a retried notice's round to end",
            || async {
                let dlq = app
                    .get(&format!(
                        "/v1/apps/hookline/dlq?endpoint_id={}",
                        channel["id"].as_str().unwrap()
                    ))
                    .await;
                dlq["data"].as_array().unwrap().first().cloned()
            },
        )
        .await;
        assert_eq!(ended["dead_reason"], "retries_exhausted", "{mailbox}");
        assert!(
            smtp.recipients().contains(&(mailbox.to_owned(), code)),
            "{mailbox} answered {code}"
        );
    }
    assert!(smtp.mails().is_empty());
}

async fn channels_are_checked_listed_masked_and_removed_by_their_app_only(engine: Engine) {
    let smtp = SmtpServer::start().await;
    let app = spawn(engine, &smtp).await;
    let acme = app.create_app().await;
    let other = app.create_app().await;
    let path = format!("/v1/apps/{acme}/notifications");
    for (body, status, code) in [
        (
            json!({"kind": "email", "to": "not an address"}),
            422,
            "validation_failed",
        ),
        (
            json!({"kind": "email", "to": "ops@acme.example\r\nBcc: x@y.example"}),
            422,
            "validation_failed",
        ),
        (
            json!({"kind": "email", "to": "ops@acme.example", "events": []}),
            422,
            "validation_failed",
        ),
        (
            json!({"kind": "email", "to": "ops@acme.example", "events": ["endpoint.created"]}),
            422,
            "validation_failed",
        ),
        (
            json!({"kind": "fax", "to": "ops@acme.example"}),
            422,
            "validation_failed",
        ),
        (
            json!({"kind": "slack", "to": "ftp://hooks.example/x"}),
            422,
            "validation_failed",
        ),
    ] {
        let answer = app.call(Method::POST, &path, Some(&body), status).await;
        assert_eq!(answer["code"], code, "{body}: {answer}");
    }
    let slack = channel(
        &app,
        &acme,
        json!({"kind": "slack", "to": "http://127.0.0.1:9/services/T1/B2/secretXy9z"}),
    )
    .await;
    assert_eq!(slack["to"], "http://127.0.0.1:9/services/…Xy9z");
    assert_eq!(
        (slack["enabled"].clone(), slack.get("disabled_reason")),
        (json!(true), None)
    );
    // The operator sees it among the internal app's endpoints, and may pause it
    // there; where it sends and its scope change only through its app.
    let as_endpoint = format!(
        "/v1/apps/hookline/endpoints/{}",
        slack["id"].as_str().unwrap()
    );
    for patch in [
        json!({"url": "https://elsewhere.example/x"}),
        json!({"filter": null}),
        json!({"paused": true, "description": "x"}),
    ] {
        let refused = app
            .call(Method::PATCH, &as_endpoint, Some(&patch), 409)
            .await;
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("notification channel"),
            "{refused}"
        );
    }
    let paused = app
        .call(
            Method::PATCH,
            &as_endpoint,
            Some(&json!({"paused": true})),
            200,
        )
        .await;
    assert_eq!(paused["filter"], format!("/app_id = \"{acme}\""));
    app.call(
        Method::PATCH,
        &as_endpoint,
        Some(&json!({"paused": false})),
        200,
    )
    .await;
    assert_eq!(slack["events"].as_array().unwrap().len(), 6);
    let mail = channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "ops@acme.example", "events": ["delivery.dead", "endpoint.failing", "delivery.dead"]}),
    )
    .await;
    assert_eq!(mail["events"], json!(["endpoint.failing", "delivery.dead"]));
    let listed = app.get(&path).await;
    let ids: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, vec![&slack["id"], &mail["id"]]);
    assert_eq!(listed["data"][0], slack);
    // Another app sees none of them, and cannot remove them.
    assert_eq!(
        app.get(&format!("/v1/apps/{other}/notifications")).await["data"],
        json!([])
    );
    let remove =
        |of: &str, id: &Value| format!("/v1/apps/{of}/notifications/{}", id.as_str().unwrap());
    app.call(Method::DELETE, &remove(&other, &slack["id"]), None, 404)
        .await;
    // Nor is a channel an ordinary endpoint of the app.
    app.call(
        Method::GET,
        &format!(
            "/v1/apps/{acme}/endpoints/{}",
            slack["id"].as_str().unwrap()
        ),
        None,
        404,
    )
    .await;
    app.call(Method::DELETE, &remove(&acme, &slack["id"]), None, 204)
        .await;
    app.call(Method::DELETE, &remove(&acme, &slack["id"]), None, 404)
        .await;
    assert_eq!(app.get(&path).await["data"], json!([mail]));
    // At most 20 channels per app.
    for n in 1..20 {
        channel(
            &app,
            &acme,
            json!({"kind": "email", "to": format!("ops{n}@acme.example")}),
        )
        .await;
    }
    let full = app
        .call(
            Method::POST,
            &path,
            Some(&json!({"kind": "email", "to": "one@more.example"})),
            409,
        )
        .await;
    assert!(
        full["detail"]
            .as_str()
            .unwrap()
            .contains("20 notification channels"),
        "{full}"
    );
    // Deleting the app removes its channels from the operational app.
    app.call(Method::DELETE, &format!("/v1/apps/{acme}"), None, 204)
        .await;
    let left = app.get("/v1/apps/hookline/endpoints?limit=250").await;
    assert_eq!(left["data"], json!([]), "{left}");

    // Without an SMTP server, e-mail channels cannot be made (chat ones can).
    let bare = TestApp::spawn(engine).await;
    let app_id = bare.create_app().await;
    let refused = bare
        .call(
            Method::POST,
            &format!("/v1/apps/{app_id}/notifications"),
            Some(&json!({"kind": "email", "to": "ops@acme.example"})),
            422,
        )
        .await;
    assert!(
        refused["detail"].as_str().unwrap().contains("smtp_url"),
        "{refused}"
    );
}

/// An app whose portal is in Hebrew (`portal.language`) is told in Hebrew:
/// the mail's subject and text, and the chat's, with the endpoint's name and
/// the status set in as they are.
async fn an_app_whose_portal_speaks_hebrew_is_told_in_hebrew(engine: Engine) {
    let smtp = SmtpServer::start().await;
    let app = spawn(engine, &smtp).await;
    let chat = Receiver::start().await;
    let acme = app.create_app().await;
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{acme}"),
        Some(&json!({"portal": {"language": "he"}})),
        200,
    )
    .await;
    let events = json!(["endpoint.failing"]);
    channel(
        &app,
        &acme,
        json!({"kind": "email", "to": "ops@acme.example", "events": events}),
    )
    .await;
    channel(
        &app,
        &acme,
        json!({"kind": "slack", "to": chat.url, "events": events}),
    )
    .await;
    let (customer, _status) = switchable(503).await;
    app.create_endpoint_with(&acme, &customer.url, json!({"description": "Orders"}))
        .await;
    fail_twenty_five_times(&app, &acme, &customer).await;

    let hebrew = |text: &str| text.chars().any(|c| ('\u{05D0}'..='\u{05EA}').contains(&c));
    let mails = smtp.wait_for_mails(1).await;
    let subject = mails[0].decoded_header("subject").unwrap();
    assert_eq!(subject, "נקודת הקצה \u{2068}Orders\u{2069} נכשלת");
    let body = mails[0].body();
    assert!(hebrew(&body), "{body}");
    assert!(body.contains("503"), "{body}");
    assert!(!body.contains("failed in a row"), "{body}");
    let posted = chat.wait_for_requests(1).await;
    let slack = posted[0].json();
    assert_eq!(slack["text"].as_str().unwrap(), subject);
    let section = slack["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(hebrew(section) && section.contains("503"), "{section}");
}
