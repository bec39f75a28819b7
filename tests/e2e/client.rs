//! `hookline-client` against the real server: the typed calls read back what
//! they wrote, listings stream every row across pages, refusals are the API's
//! problems, and a publish whose answer was lost on the way is sent again with
//! the same idempotency key — one event, one delivery, never two.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use hookline_client::types::{
    BatchItem, BatchItemAnswer, CreateApp, CreateEndpoint, DeliveriesQuery, DeliveryState,
    EventsQuery, ExplanationCode, PageQuery, PublishRequest, StateParam, TimelineWindow,
    UpdateEndpoint,
};
use hookline_client::{Client, Error, Retries};
use serde_json::json;

use crate::helpers::{both_engines, Engine, Receiver, TestApp, ADMIN_TOKEN};

both_engines!(
    the_client_writes_reads_and_streams_with_the_servers_types,
    a_publish_whose_answer_was_lost_is_retried_into_one_event,
    a_batch_whose_answer_was_lost_is_retried_into_the_same_events,
);

/// Quick retries: the tests wait on them.
fn quick() -> Retries {
    Retries {
        attempts: 4,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(50),
    }
}

async fn the_client_writes_reads_and_streams_with_the_servers_types(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let hookline = Client::builder(&app.base, ADMIN_TOKEN)
        .retries(quick())
        .build()
        .unwrap();

    let created = hookline
        .create_app(&CreateApp {
            name: "Acme".into(),
            uid: Some("acme".into()),
            ..CreateApp::default()
        })
        .await
        .unwrap();
    assert_eq!(hookline.get_app("acme").await.unwrap(), created);
    let endpoint = hookline
        .create_endpoint(
            "acme",
            &CreateEndpoint {
                event_types: Some(vec!["order.*".into()]),
                ..CreateEndpoint::new(&receiver.url)
            },
        )
        .await
        .unwrap();
    let secret = endpoint.secret.clone().expect("the secret, on creation");
    assert_eq!(
        hookline
            .endpoint_secret("acme", &endpoint.id)
            .await
            .unwrap()
            .key,
        secret
    );

    // Five events of one key: the receiver gets them in order; the client reads them back.
    let mut ids = Vec::new();
    for n in 0..5 {
        let published = hookline
            .publish(
                "acme",
                &PublishRequest::new("order.paid", json!({"n": n})).ordering_key("order-1"),
            )
            .await
            .unwrap();
        assert!(!published.replayed);
        assert!(published.idempotency_key.starts_with("hkc_"));
        assert_eq!(published.event.deliveries.len(), 1);
        ids.push(published.event.id);
    }
    let received = receiver.wait_for_requests(5).await;
    let sent: Vec<&str> = received.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(sent, ids.iter().map(String::as_str).collect::<Vec<_>>());
    let event = hookline.get_event("acme", &ids[2]).await.unwrap();
    assert_eq!(event.payload, json!({"n": 2}));
    assert_eq!(event.ordering_key.as_deref(), Some("order-1"));

    // Listings stream across pages of two, newest first.
    let events: Vec<String> = hookline
        .events_stream(
            "acme",
            EventsQuery {
                limit: Some(2),
                ..EventsQuery::default()
            },
        )
        .map_ok(|e| e.id)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(events, ids.iter().rev().cloned().collect::<Vec<_>>());
    let delivered = crate::helpers::wait_until(
        Duration::from_secs(10),
        "five succeeded deliveries",
        || async {
            let succeeded: Vec<_> = hookline
                .deliveries_stream(
                    "acme",
                    DeliveriesQuery {
                        limit: Some(2),
                        state: Some(StateParam::Succeeded),
                        ..DeliveriesQuery::default()
                    },
                )
                .try_collect()
                .await
                .unwrap();
            (succeeded.len() == 5).then_some(succeeded)
        },
    )
    .await;
    assert!(delivered
        .iter()
        .all(|d| d.state == DeliveryState::Succeeded));
    let attempts: Vec<_> = hookline
        .delivery_attempts_stream("acme", &delivered[0].id, PageQuery::default())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status_code, Some(200));
    let stats = hookline.endpoint_stats("acme", &endpoint.id).await.unwrap();
    assert_eq!(stats.deliveries["succeeded"], 5);
    assert_eq!(stats.windows["hour"].attempts, 5);
    // The timeline counts the same five, in the last hour's minutes.
    let timeline = hookline
        .endpoint_timeline("acme", &endpoint.id, Some(TimelineWindow::Hour))
        .await
        .unwrap();
    assert_eq!(timeline.buckets.len(), 60);
    assert_eq!(
        timeline
            .buckets
            .iter()
            .map(|b| (b.delivered, b.failed))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        (5, 0)
    );
    assert_eq!(attempts[0].explanation.code, ExplanationCode::Delivered);
    // A client in Hebrew reads the same attempt explained in Hebrew.
    let hebrew = Client::builder(&app.base, ADMIN_TOKEN)
        .language(hookline_core::language::Language::He)
        .build()
        .unwrap();
    let said: Vec<_> = hebrew
        .delivery_attempts_stream("acme", &delivered[0].id, PageQuery::default())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(said[0].explanation.code, ExplanationCode::Delivered);
    assert_ne!(said[0].explanation.message, attempts[0].explanation.message);
    assert!(
        said[0]
            .explanation
            .message
            .chars()
            .any(|c| ('\u{05D0}'..='\u{05EA}').contains(&c)),
        "{}",
        said[0].explanation.message
    );
    // Nothing is wrong.
    let incidents = hookline.incidents("acme", None).await.unwrap();
    assert!(incidents.data.is_empty(), "{incidents:?}");
    // The five events, through a filter that lets none of them through.
    let preview = hookline
        .filter_preview(
            "acme",
            &hookline_client::types::FilterPreview {
                filter: Some("/amount > 1000000".into()),
                event_types: None,
            },
        )
        .await
        .unwrap();
    assert_eq!((preview.data.len(), preview.passed), (5, 0));
    // A Teams channel for the app's notices: made, listed (its URL masked), removed.
    let teams = hookline
        .create_notification_channel(
            "acme",
            &hookline_client::types::CreateNotificationChannel {
                kind: hookline_client::types::ChannelKind::Teams,
                to: format!("{}/workflows/abc/secret1234", receiver.url),
                events: Some(vec![
                    hookline_client::types::NotificationEvent::EndpointFailing,
                ]),
            },
        )
        .await
        .unwrap();
    assert!(teams.to.ends_with("/…1234"), "{teams:?}");
    let channels = hookline.notification_channels("acme").await.unwrap();
    assert_eq!(channels.data, vec![teams.clone()]);
    hookline
        .delete_notification_channel("acme", &teams.id)
        .await
        .unwrap();
    assert!(hookline
        .notification_channels("acme")
        .await
        .unwrap()
        .data
        .is_empty());

    // A patch changes only what it names; `null` clears.
    let patched = hookline
        .update_endpoint(
            "acme",
            &endpoint.id,
            &UpdateEndpoint {
                description: Some("orders".into()),
                event_types: Some(None),
                ..UpdateEndpoint::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            patched.description.as_str(),
            patched.event_types,
            patched.url
        ),
        ("orders", None, endpoint.url.clone())
    );
    let endpoints: Vec<_> = hookline
        .endpoints_stream("acme", PageQuery::default())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(
        endpoints[0].secret, None,
        "a listing never shows the secret"
    );

    // Refusals are the API's problems, with their codes.
    let missing = hookline
        .get_delivery("acme", "dlv_01J00000000000000000000000")
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some("not_found"));
    assert!(
        missing.to_string().starts_with("404 not_found: "),
        "{missing}"
    );
    let event = PublishRequest::new("order.paid", json!({"n": 1}));
    hookline
        .publish_with_key("acme", &event, "key-1")
        .await
        .unwrap();
    let again = hookline
        .publish_with_key("acme", &event, "key-1")
        .await
        .unwrap();
    assert!(again.replayed);
    let reused = hookline
        .publish_with_key(
            "acme",
            &PublishRequest::new("order.paid", json!({"n": 2})),
            "key-1",
        )
        .await
        .unwrap_err();
    assert_eq!(reused.code(), Some("idempotency_key_reused"));
    // `..` is not an id: sent, a URL parser would make it the app's own path.
    let climbing = hookline.delete_endpoint("acme", "..").await.unwrap_err();
    assert!(matches!(climbing, Error::Segment(_)), "{climbing}");
    assert_eq!(hookline.get_app("acme").await.unwrap(), created);
    let dotted = hookline
        .create_app(&CreateApp {
            name: "Dots".into(),
            uid: Some("..".into()),
            ..CreateApp::default()
        })
        .await
        .unwrap_err();
    assert_eq!(dotted.code(), Some("validation_failed"), "{dotted}");
    let bad = hookline
        .create_endpoint(
            "acme",
            &CreateEndpoint {
                filter: Some("/amount >".into()),
                ..CreateEndpoint::new(&receiver.url)
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&bad, Error::Api(problem) if problem.code == "invalid_filter" && problem.status == 422),
        "{bad}"
    );
}

