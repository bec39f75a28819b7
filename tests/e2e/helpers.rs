//! Test harness: databases, the app, the receiver, waiting with deadlines.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use hookline::{Config, Role, Server};
use serde_json::{json, Value};
use tokio::sync::Notify;

/// Generates one `#[tokio::test]` per engine: `mod name { sqlite, postgres }`.
macro_rules! both_engines {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name($crate::helpers::Engine::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::helpers::Engine::Postgres).await
            }
        }
    )+};
}
pub(crate) use both_engines;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// The PostgreSQL server the tests use (each test gets a fresh database on
/// it), started first if it is this machine's and down.
pub fn postgres_admin_url() -> String {
    let url = std::env::var("HOOKLINE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    crate::prerequisites::postgres(&url);
    url
}

/// A fresh, empty database for one test, removed when dropped.
pub struct TestDb {
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    File(std::path::PathBuf),
    Database(String),
    /// Someone else's: left as it is.
    Nothing,
}

/// Runs `sql` on the test database directly; the first column of the row it
/// returns, if it returns one.
pub async fn raw(engine: Engine, db: &TestDb, sql: &str) -> Option<String> {
    use sqlx::{Connection, Row};
    match engine {
        Engine::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            let row = sqlx::query(sql).fetch_optional(&mut conn).await.unwrap();
            row.map(|row| row.get(0))
        }
        Engine::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
            let row = sqlx::query(sql).fetch_optional(&mut conn).await.unwrap();
            row.map(|row| row.get(0))
        }
    }
}

impl TestDb {
    /// A database the caller made and removes (a PostgreSQL cluster of its own).
    pub fn external(url: String) -> Self {
        Self {
            url,
            cleanup: Cleanup::Nothing,
        }
    }

