//! `hookline-bench`: a reproducible benchmark of Hookline on one machine.
//!
//! # What one run does
//!
//! 1. Starts a **sink** receiver in this process (hyper, HTTP/1.1 keep-alive,
//!    127.0.0.1) that answers 200, or 500 (`--fail-status`) for `--fail-share` of attempts drawn
//!    from a seeded RNG, and records each request's `webhook-id`, endpoint and
//!    arrival time. With `--destination rabbitmq` it declares a fresh topic
//!    exchange and queue on the RabbitMQ at `--amqp-url` instead and consumes
//!    the queue, recording each message the same way (its `webhook-id` header,
//!    the endpoint named by its routing key, its arrival) as answered 200.
//! 2. Starts Hookline on a **fresh store** (a new SQLite file or a new
//!    PostgreSQL database, removed afterwards): as a child process with
//!    `--spawn BIN` (recommended), in-process with `Server::start` otherwise,
//!    or not at all with `--url`.
//! 3. Creates one app and `--endpoints` endpoints on the sink (or `amqp://`
//!    endpoints on the exchange, routing key `ep.<i>`) through the API.
//! 4. Optionally publishes a **backlog** while no dispatcher runs (`api` role),
//!    then starts `serve` for the measured phase.
//! 5. Publishes `--events` events with `--concurrency` producers, optionally at
//!    an open-loop `--rate`, and waits until the **ledger** balances.
//! 6. Measures the **HTTP ceiling** against the same sink (not with
//!    `--destination rabbitmq`, which then deletes its exchange and queue).
//!
//! # What is measured, and why this way
//!
//! - **Publish rate**: events accepted (202) per second from the first send to
//!   the last acceptance — the producer API's durable-commit throughput.
//! - **End-to-end delivery rate**: unique deliveries (distinct (webhook-id,
//!   endpoint) pairs answered 200) per second, from the phase start (the first
//!   publish, or the dispatcher's start with a backlog) to the last unique
//!   delivery. Re-sends do not count twice.
//! - **Latency from the due time**: each delivery's latency runs from its
//!   event's *due* time — its slot in the `--rate` schedule, or the moment its
//!   publish request was sent — to the first request for it at the sink (and,
//!   separately, to the first 200). Counting from the schedule rather than from
//!   when a late producer got round to sending keeps generator lag from hiding
//!   latency (coordinated omission). The time from the due time to the publish
//!   request's answer is reported beside it: what the producer API takes of it.
//! - **Attempts per delivery**: sink requests / unique deliveries (retries and
//!   at-least-once re-sends).
//! - **CPU and peak RSS**: from `/proc/<pid>/stat` (utime + stime) and
//!   `/proc/<pid>/status` (`VmHWM`) over the measured phase. With `--spawn`
//!   they are Hookline's alone (its CPU with its children's, the transform
//!   workers; the peak RSS is its own); in-process they include the sink and the load
//!   generator, and the report says so.
//! - **Ledger**: accepted events × endpoints must equal unique deliveries
//!   answered 200 plus dead-lettered deliveries (the DLQ, read through the
//!   API), with no delivery both delivered and dead and none for an event that
//!   was never accepted. A run that does not balance within `--timeout-secs`
//!   is reported as `VOID` and exits non-zero: a throughput number is
//!   meaningless if work was lost or invented.
//! - **HTTP ceiling**: a plain keep-alive client sending same-size, freshly
//!   signed bodies straight to the same sink with `--max-in-flight` requests in
//!   flight and no storage. Hookline's rate as a share of it tells how much of
//!   this machine's plain HTTP capacity survives durability, and shows the sink
//!   is not the bottleneck.
//!
//! All traffic stays on 127.0.0.1 (`--url`, `--postgres-url` and `--amqp-url` must be loopback).

mod api;
mod arrivals;
mod ceiling;
mod cli;
mod load;
mod rabbitmq;
mod report;
mod sink;
mod target;
mod writes;