/// A gateway in front of Hookline that passes the first `lose` POSTs on and
/// then answers 502 instead of Hookline's answer, as a load balancer does
/// whose upstream connection dropped after the request went through.
struct LossyGateway {
    url: String,
    forwarded: Arc<AtomicUsize>,
}

impl LossyGateway {
    async fn start(upstream: &str, lose: usize) -> Self {
        use axum::body::Bytes;
        use axum::http::{HeaderMap, Method, StatusCode, Uri};
        use axum::response::IntoResponse;
        let upstream = upstream.to_owned();
        let forwarded = Arc::new(AtomicUsize::new(0));
        let http = reqwest::Client::new();
        let count = forwarded.clone();
        let handler = move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (upstream, http, count) = (upstream.clone(), http.clone(), count.clone());
            async move {
                let mut request = http.request(method.clone(), format!("{upstream}{uri}"));
                for name in ["authorization", "content-type", "idempotency-key"] {
                    if let Some(value) = headers.get(name) {
                        request = request.header(name, value.as_bytes());
                    }
                }
                let answer = request.body(body).send().await.unwrap();
                let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
                let replayed = answer
                    .headers()
                    .get("idempotent-replayed")
                    .map(|v| v.to_str().unwrap().to_owned());
                let bytes = answer.bytes().await.unwrap();
                if method == Method::POST && count.fetch_add(1, Ordering::SeqCst) < lose {
                    return (StatusCode::BAD_GATEWAY, "upstream connection lost").into_response();
                }
                let mut response = (status, bytes).into_response();
                response.headers_mut().insert(
                    "content-type",
                    axum::http::HeaderValue::from_static("application/json"),
                );
                if let Some(replayed) = replayed {
                    response
                        .headers_mut()
                        .insert("idempotent-replayed", replayed.parse().unwrap());
                }
                response
            }
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = axum::Router::new().fallback(handler);
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { url, forwarded }
    }
}

