//! What the suite needs from the machine, provided on first use, so that the
//! README's `cargo test --workspace` passes on a fresh machine with nothing
//! done by hand first.
//!
//! - **PostgreSQL** at `HOOKLINE_TEST_POSTGRES_URL` (default
//!   `127.0.0.1:5432`): when `pg_isready` says no and the server is this
//!   machine's, the Debian cluster on that port is started
//!   (`pg_ctlcluster … start`) and waited for.
//! - **Chromium and ChromeDriver** for the portal's browser tests: when either
//!   is missing, Debian's `chromium` and `chromium-driver` are installed with
//!   `apt-get` (as root; `HOOKLINE_TEST_INSTALL=never` forbids it).
//! - **The brokers** for the broker destinations, each started when nothing
//!   answers at its address and it is installed: Redis at 127.0.0.1:6379
//!   (`redis-server --daemonize yes`, keeping nothing on disk), NATS with
//!   JetStream at 127.0.0.1:4222 (`nats-server -js`, its store under
//!   /var/tmp), RabbitMQ at 127.0.0.1:5672 (`service rabbitmq-server start`).
//! - **moto** (the AWS stand-in, from PyPI) for the Amazon SQS, SNS and EventBridge
//!   destinations: started in server mode on a free port for the test
//!   process, and installed with pip first when Python cannot import it.
//!
//! Each is done at most once per test process (a `OnceLock`; the other tests
//! wait for it) and under a file lock across processes. Only the tests that
//! need a prerequisite ask for it. Where one cannot be had, the test fails
//! with what is missing and the command that gets it — never a silent skip.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a started PostgreSQL may take to accept connections.
const POSTGRES_PATIENCE: Duration = Duration::from_secs(60);

/// Makes sure Redis answers at 127.0.0.1:6379, starting this machine's
/// `redis-server` there if nothing does. Panics, saying what to do, when it
/// cannot.
pub fn redis() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let redis = Service {
        what: "Redis is needed at 127.0.0.1:6379 for the Redis Streams tests: \
               install Debian's `redis-server`, or start one there",
        address: "127.0.0.1:6379",
        program: "redis-server",
        start: &[
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        detach: false,
    };
    if let Err(problem) = READY.get_or_init(|| redis.ensure()) {
        panic!("{problem}");
    }
}

/// Makes sure NATS with JetStream answers at 127.0.0.1:4222, starting this
/// machine's `nats-server -js` there if nothing does (its store under
/// /var/tmp). Panics, saying what to do, when it cannot.
pub fn nats() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let nats = Service {
        what: "NATS with JetStream is needed at 127.0.0.1:4222 for the NATS tests: \
               install Debian's `nats-server`, or start `nats-server -js` there",
        address: "127.0.0.1:4222",
        program: "nats-server",
        start: &[
            "-a",
            "127.0.0.1",
            "-p",
            "4222",
            "-js",
            "-sd",
            "/var/tmp/hookline-test-nats",
        ],
        detach: true,
    };
    if let Err(problem) = READY.get_or_init(|| nats.ensure()) {
        panic!("{problem}");
    }
}

/// Makes sure RabbitMQ answers at 127.0.0.1:5672, starting this machine's
/// `rabbitmq-server` service if nothing does. Panics, saying what to do,
/// when it cannot.
pub fn rabbitmq() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let rabbitmq = Service {
        what: "RabbitMQ is needed at 127.0.0.1:5672 (user guest/guest) for the RabbitMQ tests: \
               install Debian's `rabbitmq-server`, or start it (`service rabbitmq-server start`)",
        address: "127.0.0.1:5672",
        program: "service",
        start: &["rabbitmq-server", "start"],
        detach: false,
    };
    if let Err(problem) = READY.get_or_init(|| rabbitmq.ensure()) {
        panic!("{problem}");
    }
}

