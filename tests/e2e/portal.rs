//! The customer portal in a real browser (Chromium through ChromeDriver)
//! against a real Hookline and a real receiver: what a customer does, screen
//! by screen, with axe-core on every screen. The server side alone is
//! `portal_access.rs`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::helpers::{wait_until, Engine, Receiver, Reply, TestApp};

const PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// A portal link for `app`, minted with `access` (`POST …/portal-access`'s body).
async fn link_with(app: &TestApp, app_id: &str, access: Value) -> String {
    let link = app
        .call(
            Method::POST,
            &format!("/v1/apps/{app_id}/portal-access"),
            Some(&access),
            201,
        )
        .await;
    link["url"].as_str().unwrap().to_owned()
}

/// A portal link for `app` with these capabilities besides `read`.
pub(crate) async fn portal_link(app: &TestApp, app_id: &str, capabilities: &[&str]) -> String {
    link_with(app, app_id, json!({ "capabilities": capabilities })).await
}

/// A link for an iframe's `src`, spent on load (nobody clicks "Continue" in a frame).
async fn framing_link(app: &TestApp, app_id: &str) -> String {
    link_with(app, app_id, json!({ "redeem": "load" })).await
}

/// A link to `app`'s portal with the code `code`, opened within `link_secs`,
/// whose session lasts `session_secs`: made through the store, as links made
/// over the API last a minute and their sessions five at least.
async fn short_link(
    app: &TestApp,
    app_id: &str,
    code: &str,
    link_secs: u64,
    session_secs: u64,
) -> String {
    let now = hookline_core::time::Timestamp::from_system_time(std::time::SystemTime::now());
    app.store()
        .apps()
        .create_portal_code(
            &hookline_core::signing::api_key::hash(code),
            &app_id.parse().unwrap(),
            hookline_core::portal::default_capabilities(),
            now + std::time::Duration::from_secs(link_secs),
            std::time::Duration::from_secs(session_secs),
            now,
        )
        .await
        .unwrap();
    format!("{}/portal/apps/{app_id}/#code={code}", app.base)
}