async fn a_publish_whose_answer_was_lost_is_retried_into_one_event(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let gateway = LossyGateway::start(&app.base, 2).await;
    let hookline = Client::builder(&gateway.url, ADMIN_TOKEN)
        .retries(quick())
        .build()
        .unwrap();

    let published = hookline
        .publish(&app_id, &PublishRequest::new("order.paid", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(
        gateway.forwarded.load(Ordering::SeqCst),
        3,
        "two lost, one answered"
    );
    assert!(
        published.replayed,
        "the third try found the first one's event"
    );
    let events = app.get(&format!("/v1/apps/{app_id}/events")).await;
    let events = events["data"].as_array().unwrap();
    assert_eq!(events.len(), 1, "one event: {events:?}");
    assert_eq!(events[0]["id"], published.event.id.as_str());
    let received = receiver.wait_for_requests(1).await;
    assert_eq!(received[0].header("webhook-id"), published.event.id);

    // Without retries, the lost answer is the caller's to see (nothing hidden).
    let lossy = LossyGateway::start(&app.base, 1).await;
    let once = Client::builder(&lossy.url, ADMIN_TOKEN)
        .retries(Retries::none())
        .build()
        .unwrap();
    let lost = once
        .publish(&app_id, &PublishRequest::new("order.paid", json!({"n": 2})))
        .await
        .unwrap_err();
    assert!(
        matches!(lost, Error::Unexpected { status: 502, .. }),
        "{lost}"
    );
    let events = app.get(&format!("/v1/apps/{app_id}/events")).await;
    assert_eq!(
        events["data"].as_array().unwrap().len(),
        2,
        "the event the caller was not told about is stored all the same"
    );
}

async fn a_batch_whose_answer_was_lost_is_retried_into_the_same_events(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let gateway = LossyGateway::start(&app.base, 1).await;
    let hookline = Client::builder(&gateway.url, ADMIN_TOKEN)
        .retries(quick())
        .build()
        .unwrap();

    let items = (0..3)
        .map(|n| BatchItem {
            event_type: "order.paid".into(),
            payload: json!({"n": n}),
            ordering_key: None,
            idempotency_key: None,
        })
        .collect();
    let answers = hookline.publish_batch(&app_id, items).await.unwrap();
    assert_eq!(gateway.forwarded.load(Ordering::SeqCst), 2);
    let ids: Vec<String> = answers
        .iter()
        .map(|answer| match answer {
            BatchItemAnswer::Published {
                status: 202,
                idempotent_replayed: true,
                event,
            } => event.id.clone(),
            other => panic!("each item the first try's event again: {other:?}"),
        })
        .collect();
    let events = app.get(&format!("/v1/apps/{app_id}/events")).await;
    let mut stored: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    stored.reverse();
    assert_eq!(stored, ids, "three events, once each");
    assert_eq!(receiver.wait_for_requests(3).await.len(), 3);
}