    pub async fn new(engine: Engine) -> Self {
        let name = format!(
            "hookline_test_{}",
            ulid::Ulid::new().to_string().to_lowercase()
        );
        match engine {
            Engine::Sqlite => {
                let path = std::env::temp_dir().join(format!("{name}.db"));
                Self {
                    url: format!("sqlite://{}", path.display()),
                    cleanup: Cleanup::File(path),
                }
            }
            Engine::Postgres => {
                use sqlx::Connection;
                let admin = postgres_admin_url();
                let mut conn = sqlx::PgConnection::connect(&admin).await.expect(
                    "connecting to the test PostgreSQL server (HOOKLINE_TEST_POSTGRES_URL)",
                );
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("creating the test database");
                let base = admin
                    .rsplit_once('/')
                    .map(|(base, _)| base)
                    .unwrap_or(&admin);
                Self {
                    url: format!("{base}/{name}"),
                    cleanup: Cleanup::Database(name),
                }
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::Nothing => {}
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Database(name) => {
                let name = name.clone();
                // Drop runs inside the test's runtime; a separate thread may block on its own.
                let _ = std::thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    runtime.block_on(async {
                        use sqlx::Connection;
                        if let Ok(mut conn) =
                            sqlx::PgConnection::connect(&postgres_admin_url()).await
                        {
                            let _ = sqlx::query(&format!(
                                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                            ))
                            .execute(&mut conn)
                            .await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

pub const ADMIN_TOKEN: &str = "hk_test_admin_token";
/// Every test process and server seals endpoint secrets with this key.
pub const TEST_MASTER_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The configuration every test starts from: loopback allowed, fast retries.
pub fn test_config(db: &TestDb) -> Config {
    Config {
        database_url: db.url.clone(),
        listen: "127.0.0.1:0".into(),
        admin_token: Some(ADMIN_TOKEN.into()),
        master_key: Some(TEST_MASTER_KEY.into()),
        allow_private_destinations: true,
        retry_base_ms: 20,
        retry_cap_ms: 200,
        max_attempts: 5,
        request_timeout_ms: 2_000,
        idle_poll_ms: 200,
        db_max_connections: 8,
        // This test binary is no `hookline`: transforms run in the one that is.
        transform_worker: Some(env!("CARGO_BIN_EXE_hookline-under-test").into()),
        ..Config::default()
    }
}

/// A store's configuration for the tests' databases: sealed with the tests' master key.
pub fn store_config(url: &str) -> hookline_store::StoreConfig {
    hookline_store::StoreConfig {
        keyring: hookline_core::sealing::Keyring::new(
            hookline_core::sealing::MasterKey::parse(TEST_MASTER_KEY).unwrap(),
            Vec::new(),
        ),
        ..hookline_store::StoreConfig::new(url)
    }
}

/// Hookline running in this process on a fresh database.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub server: Option<Server>,
    /// Removed when dropped; dropped last, after the server.
    pub db: TestDb,
}

impl TestApp {
    /// A client of Hookline running as a child `process` on `db` (which this
    /// keeps, so the database outlives the process's use of it).
    pub fn of_process(process: &Process, db: TestDb) -> Self {
        Self {
            base: process.base.clone(),
            http: reqwest::Client::new(),
            server: None,
            db,
        }
    }

    pub async fn spawn(engine: Engine) -> Self {
        Self::spawn_with(engine, |_| {}).await
    }

    pub async fn spawn_with(engine: Engine, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::spawn_on_clock(engine, Arc::new(hookline_core::time::SystemClock), tweak).await
    }

    /// Like [`TestApp::spawn_with`], with every part of the server on `clock`.
    pub async fn spawn_on_clock(
        engine: Engine,
        clock: Arc<dyn hookline_core::time::Clock>,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let db = TestDb::new(engine).await;
        let mut config = test_config(&db);
        tweak(&mut config);
        let server = Server::start_with_clock(config, Role::Serve, clock)
            .await
            .expect("starting Hookline");
        let addr: SocketAddr = server.addr;
        Self {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            server: Some(server),
            db,
        }
    }

    /// Creates an endpoint at `url` in the store directly, past the API's checks
    /// (a `localhost` URL stands for a public name that resolves to loopback).
    pub async fn create_endpoint_in_store(
        &self,
        app_id: &str,
        url: &str,
    ) -> hookline_store::Endpoint {
        self.store()
            .endpoints()
            .create_endpoint(
                &hookline_core::ids::AppId::parse(app_id).unwrap(),
                new_endpoint(url, None),
                hookline_core::time::Timestamp::from_millis(0),
            )
            .await
            .unwrap()
    }

    pub fn store(&self) -> &hookline_store::Store {
        &self.server.as_ref().expect("running").store
    }

    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().await.expect("request to Hookline")
    }

    /// A request that must answer `expected`; returns the JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        expected: u16,
    ) -> Value {
        let response = self.request(method.clone(), path, body, &[]).await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(
            status, expected,
            "{method} {path} answered {status}: {text}"
        );
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    pub async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None, 200).await
    }

    /// Creates an app; returns its id.
    pub async fn create_app(&self) -> String {
        let app = self
            .call(
                reqwest::Method::POST,
                "/v1/apps",
                Some(&json!({"name": "Acme"})),
                201,
            )
            .await;
        app["id"].as_str().unwrap().to_owned()
    }

    /// Creates an endpoint with extra fields merged into `{"url": url}`; returns it (with its secret).
    pub async fn create_endpoint_with(&self, app: &str, url: &str, extra: Value) -> Value {
        let mut body = json!({ "url": url });
        if let Value::Object(extra) = extra {
            body.as_object_mut().unwrap().extend(extra);
        }
        self.call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app}/endpoints"),
            Some(&body),
            201,
        )
        .await
    }

    pub async fn create_endpoint(&self, app: &str, url: &str) -> Value {
        self.create_endpoint_with(app, url, json!({})).await
    }

    /// Publishes an event; returns the 202 body.
    pub async fn publish(&self, app: &str, event_type: &str, payload: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app}/events"),
            Some(&json!({"event_type": event_type, "payload": payload})),
            202,
        )
        .await
    }

    /// Publishes `events` (`{"event_type", "payload", …}` each) in one batch; returns the 202 body.
    pub async fn publish_batch(&self, app: &str, events: Vec<Value>) -> Value {
        self.call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app}/events/batch"),
            Some(&json!({ "events": events })),
            202,
        )
        .await
    }

    /// Replays a delivery (202) and waits for it to succeed.
    pub async fn replay_until_succeeded(&self, app: &str, delivery: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app}/deliveries/{delivery}/replay"),
            None,
            202,
        )
        .await;
        self.wait_for_delivery_state(app, delivery, "succeeded")
            .await;
    }

    /// Waits until a delivery is in `state`; returns it.
    pub async fn wait_for_delivery_state(&self, app: &str, delivery: &str, state: &str) -> Value {
        let path = format!("/v1/apps/{app}/deliveries/{delivery}");
        wait_until(
            Duration::from_secs(30),
            &format!("delivery {delivery} to be {state}"),
            || async {
                let current = self.get(&path).await;
                (current["state"] == state).then_some(current)
            },
        )
        .await
    }

    /// A delivery's attempts, oldest first.
    pub async fn attempts(&self, app: &str, delivery: &str) -> Vec<Value> {
        let page = self
            .get(&format!("/v1/apps/{app}/deliveries/{delivery}/attempts"))
            .await;
        let mut attempts = page["data"].as_array().unwrap().clone();
        attempts.reverse();
        attempts
    }
}