/// Every screen of a session with every capability (its route and name),
/// with `endpoint` and `delivery` as the ones shown alone.
pub(crate) fn every_screen(endpoint: &str, delivery: &str) -> [(String, &'static str); 8] {
    [
        ("/status".to_owned(), "status"),
        ("/endpoints".to_owned(), "endpoints"),
        (format!("/endpoints/{endpoint}"), "endpoint"),
        ("/deliveries".to_owned(), "deliveries"),
        (format!("/deliveries/{delivery}"), "delivery"),
        ("/catalog".to_owned(), "catalog"),
        ("/recover".to_owned(), "recover"),
        ("/notifications".to_owned(), "notifications"),
    ]
}

/// The portal's address of a screen (`#/…`) for `app`, once a session exists.
pub(crate) fn screen(app: &TestApp, app_id: &str, route: &str) -> String {
    format!("{}/portal/apps/{app_id}/#{route}", app.base)
}

pub(crate) async fn catalog(app: &TestApp) {
    for (name, description, example) in [
        (
            "order.paid",
            "An order was paid in full.",
            json!({"order_id": 42, "amount": 1999}),
        ),
        (
            "order.refunded",
            "An order was refunded.",
            json!({"order_id": 42}),
        ),
        (
            "invoice.created",
            "An invoice was issued.",
            json!({"order_id": 42}),
        ),
    ] {
        app.call(
            Method::POST,
            "/v1/event-types",
            Some(&json!({
                "name": name,
                "description": description,
                "schema": {
                    "type": "object",
                    "required": ["order_id"],
                    "properties": {
                        "order_id": {"type": "integer", "description": "The order's number."},
                        "amount": {"type": "integer", "description": "In cents."}
                    }
                },
                "example": example,
            })),
            201,
        )
        .await;
    }
}

/// Publishes `order.paid`; the delivery to the app's only endpoint.
pub(crate) async fn publish(app: &TestApp, app_id: &str, order: u64) -> String {
    let published = app
        .publish(app_id, "order.paid", json!({ "order_id": order }))
        .await;
    published["deliveries"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a delivery in {published}"))
        .to_owned()
}

/// Every journey a customer with full rights makes: endpoints, the endpoint
/// page with its secret and a test send, the delivery log filling itself, a
/// failed delivery explained and replayed, the catalog, a recover job; each
/// screen checked by axe-core, in light and in dark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_manages_endpoints_and_recovers_failed_deliveries() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let browser = Browser::start(1280, 900).await;

    // The link opens the Status screen (nothing is wrong), and the code
    // leaves the address bar; the Endpoints screen is one click away.
    let link = portal_link(&app, &app_id, &["endpoints", "secrets", "replay"]).await;
    browser.open_link(&link).await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    let url = browser.client.current_url().await.unwrap();
    assert!(!url.as_str().contains("code="), "{url}");
    // The session's key is in no storage a script can read: the page keeps
    // what it shows, and the key is an HttpOnly cookie.
    let readable = browser
        .run("return [Object.values(sessionStorage).concat(Object.values(localStorage)).some((v) => v.includes('token')), document.cookie];")
        .await;
    assert_eq!(readable, json!([false, ""]));
    browser
        .wait_text("[data-test=incidents-all-good]", "all good", |t| {
            t.contains("All good")
        })
        .await;
    browser.check_accessibility("status (all good)").await;
    browser.click("[data-test=nav-endpoints]").await;
    browser
        .wait_text("main", "the empty list", |t| {
            t.to_lowercase().contains("no endpoints")
        })
        .await;
    browser.check_accessibility("endpoints (empty)").await;

    // Create an endpoint for order.paid, picked from the catalog.
    browser.click("[data-test=endpoint-new]").await;
    browser.wait_for("[data-test=endpoint-form]").await;
    browser.fill("#endpoint-url", &receiver.url).await;
    browser
        .fill("#endpoint-description", "Orders into our ERP")
        .await;
    // "All event types" is said, not implied by nothing ticked: choosing
    // "only these" with none ticked is refused here, and nothing is made.
    let all = browser
        .run("return document.querySelector('[data-test=types-all]').checked;")
        .await;
    assert_eq!(
        all,
        json!(true),
        "a new endpoint starts with all event types"
    );
    browser.click("[data-test=types-some]").await;
    browser.click("[data-test=endpoint-save]").await;
    browser
        .wait_text(
            "[data-test=endpoint-form] [data-test=problem]",
            "no type picked",
            |t| t.contains("Pick at least one event type"),
        )
        .await;
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    browser
        .click("input[name=event_types][value='order.paid']")
        .await;
    browser.check_accessibility("endpoint form").await;
    // A payload filter that does not parse: the refusal names the position, nothing is made.
    browser.fill("#endpoint-filter", "/order_id >> 1").await;
    browser.click("[data-test=endpoint-save]").await;
    browser
        .wait_text("[data-test=endpoint-form]", "the filter's refusal", |t| {
            t.contains("filter at position 12")
        })
        .await;
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    // The refusal is tied to the field it is about, and has the focus there.
    let tied = browser
        .run(
            "const f = document.getElementById('endpoint-filter');
             const ids = (f.getAttribute('aria-describedby') || '').split(' ');
             const why = ids.map((id) => document.getElementById(id)).filter(Boolean).map((el) => el.textContent).join(' ');
             return [f.getAttribute('aria-invalid'), document.activeElement === f, why.includes('position 12')];",
        )
        .await;
    assert_eq!(tied, json!(["true", true, true]));
    browser.check_accessibility("endpoint form (refused)").await;
    browser.fill("#endpoint-filter", "/order_id >= 0").await;
    browser.click("[data-test=endpoint-save]").await;
    let endpoints = wait_until(PATIENCE, "the endpoint over the API", || async {
        let list = app.get(&format!("/v1/apps/{app_id}/endpoints")).await;
        let data = list["data"].as_array().unwrap().clone();
        (!data.is_empty()).then_some(data)
    })
    .await;
    assert_eq!(endpoints.len(), 1);
    let endpoint = endpoints[0].clone();
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    assert_eq!(endpoint["url"], receiver.url.as_str());
    assert_eq!(endpoint["description"], "Orders into our ERP");
    assert_eq!(endpoint["event_types"], json!(["order.paid"]));
    assert_eq!(endpoint["filter"], "/order_id >= 0");

    browser.open(&screen(&app, &app_id, "/endpoints")).await;
    let row = browser
        .wait_for(&format!(
            "[data-test=endpoint-row][data-id='{endpoint_id}']"
        ))
        .await;
    assert!(row.text().await.unwrap().contains(&receiver.url));
    browser.check_accessibility("endpoints").await;
    browser.screenshot("endpoints-light").await;

    // The endpoint page: reveal and copy the secret, send a test event.
    browser
        .open(&screen(&app, &app_id, &format!("/endpoints/{endpoint_id}")))
        .await;
    browser.allow_clipboard().await;
    browser.click("[data-test=secret-reveal]").await;
    let secret = app
        .get(&format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/secret"))
        .await;
    let shown = browser
        .wait_text("[data-test=secret-value]", "the secret", |t| {
            t.starts_with("whsec_")
        })
        .await;
    assert_eq!(shown, secret["key"].as_str().unwrap());
    browser.click("[data-test=secret-copy]").await;
    browser
        .wait_text("[data-test=secret-copied]", "copied", |t| !t.is_empty())
        .await;
    let clipboard = browser.clipboard().await;
    assert_eq!(
        Some(clipboard.as_str()),
        secret["key"].as_str(),
        "the clipboard holds the secret"
    );

    browser.click("[data-test=test-send]").await;
    browser.wait_for("#test-payload").await;
    browser.click("[data-test=test-send-submit]").await;
    let received = receiver.wait_for_requests(1).await;
    let test_event = received[0].json();
    assert_eq!(test_event["type"], "order.paid");
    assert_eq!(
        test_event["data"],
        json!({"order_id": 42, "amount": 1999}),
        "the catalog's example"
    );
    // What the receiver got, pasted into the signature checker, verifies;
    // the same with its body changed does not, and says why.
    let pasted = ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .map(|name| format!("{name}: {}", received[0].header(name)))
        .join("\n");
    let got = String::from_utf8(received[0].body.to_vec()).unwrap();
    browser.fill("#check-headers", &pasted).await;
    browser.fill("#check-body", &got).await;
    browser.click("[data-test=signature-check]").await;
    browser
        .wait_text("[data-test=signature-result]", "it verifies", |t| {
            t.starts_with("The signature is right")
        })
        .await;
    browser
        .fill("#check-body", &got.replace("1999", "2999"))
        .await;
    browser.click("[data-test=signature-check]").await;
    browser
        .wait_text("[data-test=signature-result]", "the body changed", |t| {
            t.starts_with("The body differs")
        })
        .await;
    // By keyboard alone: the body put back as received (all of it selected
    // and typed over), Tab to "Check", Enter: it verifies again.
    browser
        .run("document.getElementById('check-body').focus(); return null;")
        .await;
    browser.press("\u{E009}a\u{E009}").await;
    browser.press(&got).await;
    browser.press("\u{E004}").await;
    assert_eq!(browser.focused().await, "signature-check");
    browser.press("\u{E007}").await;
    browser
        .wait_text("[data-test=signature-result]", "it verifies again", |t| {
            t.starts_with("The signature is right")
        })
        .await;
    browser.check_accessibility("endpoint").await;
    browser.screenshot("endpoint-light").await;

    // The delivery log fills itself as events are published.
    browser.open(&screen(&app, &app_id, "/deliveries")).await;
    browser
        .wait_count(
            "[data-test=delivery-row]",
            "the test send in the log",
            |n| n == 1,
        )
        .await;
    for order in 1..=3 {
        publish(&app, &app_id, order).await;
    }
    browser
        .wait_count(
            "[data-test=delivery-row]",
            "three more deliveries without a reload",
            |n| n == 4,
        )
        .await;
    receiver.wait_for_requests(4).await;

    // Live updates pause (WCAG 2.2.2): a delivery made meanwhile is listed
    // only once they resume, though the log's timer kept ticking.
    browser.click("[data-test=live-toggle]").await;
    browser
        .wait_for("[data-test=live-toggle][aria-pressed=true]")
        .await;
    let ticks = || async {
        browser
            .run("return Number(document.querySelector('.delivery-log').dataset.ticks);")
            .await
            .as_u64()
            .unwrap()
    };
    publish(&app, &app_id, 9).await;
    receiver.wait_for_requests(5).await;
    // A tick after the delivery exists, and the whole interval after it.
    let made_at = ticks().await;
    crate::helpers::wait_until(
        std::time::Duration::from_secs(30),
        "two ticks of the paused log's timer",
        || async { (ticks().await >= made_at + 2).then_some(()) },
    )
    .await;
    assert_eq!(
        browser.all("[data-test=delivery-row]").await.len(),
        4,
        "nothing new while paused"
    );
    browser.click("[data-test=live-toggle]").await;
    browser
        .wait_count(
            "[data-test=delivery-row]",
            "the delivery made while paused, once resumed",
            |n| n == 5,
        )
        .await;
    browser.check_accessibility("delivery log").await;
    browser.screenshot("deliveries-light").await;

    // The receiver refuses one: the customer finds it, reads why, replays it.
    receiver.script([Reply::status(400).body(b"missing field customer")]);
    let refused = publish(&app, &app_id, 4).await;
    app.wait_for_delivery_state(&app_id, &refused, "dead").await;
    browser
        .open(&screen(&app, &app_id, "/deliveries?state=dead"))
        .await;
    let rows = browser
        .wait_count("[data-test=delivery-row]", "the dead delivery alone", |n| {
            n == 1
        })
        .await;
    assert_eq!(
        rows[0].attr("data-id").await.unwrap().as_deref(),
        Some(refused.as_str())
    );
    // The row says when, in short ("… ago", the exact time on hover), which
    // event it was and what the receiver answered.
    let time = rows[0]
        .find(fantoccini::Locator::Css("time.short-time"))
        .await
        .unwrap();
    let (short, exact) = (
        time.text().await.unwrap(),
        time.attr("title").await.unwrap().unwrap_or_default(),
    );
    // (What WebDriver reads may include the exact time hidden for screen readers, after a comma.)
    let relative = short.split(',').next().unwrap_or_default().trim();
    assert!(
        relative.len() < 20 && (relative.contains("ago") || relative == "now"),
        "a short relative time: {short:?}"
    );
    let created = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{refused}"))
        .await["created_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        exact.contains(&created[..4]) && exact != short,
        "the exact time, with its year ({created}): {exact:?}"
    );
    for (cell, want) in [
        ("[data-test=delivery-event-type]", "order.paid"),
        ("[data-test=last-status]", "HTTP 400"),
    ] {
        let text = rows[0]
            .find(fantoccini::Locator::Css(cell))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(text, want, "{cell}");
    }
    rows[0]
        .find(fantoccini::Locator::Css("a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let explanation = browser
        .wait_text("[data-test=delivery-explanation]", "why it failed", |t| {
            t.contains("400")
        })
        .await;
    assert!(
        explanation.contains("are not retried") && explanation.to_lowercase().contains("replay"),
        "{explanation}"
    );
    let attempt = browser.wait_for("[data-test=attempt]").await;
    let attempt_text = attempt.text().await.unwrap();
    assert!(
        attempt_text.contains("missing field customer"),
        "{attempt_text}"
    );
    // Its event's id is copied with one click.
    let event_id = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{refused}"))
        .await["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    browser
        .click(&format!("[data-test=copy-id][data-copy='{event_id}']"))
        .await;
    browser
        .wait_text(
            &format!("[data-test=id-copied][data-copy='{event_id}']"),
            "copied",
            |t| t == "Copied",
        )
        .await;
    let clipboard = browser.clipboard().await;
    assert_eq!(clipboard, event_id);

    // Its attempt, copied as curl: the request as signed.
    let attempt = &app.attempts(&app_id, &refused).await[0];
    let full = app
        .get(&format!(
            "/v1/apps/{app_id}/attempts/{}",
            attempt["id"].as_str().unwrap()
        ))
        .await;
    browser
        .click(&format!(
            "[data-test=copy-curl][data-id='{}']",
            attempt["id"].as_str().unwrap()
        ))
        .await;
    let command = browser
        .wait_text("[data-test=curl-command]", "the curl command", |t| {
            t.starts_with("curl -X POST")
        })
        .await;
    let clipboard = browser.clipboard().await;
    assert_eq!(clipboard, command);
    assert!(
        command.starts_with(&format!("curl -X POST '{}'", receiver.url)),
        "{command}"
    );
    assert!(command.contains("-H 'webhook-signature: v1,"), "{command}");
    assert!(
        command.ends_with(&format!(
            "--data-raw '{}'",
            full["request_body"].as_str().unwrap()
        )),
        "{command}"
    );

    // The attempt says what it meant, in the server's words.
    let meant = browser
        .wait_for("[data-test=attempt-explanation]")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        meant.contains("400 Bad Request") && meant.contains("are not retried"),
        "{meant}"
    );
    browser.check_accessibility("delivery (dead)").await;
    browser.screenshot("delivery-light").await;
    browser.click("[data-test=delivery-replay]").await;
    browser.click("[data-test=confirm-yes]").await;
    app.wait_for_delivery_state(&app_id, &refused, "succeeded")
        .await;
    browser
        .wait_text("[data-test=delivery-explanation]", "delivered", |t| {
            t.to_lowercase().contains("delivered")
        })
        .await;

    // Three more are refused: one is replayed from its row in the log, the
    // other two ticked and replayed together.
    receiver.script([Reply::status(400), Reply::status(400), Reply::status(400)]);
    let mut dead = Vec::new();
    for order in 5..=7 {
        let id = publish(&app, &app_id, order).await;
        app.wait_for_delivery_state(&app_id, &id, "dead").await;
        dead.push(id);
    }
    browser
        .open(&screen(&app, &app_id, "/deliveries?state=dead"))
        .await;
    let rows = browser
        .wait_count("[data-test=delivery-row]", "the three dead", |n| n == 3)
        .await;
    let alone = rows[0].attr("data-id").await.unwrap().unwrap();
    browser
        .click(&format!(
            "tr[data-id=\"{alone}\"] [data-test=delivery-replay-row]"
        ))
        .await;
    browser.click("[data-test=confirm-yes]").await;
    app.wait_for_delivery_state(&app_id, &alone, "succeeded")
        .await;
    browser
        .wait_text("[data-test=replay-note]", "one replayed", |t| {
            t == "Replayed 1 of 1."
        })
        .await;
    let rows = browser
        .wait_count("[data-test=delivery-row]", "two still dead", |n| n == 2)
        .await;
    let mut left = Vec::new();
    for row in &rows {
        left.push(row.attr("data-id").await.unwrap().unwrap());
    }
    left.sort();
    let mut expected: Vec<String> = dead.iter().filter(|id| **id != alone).cloned().collect();
    expected.sort();
    assert_eq!(left, expected, "the two not replayed are the ones left");
    for id in &left {
        browser
            .click(&format!("tr[data-id=\"{id}\"] [data-test=delivery-select]"))
            .await;
    }
    browser
        .wait_text("[data-test=replay-selected]", "two ticked", |t| {
            t == "Replay selected (2)"
        })
        .await;
    browser
        .check_accessibility("delivery log (dead, ticked)")
        .await;
    browser.click("[data-test=replay-selected]").await;
    browser.click("[data-test=confirm-yes]").await;
    for id in dead.iter().filter(|id| **id != alone) {
        app.wait_for_delivery_state(&app_id, id, "succeeded").await;
    }
    browser
        .wait_text("[data-test=replay-note]", "two replayed", |t| {
            t == "Replayed 2 of 2."
        })
        .await;
    browser
        .wait_count("[data-test=delivery-row]", "no dead delivery left", |n| {
            n == 0
        })
        .await;
    browser
        .wait_text("[data-test=replay-selected]", "nothing ticked", |t| {
            t == "Replay selected"
        })
        .await;

    // The catalog.
    browser.open(&screen(&app, &app_id, "/catalog")).await;
    browser
        .wait_count("[data-test=event-type]", "the three types", |n| n == 3)
        .await;
    let catalog_text = browser
        .wait_text("main", "the descriptions", |t| {
            t.contains("An order was paid in full.")
        })
        .await;
    assert!(catalog_text.contains("order.refunded"), "{catalog_text}");
    // Grouped by prefix; each type's fields as a table.
    let groups = browser
        .run("return [...document.querySelectorAll('[data-test=event-group]')].map((g) => g.dataset.prefix);")
        .await;
    assert_eq!(groups, json!(["invoice", "order"]));
    let fields = browser
        .run("return document.querySelector('[data-name=\"order.paid\"] [data-test=event-fields] tbody').innerText;")
        .await;
    let fields = fields.as_str().unwrap();
    assert!(
        fields.contains("order_id")
            && fields.contains("integer")
            && fields.contains("The order's number."),
        "{fields}"
    );
    browser.check_accessibility("catalog").await;
    browser.screenshot("catalog-light").await;
    // A search narrows it, and says how many match.
    browser.fill("#catalog-search", "refund").await;
    browser
        .wait_text("[data-test=catalog-found]", "one match", |t| {
            t == "1 of 3 event types match."
        })
        .await;
    let shown = browser
        .run("return [...document.querySelectorAll('[data-test=event-type]')].filter((e) => !e.hidden).map((e) => e.dataset.name);")
        .await;
    assert_eq!(shown, json!(["order.refunded"]));
    // "Subscribe an endpoint to this" opens the form with the type picked.
    browser
        .click("[data-name=\"order.refunded\"] [data-test=subscribe]")
        .await;
    browser.wait_for("[data-test=endpoint-form]").await;
    let picked = browser
        .run("return [document.querySelector('[data-test=types-some]').checked, [...document.querySelectorAll('input[name=event_types]:checked')].map((b) => b.value)];")
        .await;
    assert_eq!(picked, json!([true, ["order.refunded"]]));

    // Recover: three deliveries die; the dry run counts them; the job replays them.
    receiver.answer_always(Reply::status(422));
    let mut dead = Vec::new();
    for order in 10..13 {
        dead.push(publish(&app, &app_id, order).await);
    }
    for delivery in &dead {
        app.wait_for_delivery_state(&app_id, delivery, "dead").await;
    }
    receiver.answer_always(Reply::status(200));
    let before = receiver.requests().len();
    // The Status screen says so, and leads to Recover for this endpoint.
    browser.open(&screen(&app, &app_id, "/status")).await;
    browser.client.refresh().await.unwrap();
    let said = browser
        .wait_text(
            "[data-test=incident][data-kind=dead_letters] [data-test=incident-message]",
            "the refusals, said",
            |t| t.contains("422"),
        )
        .await;
    assert_eq!(
        said,
        "Your endpoint refused deliveries with 422 Unprocessable Entity: 3 deliveries are in the dead-letter queue. Fix it, then recover them."
    );
    browser
        .check_accessibility("status (failed deliveries)")
        .await;
    browser.screenshot("status-light").await;
    browser.click("[data-test=incident-recover]").await;
    browser.select("#recover-endpoint", &endpoint_id).await;
    browser.click("[data-test=recover-dry-run]").await;
    browser
        .wait_text("[data-test=recover-count]", "three to replay", |t| {
            t.contains('3')
        })
        .await;
    browser.check_accessibility("recover").await;
    browser.screenshot("recover-light").await;
    browser.click("[data-test=recover-confirm]").await;
    browser
        .wait_text("[data-test=recover-status]", "the job done", |t| {
            let t = t.to_lowercase();
            t.contains("done") || t.contains("finished") || t.contains("completed")
        })
        .await;
    for delivery in &dead {
        app.wait_for_delivery_state(&app_id, delivery, "succeeded")
            .await;
    }
    assert_eq!(receiver.requests().len(), before + 3);

    // The endpoint's timeline counts what the receiver answered, as the API
    // does, and switches windows.
    let totals = |timeline: &Value| {
        timeline["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .fold((0, 0), |(d, f), b| {
                (
                    d + b["delivered"].as_u64().unwrap(),
                    f + b["failed"].as_u64().unwrap(),
                )
            })
    };
    let timeline_path = format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/timeline");
    let (delivered, failed) = totals(&app.get(&timeline_path).await);
    assert!(
        failed >= 7 && delivered >= 1,
        "{delivered} delivered, {failed} failed"
    );
    browser
        .open(&screen(&app, &app_id, &format!("/endpoints/{endpoint_id}")))
        .await;
    let want = format!("Last 24 hours: {delivered} delivered, {failed} failed.");
    browser
        .wait_text("[data-test=timeline-summary]", "the day's totals", |t| {
            t.starts_with(&want)
        })
        .await;
    browser.select("#timeline-window", "hour").await;
    let (delivered, failed) = totals(&app.get(&format!("{timeline_path}?window=hour")).await);
    let want = format!("Last hour: {delivered} delivered, {failed} failed.");
    browser
        .wait_text("[data-test=timeline-summary]", "the hour's totals", |t| {
            t.starts_with(&want)
        })
        .await;
    browser.check_accessibility("endpoint timeline").await;

    // Dark, forced by the app, with a dark brand colour (navy, which on the
    // dark page is lightened until buttons stand out): every screen again,
    // checked and pictured.
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{app_id}"),
        Some(&json!({"portal": {"theme": "dark", "display_name": "Acme Webhooks", "brand_color": "#102040"}})),
        200,
    )
    .await;
    for (route, name) in every_screen(&endpoint_id, &refused) {
        browser.open(&screen(&app, &app_id, &route)).await;
        browser.client.refresh().await.unwrap();
        browser
            .wait_text("header", "the display name", |t| {
                t.contains("Acme Webhooks")
            })
            .await;
        let theme = browser
            .run("return document.documentElement.dataset.theme;")
            .await;
        assert_eq!(theme, "dark", "{name}");
        browser.wait_for("main h1").await;
        // White-label: the product's name is nowhere a customer reads.
        let text = browser.run("return document.body.innerText;").await;
        assert!(
            !text.as_str().unwrap().contains("Hookline"),
            "{name} names the product: {text}"
        );
        if name == "endpoints" {
            browser.wait_for("[data-test=endpoint-new]").await;
            let contrast = browser
                .run(
                    "const rgb = (el, p) => getComputedStyle(el)[p].match(/\\d+/g).slice(0, 3).map(Number);
                     const lum = ([r, g, b]) => [r, g, b].map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; })
                       .reduce((s, c, i) => s + c * [0.2126, 0.7152, 0.0722][i], 0);
                     const a = lum(rgb(document.querySelector('[data-test=endpoint-new]'), 'backgroundColor'));
                     const b = lum(rgb(document.documentElement, 'backgroundColor'));
                     return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);",
                )
                .await;
            assert!(
                contrast.as_f64().unwrap() >= 3.0,
                "a primary button stands out of the dark page: {contrast}"
            );
        }
        browser.check_accessibility(&format!("{name} (dark)")).await;
        browser.screenshot(&format!("{name}-dark")).await;
    }
    // A colour of its own for dark mode, and a typeface: both applied.
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{app_id}"),
        Some(
            &json!({"portal": {"theme": "dark", "brand_color": "#102040",
            "brand_color_dark": "#8ab4f8", "font": "serif"}}),
        ),
        200,
    )
    .await;
    browser.open(&screen(&app, &app_id, "/endpoints")).await;
    browser.client.refresh().await.unwrap();
    browser.wait_for("[data-test=endpoint-new]").await;
    let look = browser
        .run(
            "return [getComputedStyle(document.querySelector('[data-test=endpoint-new]')).backgroundColor,
                     getComputedStyle(document.body).fontFamily.split(',')[0]];",
        )
        .await;
    assert_eq!(look, json!(["rgb(138, 180, 248)", "Charter"]));
    browser
        .check_accessibility("endpoints (dark colour, serif)")
        .await;
    browser.close().await;
}

