//! The customer portal's server side, over HTTP on both engines: links, the
//! one-time exchange of their code for a session, the session as an app key,
//! the app's portal settings, and the headers and caching of the portal's files.
//! (What a customer does in the portal is `portal.rs`, in a real browser.)

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, Engine, TestApp};

both_engines!(
    a_link_opens_one_session_with_its_capabilities,
    a_session_signs_out_and_its_key_stops_working,
    the_session_key_lives_in_a_cookie_for_the_portals_own_requests,
    codes_that_cannot_open_a_session_say_why,
    portal_settings_are_checked_and_frame_the_page,
    portal_files_are_served_with_strict_headers,
);

/// `POST /v1/apps/{app}/portal-access`; the link.
async fn link(app: &TestApp, app_id: &str, body: Value) -> Value {
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/portal-access"),
        Some(&body),
        201,
    )
    .await
}

/// The code in a link's fragment.
fn code_of(link: &Value) -> String {
    let url = link["url"].as_str().unwrap();
    let rest = url.split_once("#code=").unwrap().1;
    rest.split('&').next().unwrap().to_owned()
}

/// `POST /portal/session` without a key: status and body.
async fn exchange(app: &TestApp, code: &str) -> (u16, Value, reqwest::header::HeaderMap) {
    let response = app
        .http
        .post(format!("{}/portal/session", app.base))
        .json(&json!({ "code": code }))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, response.json().await.unwrap(), headers)
}

/// `GET path` without a key (the portal's page and files need none).
async fn get_keyless(app: &TestApp, path: &str) -> reqwest::Response {
    app.http
        .get(format!("{}{path}", app.base))
        .send()
        .await
        .unwrap()
}

