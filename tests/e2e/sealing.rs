//! Endpoint secrets and custom headers at rest: sealed under the master key,
//! never in the clear in the database; a wrong key stops the process at start;
//! a master key rotation re-seals everything and keeps every endpoint's
//! signatures and headers as they were; headers an older release stored in the
//! clear are sealed at the next start.

use std::time::Duration;

use hookline::{Config, Role, Server};
use reqwest::Method;
use serde_json::json;

use crate::helpers::{
    both_engines, raw, test_config, Engine, Receiver, TestApp, TestDb, TEST_MASTER_KEY,
};

both_engines!(
    no_secret_is_in_the_clear_in_the_database,
    a_wrong_master_key_stops_the_start_and_a_rotation_reseals_every_secret,
    custom_headers_an_older_release_stored_in_the_clear_are_sealed_at_start,
);

/// A receiver's token, as an endpoint's custom header carries it.
const HEADER_TOKEN: &str = "tok_live_7f3Qm9ZpW2sealedHeaderValue";

/// A receiver's bearer token, as an endpoint's outbound authentication carries it.
const AUTH_TOKEN: &str = "tok_live_9Kx2AuthSealedBearerValue";

const OTHER_MASTER_KEY: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

/// `hookline rotate-master-key` (the real binary): the other key seals, the tests' key opens.
fn rotate_to_other_key(database_url: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hookline-under-test"))
        .arg("rotate-master-key")
        .env("HOOKLINE_DATABASE_URL", database_url)
        .env("HOOKLINE_MASTER_KEY", OTHER_MASTER_KEY)
        .env("HOOKLINE_PREVIOUS_MASTER_KEYS", TEST_MASTER_KEY)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running hookline rotate-master-key")
}

/// Every byte the database holds, as text: the SQLite files, or a `pg_dump`.
pub(crate) fn database_contents(engine: Engine, db: &TestDb) -> String {
    match engine {
        Engine::Sqlite => {
            let path = db.url.strip_prefix("sqlite://").unwrap();
            ["", "-wal"]
                .iter()
                .filter_map(|suffix| std::fs::read(format!("{path}{suffix}")).ok())
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .collect()
        }
        Engine::Postgres => {
            let dump = std::process::Command::new("pg_dump")
                .arg(&db.url)
                .output()
                .expect("pg_dump runs");
            assert!(dump.status.success(), "pg_dump: {dump:?}");
            String::from_utf8(dump.stdout).unwrap()
        }
    }
}

async fn no_secret_is_in_the_clear_in_the_database(engine: Engine) {
    let receiver = Receiver::start().await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let given = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({ "secret": given, "headers": {"X-Api-Key": HEADER_TOKEN} }),
        )
        .await;
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}/secret",
        endpoint["id"].as_str().unwrap()
    );
    // A rotation leaves two secrets on the row: the new one and the retiring one.
    let rotated = app
        .call(
            Method::POST,
            &format!("{path}/rotate"),
            Some(&json!({})),
            200,
        )
        .await;
    app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let got = receiver.wait_for_requests(1).await;
    assert_eq!(
        got[0].header("x-api-key"),
        HEADER_TOKEN,
        "the sealed header is sent"
    );
    for secret in [given, rotated["key"].as_str().unwrap()] {
        assert!(
            standardwebhooks::Webhook::new(secret)
                .unwrap()
                .verify(&got[0].body, &got[0].headers)
                .is_ok(),
            "the sealed secrets still sign"
        );
    }

    let contents = database_contents(engine, &app.db);
    assert!(
        contents.contains(endpoint["id"].as_str().unwrap()),
        "the dump holds the endpoint"
    );
    assert!(!contents.contains("whsec_"), "no secret in the clear");
    assert!(!contents.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    assert!(!contents.contains(&rotated["key"].as_str().unwrap()[6..]));
    assert!(
        !contents.contains(HEADER_TOKEN),
        "no custom header value in the clear"
    );
}