/// A read-only session shows no control that changes anything, and another
/// app's ids are not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_session_sees_everything_and_can_change_nothing() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    receiver.answer_always(Reply::status(400));
    let dead = publish(&app, &app_id, 1).await;
    app.wait_for_delivery_state(&app_id, &dead, "dead").await;

    let other = app.create_app().await;
    let other_endpoint = app.create_endpoint(&other, &receiver.url).await;
    let other_endpoint = other_endpoint["id"].as_str().unwrap().to_owned();
    let other_delivery = publish(&app, &other, 2).await;

    let browser = Browser::start(390, 844).await; // a phone
    browser
        .open_link(&portal_link(&app, &app_id, &[]).await)
        .await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    for (route, ready) in [
        ("/status".to_owned(), "[data-test=incident]"),
        ("/endpoints".to_owned(), "[data-test=endpoint-row]"),
        (format!("/endpoints/{endpoint_id}"), "main h1"),
        ("/deliveries".to_owned(), "[data-test=delivery-row]"),
        (
            format!("/deliveries/{dead}"),
            "[data-test=delivery-explanation]",
        ),
        ("/catalog".to_owned(), "[data-test=event-type]"),
        ("/notifications".to_owned(), "[data-test=channels] .empty"),
    ] {
        browser.open(&screen(&app, &app_id, &route)).await;
        browser.client.refresh().await.unwrap();
        browser.wait_for(ready).await;
        let mutating = browser.all("[data-mutating]").await;
        assert!(
            mutating.is_empty(),
            "{route}: {} mutating controls",
            mutating.len()
        );
        assert!(
            browser.all("[data-test=nav-recover]").await.is_empty(),
            "{route}"
        );
        browser
            .check_accessibility(&format!("{route} (read-only, phone)"))
            .await;
        if route == "/deliveries" {
            // On a phone the filters fold away and the log starts on the first screen.
            let (open, top, screen_height) = (
                browser
                    .run("return document.querySelector('[data-test=filters]').open;")
                    .await,
                browser
                    .run("return document.querySelector('[data-test=delivery-row]').getBoundingClientRect().top;")
                    .await,
                browser.run("return window.innerHeight;").await,
            );
            assert_eq!(open, json!(false), "the filters are folded");
            assert!(
                top.as_f64().unwrap() < screen_height.as_f64().unwrap(),
                "the first row is on the first screen: {top} of {screen_height}"
            );
            // Drawn as cards, the rows keep their table roles.
            let roles = browser
                .run(
                    "const row = document.querySelector('[data-test=delivery-row]');
                     return [row.closest('table'), row.closest('tbody'), row, row.querySelector('th'), row.querySelector('td')]
                       .map((el) => el.getAttribute('role')).join(' ');",
                )
                .await;
            assert_eq!(roles, json!("table rowgroup row rowheader cell"));
        }
    }

    // Another app's endpoint and delivery: not found, as the API says.
    for route in [
        format!("/endpoints/{other_endpoint}"),
        format!("/deliveries/{other_delivery}"),
    ] {
        browser.open(&screen(&app, &app_id, &route)).await;
        browser.client.refresh().await.unwrap();
        browser.wait_for("[data-test=not-found]").await;
    }

    // Signing out ends the session on the server, not only in the tab. (The
    // key is the session's HttpOnly cookie, which only the browser reads.)
    let token = browser
        .client
        .get_all_cookies()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.name() == format!("hl_portal_{app_id}"))
        .expect("the session's cookie")
        .value()
        .to_owned();
    let endpoints = format!("{}/v1/apps/{app_id}/endpoints", app.base);
    let status = |token: String| {
        let (http, url) = (app.http.clone(), endpoints.clone());
        async move {
            let response = http.get(url).bearer_auth(token).send().await.unwrap();
            response.status().as_u16()
        }
    };
    assert_eq!(status(token.clone()).await, 200);
    browser.click("[data-test=sign-out]").await;
    browser
        .wait_text("main h1", "the signed-out page", |t| {
            t == "You are signed out"
        })
        .await;
    browser.check_accessibility("signed out (phone)").await;
    assert_eq!(
        status(token).await,
        401,
        "the session's key no longer works"
    );
    browser.client.refresh().await.unwrap();
    browser
        .wait_text("main h1", "no session after a reload", |t| {
            t == "No session"
        })
        .await;
    browser.close().await;
}

