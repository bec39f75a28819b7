//! PostgreSQL away: Hookline reaches its database through a TCP proxy that the
//! test cuts (every connection dropped, new ones refused) and restores, as an
//! outage would, without stopping the server the other tests share.
//!
//! While it is away a request is answered `503 database_unavailable` with
//! `Retry-After` once the bounded wait for a connection ends — never held
//! until the database returns, never a 2xx for what was not committed — and
//! `/readyz` says not ready; once it is back, publishing and delivery resume
//! on their own. The same holds for SQLite's file locked by another process.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::helpers::{postgres_admin_url, wait_until, Engine, Receiver, TestApp, ADMIN_TOKEN};

/// A TCP proxy to `target` that can be cut and restored.
struct Proxy {
    addr: SocketAddr,
    down: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Proxy {
    async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let down = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (accept_down, accept_links) = (down.clone(), links.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if accept_down.load(Ordering::SeqCst) {
                    drop(client); // refused: the server is away
                    continue;
                }
                let target = target.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                accept_links.lock().unwrap().push(link.abort_handle());
            }
        });
        Self { addr, down, links }
    }

    /// The outage: every open connection is dropped, new ones are closed at once.
    fn cut(&self) {
        self.down.store(true, Ordering::SeqCst);
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }

    fn restore(&self) {
        self.down.store(false, Ordering::SeqCst);
    }
}

/// `postgres://user@host:port/db` with `host:port` replaced by `addr`.
fn through(url: &str, addr: SocketAddr) -> String {
    let (user, _, database) = split(url);
    format!("{user}{addr}{database}")
}

/// `host:port` of a PostgreSQL URL.
fn server_of(url: &str) -> String {
    split(url).1.to_owned()
}

/// `postgres://user@`, `host:port` and `/db…` of a PostgreSQL URL.
fn split(url: &str) -> (&str, &str, &str) {
    let at = url.find('@').expect("a user in the URL") + 1;
    let slash = at + url[at..].find('/').expect("a database in the URL");
    (&url[..at], &url[at..slash], &url[slash..])
}

/// A publish refused because the database is away: 503, the problem, `Retry-After`.
async fn assert_unavailable(answer: reqwest::Response, what: &str) {
    assert_eq!(answer.status(), 503, "{what}");
    assert_eq!(answer.headers()["retry-after"], "5", "{what}");
    let problem: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(problem["code"], "database_unavailable", "{what}: {problem}");
}

/// The `key` of every event the app holds, newest first.
async fn event_keys(app: &TestApp, app_id: &str) -> Vec<String> {
    let events = app.get(&format!("/v1/apps/{app_id}/events")).await;
    events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["key"].as_str().unwrap().to_owned())
        .collect()
}

