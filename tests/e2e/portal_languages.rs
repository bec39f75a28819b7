//! The portal in a second language, right to left: Hebrew, chosen by the app
//! or by the customer's browser. Every screen, in both themes, says nothing in
//! English but data (and the technical names a translation keeps), is laid
//! out right to left, passes axe, and shows the server's sentences (an
//! explanation, an incident) in Hebrew too. The API's side of it — the same
//! sentences by `Accept-Language` on both engines — is at the end.

use reqwest::Method;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::helpers::{Engine, Receiver, Reply, TestApp};
use crate::portal::{catalog, every_screen, portal_link, publish, screen};

/// Any letter of the Hebrew alphabet.
fn has_hebrew(text: &str) -> bool {
    text.chars().any(|c| ('\u{05D0}'..='\u{05EA}').contains(&c))
}

/// Opens `route` afresh and waits until it has drawn (no "Loading…" left).
async fn show(browser: &Browser, app: &TestApp, app_id: &str, route: &str) {
    browser.open(&screen(app, app_id, route)).await;
    browser.client.refresh().await.unwrap();
    browser.wait_for("main h1").await;
    browser
        .wait_count(".loading", "the screen drawn", |n| n == 0)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_chooses_hebrew_and_every_screen_reads_right_to_left() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    catalog(&app).await;
    let receiver = Receiver::start().await;
    let refusing = Receiver::start_with(|_| Reply::status(422)).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"description": "Orders into our ERP", "event_types": ["order.paid"]}),
        )
        .await;
    let endpoint_id = endpoint["id"].as_str().unwrap().to_owned();
    publish(&app, &app_id, 1).await;
    // A second endpoint refuses: a dead delivery, explained, and an incident.
    app.create_endpoint_with(
        &app_id,
        &refusing.url,
        json!({"description": "Invoices", "event_types": ["invoice.created"]}),
    )
    .await;
    let dead = app
        .publish(&app_id, "invoice.created", json!({"order_id": 7}))
        .await["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_delivery_state(&app_id, &dead, "dead").await;
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{app_id}"),
        Some(&json!({"portal": {"display_name": "Acme Webhooks", "language": "he"}})),
        200,
    )
    .await;

    // The browser speaks English; the app's setting wins once it is read.
    let browser = Browser::start(1280, 900).await;
    let link = portal_link(&app, &app_id, &["endpoints", "secrets", "replay"]).await;
    browser.open_link(&link).await;
    browser.wait_for("[data-test=nav-endpoints]").await;
    let page = browser
        .run("return [document.documentElement.lang, document.documentElement.dir, getComputedStyle(document.body).direction];")
        .await;
    assert_eq!(page, json!(["he", "rtl", "rtl"]));

    // The server's sentences come in Hebrew: the incident, the explanation.
    let said = browser
        .wait_text(
            "[data-test=incident][data-kind=dead_letters] [data-test=incident-message]",
            "the refusal, said",
            |t| t.contains("422"),
        )
        .await;
    assert!(has_hebrew(&said), "{said}");
    show(&browser, &app, &app_id, &format!("/deliveries/{dead}")).await;
    let explained = browser
        .wait_text(".explanation", "the dead delivery explained", |t| {
            t.contains("422")
        })
        .await;
    assert!(has_hebrew(&explained), "{explained}");

    for theme in ["light", "dark"] {
        app.call(
            Method::PATCH,
            &format!("/v1/apps/{app_id}"),
            Some(&json!({"portal": {"display_name": "Acme Webhooks", "language": "he", "theme": theme}})),
            200,
        )
        .await;
        for (route, name) in every_screen(&endpoint_id, &dead) {
            show(&browser, &app, &app_id, &route).await;
            let dir = browser
                .run("return [document.documentElement.dir, document.documentElement.dataset.theme ?? 'system'];")
                .await;
            assert_eq!(dir, json!(["rtl", theme]), "{name}");
            let english = browser.english_left().await;
            assert!(
                english.is_empty(),
                "{name} ({theme}) has English left: {english:#?}"
            );
            browser
                .check_accessibility(&format!("{name} (Hebrew, {theme})"))
                .await;
            browser.screenshot(&format!("{name}-he-{theme}")).await;
        }
    }
    // The endpoint form, opened, and the navigation on the right.
    show(&browser, &app, &app_id, "/endpoints").await;
    browser.click("[data-test=endpoint-new]").await;
    browser.wait_for("[data-test=endpoint-form]").await;
    let english = browser.english_left().await;
    assert!(english.is_empty(), "the endpoint form: {english:#?}");
    browser.check_accessibility("endpoint form (Hebrew)").await;
    let sides = browser
        .run(
            "const brand = document.querySelector('.brand').getBoundingClientRect();
             const nav = document.querySelector('#nav').getBoundingClientRect();
             return brand.left > nav.left;",
        )
        .await;
    assert_eq!(sides, json!(true), "the name sits right of the navigation");
    browser.close().await;

    // On a phone too: every screen, in Hebrew and in English.
    let phone = Browser::start(390, 844).await;
    phone
        .open_link(&portal_link(&app, &app_id, &["endpoints", "secrets", "replay"]).await)
        .await;
    phone.wait_for("[data-test=nav-endpoints]").await;
    for language in ["he", "en"] {
        app.call(
            Method::PATCH,
            &format!("/v1/apps/{app_id}"),
            Some(&json!({"portal": {"display_name": "Acme Webhooks", "language": language}})),
            200,
        )
        .await;
        for (route, name) in every_screen(&endpoint_id, &dead) {
            show(&phone, &app, &app_id, &route).await;
            let lang = phone.run("return document.documentElement.lang;").await;
            assert_eq!(lang, json!(language), "{name}");
            if language == "he" {
                let english = phone.english_left().await;
                assert!(english.is_empty(), "{name} on a phone: {english:#?}");
            }
            phone
                .check_accessibility(&format!("{name} ({language}, phone)"))
                .await;
            let file = match language {
                "he" => format!("{name}-he-phone"),
                _ => format!("{name}-phone"),
            };
            phone.screenshot(&file).await;
        }
    }
    phone.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_setting_the_portal_speaks_the_browsers_language() {
    let app = TestApp::spawn(Engine::Sqlite).await;
    let app_id = app.create_app().await;
    let browser = Browser::start_in("he-IL", 1280, 900).await;
    // Before sign-in already: the page that asks for the click.
    browser.open(&portal_link(&app, &app_id, &[]).await).await;
    let button = browser
        .wait_text("[data-test=continue]", "the button in Hebrew", has_hebrew)
        .await;
    assert!(has_hebrew(&button), "{button}");
    let english = browser.english_left().await;
    assert!(english.is_empty(), "{english:#?}");
    browser.check_accessibility("continue (Hebrew)").await;
    browser.click("[data-test=continue]").await;
    browser
        .wait_text(
            "[data-test=incidents-all-good]",
            "all good, in Hebrew",
            has_hebrew,
        )
        .await;
    let english = browser.english_left().await;
    assert!(english.is_empty(), "{english:#?}");

    // The app's setting outranks the browser.
    app.call(
        Method::PATCH,
        &format!("/v1/apps/{app_id}"),
        Some(&json!({"portal": {"language": "en"}})),
        200,
    )
    .await;
    browser.client.refresh().await.unwrap();
    browser
        .wait_text(
            "[data-test=incidents-all-good]",
            "all good, in English",
            |t| t.contains("All good"),
        )
        .await;
    let page = browser
        .run("return [document.documentElement.lang, document.documentElement.dir];")
        .await;
    assert_eq!(page, json!(["en", "ltr"]));
    browser.close().await;
}