/// A link works once; a revoked or expired session says so; the portal is framed only
/// by the origins its app allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_work_once_and_only_allowed_origins_frame_the_portal() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let app_id = app.create_app().await;
    let browser = Browser::start(1024, 768).await;

    // A link opened but not continued spends nothing (a mail scanner that
    // opens links and runs their scripts): it still signs in afterwards.
    let link = portal_link(&app, &app_id, &[]).await;
    browser.open(&link).await;
    browser.wait_for("[data-test=continue-page]").await;
    browser.check_accessibility("continue").await;
    assert!(
        browser.all("[data-test=nav-endpoints]").await.is_empty(),
        "not signed in before the click"
    );
    // A reload on "Continue" keeps the unspent link (the address lost its code).
    browser.client.refresh().await.unwrap();
    browser.wait_for("[data-test=continue-page]").await;
    browser.open(&format!("{}/healthz", app.base)).await;
    browser.open_link(&link).await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    // The same link again, in a fresh tab state: it has been used.
    browser.run("sessionStorage.clear(); return null;").await;
    browser.open(&format!("{}/healthz", app.base)).await;
    browser.open_link(&link).await;
    let page = browser
        .wait_text("[data-test=error-page]", "the used link", |t| !t.is_empty())
        .await;
    assert!(page.to_lowercase().contains("already"), "{page}");
    browser.check_accessibility("used link").await;

    // A revoked session: the next call sends the customer to a page that says so.
    let fresh = portal_link(&app, &app_id, &[]).await;
    browser.run("sessionStorage.clear(); return null;").await;
    browser.open(&format!("{}/healthz", app.base)).await;
    browser.open_link(&fresh).await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    app.call(
        Method::DELETE,
        &format!("/v1/apps/{app_id}/keys"),
        None,
        200,
    )
    .await;
    browser.open(&screen(&app, &app_id, "/catalog")).await;
    browser.client.refresh().await.unwrap();
    let page = browser
        .wait_text("[data-test=error-page]", "the ended session", |t| {
            !t.is_empty()
        })
        .await;
    assert!(page.to_lowercase().contains("session"), "{page}");

    // A session whose time runs out while the page is open: the page says so
    // by itself (a link made through the store, as the server's clock is the
    // system's and links last at least a minute).
    let link = short_link(&app, &app_id, "hkp_short_lived", 3, 3).await;
    browser.run("sessionStorage.clear(); return null;").await;
    browser.open(&format!("{}/healthz", app.base)).await;
    browser.open_link(&link).await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    let page = browser
        .wait_text("[data-test=error-page]", "the session's end", |t| {
            !t.is_empty()
        })
        .await;
    assert!(page.to_lowercase().contains("expired"), "{page}");

    // A link that names a screen lands on it once signed in.
    let deep = link_with(&app, &app_id, json!({ "screen": "/catalog" })).await;
    browser.run("sessionStorage.clear(); return null;").await;
    browser.open(&format!("{}/healthz", app.base)).await;
    browser.open_link(&deep).await;
    browser
        .wait_text("main h1", "the named screen", |t| t == "Event catalog")
        .await;
    let url = browser.client.current_url().await.unwrap();
    assert!(url.as_str().ends_with("#/catalog"), "{url}");

    // Framing: a page on another 127.0.0.1 port embeds the portal.
    let framer = Framer::start().await;
    let framed = |link: String| framer.page_for(&link);
    browser
        .open(&framed(framing_link(&app, &app_id).await))
        .await;
    assert!(
        !framed_portal_loads(&browser).await,
        "a portal whose app allows no origin is not framed"
    );
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{app_id}"),
        Some(&json!({"portal": {"frame_origins": [framer.origin.clone()]}})),
        200,
    )
    .await;
    browser
        .open(&framed(framing_link(&app, &app_id).await))
        .await;
    assert!(
        framed_portal_loads(&browser).await,
        "the app's own origin frames its portal"
    );
    browser.close().await;
}