async fn publish(app: &TestApp, app_id: &str, key: &str) -> reqwest::Response {
    app.http
        .post(format!("{}/v1/apps/{app_id}/events", app.base))
        .bearer_auth(ADMIN_TOKEN)
        .header("Idempotency-Key", key)
        .json(&json!({"event_type": "order.paid", "payload": {"key": key}}))
        // Far longer than the bounded wait: a request held until the database
        // returns would fail here rather than be answered.
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("an answer while the database is away, not a hang")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_away_requests_get_503_and_everything_resumes_after() {
    let proxy = Proxy::start(server_of(&postgres_admin_url())).await;
    let app = TestApp::spawn_with(Engine::Postgres, |config| {
        config.database_url = through(&config.database_url, proxy.addr);
        config.db_acquire_timeout_ms = 500;
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    assert_eq!(publish(&app, &app_id, "before").await.status(), 202);
    receiver.wait_for_requests(1).await;

    proxy.cut();
    for key in ["during-1", "during-2", "during-3"] {
        assert_unavailable(publish(&app, &app_id, key).await, key).await;
    }
    let listing = app
        .request(
            Method::GET,
            &format!("/v1/apps/{app_id}/deliveries"),
            None,
            &[],
        )
        .await;
    assert_eq!(listing.status(), 503, "reads too");
    let ready = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "not ready while the database is away");

    proxy.restore();
    // The same request again, as a client told to retry would send it.
    wait_until(
        Duration::from_secs(30),
        "a publish to succeed again",
        || async {
            let answer = publish(&app, &app_id, "during-1").await;
            (answer.status() == 202).then_some(())
        },
    )
    .await;
    let arrived = receiver.wait_for_requests(2).await;
    assert_eq!(arrived[1].json()["data"], json!({"key": "during-1"}));
    wait_until(Duration::from_secs(30), "/readyz to say ready", || async {
        let ready = app
            .http
            .get(format!("{}/readyz", app.base))
            .send()
            .await
            .unwrap();
        (ready.status() == 200).then_some(())
    })
    .await;

    // Nothing of what was refused was written: two events, each delivered once.
    assert_eq!(event_keys(&app, &app_id).await, ["during-1", "before"]);
    assert_eq!(receiver.requests().len(), 2);
}

/// SQLite's file locked by another process: writes wait `db_acquire_timeout_ms`,
/// then are answered 503; reads go on (WAL); when the lock goes, so does the problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_another_process_locks_the_sqlite_file_writes_get_503() {
    use sqlx::Connection;
    let app = TestApp::spawn_with(Engine::Sqlite, |config| {
        config.db_acquire_timeout_ms = 300;
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    assert_eq!(publish(&app, &app_id, "before").await.status(), 202);
    receiver.wait_for_requests(1).await;

    // Another process's connection takes the write lock and keeps it.
    let mut other = sqlx::SqliteConnection::connect(&app.db.url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    for key in ["locked-1", "locked-2"] {
        assert_unavailable(publish(&app, &app_id, key).await, key).await;
    }
    // Reading needs no write lock.
    assert_eq!(event_keys(&app, &app_id).await, ["before"]);

    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    drop(other);
    wait_until(
        Duration::from_secs(30),
        "a publish to succeed again",
        || async { (publish(&app, &app_id, "locked-1").await.status() == 202).then_some(()) },
    )
    .await;
    let arrived = receiver.wait_for_requests(2).await;
    assert_eq!(arrived[1].json()["data"], json!({"key": "locked-1"}));
    assert_eq!(
        event_keys(&app, &app_id).await,
        ["locked-1", "before"],
        "nothing refused was written"
    );
}

/// A small file system of the test's own (tmpfs), unmounted when dropped.
struct SmallDisk {
    dir: std::path::PathBuf,
}

impl SmallDisk {
    /// Needs root (as CI and the test machines run); fails saying so otherwise.
    fn mount(mib: u32) -> Self {
        let dir = std::env::temp_dir().join(format!("hookline-full-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "the disk-full test mounts a tmpfs of its own: it needs root (mount -t tmpfs)"
        );
        Self { dir }
    }

    /// Makes the file system `mib` MiB: the disk is no longer full.
    fn grow(&self, mib: u32) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={mib}m")])
            .arg(&self.dir)
            .status()
            .unwrap();
        assert!(status.success(), "remounting the tmpfs");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// SQLite on a disk that fills up: a publish that cannot be written is 503
/// with the problem and `Retry-After`, nothing is half-written, reads go on,
/// and once there is room again publishing and delivery resume by themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_sqlite_disk_is_full_writes_get_503_and_resume_when_it_is_not() {
    let disk = SmallDisk::mount(3);
    let database = format!("sqlite://{}/hookline.db", disk.dir.display());
    let app = TestApp::spawn_with(Engine::Sqlite, |config| {
        config.database_url = database;
        config.db_acquire_timeout_ms = 300;
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;

    // 100 KiB events until the disk is full.
    let big = "x".repeat(100 * 1024);
    let publish_big = |key: String| {
        app.http
            .post(format!("{}/v1/apps/{app_id}/events", app.base))
            .bearer_auth(ADMIN_TOKEN)
            .header("Idempotency-Key", key.clone())
            .json(&json!({"event_type": "order.paid", "payload": {"key": key, "fill": big}}))
            .timeout(Duration::from_secs(30))
            .send()
    };
    let mut accepted = Vec::new();
    let mut refused = None;
    for n in 0..200 {
        let key = format!("big-{n}");
        let answer = publish_big(key.clone()).await.unwrap();
        if answer.status() == 202 {
            accepted.push(key);
        } else {
            refused = Some((key, answer));
            break;
        }
    }
    // Every 202 is a stored event. (A failed COMMIT once left the writer's
    // connection counted as inside a transaction: every later publish was a
    // savepoint in one that never committed, and answered 202.)
    let mut stored = event_keys(&app, &app_id).await;
    stored.sort();
    let mut expected = accepted.clone();
    expected.sort();
    assert_eq!(
        stored, expected,
        "what was accepted is stored, nothing else"
    );
    let (refused_key, answer) = refused.expect("a 3 MiB disk fills up");
    assert!(accepted.len() >= 2, "some events fit: {}", accepted.len());
    assert_unavailable(answer, "a publish on a full disk").await;
    // And the next ones are refused too, while the disk stays full.
    for n in 0..3 {
        let answer = publish_big(format!("after-{n}")).await.unwrap();
        assert_unavailable(answer, "a later publish on the full disk").await;
    }

    // Reads go on, and hold exactly what was accepted.
    let mut stored = event_keys(&app, &app_id).await;
    stored.sort();
    assert_eq!(stored, expected, "nothing refused was written");

    disk.grow(64);
    wait_until(
        Duration::from_secs(30),
        "a publish to succeed again",
        || async {
            let answer = publish_big(refused_key.clone()).await.ok()?;
            (answer.status() == 202).then_some(())
        },
    )
    .await;
    accepted.push(refused_key);
    let arrived = receiver.wait_for_requests(accepted.len()).await;
    let mut delivered: Vec<String> = arrived
        .iter()
        .map(|r| r.json()["data"]["key"].as_str().unwrap().to_owned())
        .collect();
    delivered.sort();
    delivered.dedup();
    accepted.sort();
    assert_eq!(delivered, accepted, "every accepted event is delivered");
    drop(app);
}