/// A request with `token` as the bearer key: its status.
async fn as_session(app: &TestApp, token: &str, method: Method, path: &str, body: Value) -> u16 {
    app.http
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn a_link_opens_one_session_with_its_capabilities(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.create_app().await;
    let b = app.create_app().await;
    let endpoint = app.create_endpoint(&a, "https://a.example/hook").await;
    let endpoint = endpoint["id"].as_str().unwrap();

    let read_only = link(&app, &a, json!({})).await;
    let url = read_only["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/portal/apps/{a}/#code=hkp_", app.base)),
        "{url}"
    );
    assert_eq!(read_only["capabilities"], json!(["read"]));
    assert!(!url.contains("&to=") && !url.contains("redeem"), "{url}");

    // A link may name the screen it opens on, and be spent on load (an
    // iframe's `src`); its fragment carries both, and its code is a code.
    let deep = link(
        &app,
        &a,
        json!({"screen": "/deliveries?state=dead&endpoint_id=ep_1", "redeem": "load"}),
    )
    .await;
    assert!(
        deep["url"]
            .as_str()
            .unwrap()
            .ends_with("&to=/deliveries%3Fstate%3Ddead%26endpoint_id%3Dep_1&redeem=load"),
        "{deep}"
    );
    assert!(code_of(&deep).starts_with("hkp_") && !code_of(&deep).contains('&'));
    for bad in [
        json!({"screen": "deliveries"}),
        json!({"screen": "/deliveries#x"}),
        json!({"screen": "/a b"}),
        json!({"screen": "/deliveries/100%"}),
        json!({"screen": "/deliveries/../keys"}),
        json!({"screen": format!("/{}", "a".repeat(200))}),
        json!({"redeem": "later"}),
    ] {
        let refused = app
            .call(
                Method::POST,
                &format!("/v1/apps/{a}/portal-access"),
                Some(&bad),
                422,
            )
            .await;
        assert!(
            ["validation_failed", "invalid_body"].contains(&refused["code"].as_str().unwrap()),
            "{bad}: {refused}"
        );
    }

    let (status, session, headers) = exchange(&app, &code_of(&read_only)).await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["app_id"], a);
    assert_eq!(session["capabilities"], json!(["read"]));
    // The session lasts its own span (an hour by default) from sign-in, apart
    // from the link's end, and can be renewed up to 12 hours after sign-in.
    let time =
        |v: &Value| hookline_core::time::Timestamp::parse_rfc3339(v.as_str().unwrap()).unwrap();
    let signed_in = hookline_core::time::Timestamp::from_system_time(std::time::SystemTime::now());
    let hour = std::time::Duration::from_secs(3_600);
    let ends = time(&session["expires_at"]);
    assert!(
        ends <= signed_in + hour && ends > signed_in + hour - std::time::Duration::from_secs(60),
        "{session}"
    );
    let until = time(&session["renewable_until"]);
    assert!(
        until <= signed_in + hour * 12
            && until > signed_in + hour * 12 - std::time::Duration::from_secs(60),
        "{session}"
    );
    assert_eq!(headers["cache-control"], "no-store");
    let token = session["token"].as_str().unwrap();

    // The session is an app key: it reads its app, changes nothing, and sees
    // no other app.
    let get = |path: String| {
        let app = &app;
        async move { as_session(app, token, Method::GET, &path, Value::Null).await }
    };
    assert_eq!(get(format!("/v1/apps/{a}/endpoints")).await, 200);
    assert_eq!(get(format!("/v1/apps/{b}/endpoints")).await, 404);
    assert_eq!(
        get(format!("/v1/apps/{a}/endpoints/{endpoint}/secret")).await,
        403
    );
    assert_eq!(
        as_session(
            &app,
            token,
            Method::PATCH,
            &format!("/v1/apps/{a}/endpoints/{endpoint}"),
            json!({"paused": true})
        )
        .await,
        403
    );
    assert_eq!(get("/v1/apps".into()).await, 403);

    // More capabilities, when the SaaS grants them; `read` always.
    let managing = link(
        &app,
        &a,
        json!({"capabilities": ["endpoints", "secrets"], "ttl_secs": 600}),
    )
    .await;
    assert_eq!(
        managing["capabilities"],
        json!(["read", "endpoints", "secrets"])
    );
    let (_, session, _) = exchange(&app, &code_of(&managing)).await;
    let token = session["token"].as_str().unwrap();
    let secret_path = format!("/v1/apps/{a}/endpoints/{endpoint}/secret");
    assert_eq!(
        as_session(&app, token, Method::GET, &secret_path, Value::Null).await,
        200
    );

    // Sessions are keys: listed under their name, revoked one by one.
    let keys = app.get(&format!("/v1/keys?app={a}")).await;
    let sessions: Vec<&Value> = keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["name"] == "portal session")
        .collect();
    assert_eq!(sessions.len(), 2, "{keys}");
    app.call(
        Method::DELETE,
        &format!("/v1/keys/{}", session["session_id"].as_str().unwrap()),
        None,
        204,
    )
    .await;
    assert_eq!(
        as_session(&app, token, Method::GET, &secret_path, Value::Null).await,
        401
    );

    // Only admins mint links; lifetimes are bounded.
    let path = format!("/v1/apps/{a}/portal-access");
    let (status, ..) = {
        let response = app
            .http
            .post(format!("{}{path}", app.base))
            .bearer_auth(session["token"].as_str().unwrap())
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), ())
    };
    assert_eq!(status, 401, "a revoked session mints nothing");
    for ttl in [0, 59, 7 * 24 * 3600 + 1] {
        let answer = app
            .call(Method::POST, &path, Some(&json!({"ttl_secs": ttl})), 422)
            .await;
        assert_eq!(answer["code"], "validation_failed", "{ttl}");
    }
    let answer = app
        .call(
            Method::POST,
            &path,
            Some(&json!({"capabilities": ["admin"]})),
            422,
        )
        .await;
    assert_eq!(answer["code"], "validation_failed");
    app.call(
        Method::POST,
        "/v1/apps/app_01J00000000000000000000000/portal-access",
        Some(&json!({})),
        404,
    )
    .await;
}