/// The port of `moto` in server mode (the AWS stand-in, from PyPI), started
/// on 127.0.0.1 for this test process and stopped when it ends; installed
/// with pip when Python cannot import it (unless `HOOKLINE_TEST_INSTALL=never`).
/// Panics, saying what to do, when it cannot.
pub fn moto() -> u16 {
    static PORT: OnceLock<Result<u16, String>> = OnceLock::new();
    match PORT.get_or_init(start_moto) {
        Ok(port) => *port,
        Err(problem) => panic!("{problem}"),
    }
}

fn start_moto() -> Result<u16, String> {
    let by_hand = "moto in server mode is needed for the Amazon SQS, SNS and EventBridge tests: \
                   `python3 -m pip install 'moto[server]'`";
    let importable = || {
        Command::new("python3")
            .args(["-c", "import moto.server, flask"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !importable() {
        if std::env::var("HOOKLINE_TEST_INSTALL").as_deref() == Ok("never") {
            return Err(format!(
                "{by_hand} (HOOKLINE_TEST_INSTALL=never: not installed by the tests)"
            ));
        }
        let _lock = machine_lock()?;
        if !importable() {
            let installed = run(
                "python3",
                &["-m", "pip", "install", "--quiet", "moto[server]"],
            )?;
            if !installed.status.success() {
                return Err(format!(
                    "{by_hand} (installing it failed: {})",
                    tail(&String::from_utf8_lossy(&installed.stderr))
                ));
            }
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|e| format!("a free port for moto: {e}"))?
        .port();
    // A watcher stops it once this test process is gone.
    let script = format!(
        "python3 -m moto.server -H 127.0.0.1 -p {port} >/dev/null 2>&1 & server=$!; \
         while kill -0 {parent} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 1; done; \
         kill $server 2>/dev/null",
        parent = std::process::id()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{by_hand} (starting it failed: {e})"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!(
                "{by_hand} (started, it did not answer within 30 s)"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(port)
}

/// A server the suite talks to, and how to start it on this machine.
struct Service {
    /// What is needed, and how to get it, for the failure's message.
    what: &'static str,
    address: &'static str,
    program: &'static str,
    start: &'static [&'static str],
    /// The program runs in the foreground: spawned and left running.
    detach: bool,
}

impl Service {
    /// How long a started server may take to answer (RabbitMQ's boot is slow).
    const PATIENCE: Duration = Duration::from_secs(60);

    fn ensure(&self) -> Result<(), String> {
        let answers = || std::net::TcpStream::connect(self.address).is_ok();
        if answers() {
            return Ok(());
        }
        let program = find_program(&[self.program]).ok_or_else(|| self.what.to_owned())?;
        let program = program.to_str().unwrap_or(self.program);
        let _lock = machine_lock()?;
        if !answers() {
            if self.detach {
                Command::new(program)
                    .args(self.start)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("{} (starting it failed: {e})", self.what))?;
            } else {
                let started = run(program, self.start)?;
                if !started.status.success() {
                    return Err(format!(
                        "{} (starting it failed: {})",
                        self.what,
                        tail(&String::from_utf8_lossy(&started.stderr))
                    ));
                }
            }
        }
        let deadline = Instant::now() + Self::PATIENCE;
        while !answers() {
            if Instant::now() > deadline {
                return Err(format!(
                    "{} (started, it did not answer within {} s)",
                    self.what,
                    Self::PATIENCE.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

/// Makes sure the PostgreSQL server of `url` accepts connections, starting
/// this machine's cluster on its port if it does not. Panics, saying what to
/// do, when it cannot.
pub fn postgres(url: &str) {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(problem) = READY.get_or_init(|| ensure_postgres(url)) {
        panic!("{problem}");
    }
}

/// The paths of Chromium and ChromeDriver, installed first if either is
/// missing and installing is permitted. Panics, saying what to do, when they
/// cannot be had.
pub fn browser() -> (PathBuf, PathBuf) {
    static FOUND: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    match FOUND.get_or_init(ensure_browser) {
        Ok(found) => found.clone(),
        Err(problem) => panic!("{problem}"),
    }
}

fn ensure_postgres(url: &str) -> Result<(), String> {
    let (host, port) = host_and_port(url);
    if postgres_ready(&host, port) {
        return Ok(());
    }
    let start_by_hand =
        "start it (`pg_ctlcluster --skip-systemctl-redirect <version> main start`, \
                         see `pg_lsclusters`) or point HOOKLINE_TEST_POSTGRES_URL at one";
    if !matches!(host.as_str(), "127.0.0.1" | "localhost" | "::1") {
        return Err(format!(
            "PostgreSQL does not answer at {host}:{port} (HOOKLINE_TEST_POSTGRES_URL), \
             and it is not this machine's to start: {start_by_hand}"
        ));
    }
    let _lock = machine_lock().map_err(|e| {
        format!("PostgreSQL does not answer at {host}:{port}, and {e}: {start_by_hand}")
    })?;
    if postgres_ready(&host, port) {
        return Ok(()); // another test process started it meanwhile
    }
    let clusters = run("pg_lsclusters", &["--no-header"]).map_err(|e| {
        format!("PostgreSQL does not answer at {host}:{port} and no cluster can be started ({e}): {start_by_hand}")
    })?;
    // "15 main 5432 down postgres /var/lib/postgresql/15/main …"
    let cluster = String::from_utf8_lossy(&clusters.stdout)
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .find(|fields| fields.len() > 2 && fields[2] == port.to_string())
        .ok_or_else(|| {
            format!(
                "PostgreSQL does not answer at {host}:{port} and pg_lsclusters lists no cluster \
                 on port {port}: create one (`pg_createcluster <version> main --start`) or \
                 point HOOKLINE_TEST_POSTGRES_URL at a server"
            )
        })?;
    let (version, name) = (&cluster[0], &cluster[1]);
    eprintln!(
        "tests: PostgreSQL does not answer at {host}:{port}; starting cluster {version}/{name}"
    );
    let started = run(
        "pg_ctlcluster",
        &["--skip-systemctl-redirect", version, name, "start"],
    );
    // "already running" (another process won the race) is fine: readiness decides.
    let refused = match &started {
        Ok(output) if output.status.success() => None,
        Ok(output) => Some(String::from_utf8_lossy(&output.stderr).trim().to_owned())
            .filter(|stderr| !stderr.contains("already running")),
        Err(e) => Some(e.clone()),
    };
    if let Some(why) = refused {
        return Err(format!(
            "PostgreSQL does not answer at {host}:{port} and starting cluster {version}/{name} \
             failed ({why}): {start_by_hand}"
        ));
    }
    let deadline = Instant::now() + POSTGRES_PATIENCE;
    while Instant::now() < deadline {
        if postgres_ready(&host, port) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!(
        "PostgreSQL cluster {version}/{name} was started but does not answer at {host}:{port} \
         after {POSTGRES_PATIENCE:?} (its log: `pg_lsclusters`): {start_by_hand}"
    ))
}

/// `pg_isready` when the machine has it; otherwise whether the port accepts
/// a TCP connection.
fn postgres_ready(host: &str, port: u16) -> bool {
    match Command::new("pg_isready")
        .args(["-q", "-h", host, "-p", &port.to_string()])
        .status()
    {
        Ok(status) => status.success(),
        Err(_) => std::net::TcpStream::connect((host, port)).is_ok(),
    }
}

/// The host and port of a `postgres://user@host:port/db` URL.
fn host_and_port(url: &str) -> (String, u16) {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    match host_port.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => (
            host.trim_matches(['[', ']']).to_owned(),
            port.parse().unwrap_or(5432),
        ),
        _ => (host_port.trim_matches(['[', ']']).to_owned(), 5432),
    }
}

const BROWSER_PACKAGES: [&str; 2] = ["chromium", "chromium-driver"];

fn ensure_browser() -> Result<(PathBuf, PathBuf), String> {
    if let Some(found) = find_browser() {
        return Ok(found);
    }
    let by_hand = format!(
        "the portal's browser tests need Chromium and ChromeDriver: \
         apt-get install -y {}",
        BROWSER_PACKAGES.join(" ")
    );
    if std::env::var("HOOKLINE_TEST_INSTALL").as_deref() == Ok("never") {
        return Err(format!(
            "{by_hand} (HOOKLINE_TEST_INSTALL=never: not installed by the tests)"
        ));
    }
    if !is_root() {
        return Err(format!(
            "{by_hand} (as root; the tests install them only when run as root)"
        ));
    }
    let _lock = machine_lock().map_err(|e| format!("{by_hand} ({e})"))?;
    if let Some(found) = find_browser() {
        return Ok(found); // another test process installed them meanwhile
    }
    eprintln!(
        "tests: installing {} with apt-get",
        BROWSER_PACKAGES.join(" ")
    );
    let install = || {
        let mut args = vec![
            "-o",
            "DPkg::Lock::Timeout=300",
            "install",
            "-y",
            "--no-install-recommends",
        ];
        args.extend(BROWSER_PACKAGES);
        run("apt-get", &args)
    };
    // A fresh machine's package lists may be stale or missing: update once, then retry.
    let installed = match install() {
        Ok(output) if output.status.success() => Ok(output),
        _ => run("apt-get", &["-o", "DPkg::Lock::Timeout=300", "update"]).and_then(|_| install()),
    };
    match installed {
        Ok(output) if output.status.success() => find_browser().ok_or_else(|| {
            format!(
                "{by_hand} (apt-get installed them, yet chromium or chromedriver is not on PATH)"
            )
        }),
        Ok(output) => Err(format!(
            "{by_hand} (apt-get failed: {})",
            tail(&String::from_utf8_lossy(&output.stderr))
        )),
        Err(e) => Err(format!("{by_hand} ({e})")),
    }
}

fn find_browser() -> Option<(PathBuf, PathBuf)> {
    Some((
        find_program(&["chromium", "chromium-browser", "google-chrome"])?,
        find_program(&["chromedriver"])?,
    ))
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|uids| uids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// One provisioning at a time on this machine, across test processes. The
/// file is opened read-only when it exists (another user's file in the sticky
/// temporary directory cannot be opened for writing, by root neither); a
/// read-only descriptor takes the lock as well.
fn machine_lock() -> Result<File, String> {
    let path = std::env::temp_dir().join("hookline-tests-prerequisites.lock");
    let file = File::open(&path)
        .or_else(|_| File::create(&path))
        .map_err(|e| format!("the lock {} cannot be opened: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("the lock {} cannot be taken: {e}", path.display()))?;
    Ok(file)
}

/// Runs `program` to its end. Its output goes to files, not pipes: a daemon
/// it starts may keep its output open, and a pipe would then never close.
fn run(program: &str, args: &[&str]) -> Result<Output, String> {
    let out = std::env::temp_dir().join(format!("hookline-tests-{}.out", ulid::Ulid::new()));
    let err = out.with_extension("err");
    let create = |path: &std::path::Path| File::create(path).map_err(|e| format!("{program}: {e}"));
    let status = Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null())
        .stdout(create(&out)?)
        .stderr(create(&err)?)
        .status();
    let take = |path: &std::path::Path| {
        let bytes = std::fs::read(path).unwrap_or_default();
        let _ = std::fs::remove_file(path);
        bytes
    };
    let (stdout, stderr) = (take(&out), take(&err));
    Ok(Output {
        status: status.map_err(|e| format!("{program}: {e}"))?,
        stdout,
        stderr,
    })
}

/// The last lines of a command's output, for a failure message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}

#[test]
fn host_and_port_of_test_urls() {
    assert_eq!(
        host_and_port("postgres://postgres@127.0.0.1:5432/postgres"),
        ("127.0.0.1".into(), 5432)
    );
    assert_eq!(
        host_and_port("postgres://u:p@db.example:6543/x?sslmode=disable"),
        ("db.example".into(), 6543)
    );
    assert_eq!(
        host_and_port("postgres://postgres@localhost/postgres"),
        ("localhost".into(), 5432)
    );
    assert_eq!(
        host_and_port("postgres://postgres@[::1]:5433/postgres"),
        ("::1".into(), 5433)
    );
}