/// Polls `check` until it yields a value, failing the test after `timeout`.
pub async fn wait_until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One scripted answer of the receiver.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub delay: Duration,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
            body: b"receiver says hi".to_vec(),
        }
    }

    pub fn body(mut self, body: &[u8]) -> Self {
        self.body = body.to_vec();
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A JSON object of header names and values (a fetched message's `headers`,
/// an attempt's `request_headers`) as a header map, to verify a body with.
pub fn header_map(headers: &Value) -> reqwest::header::HeaderMap {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers.as_object().into_iter().flatten() {
        if let (Ok(name), Some(Ok(value))) = (
            reqwest::header::HeaderName::from_bytes(name.as_bytes()),
            value.as_str().map(str::parse),
        ) {
            map.insert(name, value);
        }
    }
    map
}

/// A request the receiver got, logged on arrival.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
    /// Arrival on the wall clock, to compare with times Hookline reports.
    pub wall: std::time::SystemTime,
    /// The status the receiver answered (or is about to).
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the body is JSON")
    }
}

/// Decides a reply from the request's headers (instead of the script).
pub type Responder = Box<dyn Fn(&HeaderMap) -> Reply + Send + Sync>;

#[derive(Default)]
struct ReceiverState {
    log: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Option<Reply>>,
    responder: Option<Responder>,
    arrived: Notify,
    /// Requests being answered, by `webhook-id`.
    in_progress: Mutex<std::collections::HashMap<String, usize>>,
    /// Times a request arrived while another with the same `webhook-id` was still open.
    overlaps: std::sync::atomic::AtomicUsize,
}

/// Marks a `webhook-id` in progress until dropped (also when the client hangs up).
struct InProgress {
    state: Arc<ReceiverState>,
    id: String,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        let mut open = self.state.in_progress.lock().unwrap();
        if let Some(count) = open.get_mut(&self.id) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.id);
            }
        }
    }
}

/// A receiver answering whatever status the returned cell holds (set it to switch).
pub async fn switchable(status: u16) -> (Receiver, Arc<std::sync::atomic::AtomicU16>) {
    use std::sync::atomic::{AtomicU16, Ordering};
    let current = Arc::new(AtomicU16::new(status));
    let answer = current.clone();
    let receiver =
        Receiver::start_with(move |_| Reply::status(answer.load(Ordering::SeqCst))).await;
    (receiver, current)
}

/// A real HTTP receiver on 127.0.0.1:0 answering from a script (then 200).
pub struct Receiver {
    pub url: String,
    state: Arc<ReceiverState>,
}

impl Receiver {
    pub async fn start() -> Self {
        Self::start_inner(None).await
    }

    /// This receiver's URL by the name `localhost` (refused when an endpoint is
    /// saved with private destinations off: it stands for a public name that
    /// resolves to loopback, as after DNS rebinding).
    pub fn url_by_localhost(&self) -> String {
        let port = self
            .url
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap();
        format!("http://localhost:{port}/webhook")
    }

    /// A receiver whose every answer `responder` decides.
    pub async fn start_with(
        responder: impl Fn(&HeaderMap) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start_inner(Some(Box::new(responder))).await
    }