/// The API words its sentences in the language `Accept-Language` asks for
/// (of English and Hebrew), on both engines; the structured parts stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_explains_in_the_language_asked_for() {
    for engine in [Engine::Sqlite, Engine::Postgres] {
        let app = TestApp::spawn(engine).await;
        let refusing = Receiver::start_with(|_| Reply::status(422)).await;
        let app_id = app.create_app().await;
        app.create_endpoint(&app_id, &refusing.url).await;
        let dead = app
            .publish(&app_id, "order.paid", json!({"order_id": 1}))
            .await["deliveries"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        app.wait_for_delivery_state(&app_id, &dead, "dead").await;
        let read = |path: String, language: &'static str| {
            let app = &app;
            async move {
                let response = app
                    .request(Method::GET, &path, None, &[("accept-language", language)])
                    .await;
                assert_eq!(response.status(), 200, "{path}");
                response.json::<Value>().await.unwrap()
            }
        };
        let delivery = format!("/v1/apps/{app_id}/deliveries/{dead}");
        let english = read(delivery.clone(), "en-US,en;q=0.9").await;
        let hebrew = read(delivery.clone(), "he-IL,he;q=0.9,en;q=0.8").await;
        let unknown = read(delivery.clone(), "fr-FR").await;
        let (en, he) = (&english["explanation"], &hebrew["explanation"]);
        assert!(
            en["message"]
                .as_str()
                .unwrap()
                .starts_with("Your endpoint answered 422"),
            "{en}"
        );
        assert!(has_hebrew(he["message"].as_str().unwrap()), "{he}");
        assert!(he["message"].as_str().unwrap().contains("422"), "{he}");
        assert_eq!(unknown["explanation"], english["explanation"]);
        for field in ["code", "status", "retries_left", "action"] {
            assert_eq!(en[field], he[field], "{field}");
        }
        let attempts = read(format!("{delivery}/attempts"), "he").await;
        let message = attempts["data"][0]["explanation"]["message"]
            .as_str()
            .unwrap();
        assert!(has_hebrew(message), "{message}");
        let incidents = read(format!("/v1/apps/{app_id}/incidents"), "he").await;
        let message = incidents["data"][0]["message"].as_str().unwrap();
        assert!(has_hebrew(message), "{message}");
    }
}