/// Whether the portal in the page's first frame shows its navigation.
async fn framed_portal_loads(browser: &Browser) -> bool {
    browser.wait_for("iframe").await;
    // Wait for the frame's document to settle (loaded, or refused).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut loaded = false;
    while std::time::Instant::now() < deadline {
        browser.client.enter_frame(0).await.unwrap();
        loaded = !browser.all("[data-test=nav-endpoints]").await.is_empty();
        browser.client.enter_parent_frame().await.unwrap();
        if loaded {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    loaded
}

/// A third-party page on its own 127.0.0.1 port that frames a given URL.
struct Framer {
    origin: String,
}

impl Framer {
    async fn start() -> Self {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|query: axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                let src = query.get("src").cloned().unwrap_or_default();
                let src = src.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;");
                axum::response::Html(format!(
                    "<!doctype html><html lang=\"en\"><title>Framer</title><body>\
                     <iframe title=\"portal\" src=\"{src}\" width=\"800\" height=\"600\"></iframe></body></html>"
                ))
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            origin: format!("http://{addr}"),
        }
    }

    fn page_for(&self, link: &str) -> String {
        let encoded: String = link
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        format!("{}/?src={encoded}", self.origin)
    }
}

/// Notifications end to end: the customer adds a mailbox (by keyboard alone)
/// and a Slack channel in the portal; its endpoint fails; a notice arrives at
/// the test's real SMTP server and at the chat's receiver; the mail's link
/// opens that endpoint in the portal, and Status shows the failure with its count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_is_told_by_mail_and_chat_when_an_endpoint_fails_and_the_link_opens_it() {
    let smtp = crate::smtp::SmtpServer::start().await;
    let smtp_url = smtp.url.clone();
    let app = TestApp::spawn_with(Engine::Sqlite, move |c| {
        c.max_attempts = 1;
        c.breaker_failure_threshold = 1_000;
        c.smtp_url = Some(smtp_url);
        c.smtp_from = Some("Acme webhooks <webhooks@acme.example>".into());
    })
    .await;
    let chat = Receiver::start().await;
    let failing = Receiver::start_with(|_| Reply::status(503)).await;
    let app_id = app.create_app().await;
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    browser.click("[data-test=nav-notifications]").await;
    browser
        .wait_text("[data-test=channels]", "no channels", |t| {
            t.contains("No channels yet")
        })
        .await;
    browser.check_accessibility("notifications (none)").await;

    // A mailbox, typed and submitted with Enter (no click).
    let to = browser.wait_for("#channel-to").await;
    to.send_keys("ops@acme.example\u{E007}").await.unwrap();
    browser
        .wait_count("[data-test=channel]", "the mailbox channel", |n| n == 1)
        .await;
    // A Slack channel told only when an endpoint fails or recovers.
    browser.select("#channel-kind", "slack").await;
    // (The receiver takes any path: this one has a secret part, as Slack's do.)
    let chat_url = format!("{}/services/T1/B2/secretXy9z", chat.url);
    browser.fill("#channel-to", &chat_url).await;
    for unwanted in [
        "endpoint.disabled",
        "endpoint.enabled",
        "delivery.dead",
        "replay.finished",
    ] {
        browser
            .click(&format!("input[name=events][value='{unwanted}']"))
            .await;
    }
    browser.click("[data-test=channel-add]").await;
    browser
        .wait_count("[data-test=channel]", "the Slack channel", |n| n == 2)
        .await;
    let listed = browser.visible_text().await;
    assert!(listed.contains("ops@acme.example"), "{listed}");
    assert!(
        !listed.contains("secretXy9z") && listed.contains("/webhook/…Xy9z"),
        "a chat URL is shown masked: {listed}"
    );
    browser.check_accessibility("notifications").await;
    browser.run("window.scrollTo(0, 0); return null;").await;
    browser.screenshot("notifications-light").await;
    let channels = app.get(&format!("/v1/apps/{app_id}/notifications")).await;
    let kinds: Vec<(&str, usize)> = channels["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap(),
                c["events"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(kinds, vec![("email", 6), ("slack", 2)]);

    // By keyboard alone: a Discord channel added (the kind chosen with the
    // arrow keys, the notices as the last add left them), then removed
    // through its confirmation; the focus lands on the list's heading.
    const TAB: &str = "\u{E004}";
    const ENTER: &str = "\u{E007}";
    const DOWN: &str = "\u{E015}";
    browser
        .run("document.getElementById('channel-kind').focus(); return null;")
        .await;
    browser.press(&DOWN.repeat(3)).await;
    browser.press(TAB).await;
    assert_eq!(browser.focused().await, "channel-to");
    browser
        .press(&format!("{}/discord/abcd1234", chat.url))
        .await;
    browser.press(&TAB.repeat(7)).await;
    assert_eq!(browser.focused().await, "channel-add");
    browser.press(ENTER).await;
    browser
        .wait_count("[data-test=channel]", "the Discord channel", |n| n == 3)
        .await;
    let discord = "[data-test=channel][data-kind=discord] [data-test=channel-remove]";
    browser
        .run(&format!(
            "document.querySelector('{discord}').focus(); return null;"
        ))
        .await;
    browser.press(ENTER).await;
    browser.wait_for("[data-test=confirm-no]").await;
    assert_eq!(
        browser.focused().await,
        "confirm-no",
        "the confirmation starts on Cancel"
    );
    browser.press(TAB).await;
    assert_eq!(browser.focused().await, "confirm-yes");
    browser.press(ENTER).await;
    browser
        .wait_count("[data-test=channel]", "the Discord channel removed", |n| {
            n == 2
        })
        .await;
    let heading = wait_until(PATIENCE, "the focus on the heading", || async {
        let focused = browser.focused().await;
        (focused == "channels-heading").then_some(focused)
    })
    .await;
    assert_eq!(heading, "channels-heading");

    // The endpoint fails twenty times in a row: both channels are told.
    let endpoint = app
        .create_endpoint_with(&app_id, &failing.url, json!({"description": "Orders"}))
        .await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    for n in 0..20 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    // (Its deaths are told too, a window later: wait for the failing one by name.)
    let failing_mail = wait_until(PATIENCE, "the failing notice by mail", || async {
        smtp.mails()
            .into_iter()
            .find(|m| m.header("subject").as_deref() == Some("Orders is failing"))
    })
    .await;
    let link = screen(&app, &app_id, &format!("/endpoints/{endpoint_id}"));
    assert!(
        failing_mail
            .body()
            .contains(&format!("Open the endpoint: {link}")),
        "{}",
        failing_mail.body()
    );
    let posted = chat.wait_for_requests(1).await;
    assert_eq!(posted[0].json()["text"], "Orders is failing");

    // The mail's link opens the endpoint in the portal.
    browser.open(&link).await;
    browser
        .wait_text("main h1", "the endpoint's page", |t| {
            t.contains(failing.url.as_str())
        })
        .await;
    // Status shows the failure, with the count of its deliveries.
    browser.click("[data-test=nav-status]").await;
    browser
        .wait_text("[data-test=incident]", "the failing endpoint", |t| {
            t.contains("Orders") && t.contains("20")
        })
        .await;
    browser.close().await;
}

/// The filter preview in the endpoint form: the filter and the picked type run
/// over the app's latest events, each shown as sent or dropped; a filter that
/// does not parse is refused at the field; nothing is saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_is_tried_on_recent_events_before_it_is_saved() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let app_id = app.create_app().await;
    for order in 1..=3 {
        app.publish(&app_id, "order.paid", json!({ "order_id": order }))
            .await;
    }
    app.publish(&app_id, "order.refunded", json!({ "order_id": 9 }))
        .await;
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    browser.click("[data-test=nav-endpoints]").await;
    browser.click("[data-test=endpoint-new]").await;
    browser.wait_for("[data-test=endpoint-form]").await;
    browser.click("[data-test=types-some]").await;
    browser
        .click("input[name=event_types][value='order.paid']")
        .await;
    browser.fill("#endpoint-filter", "/order_id >= 2").await;
    browser.click("[data-test=filter-preview-run]").await;
    browser
        .wait_text("[data-test=filter-preview-summary]", "the preview", |t| {
            t.contains("2 of the 3 latest events")
        })
        .await;
    let shown = browser
        .run("return [...document.querySelectorAll('[data-test=filter-preview-event]')].map((e) => e.dataset.passed);")
        .await;
    assert_eq!(shown, json!(["true", "true", "false"]), "newest first");
    browser
        .check_accessibility("endpoint form (filter preview)")
        .await;
    // A filter that does not parse: refused at the field, which says why.
    browser.fill("#endpoint-filter", "/order_id >> 1").await;
    browser.click("[data-test=filter-preview-run]").await;
    browser
        .wait_text("[data-test=endpoint-form]", "the refusal", |t| {
            t.contains("filter at position 12")
        })
        .await;
    let invalid = browser
        .run("return document.getElementById('endpoint-filter').getAttribute('aria-invalid');")
        .await;
    assert_eq!(invalid, json!("true"));
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    browser.close().await;
}

/// The transform in the endpoint form: a jq program previewed as it is typed,
/// on the app's latest event (the body that would be sent), and on a type's
/// catalog example; a preset shown as its chat's message; a program that
/// does not compile refused at the field; saved, it is the endpoint's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_is_previewed_as_it_is_typed_and_saved() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let app_id = app.create_app().await;
    app.publish(&app_id, "order.refunded", json!({ "order_id": 7 }))
        .await;
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    browser.click("[data-test=nav-endpoints]").await;
    browser.click("[data-test=endpoint-new]").await;
    browser.wait_for("[data-test=endpoint-form]").await;
    browser
        .fill("#endpoint-url", "https://example.com/in")
        .await;
    browser.select("#endpoint-transform-kind", "program").await;
    // No button: the preview follows the typing.
    browser
        .fill(
            "#endpoint-transform",
            "{order: .payload.order_id, kind: .event_type}",
        )
        .await;
    browser
        .wait_text("[data-test=transform-body]", "the preview", |t| {
            t.contains("\"order\": 7") && t.contains("order.refunded")
        })
        .await;
    browser
        .check_accessibility("endpoint form (transform preview)")
        .await;
    browser
        .run("document.querySelector('[data-test=transform]').scrollIntoView();")
        .await;
    browser.screenshot("endpoint-transform-light").await;
    browser
        .select("#endpoint-transform-source", "order.paid")
        .await;
    browser
        .wait_text("[data-test=transform-body]", "the example's preview", |t| {
            t.contains("\"order\": 42") && t.contains("order.paid")
        })
        .await;
    browser.select("#endpoint-transform-kind", "slack").await;
    browser
        .wait_text("[data-test=transform-body]", "the preset's preview", |t| {
            t.contains("\"blocks\"")
        })
        .await;
    // A program that does not compile: refused at the field, which says where.
    browser.select("#endpoint-transform-kind", "program").await;
    browser.fill("#endpoint-transform", "{order: ").await;
    browser
        .wait_text("[data-test=endpoint-form]", "the refusal", |t| {
            t.contains("transform line 1, column")
        })
        .await;
    let invalid = browser
        .run("return document.getElementById('endpoint-transform').getAttribute('aria-invalid');")
        .await;
    assert_eq!(invalid, json!("true"));
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    browser
        .fill("#endpoint-transform", "{order: .payload.order_id}")
        .await;
    browser.click("[data-test=endpoint-save]").await;
    let saved = wait_until(PATIENCE, "the endpoint to be saved", || async {
        let listed = app.get(&format!("/v1/apps/{app_id}/endpoints")).await;
        listed["data"].as_array().and_then(|d| d.first().cloned())
    })
    .await;
    assert_eq!(saved["transform"], "{order: .payload.order_id}");
    browser.close().await;
}