/// Signing out ends the session whose key is the bearer: that key stops
/// working at once. It is idempotent (a spent key, or none, is a 204 that
/// changes nothing). A backend's app key is not a portal session: 404, and it
/// keeps working.
async fn a_session_signs_out_and_its_key_stops_working(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.create_app().await;
    let (status, session, _) = exchange(&app, &code_of(&link(&app, &a, json!({})).await)).await;
    assert_eq!(status, 200, "{session}");
    let token = session["token"].as_str().unwrap();
    let endpoints = format!("/v1/apps/{a}/endpoints");
    let call = |key: &str, method: Method, path: &str| {
        let (app, key, path) = (&app, key.to_owned(), path.to_owned());
        async move { as_session(app, &key, method, &path, Value::Null).await }
    };
    assert_eq!(call(token, Method::GET, &endpoints).await, 200);
    // Renewed while in use: its end moves (never past its renewable limit).
    let renewed = app
        .http
        .post(format!("{}/portal/session/renew", app.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(renewed.status(), 200);
    let renewed: Value = renewed.json().await.unwrap();
    let time =
        |v: &Value| hookline_core::time::Timestamp::parse_rfc3339(v.as_str().unwrap()).unwrap();
    assert!(
        time(&renewed["expires_at"]) > time(&session["expires_at"]),
        "{renewed} after {session}"
    );
    assert_eq!(call(token, Method::GET, &endpoints).await, 200);
    assert_eq!(renewed["renewable_until"], session["renewable_until"]);
    // It says what the session may do: a tab opened from a bookmark goes on with it.
    assert_eq!(renewed["app_id"], session["app_id"]);
    assert_eq!(renewed["capabilities"], session["capabilities"]);
    assert_eq!(call(token, Method::DELETE, "/portal/session").await, 204);
    // Signed out: nothing left to renew.
    assert_eq!(
        call(token, Method::POST, "/portal/session/renew").await,
        404
    );
    assert_eq!(call(token, Method::GET, &endpoints).await, 401);
    assert_eq!(call(token, Method::DELETE, "/portal/session").await, 204);

    let backend = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "backend", "app": a, "capabilities": ["read"]})),
            201,
        )
        .await;
    let backend = backend["key"].as_str().unwrap();
    assert_eq!(call(backend, Method::DELETE, "/portal/session").await, 404);
    // A key that is no session's is not renewed either.
    assert_eq!(
        call(backend, Method::POST, "/portal/session/renew").await,
        404
    );
    assert_eq!(call(backend, Method::GET, &endpoints).await, 200);
    // Nor is the admin key (the test client's own).
    app.call(Method::DELETE, "/portal/session", None, 404).await;
    app.call(Method::GET, "/v1/apps", None, 200).await;
    let keyless = app
        .http
        .delete(format!("{}/portal/session", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(keyless.status(), 204);
}

async fn codes_that_cannot_open_a_session_say_why(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.create_app().await;

    // Used twice.
    let first = link(&app, &a, json!({})).await;
    assert_eq!(exchange(&app, &code_of(&first)).await.0, 200);
    let (status, problem, _) = exchange(&app, &code_of(&first)).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (410, Some("portal_code_used"))
    );
    assert!(problem["detail"]
        .as_str()
        .unwrap()
        .contains("already opened"));

    // Expired: a code whose time is over (written through the store, as the
    // server's clock is the system's).
    let past = hookline_core::time::Timestamp::from_millis(1_000);
    let app_id: hookline_core::ids::AppId = a.parse().unwrap();
    let code = "hkp_expired";
    app.store()
        .apps()
        .create_portal_code(
            &hookline_core::signing::api_key::hash(code),
            &app_id,
            hookline_core::portal::default_capabilities(),
            past,
            std::time::Duration::from_secs(3_600),
            past,
        )
        .await
        .unwrap();
    let (status, problem, _) = exchange(&app, code).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (410, Some("portal_code_expired"))
    );

    // Unknown, and revoked with the app's keys.
    let (status, problem, _) = exchange(&app, "hkp_never_issued").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (401, Some("portal_code_invalid"))
    );
    let unopened = link(&app, &a, json!({})).await;
    let revoked = app
        .call(Method::DELETE, &format!("/v1/apps/{a}/keys"), None, 200)
        .await;
    assert_eq!(revoked["revoked"], 1, "the first link's session");
    let (status, problem, _) = exchange(&app, &code_of(&unopened)).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (401, Some("portal_code_invalid"))
    );

    // A code is never a key.
    let another = link(&app, &a, json!({})).await;
    assert_eq!(
        as_session(
            &app,
            &code_of(&another),
            Method::GET,
            &format!("/v1/apps/{a}"),
            Value::Null
        )
        .await,
        401
    );
    // Malformed bodies are the usual problems.
    let response = app
        .http
        .post(format!("{}/portal/session", app.base))
        .header("content-type", "application/json")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