use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use hookline::Role;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::api::{event_key, Api};
use crate::arrivals::{Arrivals, Timebase};
use crate::cli::{Args, Destination, StoreKind};
use crate::load::{Plan, Published};
use crate::report::{
    BacklogStats, CeilingStats, DeliveryStats, Inputs, Ledger, Percentiles, PublishStats, Report,
    Resources,
};
use crate::sink::{Sink, SinkLatency};
use crate::target::{FreshStore, Hookline, Mode, Pid};
use hookline_client::types::DeliveryView as DeadLetter;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The whole run; `Ok(false)` is a VOID run.
async fn run(args: Args) -> anyhow::Result<bool> {
    args.validate()?;
    let run_id = ulid::Ulid::new().to_string().to_lowercase();
    let timebase = Timebase::new();
    let latency = SinkLatency {
        base: Duration::from_millis(args.sink_latency_ms),
        per_request: Duration::from_micros(args.sink_load_latency_us),
    };
    let arrivals = Arrivals::start();
    let receiver = match args.destination {
        Destination::Http => Receiver::Http(
            Sink::start(
                &arrivals,
                timebase,
                args.fail_share,
                args.fail_status,
                args.seed,
                latency,
            )
            .await
            .context("starting the sink")?,
        ),
        Destination::Rabbitmq => Receiver::Rabbitmq(
            rabbitmq::Consumer::start(&args.amqp_url, &run_id, &arrivals, timebase)
                .await
                .context("setting up RabbitMQ")?,
        ),
    };
    let progress = Progress::new(!args.quiet && std::io::stdout().is_terminal());
    let store = match args.managed() {
        true => Some(
            FreshStore::create(&args, &run_id)
                .await
                .context("creating a fresh store")?,
        ),
        false => None,
    };
    let log = PathBuf::from(format!("/tmp/hookline-bench-{run_id}.log"));

    let outcome = tokio::select! {
        outcome = bench(&args, &run_id, &arrivals, &receiver, store.as_ref(), &progress, timebase, &log) => outcome,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    receiver.stop().await;
    arrivals.stop();

    if let Some(store) = store {
        if args.keep_store {
            eprintln!("kept the store: {} ({})", store.describe(), store.url);
        } else if let Err(error) = store.remove().await {
            eprintln!("warning: could not remove the store: {error:#}");
        }
    }
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            match std::fs::metadata(&log) {
                Ok(meta) if meta.len() > 0 => eprintln!("hookline's log: {}", log.display()),
                Ok(_) => {
                    let _ = std::fs::remove_file(&log);
                }
                Err(_) => {}
            }
            return Err(error);
        }
    };
    let _ = std::fs::remove_file(&log);
    print!("{}", report.table());
    if let Some(path) = &args.json {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        serde_json::to_writer_pretty(file, &report)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("JSON written to {}", path.display());
    }
    Ok(report.ledger.balanced)
}

/// What the endpoints point at. Either records every arrival into the run's
/// [`Arrivals`], so everything after endpoint creation is computed the same way
/// for both destinations.
enum Receiver {
    /// `--destination http`: the in-process HTTP sink.
    Http(Sink),
    /// `--destination rabbitmq`: an exchange on RabbitMQ whose queue this process consumes.
    Rabbitmq(rabbitmq::Consumer),
}

impl Receiver {
    /// The URL of healthy endpoint `i`: the sink's path `/e<i>`, or the exchange with
    /// routing key `ep.<i>`. Each names its endpoint index, which is how an arrival is
    /// attributed.
    fn endpoint_url(&self, i: u16) -> String {
        match self {
            Self::Http(sink) => format!("{}/e{i}", sink.base_url()),
            Self::Rabbitmq(consumer) => consumer.endpoint_url(i),
        }
    }

    /// The HTTP sink, which the ceiling is measured against (none for RabbitMQ).
    fn http_sink(&self) -> Option<&Sink> {
        match self {
            Self::Http(sink) => Some(sink),
            Self::Rabbitmq(_) => None,
        }
    }

    /// What the report says the destination was.
    fn describe(&self) -> String {
        match self {
            Self::Http(sink) => format!("http: in-process sink at {}", sink.base_url()),
            Self::Rabbitmq(consumer) => format!(
                "rabbitmq: {} (one transient queue bound by #, consumed here with auto-ack)",
                consumer.describe()
            ),
        }
    }

    /// Stops receiving; for RabbitMQ, also deletes the exchange and the queue (best effort).
    async fn stop(self) {
        match self {
            Self::Http(sink) => sink.stop(),
            Self::Rabbitmq(consumer) => consumer.remove().await,
        }
    }
}

/// Progress bars on stderr, or none.
struct Progress {
    multi: Option<MultiProgress>,
}

impl Progress {
    fn new(show: bool) -> Self {
        Self {
            multi: show.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
        }
    }