/// A session says before it ends, stays when asked (renewed on the server),
/// and when it does end the page says so and keeps the screen in the address.
/// (A session of twelve seconds, made through the store: links made over the
/// API open sessions of five minutes at least.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_says_before_it_ends_stays_when_asked_and_its_end_keeps_the_screen() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let app_id = app.create_app().await;
    let link = short_link(&app, &app_id, "hkp_twelve_seconds", 60, 12).await;
    let browser = Browser::start(1280, 900).await;
    browser.open_link(&format!("{link}&to=/catalog")).await;
    browser
        .wait_text("main h1", "the named screen", |t| t == "Event catalog")
        .await;
    let stored = "return JSON.parse(sessionStorage.getItem('hookline.portal.session.' + location.pathname.split('/')[3])).expires_at;";
    let before = browser.run(stored).await;
    // Halfway through its span, the notice says when it ends.
    browser
        .wait_text("[data-test=session-ending]", "the notice", |t| {
            t.contains("Your session ends at")
        })
        .await;
    browser.check_accessibility("session notice").await;
    // By keyboard: from the screen's heading back (Shift+Tab) to "Stay
    // signed in", above the page's content, and Enter.
    browser
        .run("document.querySelector('main h1').focus(); return null;")
        .await;
    let mut reached = false;
    for _ in 0..20 {
        browser.press("\u{E008}\u{E004}\u{E008}").await;
        if browser.focused().await == "session-stay" {
            reached = true;
            break;
        }
    }
    assert!(reached, "Stay signed in is reached by keyboard");
    browser.press("\u{E007}").await;
    let after = wait_until(PATIENCE, "the renewed session", || async {
        let said = browser
            .run("return document.getElementById('session-notice').textContent;")
            .await;
        let after = browser.run(stored).await;
        (said == json!("") && after != before).then_some(after)
    })
    .await;
    let (before, after) = (
        hookline_core::time::Timestamp::parse_rfc3339(before.as_str().unwrap()).unwrap(),
        hookline_core::time::Timestamp::parse_rfc3339(after.as_str().unwrap()).unwrap(),
    );
    assert!(after > before, "renewed: {before:?} → {after:?}");
    // The focus went back to the page (the button went with the notice).
    let focused = browser.run("return document.activeElement.id;").await;
    assert_eq!(focused, json!("main"));
    // Left alone, it ends: the page says so, and the address keeps the screen.
    let page = browser
        .wait_text("[data-test=error-page]", "the session's end", |t| {
            !t.is_empty()
        })
        .await;
    assert!(page.to_lowercase().contains("expired"), "{page}");
    let url = browser.client.current_url().await.unwrap();
    assert!(url.as_str().ends_with("#/catalog"), "{url}");
    // The next link, which names no screen, lands there again.
    browser.open(&portal_link(&app, &app_id, &[]).await).await;
    browser.client.refresh().await.unwrap();
    browser.click("[data-test=continue]").await;
    browser
        .wait_text("main h1", "the screen the session ended on", |t| {
            t == "Event catalog"
        })
        .await;
    browser.close().await;
}