async fn portal_settings_are_checked_and_frame_the_page(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let created = app
        .call(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "Acme", "portal": {
                "display_name": "Acme Hooks",
                "brand_color": "#0a7cff",
                "theme": "dark",
                "frame_origins": ["https://App.Acme.example/", "http://127.0.0.1:3000"]
            }})),
            201,
        )
        .await;
    let a = created["id"].as_str().unwrap();
    assert_eq!(
        created["portal"],
        json!({
            "display_name": "Acme Hooks",
            "brand_color": "#0a7cff",
            "theme": "dark",
            "frame_origins": ["https://app.acme.example", "http://127.0.0.1:3000"]
        })
    );
    let page = get_keyless(&app, &format!("/portal/apps/{a}/")).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.ends_with("frame-ancestors https://app.acme.example http://127.0.0.1:3000"),
        "{csp}"
    );

    for bad in [
        json!({"frame_origins": ["https://a.example; script-src *"]}),
        json!({"frame_origins": ["*"]}),
        json!({"brand_color": "blue"}),
        json!({"logo_url": "javascript:alert(1)"}),
        json!({"theme": "sepia"}),
        json!({"unknown": true}),
    ] {
        let answer = app
            .call(
                Method::PATCH,
                &format!("/v1/apps/{a}"),
                Some(&json!({ "portal": bad })),
                422,
            )
            .await;
        assert_eq!(answer["code"], "validation_failed", "{bad}");
    }
    // Nothing half-written: the settings are as they were.
    assert_eq!(
        app.get(&format!("/v1/apps/{a}")).await["portal"],
        created["portal"]
    );

    // Replaced whole; the default frames nowhere.
    let reset = app
        .call(
            Method::PATCH,
            &format!("/v1/apps/{a}"),
            Some(&json!({"portal": {}})),
            200,
        )
        .await;
    assert_eq!(
        reset["portal"],
        json!({"theme": "system", "frame_origins": []})
    );
    let page = get_keyless(&app, &format!("/portal/apps/{a}/")).await;
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.ends_with("frame-ancestors 'none'"), "{csp}");
}

async fn portal_files_are_served_with_strict_headers(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.create_app().await;
    let page = get_keyless(&app, &format!("/portal/apps/{a}/")).await;
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    let csp = headers["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["cache-control"], "no-store");
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    // HSTS only where the deployment's public URL is https (this one's is not).
    assert!(headers.get("strict-transport-security").is_none());
    let https = TestApp::spawn_with(engine, |c| {
        c.public_url = Some("https://hooks.example".into());
    })
    .await;
    for path in [format!("/portal/apps/{a}/"), "/healthz".to_owned()] {
        let answer = get_keyless(&https, &path).await;
        assert_eq!(
            answer.headers()["strict-transport-security"],
            "max-age=31536000",
            "{path}"
        );
    }

    // The page names its files by content hash; they are cached for good.
    let html = page.text().await.unwrap();
    let start = html
        .find("/portal/static/")
        .expect("the page names its files");
    let script = &html[start..];
    let script = &script[..script.find('"').unwrap()];
    assert!(!html.contains("{{STATIC}}"));
    let asset = get_keyless(&app, script).await;
    assert_eq!(asset.status(), 200, "{script}");
    assert_eq!(
        asset.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(asset.headers()["x-content-type-options"], "nosniff");
    assert!(asset.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .ends_with("frame-ancestors 'none'"));

    // Another hash, or a file that is not the portal's: 404.
    let hash = script.split('/').nth(3).unwrap();
    let file = &script[format!("/portal/static/{hash}/").len()..];
    for missing in [
        format!("/portal/static/0000000000000000/{file}"),
        format!("/portal/static/{hash}/nope.js"),
        format!("/portal/static/{hash}/index.html"),
        format!("/portal/static/{hash}/../../v1/apps"),
    ] {
        let response = get_keyless(&app, &missing).await;
        assert_eq!(response.status(), 404, "{missing}");
    }
    assert_eq!(headers["cross-origin-opener-policy"], "same-origin");
    for directive in [
        "img-src 'self' data:;",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }

    // The address tells no one which apps exist: the portal of no app, and
    // an app's uid (links carry ids), get the very page an app without
    // portal settings gets.
    let uid = app
        .call(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "Known", "uid": "known-customer"})),
            201,
        )
        .await;
    assert_eq!(uid["uid"], "known-customer");
    for address in [
        "/portal/apps/app_01J00000000000000000000000/".to_owned(),
        "/portal/apps/known-customer/".to_owned(),
        "/portal/apps/made-up-customer/".to_owned(),
    ] {
        let other = get_keyless(&app, &address).await;
        assert_eq!(other.status(), 200, "{address}");
        assert_eq!(
            other.headers()["content-security-policy"],
            headers["content-security-policy"],
            "{address}"
        );
        assert_eq!(other.text().await.unwrap(), html, "{address}");
    }
}