    async fn start_inner(responder: Option<Responder>) -> Self {
        let state = Arc::new(ReceiverState {
            responder,
            ..ReceiverState::default()
        });
        let handler_state = state.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let state = handler_state.clone();
            async move {
                let id = headers
                    .get("webhook-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let _open = {
                    let mut open = state.in_progress.lock().unwrap();
                    let count = open.entry(id.clone()).or_default();
                    if *count > 0 {
                        state
                            .overlaps
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    *count += 1;
                    InProgress {
                        state: state.clone(),
                        id,
                    }
                };
                let reply = match &state.responder {
                    Some(responder) => responder(&headers),
                    None => state
                        .script
                        .lock()
                        .unwrap()
                        .pop_front()
                        .or_else(|| state.default.lock().unwrap().clone())
                        .unwrap_or_else(|| Reply::status(200)),
                };
                state.log.lock().unwrap().push(Received {
                    headers,
                    body,
                    at: Instant::now(),
                    wall: std::time::SystemTime::now(),
                    status: reply.status,
                });
                state.arrived.notify_waiters();
                tokio::time::sleep(reply.delay).await;
                let mut response =
                    (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
                for (name, value) in reply.headers {
                    response.headers_mut().insert(
                        axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                        value.parse().unwrap(),
                    );
                }
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}/webhook"),
            state,
        }
    }

    /// The next answers, in order; after them, the default.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().unwrap().extend(replies);
    }

    /// The answer once the script is used up (200 unless set).
    pub fn answer_always(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = Some(reply);
    }

    pub fn requests(&self) -> Vec<Received> {
        self.state.log.lock().unwrap().clone()
    }

    /// How often a request arrived while one with the same `webhook-id` was still being answered.
    pub fn overlaps(&self) -> usize {
        self.state
            .overlaps
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until at least `count` requests arrived; returns them all.
    pub async fn wait_for_requests(&self, count: usize) -> Vec<Received> {
        self.wait_for(count, Duration::from_secs(30)).await
    }

    /// Like [`Receiver::wait_for_requests`] with a deadline of `timeout`.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let arrived = self.state.arrived.notified();
            let log = self.requests();
            if log.len() >= count {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {count} requests; got {}",
                log.len()
            );
            let _ = tokio::time::timeout(Duration::from_millis(200), arrived).await;
        }
    }
}

/// The real binary in a child process (`serve`, `api` or `dispatcher`).
pub struct Process {
    child: std::process::Child,
    pub base: String,
}

impl Process {
    /// `hookline serve` on `port`, answering `/healthz` before this returns.
    pub async fn serve(db: &TestDb, port: u16, extra_env: &[(&str, &str)]) -> Self {
        Self::start(db, "serve", Some(port), extra_env).await
    }

    /// `hookline <role>` with its log (stderr) written to `log`.
    pub async fn start_logged(
        db: &TestDb,
        role: &str,
        extra_env: &[(&str, &str)],
        log: &std::path::Path,
    ) -> Self {
        let file = std::fs::File::create(log).expect("creating the log file");
        Self::start_with_stderr(db, role, None, extra_env, file.into()).await
    }

