//! Hostile input, table-driven: each request is refused with a clear 4xx
//! problem (RFC 9457, with its stable code) and leaves nothing behind.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{both_engines, Engine, TestApp, ADMIN_TOKEN};

both_engines!(hostile_requests_get_a_clear_4xx_and_change_nothing);

/// One hostile request and what it must get.
struct Case {
    what: &'static str,
    method: Method,
    path: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    status: u16,
    /// The problem's code; `None` where the HTTP layer answers before the API
    /// (a header block too large is refused by the server itself).
    code: Option<&'static str>,
}

fn case(
    what: &'static str,
    method: Method,
    path: String,
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        what,
        method,
        path,
        headers: Vec::new(),
        body,
        status,
        code: Some(code),
    }
}

fn nested(depth: usize) -> Vec<u8> {
    let mut body = br#"{"event_type": "order.paid", "payload": "#.to_vec();
    body.extend(std::iter::repeat_n(b'[', depth));
    body.extend(std::iter::repeat_n(b']', depth));
    body.push(b'}');
    body
}

async fn hostile_requests_get_a_clear_4xx_and_change_nothing(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, "https://a.example/hook").await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/apps/{app_id}/events");
    let json_of = |value: serde_json::Value| Some(value.to_string().into_bytes());

    let mut cases = vec![
        case(
            "a payload over max_payload_bytes",
            Method::POST,
            events.clone(),
            json_of(json!({"event_type": "order.paid", "payload": {"x": "a".repeat(300 * 1024)}})),
            413,
            "payload_too_large",
        ),
        // (Four times the limit: a body much larger than the sockets' buffers
        // races the server's early answer, and the client may see the reset first.)
        case(
            "a body of spaces four times the limit",
            Method::POST,
            events.clone(),
            Some(vec![b' '; 1024 * 1024]),
            413,
            "payload_too_large",
        ),
        case(
            "JSON nested 10,000 levels",
            Method::POST,
            events.clone(),
            Some(nested(10_000)),
            400,
            "malformed_json",
        ),
        case(
            "invalid UTF-8",
            Method::POST,
            events.clone(),
            Some(b"{\"event_type\": \"\xff\xfe\"}".to_vec()),
            400,
            "malformed_json",
        ),
        case(
            "not JSON at all",
            Method::POST,
            events.clone(),
            Some(b"event_type=order.paid".to_vec()),
            400,
            "malformed_json",
        ),
        case(
            "an empty body",
            Method::POST,
            events.clone(),
            Some(Vec::new()),
            400,
            "malformed_json",
        ),
        case(
            "NUL in an event type",
            Method::POST,
            events.clone(),
            json_of(json!({"event_type": "order\u{0}paid", "payload": {}})),
            422,
            "validation_failed",
        ),
        case(
            "NUL in an app name",
            Method::POST,
            "/v1/apps".into(),
            json_of(json!({"name": "a\u{0}b"})),
            422,
            "validation_failed",
        ),
        case(
            "an unknown field",
            Method::POST,
            events.clone(),
            json_of(json!({"event_type": "order.paid", "payload": {}, "evil": true})),
            422,
            "validation_failed",
        ),
        case(
            "NUL in an app's uid in the path",
            Method::GET,
            "/v1/apps/x%00y".into(),
            None,
            404,
            "not_found",
        ),
        case(
            "NUL in the app filter of the key listing",
            Method::GET,
            "/v1/keys?app=%00".into(),
            None,
            404,
            "not_found",
        ),
        case(
            "NUL in an event type's name in the path",
            Method::GET,
            "/v1/event-types/a%00b".into(),
            None,
            404,
            "not_found",
        ),
        case(
            "a body that is an array, not an object",
            Method::POST,
            events.clone(),
            json_of(json!(["order.paid", {}])),
            422,
            "validation_failed",
        ),
        case(
            "an object given as an array of its fields",
            Method::POST,
            format!("/v1/apps/{app_id}/endpoints"),
            json_of(json!({"url": "https://b.example/hook", "retry": [1, 2, 3, 4]})),
            422,
            "validation_failed",
        ),
        case(
            "a host no DNS name can have",
            Method::POST,
            format!("/v1/apps/{app_id}/endpoints"),
            json_of(json!({"url": "https://aa*.example/hook"})),
            422,
            "validation_failed",
        ),
        case(
            "a payload of the wrong type",
            Method::POST,
            events.clone(),
            json_of(json!({"event_type": 42, "payload": {}})),
            422,
            "validation_failed",
        ),
        case(
            "limit 0",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?limit=0"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "limit 10^12",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?limit=1000000000000"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "limit -1",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?limit=-1"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "limit not a number",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?limit=all"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "a cursor the listing never made",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?before=%27%3B%20DROP%20TABLE"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "an unknown query parameter",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?sort=evil"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "thousands of query parameters",
            Method::GET,
            format!(
                "/v1/apps/{app_id}/deliveries?{}",
                (0..3000)
                    .map(|i| format!("p{i}=x"))
                    .collect::<Vec<_>>()
                    .join("&")
            ),
            None,
            400,
            "invalid_query",
        ),
        case(
            "a status filter that is not one",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?status=9xx"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "a time that is not one",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries?since=yesterday"),
            None,
            400,
            "invalid_query",
        ),
        case(
            "an endpoint id where a delivery id goes",
            Method::GET,
            format!("/v1/apps/{app_id}/deliveries/{endpoint_id}"),
            None,
            404,
            "not_found",
        ),
        case(
            "a delivery id where an endpoint id goes",
            Method::GET,
            format!("/v1/apps/{app_id}/endpoints/dlv_01J00000000000000000000000"),
            None,
            404,
            "not_found",
        ),
        case(
            "an id that is no id",
            Method::GET,
            format!("/v1/apps/{app_id}/events/..%2F..%2Fetc%2Fpasswd"),
            None,
            404,
            "not_found",
        ),
        case(
            "an app that does not exist",
            Method::GET,
            "/v1/apps/app_01J00000000000000000000000/endpoints".into(),
            None,
            404,
            "not_found",
        ),
        case(
            "a route that does not exist",
            Method::GET,
            "/v1/everything".into(),
            None,
            404,
            "not_found",
        ),
        case(
            "a method the route lacks",
            Method::PUT,
            events.clone(),
            None,
            405,
            "method_not_allowed",
        ),
    ];
    cases.push(Case {
        what: "a header block of 1 MiB",
        method: Method::GET,
        path: format!("/v1/apps/{app_id}/endpoints"),
        headers: vec![("x-filler".into(), "a".repeat(1024 * 1024))],
        body: None,
        status: 431,
        code: None,
    });
    cases.push(Case {
        what: "a thousand headers",
        method: Method::GET,
        path: format!("/v1/apps/{app_id}/endpoints"),
        headers: (0..1000).map(|i| (format!("x-h{i}"), "v".into())).collect(),
        body: None,
        status: 431,
        code: None,
    });

    for case in cases {
        let mut request = app
            .http
            .request(case.method.clone(), format!("{}{}", app.base, case.path))
            .bearer_auth(ADMIN_TOKEN);
        for (name, value) in &case.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(body) = case.body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.what));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, case.status, "{}: {text}", case.what);
        if let Some(code) = case.code {
            assert_eq!(content_type, "application/problem+json", "{}", case.what);
            let problem: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(problem["code"], code, "{}: {problem}", case.what);
            assert!(
                problem["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "{}: a human message",
                case.what
            );
        }
    }

    // Nothing of it was written: one app, one endpoint, no event.
    assert_eq!(
        app.get("/v1/apps").await["data"].as_array().unwrap().len(),
        1
    );
    assert_eq!(app.get(&events).await["data"], json!([]));
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