/// The portal page's session key lives in an HttpOnly, SameSite=Strict cookie
/// scoped to `/portal/` (not in the page's storage): it opens the `/v1` routes
/// under `/portal/api` only with the `x-portal-app` header naming its app (no
/// other site's request can carry that header), renews, and is cleared on sign-out.
async fn the_session_key_lives_in_a_cookie_for_the_portals_own_requests(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let a = app.create_app().await;
    let b = app.create_app().await;
    let (status, session, headers) =
        exchange(&app, &code_of(&link(&app, &a, json!({})).await)).await;
    assert_eq!(status, 200, "{session}");
    let cookie = headers["set-cookie"].to_str().unwrap().to_owned();
    let token = session["token"].as_str().unwrap();
    let pair = format!("hl_portal_{a}={token}");
    assert!(cookie.starts_with(&format!("{pair}; ")), "{cookie}");
    for attribute in ["Path=/portal/", "HttpOnly", "SameSite=Strict", "Max-Age="] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "http here: {cookie}");
    let send = |method: Method, path: String, app_header: Option<String>| {
        let (app, pair) = (&app, pair.clone());
        async move {
            let mut request = app
                .http
                .request(method, format!("{}{path}", app.base))
                .header("cookie", pair);
            if let Some(named) = app_header {
                request = request.header("x-portal-app", named);
            }
            request.send().await.unwrap()
        }
    };
    let endpoints = format!("/portal/api/v1/apps/{a}/endpoints");
    assert_eq!(
        send(Method::GET, endpoints.clone(), Some(a.clone()))
            .await
            .status(),
        200
    );
    // Without the header (a form another site posts, say), the cookie opens nothing;
    // naming another app finds no cookie of that app.
    assert_eq!(
        send(Method::GET, endpoints.clone(), None).await.status(),
        401
    );
    assert_eq!(
        send(Method::GET, endpoints.clone(), Some(b.clone()))
            .await
            .status(),
        401
    );
    // Its app's routes only: another app's resources are not found.
    let others = format!("/portal/api/v1/apps/{b}/endpoints");
    assert_eq!(
        send(Method::GET, others, Some(a.clone())).await.status(),
        404
    );
    // Renewed, then signed out: the answer clears the cookie, and it opens nothing.
    let renewed = send(
        Method::POST,
        "/portal/session/renew".into(),
        Some(a.clone()),
    )
    .await;
    assert_eq!(renewed.status(), 200);
    let out = send(Method::DELETE, "/portal/session".into(), Some(a.clone())).await;
    assert_eq!(out.status(), 204);
    let cleared = out.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cleared.starts_with(&format!("hl_portal_{a}=; ")) && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    assert_eq!(
        send(Method::GET, endpoints, Some(a.clone())).await.status(),
        401
    );

    // Reached over https, the cookie is Secure.
    let https = TestApp::spawn_with(engine, |c| {
        c.public_url = Some("https://hooks.example".into());
    })
    .await;
    let c = https.create_app().await;
    let (_, _, headers) = exchange(&https, &code_of(&link(&https, &c, json!({})).await)).await;
    assert!(headers["set-cookie"]
        .to_str()
        .unwrap()
        .ends_with("; Secure"));
}