async fn a_wrong_master_key_stops_the_start_and_a_rotation_reseals_every_secret(engine: Engine) {
    let receiver = Receiver::start().await;
    let mut app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"headers": {"X-Api-Key": HEADER_TOKEN}, "auth": {"bearer": AUTH_TOKEN}}),
        )
        .await;
    let secret = endpoint["secret"].as_str().unwrap().to_owned();
    app.server.take().unwrap().stop().await.unwrap();

    let with_keys = |current: &str, previous: &str| Config {
        master_key: Some(current.into()),
        previous_master_keys: previous.into(),
        ..test_config(&app.db)
    };
    let refused = Server::start(with_keys(OTHER_MASTER_KEY, ""), Role::Serve).await;
    let error = format!(
        "{:#}",
        refused.err().expect("a wrong master key is refused")
    );
    assert!(
        error.contains("sealed with master key") && error.contains("configure the key"),
        "{error}"
    );

    // The rotation: the new key seals, the old one still opens.
    let rotate = rotate_to_other_key(&app.db.url);
    assert!(rotate.status.success(), "{rotate:?}");
    assert!(
        String::from_utf8_lossy(&rotate.stdout).contains("re-sealed the secrets of 1 endpoints")
    );

    let old_only = Server::start(with_keys(TEST_MASTER_KEY, ""), Role::Serve).await;
    assert!(
        old_only.is_err(),
        "after the rotation the old key alone is refused"
    );

    // A process still sealing with the old key (it holds the new one only to
    // open) writes an endpoint during the rotation: a start with the new key
    // alone then refuses, naming the old key, until a second rotation.
    let behind = Server::start(with_keys(TEST_MASTER_KEY, OTHER_MASTER_KEY), Role::Serve)
        .await
        .expect("the old key with the new one as previous still opens everything");
    let behind_base = format!("http://{}", behind.addr);
    let made = app
        .http
        .post(format!("{behind_base}/v1/apps/{app_id}/endpoints"))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        // Subscribed to nothing the test publishes: the receiver's log stays the first endpoint's.
        .json(&json!({"url": receiver.url, "event_types": ["never.sent"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    behind.stop().await.unwrap();
    let mixed = Server::start(with_keys(OTHER_MASTER_KEY, ""), Role::Serve).await;
    let error = format!(
        "{:#}",
        mixed
            .err()
            .expect("a secret under an unconfigured key is refused")
    );
    assert!(error.contains("which is not configured"), "{error}");
    let again = rotate_to_other_key(&app.db.url);
    assert!(again.status.success(), "{again:?}");

    let server = Server::start(with_keys(OTHER_MASTER_KEY, ""), Role::Serve)
        .await
        .expect("the new key alone opens everything");
    app.base = format!("http://{}", server.addr);
    app.server = Some(server);
    assert_eq!(
        app.get(&format!(
            "/v1/apps/{app_id}/endpoints/{}/secret",
            endpoint["id"].as_str().unwrap()
        ))
        .await["key"],
        secret,
        "the endpoint's secret is what it was"
    );
    app.publish(&app_id, "order.paid", json!({})).await;
    let got = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert!(standardwebhooks::Webhook::new(&secret)
        .unwrap()
        .verify(&got[0].body, &got[0].headers)
        .is_ok());
    assert_eq!(
        got[0].header("x-api-key"),
        HEADER_TOKEN,
        "the endpoint's headers are what they were"
    );
    assert_eq!(
        got[0].header("authorization"),
        format!("Bearer {AUTH_TOKEN}"),
        "and its outbound authentication"
    );
}

/// The stored `headers` column of the endpoint `id`, as the database holds it.
async fn stored_headers(engine: Engine, db: &TestDb, id: &str) -> String {
    raw(
        engine,
        db,
        &format!("SELECT headers FROM endpoints WHERE id = '{id}'"),
    )
    .await
    .unwrap()
}

/// A release before headers were sealed stored them as clear JSON: the next
/// start seals them (the row no longer holds the value), and the endpoint
/// reads and sends them as before.
async fn custom_headers_an_older_release_stored_in_the_clear_are_sealed_at_start(engine: Engine) {
    let receiver = Receiver::start().await;
    let mut app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    app.server.take().unwrap().stop().await.unwrap();
    raw(
        engine,
        &app.db,
        &format!(
            "UPDATE endpoints SET headers = '[[\"x-api-key\",\"{HEADER_TOKEN}\"]]' WHERE id = '{id}'"
        ),
    )
    .await;
    assert!(
        stored_headers(engine, &app.db, &id)
            .await
            .contains(HEADER_TOKEN),
        "the older release's row holds the value in the clear"
    );

    let server = Server::start(test_config(&app.db), Role::Serve)
        .await
        .unwrap();
    app.base = format!("http://{}", server.addr);
    app.server = Some(server);
    let sealed = stored_headers(engine, &app.db, &id).await;
    assert!(
        !sealed.contains(HEADER_TOKEN) && hookline_core::sealing::key_id(&sealed).is_some(),
        "sealed at start: {sealed}"
    );
    let read = app.get(&format!("/v1/apps/{app_id}/endpoints/{id}")).await;
    assert_eq!(read["headers"], json!({"x-api-key": HEADER_TOKEN}));
    app.publish(&app_id, "order.paid", json!({})).await;
    let got = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(got[0].header("x-api-key"), HEADER_TOKEN);
}

/// Without a configured key, the first start writes one beside the SQLite file
/// (owner-only), and the next start uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_master_key_is_generated_beside_the_database_once() {
    let dir = std::env::temp_dir().join(format!(
        "hookline_key_{}",
        ulid::Ulid::new().to_string().to_lowercase()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config {
        database_url: format!("sqlite://{}", dir.join("hookline.db").display()),
        listen: "127.0.0.1:0".into(),
        admin_token: Some(crate::helpers::ADMIN_TOKEN.into()),
        master_key: None,
        ..Config::default()
    };
    let key_file = dir.join("hookline.master-key");
    let first = Server::start(config.clone(), Role::Api).await.unwrap();
    let written = std::fs::read_to_string(&key_file).expect("a key file beside the database");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner only");
    }
    first.stop().await.unwrap();
    let second = Server::start(config, Role::Api).await.unwrap();
    second.stop().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(&key_file).unwrap(),
        written,
        "reused, not replaced"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