/// The endpoint form's advanced settings: custom headers, a bearer token, the
/// retry policy, the in-flight ceiling and the ordering rule are set and saved;
/// reopened by a session without `secrets`, the token and the header values
/// show masked, as the API shows them, and saving another change keeps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advanced_settings_are_saved_shown_masked_and_kept() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/apps/{app_id}/endpoints/{endpoint_id}");
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    let edit = || async {
        browser.open(&screen(&app, &app_id, "/endpoints")).await;
        browser
            .wait_for(&format!(
                "[data-test=endpoint-row][data-id='{endpoint_id}']"
            ))
            .await;
        browser.click("[data-test=endpoint-edit]").await;
        browser.wait_for("[data-test=endpoint-form]").await;
        browser.click("[data-test=endpoint-advanced] summary").await;
    };
    edit().await;
    browser
        .check_accessibility("endpoint form (advanced)")
        .await;
    // A value the form can tell is wrong is refused at its field, nothing sent.
    browser.fill("#endpoint-max-attempts", "0").await;
    browser.click("[data-test=endpoint-save]").await;
    browser
        .wait_text(
            "[data-test=endpoint-form] [data-test=problem]",
            "the refusal",
            |t| t.contains("Attempts must be a whole number from 1 to 1000"),
        )
        .await;
    let invalid = browser
        .run(
            "return document.getElementById('endpoint-max-attempts').getAttribute('aria-invalid');",
        )
        .await;
    assert_eq!(invalid, json!("true"));
    browser.fill("#endpoint-max-attempts", "3").await;
    browser.fill("#endpoint-max-age", "2").await;
    browser.fill("#endpoint-headers", "X-Team: billing").await;
    browser.select("#endpoint-auth", "bearer").await;
    browser.fill("#endpoint-bearer", "tok123").await;
    browser.fill("#endpoint-max-in-flight", "4").await;
    browser.select("#endpoint-ordering-on-dead", "block").await;
    // On, as the API made it: turned off, the envelope is sent without `seq`.
    let checked = browser
        .run("return document.getElementById('endpoint-seq-in-body').checked;")
        .await;
    assert_eq!(checked, json!(true));
    browser.click("#endpoint-seq-in-body").await;
    browser.click("[data-test=endpoint-save]").await;
    let saved = wait_until(PATIENCE, "the advanced settings over the API", || async {
        let saved = app.get(&path).await;
        (saved["max_in_flight"] == 4).then_some(saved)
    })
    .await;
    assert_eq!(saved["headers"], json!({"x-team": "billing"}));
    assert_eq!(saved["auth"], json!({"bearer": "tok123"}));
    assert_eq!(
        saved["retry"],
        json!({"max_attempts": 3, "max_age_secs": 7200})
    );
    assert_eq!(saved["ordering_on_dead"], "block");
    assert_eq!(saved["seq_in_body"], false);

    // Reopened by this session (no `secrets`): masked as the API masks them.
    edit().await;
    let shown = browser
        .run(
            "return [document.getElementById('endpoint-headers').value,
                     document.getElementById('endpoint-headers').readOnly,
                     document.getElementById('endpoint-bearer').value,
                     document.getElementById('endpoint-max-attempts').value];",
        )
        .await;
    assert_eq!(shown, json!(["x-team: …", true, "…", "3"]));
    let checked = browser
        .run("return document.getElementById('endpoint-seq-in-body').checked;")
        .await;
    assert_eq!(checked, json!(false));
    // Another change leaves the hidden values as they are.
    browser.fill("#endpoint-max-in-flight", "8").await;
    browser.click("[data-test=endpoint-save]").await;
    let kept = wait_until(PATIENCE, "the second save", || async {
        let kept = app.get(&path).await;
        (kept["max_in_flight"] == 8).then_some(kept)
    })
    .await;
    assert_eq!(kept["headers"], json!({"x-team": "billing"}));
    assert_eq!(kept["auth"], json!({"bearer": "tok123"}));
    assert_eq!(kept["retry"], saved["retry"]);
    browser.close().await;
}

/// Opens the endpoint form of `endpoint_id` from a freshly loaded endpoints
/// screen (no form left open from before), its advanced settings unfolded.
async fn open_advanced_settings(browser: &Browser, app: &TestApp, app_id: &str, endpoint_id: &str) {
    browser.open(&screen(app, app_id, "/endpoints")).await;
    browser.client.refresh().await.unwrap();
    let row = format!("[data-test=endpoint-row][data-id='{endpoint_id}']");
    browser.wait_for(&row).await;
    browser
        .click(&format!("{row} [data-test=endpoint-edit]"))
        .await;
    browser.wait_for("[data-test=endpoint-form]").await;
    browser.click("[data-test=endpoint-advanced] summary").await;
}

/// Batching in the endpoint form's advanced settings: turned on with its two
/// numbers (one out of bounds is refused at its field, nothing sent), saved as
/// the API has it, shown on the attempt of a delivery sent in a batch, and
/// turned off; beside a transform the server's refusal is shown in the form;
/// a polling endpoint is not offered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batching_is_turned_on_and_off_in_the_advanced_settings() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/apps/{app_id}/endpoints/{endpoint_id}");
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    open_advanced_settings(&browser, &app, &app_id, &endpoint_id).await;
    // Off, as the API made it; ticked, its numbers show at their defaults.
    let shown = browser
        .run(
            "return [document.querySelector('[data-test=endpoint-batching]').hidden,
                     document.getElementById('endpoint-batch').checked];",
        )
        .await;
    assert_eq!(shown, json!([false, false]));
    browser.click("#endpoint-batch").await;
    let defaults = browser
        .run(
            "return [document.getElementById('endpoint-batch-max-events').value,
                     document.getElementById('endpoint-batch-max-wait').value];",
        )
        .await;
    assert_eq!(defaults, json!(["10", "1000"]));
    browser
        .check_accessibility("endpoint form (batching)")
        .await;
    browser
        .run("document.querySelector('[data-test=endpoint-batching]').scrollIntoView({block: 'center'});")
        .await;
    browser.screenshot("endpoint-batching-light").await;
    // A number the form can tell is wrong is refused at its field, nothing sent.
    browser.fill("#endpoint-batch-max-events", "1").await;
    browser.click("[data-test=endpoint-save]").await;
    browser
        .wait_text(
            "[data-test=endpoint-form] [data-test=problem]",
            "the refusal",
            |t| t.contains("Deliveries per request must be a whole number from 2 to 100"),
        )
        .await;
    let invalid = browser
        .run(
            "return document.getElementById('endpoint-batch-max-events').getAttribute('aria-invalid');",
        )
        .await;
    assert_eq!(invalid, json!("true"));
    assert_eq!(app.get(&path).await["batch"], Value::Null);
    browser.fill("#endpoint-batch-max-events", "5").await;
    browser.fill("#endpoint-batch-max-wait", "200").await;
    browser.click("[data-test=endpoint-save]").await;
    let saved = wait_until(PATIENCE, "batching over the API", || async {
        let saved = app.get(&path).await;
        (!saved["batch"].is_null()).then_some(saved)
    })
    .await;
    assert_eq!(saved["batch"], json!({"max_events": 5, "max_wait_ms": 200}));

    // A delivery sent in a batch: its attempt names the batch and its place.
    let delivery = publish(&app, &app_id, 1).await;
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    browser
        .open(&screen(&app, &app_id, &format!("/deliveries/{delivery}")))
        .await;
    browser
        .wait_text("[data-test=attempt-batch]", "the attempt's batch", |t| {
            t.starts_with("bat_") && t.ends_with("this one was number 1)")
        })
        .await;
    browser
        .wait_text("[data-test=attempt-batch-body]", "what the body is", |t| {
            t.contains("the whole batch")
        })
        .await;
    browser
        .run("document.querySelector('[data-test=attempt-batch]').scrollIntoView({block: 'center'});")
        .await;
    browser.screenshot("delivery-batch-light").await;

    // Reopened, it shows as saved; unticked, the endpoint stops batching.
    open_advanced_settings(&browser, &app, &app_id, &endpoint_id).await;
    let shown = browser
        .run(
            "return [document.getElementById('endpoint-batch').checked,
                     document.getElementById('endpoint-batch-max-events').value,
                     document.getElementById('endpoint-batch-max-wait').value];",
        )
        .await;
    assert_eq!(shown, json!([true, "5", "200"]));
    browser.click("#endpoint-batch").await;
    browser.click("[data-test=endpoint-save]").await;
    let stopped = wait_until(PATIENCE, "batching off over the API", || async {
        let stopped = app.get(&path).await;
        stopped["batch"].is_null().then_some(stopped)
    })
    .await;
    assert_eq!(stopped["batch"], Value::Null);

    // Beside a transform, the server refuses (409) and the form says why.
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"transform": "slack"})),
        200,
    )
    .await;
    open_advanced_settings(&browser, &app, &app_id, &endpoint_id).await;
    browser.click("#endpoint-batch").await;
    browser.click("[data-test=endpoint-save]").await;
    browser
        .wait_text(
            "[data-test=endpoint-form] [data-test=problem]",
            "the server's refusal",
            |t| t.contains("transform"),
        )
        .await;
    assert_eq!(app.get(&path).await["batch"], Value::Null);

    // A polling endpoint is sent nothing: batching is not offered.
    let polled = app.create_endpoint(&app_id, "poll:").await;
    open_advanced_settings(&browser, &app, &app_id, polled["id"].as_str().unwrap()).await;
    let hidden = browser
        .run("return document.querySelector('[data-test=endpoint-batching]').hidden;")
        .await;
    assert_eq!(hidden, json!(true));
    browser.close().await;
}