    fn bar(&self, len: u64, prefix: &'static str) -> ProgressBar {
        let Some(multi) = &self.multi else {
            return ProgressBar::hidden();
        };
        let bar = multi.add(ProgressBar::new(len));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>9} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {rate:>9} eta {eta}",
            )
            .expect("a valid template")
            .with_key(
                "rate",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0}/s", state.per_sec());
                },
            ),
        );
        bar.set_prefix(prefix);
        bar
    }
}

/// Everything between a fresh store and the report.
#[allow(clippy::too_many_arguments)]
async fn bench(
    args: &Args,
    run_id: &str,
    arrivals: &Arrivals,
    receiver: &Receiver,
    store: Option<&FreshStore>,
    progress: &Progress,
    timebase: Timebase,
    log: &Path,
) -> anyhow::Result<Report> {
    let mode = Mode::of(args);
    let endpoints = args.endpoints;
    let token = match &args.token {
        Some(token) => token.clone(),
        None => format!("hk_bench_{run_id}"),
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .pool_max_idle_per_host(args.concurrency as usize + 8)
        .tcp_nodelay(true)
        .build()?;

    // 1. Hookline: `api` only while a backlog is published, else `serve` from the start.
    let start = |role: Role| {
        let (http, token) = (&http, &token);
        async move {
            let store = store.expect("a managed run has a store");
            let mut hookline = Hookline::start(args, &store.url, token, role, log).await?;
            hookline.wait_ready(http, log).await?;
            anyhow::Ok(hookline)
        }
    };
    let mut hookline = match (&args.url, args.backlog) {
        (Some(url), _) => {
            let mut hookline = Hookline::external(url);
            hookline.wait_ready(&http, log).await?;
            hookline
        }
        (None, 0) => start(Role::Serve).await?,
        (None, _) => start(Role::Api).await?,
    };
    let mut api = Api::new(http.clone(), &hookline.base_url, &token)?;
    let autovacuum = match store {
        Some(store) if args.store == StoreKind::Postgres => {
            if args.no_autovacuum {
                store.disable_autovacuum().await?;
            }
            let server = store.server_autovacuum().await?.unwrap_or_default();
            Some(format!(
                "server: {server}; Hookline's tables: {}",
                if args.no_autovacuum {
                    "off (--no-autovacuum)"
                } else {
                    "as the server"
                }
            ))
        }
        _ => None,
    };

    // 2. One app, M endpoints on the sink (or the exchange).
    let app = api.create_app("bench").await?;
    let mut endpoint_index = HashMap::new();
    for i in 0..endpoints {
        let id = api
            .create_endpoint(
                &app,
                &receiver.endpoint_url(i),
                args.filter.as_deref(),
                args.transform.as_deref(),
                args.batch_deliveries
                    .map(|max_events| hookline_core::batch::Batching {
                        max_events,
                        max_wait_ms: args.batch_wait_ms,
                    }),
            )
            .await?;
        endpoint_index.insert(id, i);
    }
    // Endpoints that are down: a port that was free a moment ago refuses connections.
    let mut down = HashSet::new();
    for i in 0..args.dead_endpoints {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        down.insert(
            api.create_endpoint(
                &app,
                &format!("http://127.0.0.1:{port}/dead{i}"),
                None,
                None,
                None,
            )
            .await?,
        );
    }
    // The tenant the backlog goes to: the live app, or (--backlog-app) a second one.
    let backlog_app = if args.backlog_app {
        let other = api.create_app("bench-backlog").await?;
        for i in 0..endpoints {
            api.create_endpoint(&other, &receiver.endpoint_url(i), None, None, None)
                .await?;
        }
        other
    } else {
        app.clone()
    };
    // The DLQ as the ledger sees it: the down endpoints' deliveries are not in it.
    let dead_letters = |api: Api| {
        let (app, down) = (app.clone(), &down);
        async move {
            let mut dead: Vec<DeadLetter> = api.dead_letters(&app).await?;
            dead.retain(|d| !down.contains(&d.endpoint_id));
            anyhow::Ok(dead)
        }
    };

    let plan = |events: u64, stream: u64, rate: f64| Plan {
        events,
        rate,
        concurrency: args.concurrency,
        payload_bytes: args.payload_bytes,
        ordered_share: args.ordered_share,
        keys: args.keys,
        seed: args.seed,
        batch: args.batch.then_some(args.batch_size_publish),
        stream,
    };

    // 3. The backlog, published while nothing consumes it; then `serve` takes over.
    let mut backlog = None;
    let mut backlog_ids = HashSet::new();
    let cpu_before;
    let write_start;
    let phase_start_ns;
    let mut peak_reset = false;
    let measured = hookline.measured_pid();
    if args.backlog > 0 {
        let published = load::publish(
            api.clone(),
            backlog_app.clone(),
            plan(args.backlog, 1 << 48, 0.0),
            timebase,
            progress.bar(args.backlog, "backlog"),
        )
        .await?;
        backlog_ids.extend(published.accepted.iter().map(|(id, _)| *id));
        backlog = Some(BacklogStats {
            events_offered: args.backlog,
            accepted: published.accepted.len() as u64,
            deliveries: published.accepted.len() as u64 * u64::from(endpoints),
            publish_seconds: published.seconds(),
        });
        hookline
            .stop()
            .await
            .context("stopping the api-only Hookline")?;
        // The measured phase starts when the dispatcher does: it drains the backlog at once.
        cpu_before = match measured {
            Some(Pid::SelfProcess) => {
                peak_reset = Pid::SelfProcess.reset_peak_rss();
                Pid::SelfProcess.cpu_seconds()?
            }
            // A fresh child: its whole life is the measured phase.
            _ => {
                peak_reset = true;
                0.0
            }
        };
        write_start = writes::Start {
            machine: writes::MachineTicks::read()?,
            process: match measured {
                Some(Pid::SelfProcess) => Some(writes::ProcessIo::read(Pid::SelfProcess)?),
                // A fresh child: its whole life is the measured phase.
                Some(Pid::Child(_)) => Some(writes::ProcessIo::default()),
                None => None,
            },
            // Once the api-only Hookline's sessions have published their counters,
            // so none of the backlog's rows count in the live phase.
            postgres: match store {
                Some(store) if store.url.starts_with("postgres") => {
                    Some(writes::read_once_sessions_end(&store.url).await?.0)
                }
                _ => None,
            },
        };
        phase_start_ns = Some(timebase.now_ns());
        hookline = start(Role::Serve).await?;
        api = Api::new(http.clone(), &hookline.base_url, &token)?;
    } else {
        cpu_before = match hookline.measured_pid() {
            Some(pid) => {
                peak_reset = pid.reset_peak_rss();
                pid.cpu_seconds_with_children()?
            }
            None => 0.0,
        };
        write_start = writes::Start {
            machine: writes::MachineTicks::read()?,
            process: measured.map(writes::ProcessIo::read).transpose()?,
            postgres: postgres_counters(store).await?,
        };
        phase_start_ns = None;
    }
    let measured = hookline.measured_pid();

    // 4. The live events, while the sink (or the consumer) counts deliveries.
    let backlog_accepted = backlog.as_ref().map_or(0, |b| b.accepted);
    let publish_bar = progress.bar(args.events, "publish");
    let deliver_bar = progress.bar(
        (backlog_accepted + args.events) * u64::from(endpoints),
        "deliver",
    );
    let mut publishing = tokio::spawn(load::publish(
        api.clone(),
        app.clone(),
        plan(args.events, 0, args.rate),
        timebase,
        publish_bar,
    ));
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    // The database's size, each second of the live phase (only with --history-retention-secs).
    let sized = store.filter(|_| args.history_retention_secs.is_some());
    let live_started = Instant::now();
    let mut sizes: Vec<(f64, u64)> = Vec::new();
    let mut published: Option<Published> = None;
    let mut last_dlq_poll: Option<Instant> = None;
    let mut timed_out = false;
    // The local PostgreSQL server's CPU, sampled through the live phase (for windows).
    let sample_postgres = args.window_secs > 0 && args.store == StoreKind::Postgres;
    let mut postgres_cpu: Vec<(u64, f64)> = Vec::new();
    loop {
        if sample_postgres {
            postgres_cpu.push((timebase.now_ns(), target::postgres_cpu_seconds()));
        }
        if published.is_none() && publishing.is_finished() {
            published = Some(
                (&mut publishing)
                    .await
                    .context("the publisher panicked")??,
            );
        }
        let unique = arrivals.counters.unique_ok.load(Ordering::Relaxed);
        deliver_bar.set_position(unique);
        if let Some(p) = &published {
            let expected = (backlog_accepted + p.accepted.len() as u64) * u64::from(endpoints);
            deliver_bar.set_length(expected);
            if unique >= expected {
                break;
            }
            // The tail: only now look at the DLQ (reading it costs Hookline a query).
            if last_dlq_poll.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                let dead = dead_letters(api.clone()).await?.len() as u64;
                last_dlq_poll = Some(Instant::now());
                let unique = arrivals.counters.unique_ok.load(Ordering::Relaxed);
                if unique + dead >= expected {
                    break;
                }
            }
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break;
        }
        if let Some(store) = sized {
            let at = live_started.elapsed().as_secs_f64();
            if sizes.last().is_none_or(|(last, _)| at - last >= 1.0) {
                sizes.push((at, store.size_bytes().await?));
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let end_ns = timebase.now_ns();
    let (cpu_after, peak_rss) = match measured {
        Some(pid) => (
            pid.cpu_seconds_with_children()?,
            Some(pid.peak_rss_bytes()?),
        ),
        None => (0.0, None),
    };
    let machine_after = writes::MachineTicks::read()?;
    let process_io_after = measured.map(writes::ProcessIo::read).transpose()?;
    let wal_after = postgres_counters(store).await?.map(|c| c.wal_lsn);
    deliver_bar.finish();
    let Some(published) = published else {
        publishing.abort();
        anyhow::bail!(
            "VOID: still publishing when --timeout-secs {} ran out",
            args.timeout_secs
        );
    };
    // The final word on the DLQ (deliveries may have died since the last look).
    let dead: Vec<DeadLetter> = dead_letters(api.clone()).await?;
    hookline.stop().await.context("stopping Hookline")?;
    let mut notes = Vec::new();
    // The table counters once Hookline's sessions have published theirs.
    let postgres_after = match (write_start.postgres.is_some(), store) {
        (true, Some(store)) => {
            let (counters, gone) = writes::read_once_sessions_end(&store.url).await?;
            if !gone {
                notes.push(
                    "Hookline's PostgreSQL sessions outlived its stop by 10 s: the row counts of \
                     the write budget may miss their last second"
                        .into(),
                );
            }
            Some(counters)
        }
        _ => None,
    };
    let write_end = writes::End {
        machine: machine_after,
        process: process_io_after,
        wal_lsn: wal_after,
        postgres: postgres_after,
    };

    // 5. Fold the arrivals into the results.
    let live_due: HashMap<u128, u64> = published.accepted.iter().copied().collect();
    let mut answered = histogram();
    for &us in &published.answered_us {
        answered.saturating_record(us);
    }
    let mut lag = histogram();
    for &us in &published.sent_lag_us {
        lag.saturating_record(us);
    }
    let phase_start_ns = phase_start_ns.unwrap_or(published.first_send_ns);
    let accepted_total = backlog_accepted + published.accepted.len() as u64;
    let expected = accepted_total * u64::from(endpoints);
    let dead_pairs: Vec<(Option<u128>, Option<u16>)> = dead
        .iter()
        .map(|d| {
            (
                event_key(&d.event_id),
                endpoint_index.get(&d.endpoint_id).copied(),
            )
        })
        .collect();
    let window_ns = args.window_secs * 1_000_000_000;
    let window_of = |due: u64| (due.saturating_sub(phase_start_ns) / window_ns.max(1)) as usize;
    let windows_count = match window_ns {
        0 => 0,
        _ => live_due
            .values()
            .map(|&due| window_of(due) + 1)
            .max()
            .unwrap_or(0),
    };
    let folded = arrivals
        .with_collected(|collected| {
            let mut windows: Vec<hdrhistogram::Histogram<u64>> =
                (0..windows_count).map(|_| histogram()).collect();
            let mut first = histogram();
            let mut delivered_hist = histogram();
            let mut delivered = 0u64;
            let mut unknown_delivered = 0u64;
            let mut ok_times = Vec::with_capacity(expected as usize);
            for (&(event, endpoint), record) in &collected.pairs {
                let ok = record.ok_ns != u64::MAX;
                let known = endpoint < endpoints
                    && (live_due.contains_key(&event) || backlog_ids.contains(&event));
                if !known {
                    unknown_delivered += u64::from(ok);
                    continue;
                }
                if ok {
                    delivered += 1;
                    ok_times.push(record.ok_ns);
                }
                if let Some(&due) = live_due.get(&event) {
                    let us = |at: u64| (at.saturating_sub(due) / 1000).max(1);
                    first.saturating_record(us(record.first_ns));
                    if ok {
                        delivered_hist.saturating_record(us(record.ok_ns));
                    }
                    if let Some(window) = windows.get_mut(window_of(due)) {
                        window.saturating_record(us(record.first_ns));
                    }
                }
            }
            let dead_also_delivered = dead_pairs
                .iter()
                .filter(|(event, endpoint)| {
                    let (Some(event), Some(endpoint)) = (event, endpoint) else {
                        return false;
                    };
                    collected
                        .pairs
                        .get(&(*event, *endpoint))
                        .is_some_and(|r| r.ok_ns != u64::MAX)
                })
                .count() as u64;
            ok_times.sort_unstable();
            Folded {
                first,
                delivered_hist,
                delivered,
                unknown_delivered,
                dead_also_delivered,
                duplicate_oks: collected.duplicate_oks,
                ok_times,
                windows,
            }
        })
        .await;
    let sink_requests = arrivals.counters.requests.load(Ordering::Relaxed);
    let sink_failed = arrivals.counters.failed.load(Ordering::Relaxed);
    let last_ok_ns = folded.ok_times.last().copied().unwrap_or(phase_start_ns);
    let delivery_seconds = last_ok_ns.saturating_sub(phase_start_ns) as f64 / 1e9;
    let per_sec = |n: u64, seconds: f64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    let delivery_rate = per_sec(folded.delivered, delivery_seconds);
    let to_99 = {
        let needed = (expected as f64 * 0.99).ceil() as usize;
        (needed > 0)
            .then(|| folded.ok_times.get(needed - 1))
            .flatten()
            .map(|&ns| ns.saturating_sub(phase_start_ns) as f64 / 1e9)
    };

    let ledger = Ledger {
        expected,
        delivered: folded.delivered,
        dead: dead.len() as u64,
        dead_also_delivered: folded.dead_also_delivered,
        unknown_delivered: folded.unknown_delivered,
        balanced: !timed_out
            && folded.delivered + dead.len() as u64 == expected
            && folded.dead_also_delivered == 0
            && folded.unknown_delivered == 0,
    };

    // What receives in this process, for the notes on whose CPU is whose.
    let local_receiver = match args.destination {
        Destination::Http => "sink",
        Destination::Rabbitmq => "RabbitMQ consumer",
    };
    let resources = peak_rss.map(|peak| {
        let cpu_seconds = cpu_after - cpu_before;
        let wall = end_ns.saturating_sub(phase_start_ns) as f64 / 1e9;
        let (cpu_scope, rss_who) = match mode {
            Mode::Spawn => (
                String::from("Hookline process CPU (with its transform workers)"),
                String::from("Hookline process"),
            ),
            _ => (
                format!("process CPU (Hookline + {local_receiver} + generator)"),
                format!("process (Hookline + {local_receiver} + generator)"),
            ),
        };
        Resources {
            scope: cpu_scope,
            cpu_seconds,
            cpu_ms_per_delivery: if folded.delivered > 0 {
                cpu_seconds * 1000.0 / folded.delivered as f64
            } else {
                0.0
            },
            cores_busy: if wall > 0.0 { cpu_seconds / wall } else { 0.0 },
            peak_rss_mib: peak as f64 / (1024.0 * 1024.0),
            peak_rss_who: rss_who,
            peak_rss_scope: if peak_reset {
                "measured phase".into()
            } else {
                "since the process started".into()
            },
        }
    });

    // Per window: what was offered (events due in it x endpoints), and what arrived in it.
    let mut offered = vec![0u64; folded.windows.len()];
    for &due in live_due.values() {
        // (No windows without --window-secs.)
        if let Some(count) = offered.get_mut(window_of(due)) {
            *count += u64::from(endpoints);
        }
    }
    let mut arrived = vec![0u64; folded.windows.len()];
    for &ok_ns in &folded.ok_times {
        if let Some(count) = arrived.get_mut(window_of(ok_ns)) {
            *count += 1;
        }
    }
    let cpu_at = |at_ns: u64| {
        postgres_cpu
            .iter()
            .min_by_key(|(sampled, _)| sampled.abs_diff(at_ns))
            .map(|(_, cpu)| *cpu)
    };
    let windows: Vec<report::Window> = folded
        .windows
        .iter()
        .enumerate()
        .map(|(i, latency)| {
            let (from_ns, to_ns) = (
                phase_start_ns + i as u64 * window_ns,
                phase_start_ns + (i as u64 + 1) * window_ns,
            );
            report::Window {
                from_secs: i as u64 * args.window_secs,
                to_secs: (i as u64 + 1) * args.window_secs,
                offered: offered[i],
                delivered: arrived[i],
                latency_first_attempt: Percentiles::of(latency),
                postgres_cpu_seconds: cpu_at(from_ns)
                    .zip(cpu_at(to_ns))
                    .map(|(from, to)| to - from),
            }
        })
        .collect();

    // 6. The ceiling, on the same sink, after Hookline has stopped. HTTP only: what a
    // plain HTTP client gets from the sink says nothing about a RabbitMQ destination.
    let ceiling = match receiver.http_sink() {
        _ if args.no_ceiling => None,
        None => None,
        Some(_) if !ledger.balanced => {
            notes.push("HTTP ceiling skipped: the run is VOID".into());
            None
        }
        Some(sink) => Some(
            measure_ceiling(
                args,
                sink,
                arrivals,
                progress,
                expected,
                delivery_rate,
                per_sec(sink_requests, delivery_seconds),
            )
            .await?,
        ),
    };

    match mode {
        Mode::InProcess => notes.push(format!(
            "Hookline ran in this process: CPU and RSS include the {local_receiver} and the load \
             generator. Use --spawn target/release/hookline to measure Hookline alone."
        )),
        Mode::Spawn => {
            let mut others = vec![format!("the {local_receiver}"), "the generator".to_owned()];
            if args.store == StoreKind::Postgres {
                others.push("the PostgreSQL server".into());
            }
            if args.destination == Destination::Rabbitmq {
                others.push("the RabbitMQ server".into());
            }
            let last = others.pop().unwrap_or_default();
            notes.push(format!(
                "Hookline ran as its own process; {} and {last} share the same {} cores with it \
                 and are not in its CPU figure.",
                others.join(", "),
                cpus()
            ));
        }
        Mode::External => notes.push("External Hookline: CPU and RSS not measured.".into()),
    }
    if args.store == StoreKind::Postgres && mode != Mode::External {
        notes.push("The PostgreSQL server's own CPU and memory are not included.".into());
    }
    if args.destination == Destination::Rabbitmq {
        notes.push(
            "Destination RabbitMQ: a delivery counts (as 'answered 200') when this tool consumed \
             its message from the queue, so its latency includes RabbitMQ's routing and \
             queueing; 'sink requests' are messages consumed. The queue is transient, so \
             RabbitMQ confirmed without writing to disk. The RabbitMQ server's CPU and memory \
             are not included, and the HTTP ceiling is not measured."
                .into(),
        );
    }
    if backlog.is_some() {
        notes.push(
            "Latency percentiles cover the live events only; backlog deliveries count in the \
             delivery rate and the ledger. The phase starts when the dispatcher (serve) starts."
                .into(),
        );
    }
    if let Some(c) = &ceiling {
        if c.ceiling.seconds < 2.0 {
            notes.push(format!(
                "The ceiling phase took only {:.2} s, so its rate is rough (connection set-up \
                 weighs in); raise --ceiling-requests for a steadier figure.",
                c.ceiling.seconds
            ));
        }
        let attempt_rate = per_sec(sink_requests, delivery_seconds);
        if attempt_rate > 0.0 {
            notes.push(format!(
                "The sink is not Hookline's bottleneck: with a plain client it served {:.0} req/s, \
                 {:.1}x Hookline's attempt rate (the ceiling includes the client's cost, so the \
                 sink alone can do more).",
                c.ceiling.rate_per_sec,
                c.ceiling.rate_per_sec / attempt_rate
            ));
        }
    }
    if args.fail_share > 0.0 && args.fail_status >= 500 {
        notes.push(format!(
            "With --fail-share {} the delivery time includes full-jitter backoff (retry base {} ms) \
             and any circuit-breaker cool-downs; see 'seconds to 99% delivered' for the bulk.",
            args.fail_share,
            target::effective_settings(args).retry_base_ms
        ));
    }
    if published.rejected + published.transport_errors > 0 {
        notes.push(format!(
            "{} events were not accepted; the ledger counts accepted events only.",
            published.rejected + published.transport_errors
        ));
    }

    let verdict = if ledger.balanced {
        format!(
            "OK: ledger balances ({} accepted events x {endpoints} endpoints = {} delivered + {} dead-lettered)",
            accepted_total, ledger.delivered, ledger.dead
        )
    } else {
        format!(
            "VOID: ledger does not balance (expected {}, delivered {}, dead-lettered {}, \
             dead but also delivered {}, delivered but never accepted {}{})",
            ledger.expected,
            ledger.delivered,
            ledger.dead,
            ledger.dead_also_delivered,
            ledger.unknown_delivered,
            if timed_out {
                format!(", gave up after --timeout-secs {}", args.timeout_secs)
            } else {
                String::new()
            }
        )
    };

    let managed = args.managed();
    let mut echoed = args.clone();
    echoed.postgres_url = target::redact(&echoed.postgres_url);
    Ok(Report {
        verdict,
        inputs: Inputs {
            args: echoed,
            mode,
            run_id: run_id.to_owned(),
            destination: receiver.describe(),
            store_location: store.map(FreshStore::describe),
            hookline_settings: managed.then(|| target::effective_settings(args)),
            cpus: cpus(),
            postgres_autovacuum: autovacuum,
            bench_version: env!("CARGO_PKG_VERSION"),
        },
        publish: PublishStats {
            events_offered: args.events,
            accepted: published.accepted.len() as u64,
            rejected: published.rejected,
            transport_errors: published.transport_errors,
            batch: args.batch,
            seconds: published.seconds(),
            rate_per_sec: published.rate(),
            error_samples: published.error_samples.clone(),
        },
        backlog,
        delivery: DeliveryStats {
            endpoints,
            expected,
            delivered_unique: folded.delivered,
            dead_lettered: dead.len() as u64,
            sink_requests,
            sink_answered_failure: sink_failed,
            // Only the HTTP sink has requests in flight.
            sink_mean_in_flight: receiver.http_sink().map(|_| {
                if sink_requests > 0 {
                    arrivals.counters.in_flight_sum.load(Ordering::Relaxed) as f64
                        / sink_requests as f64
                } else {
                    0.0
                }
            }),
            sink_peak_in_flight: receiver
                .http_sink()
                .map(|_| arrivals.counters.peak_in_flight.load(Ordering::Relaxed)),
            duplicate_200s: folded.duplicate_oks,
            attempts_per_delivery: if folded.delivered > 0 {
                sink_requests as f64 / folded.delivered as f64
            } else {
                0.0
            },
            seconds: delivery_seconds,
            rate_per_sec: delivery_rate,
            seconds_to_99_percent: to_99,
            phase_start: if args.backlog > 0 {
                "the dispatcher's start (backlog waiting)"
            } else {
                "the first publish request"
            },
        },
        latency_publish: Percentiles::of(&answered),
        generator_lag: Percentiles::of(&lag),
        latency_first_attempt: Percentiles::of(&folded.first),
        latency_delivered: Percentiles::of(&folded.delivered_hist),
        windows,
        resources,
        writes: writes::WriteBudget::of(&write_start, &write_end, folded.delivered),
        database: args
            .history_retention_secs
            .and_then(|retention| report::DatabaseSize::new(retention, &sizes)),
        ledger,
        ceiling,
        notes,
    })
}

/// The HTTP ceiling against `sink`, once Hookline has stopped; Hookline's rates as shares of it.
async fn measure_ceiling(
    args: &Args,
    sink: &Sink,
    arrivals: &Arrivals,
    progress: &Progress,
    expected: u64,
    delivery_rate: f64,
    attempt_rate: f64,
) -> anyhow::Result<CeilingStats> {
    arrivals.reset().await;
    let requests = args.ceiling_requests.unwrap_or(expected.max(1));
    let concurrency = args
        .max_in_flight
        .unwrap_or(hookline::Config::default().max_in_flight);
    let ceiling = ceiling::run(
        &sink.base_url(),
        args.endpoints,
        requests,
        concurrency,
        args.payload_bytes,
        progress.bar(requests, "ceiling"),
    )
    .await?;
    Ok(CeilingStats {
        hookline_delivery_ratio: delivery_rate / ceiling.rate_per_sec,
        hookline_attempt_ratio: attempt_rate / ceiling.rate_per_sec,
        ceiling,
    })
}

struct Folded {
    first: hdrhistogram::Histogram<u64>,
    delivered_hist: hdrhistogram::Histogram<u64>,
    delivered: u64,
    unknown_delivered: u64,
    dead_also_delivered: u64,
    duplicate_oks: u64,
    ok_times: Vec<u64>,
    /// Per window of due times: first-attempt latency.
    windows: Vec<hdrhistogram::Histogram<u64>>,
}

/// PostgreSQL's WAL position and table counters for a managed PostgreSQL store.
async fn postgres_counters(
    store: Option<&FreshStore>,
) -> anyhow::Result<Option<writes::PostgresCounters>> {
    match store {
        Some(store) if store.url.starts_with("postgres") => Ok(Some(
            writes::PostgresCounters::read(&store.url)
                .await
                .context("reading PostgreSQL's write counters")?,
        )),
        _ => Ok(None),
    }
}

/// Microseconds from 1 µs to 1 hour, 3 significant digits.
fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