    /// `hookline serve` on `port` with its log (stderr) appended to `log`, so
    /// the processes of one run, restarted on one port, share one log.
    pub async fn serve_appending(
        db: &TestDb,
        port: u16,
        extra_env: &[(&str, &str)],
        log: &std::path::Path,
    ) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("opening the log file");
        Self::start_with_stderr(db, "serve", Some(port), extra_env, file.into()).await
    }

    /// `hookline <role>`, waiting until it answers `/healthz` (every role does).
    pub async fn start(
        db: &TestDb,
        role: &str,
        port: Option<u16>,
        extra_env: &[(&str, &str)],
    ) -> Self {
        Self::start_with_stderr(db, role, port, extra_env, std::process::Stdio::inherit()).await
    }

    async fn start_with_stderr(
        db: &TestDb,
        role: &str,
        port: Option<u16>,
        extra_env: &[(&str, &str)],
        stderr: std::process::Stdio,
    ) -> Self {
        let port = port.unwrap_or_else(free_port);
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hookline-under-test"));
        command
            .arg(role)
            .env("HOOKLINE_DATABASE_URL", &db.url)
            .env("HOOKLINE_LISTEN", format!("127.0.0.1:{port}"))
            .env("HOOKLINE_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("HOOKLINE_MASTER_KEY", TEST_MASTER_KEY)
            .env("HOOKLINE_ALLOW_PRIVATE_DESTINATIONS", "true")
            .env("HOOKLINE_IDLE_POLL_MS", "100")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(stderr);
        for (name, value) in extra_env {
            command.env(name, value);
        }
        // Built before waiting, so a failed start still kills the child on drop.
        let process = Self {
            child: command.spawn().expect("starting hookline"),
            base: format!("http://127.0.0.1:{port}"),
        };
        {
            let http = reqwest::Client::new();
            let health = format!("{}/healthz", process.base);
            wait_until(
                Duration::from_secs(30),
                "hookline to answer /healthz",
                || async {
                    http.get(&health)
                        .send()
                        .await
                        .ok()
                        .filter(|r| r.status() == 200)
                },
            )
            .await;
        }
        process
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().unwrap();
    }

    pub fn terminate(mut self) -> std::process::ExitStatus {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A log holds none of `secrets` (what, value): no payload, token, secret
/// or signature is ever logged.
pub fn assert_scrubbed(log: &str, secrets: &[(&str, String)]) {
    for (what, value) in secrets {
        assert!(!log.contains(value.as_str()), "the log holds {what}");
    }
}

/// A TCP port for a listener bound later (a child process's, mostly): free
/// when asked, and kept free by where it is taken from — the ports just below
/// the kernel's ephemeral range, which `bind(0)` and outgoing connections
/// never use, so no other test's receiver or connection can take it before
/// its listener binds (a port from `bind(0)`, given back, could be: a child
/// then failed to bind, and another test's receiver answered its requests).
/// Each port is handed out once per run of this binary.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const SPAN: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    assert!(
        low > SPAN + 1024,
        "the ephemeral port range starts at {low}: no room below it for the tests' ports"
    );
    // Runs one after another start at different places (ports of the last
    // run may still be in TIME_WAIT).
    let start = std::process::id() % SPAN;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(
            n < SPAN,
            "every port below the ephemeral range was handed out"
        );
        let port = (low - SPAN + (start + n) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `POST {base}{path}` with the admin token, which must answer 201; the body.
pub async fn create(http: &reqwest::Client, base: &str, path: &str, body: Value) -> Value {
    let response = http
        .post(format!("{base}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "POST {path}");
    response.json().await.unwrap()
}

/// Creates an app and an endpoint over HTTP against a process; returns (app id, endpoint id).
pub async fn setup_remote(base: &str, url: &str, endpoint: Value) -> (String, String) {
    let http = reqwest::Client::new();
    let create = |path: String, body: Value| {
        let http = http.clone();
        async move {
            create(&http, base, &path, body).await["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let app_id = create("/v1/apps".into(), json!({"name": "cluster"})).await;
    let mut body = endpoint;
    body["url"] = json!(url);
    let endpoint_id = create(format!("/v1/apps/{app_id}/endpoints"), body).await;
    (app_id, endpoint_id)
}

/// Publishes `count` events with `concurrency` producers; returns the accepted ids.
pub async fn publish_concurrently(
    base: &str,
    app_id: &str,
    count: usize,
    concurrency: usize,
) -> HashSet<String> {
    let http = reqwest::Client::new();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (http, next, url) = (
            http.clone(),
            next.clone(),
            format!("{base}/v1/apps/{app_id}/events"),
        );
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n >= count {
                    return ids;
                }
                let response = http
                    .post(&url)
                    .bearer_auth(ADMIN_TOKEN)
                    .json(&json!({"event_type": "order.paid", "payload": {"n": n}}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 202);
                let body: Value = response.json().await.unwrap();
                ids.push(body["id"].as_str().unwrap().to_owned());
            }
        }));
    }
    let mut all = HashSet::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// The first page (up to 10) of a delivery's attempts.
pub async fn attempts_of(
    store: &hookline_store::Store,
    app: &hookline_core::ids::AppId,
    delivery: &hookline_core::ids::DeliveryId,
) -> Vec<hookline_store::Attempt> {
    store
        .listings()
        .list_attempts(
            app,
            delivery,
            &hookline_store::Page {
                limit: 10,
                before: None,
            },
        )
        .await
        .unwrap()
}

/// The first page (ten, newest first) of an app's whole DLQ.
pub async fn dlq_of(
    store: &hookline_store::Store,
    app: &hookline_core::ids::AppId,
) -> Vec<hookline_store::Delivery> {
    store
        .listings()
        .list_dlq(
            app,
            &hookline_store::DlqFilter::default(),
            &hookline_store::Page {
                limit: 10,
                before: None,
            },
        )
        .await
        .unwrap()
}

/// An enabled endpoint at `url` with default settings and a fresh secret.
pub fn new_endpoint(url: &str, event_types: Option<Vec<&str>>) -> hookline_store::NewEndpoint {
    hookline_store::NewEndpoint {
        url: url.into(),
        description: String::new(),
        event_types: event_types.map(|t| t.into_iter().map(String::from).collect()),
        filter: None,
        enabled: true,
        paused: false,
        secret: hookline_core::signing::EndpointSecret::generate(),
        headers: Vec::new(),
        auth: None,
        retry: hookline_store::RetryOverrides::default(),
        rate_limit_per_sec: None,
        max_in_flight: None,
        ordering_on_dead: Default::default(),
        owner_app: None,
        transform: None,
        seq_in_body: true,
        batch: None,
    }
}

/// A publish request as the API makes it.
pub fn item(
    app: &hookline_core::ids::AppId,
    event: hookline_store::NewEvent,
    key: Option<&hookline_store::IdempotencyKey>,
    now: hookline_core::time::Timestamp,
) -> hookline_store::PublishItem {
    hookline_store::PublishItem {
        app: app.clone(),
        event,
        key: key.cloned(),
        now,
    }
}

/// A publish through the API's steps (`hookline_api::publish::publish_group`),
/// with no dispatcher to hand off to, called as the contract tests read it:
/// `store.events().publish(…)`.
pub trait Publishes {
    fn publish(
        &self,
        item: hookline_store::PublishItem,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::PublishOutcome>>;

    fn publish_group<'a>(
        &'a self,
        items: &'a [hookline_store::PublishItem],
    ) -> impl Future<Output = hookline_store::Result<Vec<hookline_store::PublishOutcome>>> + 'a;
}

impl Publishes for hookline_store::Events<'_> {
    async fn publish(
        &self,
        item: hookline_store::PublishItem,
    ) -> hookline_store::Result<hookline_store::PublishOutcome> {
        let mut outcomes =
            hookline_api::publish::publish_group(self, None, std::slice::from_ref(&item)).await?;
        Ok(outcomes.remove(0))
    }

    fn publish_group<'a>(
        &'a self,
        items: &'a [hookline_store::PublishItem],
    ) -> impl Future<Output = hookline_store::Result<Vec<hookline_store::PublishOutcome>>> + 'a
    {
        hookline_api::publish::publish_group(self, None, items)
    }
}

/// The dispatcher's turn (`hookline_dispatch::turn`), called on a store as the
/// contract tests read it: `store.claim_due_deliveries(…)`, `store.complete_attempts(…)`.
pub trait Claims {
    fn complete_attempts(
        &self,
        records: &[hookline_store::AttemptRecord],
        breaker: &hookline_core::breaker::BreakerPolicy,
        now: hookline_core::time::Timestamp,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::BreakerChanges>>;

    fn claim_due_deliveries(
        &self,
        now: hookline_core::time::Timestamp,
        lease: Duration,
        limit: u32,
        policy: &hookline_dispatch::turn::ClaimPolicy,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::Claim>>;

    #[allow(clippy::too_many_arguments)]
    fn complete_and_claim(
        &self,
        records: &[hookline_store::AttemptRecord],
        breaker: &hookline_core::breaker::BreakerPolicy,
        now: hookline_core::time::Timestamp,
        lease: Duration,
        limit: u32,
        policy: &hookline_dispatch::turn::ClaimPolicy,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::Claim>>;
}

impl Claims for hookline_store::Store {
    fn complete_attempts(
        &self,
        records: &[hookline_store::AttemptRecord],
        breaker: &hookline_core::breaker::BreakerPolicy,
        now: hookline_core::time::Timestamp,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::BreakerChanges>> {
        hookline_dispatch::turn::complete_attempts(self, records, breaker, now)
    }

    fn claim_due_deliveries(
        &self,
        now: hookline_core::time::Timestamp,
        lease: Duration,
        limit: u32,
        policy: &hookline_dispatch::turn::ClaimPolicy,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::Claim>> {
        hookline_dispatch::turn::claim_due_deliveries(self, now, lease, limit, policy)
    }

    fn complete_and_claim(
        &self,
        records: &[hookline_store::AttemptRecord],
        breaker: &hookline_core::breaker::BreakerPolicy,
        now: hookline_core::time::Timestamp,
        lease: Duration,
        limit: u32,
        policy: &hookline_dispatch::turn::ClaimPolicy,
    ) -> impl Future<Output = hookline_store::Result<hookline_store::Claim>> {
        hookline_dispatch::turn::complete_and_claim(
            self, records, breaker, now, lease, limit, policy,
        )
    }
}

/// The id of a publish answer's one delivery (asserting there is exactly one).
pub fn only_delivery(published: &Value) -> String {
    let deliveries = published["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 1, "{published}");
    deliveries[0]["id"].as_str().unwrap().to_owned()
}