/// The endpoint's timeline marks its breaker opening: three failures in a row
/// open it (as the API's health says), and the endpoint page lists the mark in
/// words under the chart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_marks_the_breaker_opening() {
    let app = TestApp::spawn_with(Engine::Sqlite, |c| {
        c.max_attempts = 1;
        c.breaker_failure_threshold = 3;
        // Open for the whole test: no probe closes it meanwhile.
        c.breaker_cooldown_ms = 3_600_000;
        c.breaker_max_cooldown_ms = 3_600_000;
    })
    .await;
    let failing = Receiver::start_with(|_| Reply::status(503)).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &failing.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    for n in 0..3 {
        app.publish(&app_id, "order.paid", json!({ "order_id": n }))
            .await;
    }
    let health = format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/health");
    wait_until(PATIENCE, "the breaker to open", || async {
        let health = app.get(&health).await;
        (health["breaker"] == "open").then_some(())
    })
    .await;
    let timeline = app
        .get(&format!(
            "/v1/apps/{app_id}/endpoints/{endpoint_id}/timeline"
        ))
        .await;
    let kinds: Vec<&str> = timeline["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["breaker_opened"]);

    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &[]).await)
        .await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    browser
        .open(&screen(&app, &app_id, &format!("/endpoints/{endpoint_id}")))
        .await;
    browser
        .wait_text("[data-test=timeline-marks]", "the breaker's mark", |t| {
            t.contains("circuit breaker opened")
        })
        .await;
    browser
        .check_accessibility("endpoint timeline (breaker opened)")
        .await;
    browser.close().await;
}

/// A bookmark: opened in a tab that never saw the sign-in, it goes on with
/// the browser's session (its cookie) at the bookmarked screen; once signed
/// out it says there is no session, and the next link opened lands on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookmark_opens_its_screen_with_the_session_or_after_the_next_sign_in() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let app_id = app.create_app().await;
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["endpoints"]).await)
        .await;
    browser.wait_for("[data-test=nav-catalog]").await;
    // A new tab: nothing of this tab's kept, only the browser's cookie.
    browser.run("sessionStorage.clear();").await;
    browser.open(&screen(&app, &app_id, "/catalog")).await;
    browser.client.refresh().await.unwrap();
    browser
        .wait_text("main h1", "the bookmarked screen", |t| t == "Event catalog")
        .await;
    // What the session may do came with it: the endpoints capability's button.
    browser.click("[data-test=nav-endpoints]").await;
    browser.wait_for("[data-test=endpoint-new]").await;

    // Signed out, the bookmark finds no session, and says where it will land.
    browser.click("[data-test=sign-out]").await;
    browser
        .wait_text("[data-test=error-page]", "signed out", |t| {
            t.contains("signed out")
        })
        .await;
    browser.open(&screen(&app, &app_id, "/catalog")).await;
    browser.client.refresh().await.unwrap();
    browser
        .wait_text("[data-test=error-page]", "no session", |t| {
            t.contains("No session") && t.contains("you will land on this screen")
        })
        .await;
    browser.check_accessibility("no session (bookmark)").await;
    // A new link that names no screen: the bookmarked one opens. (Opened
    // over this page, the address changes only after `#`: reloaded, as a
    // link opened from a mail is.)
    let open_afresh = |link: String| {
        let browser = &browser;
        async move {
            browser.open(&link).await;
            browser.client.refresh().await.unwrap();
            browser.click("[data-test=continue]").await;
        }
    };
    open_afresh(portal_link(&app, &app_id, &[]).await).await;
    browser
        .wait_text("main h1", "the bookmarked screen after sign-in", |t| {
            t == "Event catalog"
        })
        .await;
    let url = browser.client.current_url().await.unwrap();
    assert!(url.as_str().ends_with("#/catalog"), "{url}");
    // A link that names its own screen wins over a remembered one, which it
    // forgets: the link after it opens where links open.
    browser.click("[data-test=sign-out]").await;
    browser.wait_for("[data-test=error-page]").await;
    browser.open(&screen(&app, &app_id, "/catalog")).await;
    browser.client.refresh().await.unwrap();
    browser.wait_for("[data-test=error-page]").await;
    open_afresh(format!(
        "{}&to=/notifications",
        portal_link(&app, &app_id, &[]).await
    ))
    .await;
    browser
        .wait_text("main h1", "the link's own screen", |t| t == "Notifications")
        .await;
    browser.run("sessionStorage.clear();").await;
    open_afresh(portal_link(&app, &app_id, &[]).await).await;
    browser
        .wait_text("main h1", "the status screen", |t| t == "Status")
        .await;
    browser.close().await;
}

/// Bulk replay by keyboard alone: the rows' boxes ticked with Space, reached
/// with Tab; "Replay selected" reached and pressed with Enter; the
/// confirmation starts on Cancel and is answered with Tab and Enter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_deliveries_are_ticked_and_replayed_by_keyboard_alone() {
    const TAB: &str = "\u{E004}";
    const SHIFT_TAB: &str = "\u{E008}\u{E004}\u{E008}";
    const ENTER: &str = "\u{E007}";
    const SPACE: &str = " ";
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(422));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let mut dead = Vec::new();
    for order in 1..=2 {
        let id = publish(&app, &app_id, order).await;
        app.wait_for_delivery_state(&app_id, &id, "dead").await;
        dead.push(id);
    }
    receiver.answer_always(Reply::status(200));
    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &["replay"]).await)
        .await;
    browser.wait_for("[data-test=nav-deliveries]").await;
    browser
        .open(&screen(&app, &app_id, "/deliveries?state=dead"))
        .await;
    browser
        .wait_count("[data-test=delivery-row]", "the two dead", |n| n == 2)
        .await;
    // From the page's heading, Tab by Tab to each row's box, ticked with Space.
    browser
        .run("document.querySelector('main h1').focus(); return null;")
        .await;
    let tab_to = |target: &'static str, keys: &'static str| {
        let browser = &browser;
        async move {
            for _ in 0..60 {
                browser.press(keys).await;
                if browser.focused().await == target {
                    return;
                }
            }
            panic!("{target} is not reached by keyboard");
        }
    };
    for ticked in 1..=2 {
        tab_to("delivery-select", TAB).await;
        browser.press(SPACE).await;
        let checked = browser
            .run("return document.querySelectorAll('[data-test=delivery-select]:checked').length;")
            .await;
        assert_eq!(checked, json!(ticked));
    }
    browser
        .wait_text("[data-test=replay-selected]", "two ticked", |t| {
            t == "Replay selected (2)"
        })
        .await;
    // Back up to "Replay selected", above the table.
    tab_to("replay-selected", SHIFT_TAB).await;
    browser.press(ENTER).await;
    browser.wait_for("[data-test=confirm-no]").await;
    assert_eq!(
        browser.focused().await,
        "confirm-no",
        "the dialog starts on Cancel"
    );
    browser.press(TAB).await;
    assert_eq!(browser.focused().await, "confirm-yes");
    browser.press(ENTER).await;
    for id in &dead {
        app.wait_for_delivery_state(&app_id, id, "succeeded").await;
    }
    browser
        .wait_text("[data-test=replay-note]", "two replayed", |t| {
            t == "Replayed 2 of 2."
        })
        .await;
    assert_eq!(receiver.requests().len(), 4, "two refused, two replayed");
    browser
        .check_accessibility("delivery log (replayed by keyboard)")
        .await;
    browser.close().await;
}

/// A polling endpoint's page says where its receiver stands: how far it has
/// committed, how many numbers wait, and when it last committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_endpoints_page_shows_its_receivers_position() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, "poll:").await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    for n in 1..=3 {
        publish(&app, &app_id, n).await;
    }
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/messages/commit"),
        Some(&json!({"cursor": 1})),
        200,
    )
    .await;
    let health = app
        .get(&format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/health"))
        .await;
    assert_eq!(
        (
            &health["polling"]["committed_seq"],
            &health["polling"]["last_seq"],
            &health["polling"]["waiting"]
        ),
        (&json!(1), &json!(3), &json!(2)),
        "{health}"
    );
    assert!(health["polling"]["committed_at"].is_string(), "{health}");

    let browser = Browser::start(1280, 900).await;
    browser
        .open_link(&portal_link(&app, &app_id, &[]).await)
        .await;
    browser
        .open(&screen(&app, &app_id, &format!("/endpoints/{endpoint_id}")))
        .await;
    browser
        .wait_text(
            "[data-test=endpoint-polling]",
            "the receiver's position",
            |t| t.contains("up to number 1 of 3"),
        )
        .await;
    let waiting = browser
        .wait_text(
            "[data-test=endpoint-polling-waiting]",
            "the waiting count",
            |t| t == "2",
        )
        .await;
    assert_eq!(waiting, "2");
    browser.check_accessibility("polling endpoint").await;
    browser.close().await;
}
