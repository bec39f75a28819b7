//! The results of a run: one structure, printed as an aligned table and written as JSON.

use std::fmt::Write;

use serde::Serialize;

use crate::ceiling::Ceiling;
use crate::cli::{Args, Destination};
use crate::target::{Effective, Mode};
use crate::writes::WriteBudget;

#[derive(Debug, Serialize)]
pub struct Report {
    /// `OK` or `VOID: …`.
    pub verdict: String,
    pub inputs: Inputs,
    pub publish: PublishStats,
    pub backlog: Option<BacklogStats>,
    pub delivery: DeliveryStats,
    /// From each live event's due time to its publish request's answer (202): the
    /// part of the delivery latencies below that the producer API takes.
    pub latency_publish: Option<Percentiles>,
    /// From each event's due time to the moment its publish request was sent: the
    /// load generator's own lag, part of every latency here.
    pub generator_lag: Option<Percentiles>,
    /// From each live event's due time to the first request for that delivery at the sink.
    pub latency_first_attempt: Option<Percentiles>,
    /// From each live event's due time to the first request answered 200.
    pub latency_delivered: Option<Percentiles>,
    /// Per --window-secs window of the live events' due times (empty without it).
    pub windows: Vec<Window>,
    pub resources: Option<Resources>,
    /// What the live phase wrote, per delivery, and how busy the machine was.
    pub writes: WriteBudget,
    /// The database's size through the live phase (with --history-retention-secs).
    pub database: Option<DatabaseSize>,
    pub ledger: Ledger,
    pub ceiling: Option<CeilingStats>,
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Inputs {
    pub args: Args,
    pub mode: Mode,
    pub run_id: String,
    /// Where the endpoints pointed: the HTTP sink's address, or RabbitMQ's and the exchange.
    pub destination: String,
    /// Where the data went (a file or a database name), for a managed Hookline.
    pub store_location: Option<String>,
    /// Effective settings of a managed Hookline (defaults unless overridden).
    pub hookline_settings: Option<Effective>,
    pub cpus: usize,
    /// PostgreSQL: the server's autovacuum setting, and whether --no-autovacuum
    /// turned it off for Hookline's tables.
    pub postgres_autovacuum: Option<String>,
    pub bench_version: &'static str,
}

#[derive(Debug, Serialize)]
pub struct PublishStats {
    pub events_offered: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub transport_errors: u64,
    pub batch: bool,
    pub seconds: f64,
    /// Accepted events per second, first send to last acceptance.
    pub rate_per_sec: f64,
    pub error_samples: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct BacklogStats {
    pub events_offered: u64,
    pub accepted: u64,
    /// accepted × endpoints.
    pub deliveries: u64,
    pub publish_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct DeliveryStats {
    pub endpoints: u16,
    /// (backlog + live accepted events) × endpoints.
    pub expected: u64,
    /// Distinct (webhook-id, endpoint) pairs the sink answered 200 (RabbitMQ: consumed).
    pub delivered_unique: u64,
    pub dead_lettered: u64,
    /// Every request the sink got in the Hookline phase (RabbitMQ: messages consumed).
    pub sink_requests: u64,
    /// Requests answered with the failure status.
    pub sink_answered_failure: u64,
    /// 200s for a pair that already had one (at-least-once re-sends).
    pub duplicate_200s: u64,
    /// sink_requests / delivered_unique.
    pub attempts_per_delivery: f64,
    /// Requests in flight at the sink, as each request found it on arrival (itself
    /// included), averaged over requests: how much concurrency Hookline used.
    /// `None` for RabbitMQ, where a consumer sees no requests in flight.
    pub sink_mean_in_flight: Option<f64>,
    /// The most requests in flight at the sink at once (`None` for RabbitMQ).
    pub sink_peak_in_flight: Option<u64>,
    /// From the phase start to the last unique delivery.
    pub seconds: f64,
    /// delivered_unique / seconds.
    pub rate_per_sec: f64,
    /// From the phase start until 99 % of the expected deliveries had arrived.
    pub seconds_to_99_percent: Option<f64>,
    /// What the phase start is.
    pub phase_start: &'static str,
}

#[derive(Debug, Serialize, Clone, Copy)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Percentiles {
    /// From a histogram of microseconds.
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Option<Self> {
        if histogram.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(Self {
            count: histogram.len(),
            p50_ms: ms(histogram.value_at_quantile(0.50)),
            p95_ms: ms(histogram.value_at_quantile(0.95)),
            p99_ms: ms(histogram.value_at_quantile(0.99)),
            max_ms: ms(histogram.max()),
            mean_ms: histogram.mean() / 1000.0,
        })
    }
}

/// One window of the live events' due times.
#[derive(Debug, Serialize)]
pub struct Window {
    pub from_secs: u64,
    pub to_secs: u64,
    /// Events due in the window x endpoints.
    pub offered: u64,
    /// Deliveries the sink answered 200 for the first time within the window.
    pub delivered: u64,
    /// From each event's due time to the first request for its delivery.
    pub latency_first_attempt: Option<Percentiles>,
    /// The local PostgreSQL server's CPU seconds over the window (its processes'
    /// user + system time, sampled every 100 ms).
    pub postgres_cpu_seconds: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Resources {
    /// Whose CPU and memory these are.
    pub scope: String,
    pub cpu_seconds: f64,
    /// CPU milliseconds per unique delivery.
    pub cpu_ms_per_delivery: f64,
    /// CPU seconds / wall seconds of the phase (1.0 = one core busy).
    pub cores_busy: f64,
    pub peak_rss_mib: f64,
    /// Whose peak it is.
    pub peak_rss_who: String,
    /// Over which span: the measured phase, or since the process started.
    pub peak_rss_scope: String,
}

/// The database's size, sampled each second of the live phase.
#[derive(Debug, Serialize)]
pub struct DatabaseSize {
    pub retention_secs: u64,
    /// (seconds into the live phase, MiB).
    pub samples_mib: Vec<(f64, f64)>,
}

impl DatabaseSize {
    pub fn new(retention_secs: u64, samples: &[(f64, u64)]) -> Option<Self> {
        (!samples.is_empty()).then(|| Self {
            retention_secs,
            samples_mib: samples
                .iter()
                .map(|(at, bytes)| (*at, *bytes as f64 / (1024.0 * 1024.0)))
                .collect(),
        })
    }

    /// The size at the sample nearest to `share` of the phase (0.0 start, 1.0 end).
    fn at(&self, share: f64) -> (f64, f64) {
        let last = self.samples_mib.len() - 1;
        self.samples_mib[((last as f64) * share).round() as usize]
    }
}

#[derive(Debug, Serialize)]
pub struct Ledger {
    pub expected: u64,
    pub delivered: u64,
    pub dead: u64,
    /// Dead-lettered pairs that the sink also answered 200 (counted twice: must be 0).
    pub dead_also_delivered: u64,
    /// Pairs the sink answered 200 whose event was never acknowledged as accepted (must be 0).
    pub unknown_delivered: u64,
    pub balanced: bool,
}

#[derive(Debug, Serialize)]
pub struct CeilingStats {
    #[serde(flatten)]
    pub ceiling: Ceiling,
    /// Hookline's unique-delivery rate / the ceiling's request rate.
    pub hookline_delivery_ratio: f64,
    /// Hookline's attempt rate (sink requests per second) / the ceiling's request rate.
    pub hookline_attempt_ratio: f64,
}

/// Aligned `label  value` lines grouped in sections; the label column fits the longest label.
#[derive(Default)]
struct Table {
    lines: Vec<Line>,
}

enum Line {
    Section(String),
    Row(String, String),
    Text(String),
}

impl Table {
    fn section(&mut self, title: &str) {
        self.lines.push(Line::Section(title.to_owned()));
    }
    fn row(&mut self, label: &str, value: impl std::fmt::Display) {
        self.lines
            .push(Line::Row(label.to_owned(), value.to_string()));
    }
    fn text(&mut self, text: impl Into<String>) {
        self.lines.push(Line::Text(text.into()));
    }
    fn render(&self) -> String {
        let width = self
            .lines
            .iter()
            .filter_map(|line| match line {
                Line::Row(label, _) => Some(label.chars().count()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for line in &self.lines {
            let _ = match line {
                Line::Section(title) => {
                    writeln!(out, "\n{title}\n{}", "-".repeat(title.chars().count()))
                }
                Line::Row(label, value) => writeln!(out, "  {label:<width$}  {value}"),
                Line::Text(text) => writeln!(out, "{text}"),
            };
        }
        out
    }
}

fn int(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rate(per_sec: f64) -> String {
    format!("{per_sec:.1} /s")
}

impl Report {
    pub fn table(&self) -> String {
        let mut t = Table::default();
        let a = &self.inputs.args;
        t.section("Inputs");
        t.row(
            "mode",
            match self.inputs.mode {
                Mode::Spawn => format!(
                    "spawn {}",
                    a.spawn
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
                Mode::InProcess => "in-process (Server::start)".into(),
                Mode::External => format!("external {}", a.url.clone().unwrap_or_default()),
            },
        );
        t.row("destination", &self.inputs.destination);
        if let Some(location) = &self.inputs.store_location {
            t.row("store", format!("{:?}: {location}", a.store).to_lowercase());
        }
        if let Some(e) = &self.inputs.hookline_settings {
            t.row(
                "hookline max_in_flight (per endpoint)",
                format!("{} ({})", e.max_in_flight, e.max_in_flight_per_endpoint),
            );
            t.row(
                "hookline batch_size / retry_base_ms",
                format!("{} / {}", e.batch_size, e.retry_base_ms),
            );
            if a.store == crate::cli::StoreKind::Sqlite {
                t.row(
                    "hookline sqlite_synchronous / cache MiB",
                    format!("{} / {}", e.sqlite_synchronous, e.sqlite_cache_mib),
                );
            }
        }
        t.row("endpoints", a.endpoints);
        if a.dead_endpoints > 0 {
            t.row(
                "dead endpoints (connection refused; outside the ledger)",
                a.dead_endpoints,
            );
        }
        t.row(
            "events (live) / backlog events",
            format!("{} / {}", int(a.events), int(a.backlog)),
        );
        t.row("payload bytes", a.payload_bytes);
        t.row("producers (concurrency)", a.concurrency);
        t.row(
            "offered rate",
            if a.rate > 0.0 {
                format!("{} events/s (open loop)", a.rate)
            } else {
                "as fast as possible".into()
            },
        );
        t.row(
            "publish",
            if a.batch {
                format!("batch of {}", a.batch_size_publish)
            } else {
                "one event per request".into()
            },
        );
        t.row(
            "ordered share / keys",
            format!("{} / {}", a.ordered_share, a.keys),
        );
        match a.destination {
            Destination::Http => t.row(
                "sink fail share / fail status / seed",
                format!("{} / {} / {}", a.fail_share, a.fail_status, a.seed),
            ),
            Destination::Rabbitmq => t.row("seed", a.seed),
        }
        t.row("cpus", self.inputs.cpus);
        if let Some(autovacuum) = &self.inputs.postgres_autovacuum {
            t.row("PostgreSQL autovacuum", autovacuum);
        }

        let p = &self.publish;
        t.section("Publish (live phase)");
        t.row(
            "accepted / rejected / transport errors",
            format!(
                "{} / {} / {}",
                int(p.accepted),
                int(p.rejected),
                int(p.transport_errors)
            ),
        );
        t.row("seconds", format!("{:.3}", p.seconds));
        t.row("publish rate (accepted events)", rate(p.rate_per_sec));
        for sample in &p.error_samples {
            t.row("error sample", sample);
        }
        if let Some(b) = &self.backlog {
            t.section("Backlog (published before the dispatcher ran)");
            t.row(
                "events accepted / deliveries queued",
                format!("{} / {}", int(b.accepted), int(b.deliveries)),
            );
            t.row("publish seconds", format!("{:.3}", b.publish_seconds));
        }

        let d = &self.delivery;
        t.section("Delivery");
        t.row("phase start", d.phase_start);
        t.row("expected deliveries (events x endpoints)", int(d.expected));
        t.row("delivered (unique, answered 200)", int(d.delivered_unique));
        t.row("dead-lettered", int(d.dead_lettered));
        match a.destination {
            Destination::Http => t.row(
                "sink requests / answered failure / duplicate 200s",
                format!(
                    "{} / {} / {}",
                    int(d.sink_requests),
                    int(d.sink_answered_failure),
                    int(d.duplicate_200s)
                ),
            ),
            Destination::Rabbitmq => t.row(
                "messages consumed / duplicates",
                format!("{} / {}", int(d.sink_requests), int(d.duplicate_200s)),
            ),
        }
        t.row(
            match a.destination {
                Destination::Http => "attempts per delivery",
                Destination::Rabbitmq => "messages consumed per delivery",
            },
            format!("{:.4}", d.attempts_per_delivery),
        );
        if let (Some(mean), Some(peak)) = (d.sink_mean_in_flight, d.sink_peak_in_flight) {
            t.row(
                "sink requests in flight (mean seen on arrival / peak)",
                format!("{mean:.1} / {peak}"),
            );
        }
        t.row(
            "seconds (phase start -> last unique delivery)",
            format!("{:.3}", d.seconds),
        );
        if let Some(s) = d.seconds_to_99_percent {
            t.row("seconds to 99% delivered", format!("{s:.3}"));
        }
        t.row("end-to-end delivery rate", rate(d.rate_per_sec));

        for (title, latency) in [
            (
                "Load generator lag: due time -> publish request sent",
                &self.generator_lag,
            ),
            (
                "Latency: due time -> publish answered (202)",
                &self.latency_publish,
            ),
            (
                "Latency: due time -> first attempt at the sink",
                &self.latency_first_attempt,
            ),
            (
                "Latency: due time -> first 200 at the sink",
                &self.latency_delivered,
            ),
        ] {
            t.section(title);
            match latency {
                None => t.row("deliveries", 0),
                Some(l) => {
                    t.row("deliveries measured", int(l.count));
                    t.row(
                        "p50 / p95 / p99 (ms)",
                        format!("{:.2} / {:.2} / {:.2}", l.p50_ms, l.p95_ms, l.p99_ms),
                    );
                    t.row(
                        "max / mean (ms)",
                        format!("{:.2} / {:.2}", l.max_ms, l.mean_ms),
                    );
                }
            }
        }

        if !self.windows.is_empty() {
            t.section(
                "Per window: first-attempt latency p50 / p99 / max (events due in it), delivered in it of offered",
            );
            for w in &self.windows {
                let seconds = (w.to_secs - w.from_secs) as f64;
                let latency = match &w.latency_first_attempt {
                    Some(p) => format!("{:.1} / {:.1} / {:.1} ms", p.p50_ms, p.p99_ms, p.max_ms),
                    None => "-".into(),
                };
                let cpu = match w.postgres_cpu_seconds {
                    Some(cpu) => format!(", PostgreSQL CPU {cpu:.1} s"),
                    None => String::new(),
                };
                t.row(
                    &format!("{}-{} s", w.from_secs, w.to_secs),
                    format!(
                        "{latency}, {} of {} ({}){cpu}",
                        int(w.delivered),
                        int(w.offered),
                        rate(w.delivered as f64 / seconds)
                    ),
                );
            }
        }

        t.section("Resources");
        match &self.resources {
            None => t.row("CPU / RSS", "not measured (external Hookline)"),
            Some(r) => {
                t.row(
                    &format!("{}, seconds", r.scope),
                    format!("{:.2}", r.cpu_seconds),
                );
                t.row(
                    "CPU ms per delivery",
                    format!("{:.4}", r.cpu_ms_per_delivery),
                );
                t.row(
                    "cores busy (CPU s / wall s)",
                    format!("{:.2}", r.cores_busy),
                );
                t.row(
                    &format!("peak RSS, {}", r.peak_rss_who),
                    format!("{:.1} MiB (VmHWM, {})", r.peak_rss_mib, r.peak_rss_scope),
                );
            }
        }

        t.section("Write budget (live phase)");
        let w = &self.writes;
        t.row(
            "machine busy (all cores, /proc/stat)",
            format!("{:.0} %", w.machine_busy_share * 100.0),
        );
        if let Some(pg) = &w.postgres {
            t.row(
                "PostgreSQL WAL per delivery",
                format!(
                    "{:.0} bytes ({:.1} MiB in all)",
                    pg.wal_bytes_per_delivery,
                    pg.wal_bytes as f64 / (1024.0 * 1024.0)
                ),
            );
            t.row(
                "row writes per delivery",
                format!(
                    "{:.2} ({:.0} % of updates HOT)",
                    pg.row_writes_per_delivery,
                    pg.hot_update_share * 100.0
                ),
            );
            t.row(
                "index entries per delivery",
                format!("at most {:.1}", pg.index_entries_per_delivery_at_most),
            );
            for table in &pg.tables {
                t.row(
                    &format!("  {} ({} indexes)", table.table, table.indexes),
                    format!(
                        "{} ins, {} upd ({} HOT), {} del",
                        int(table.inserts),
                        int(table.updates),
                        int(table.hot_updates),
                        int(table.deletes)
                    ),
                );
            }
        }
        if let Some(p) = &w.process {
            t.row(
                "Hookline bytes to storage per delivery",
                format!(
                    "{:.0} ({:.1} MiB in all)",
                    p.storage_write_bytes_per_delivery,
                    p.storage_write_bytes as f64 / (1024.0 * 1024.0)
                ),
            );
        }

        if let Some(d) = &self.database {
            t.section(&format!(
                "Database size (history retention {} s), sampled each second",
                d.retention_secs
            ));
            for (label, share) in [
                ("at 25 %", 0.25),
                ("at 50 %", 0.5),
                ("at 75 %", 0.75),
                ("at the end", 1.0),
            ] {
                let (at, mib) = d.at(share);
                t.row(
                    &format!("{label} of the live phase ({at:.0} s)"),
                    format!("{mib:.1} MiB"),
                );
            }
            let peak = d
                .samples_mib
                .iter()
                .map(|(_, mib)| *mib)
                .fold(0.0, f64::max);
            t.row("peak", format!("{peak:.1} MiB"));
        }

        t.section("HTTP ceiling (plain keep-alive client -> same sink, no storage)");
        match &self.ceiling {
            None if a.destination == Destination::Rabbitmq => t.row(
                "ceiling",
                "not measured (--destination rabbitmq: a plain HTTP client's rate says nothing \
                 about RabbitMQ)",
            ),
            None => t.row("ceiling", "skipped"),
            Some(c) => {
                t.row(
                    "requests / in flight",
                    format!("{} / {}", int(c.ceiling.requests), c.ceiling.concurrency),
                );
                t.row(
                    "answered 200 / other / transport errors",
                    format!(
                        "{} / {} / {}",
                        int(c.ceiling.answered_200),
                        int(c.ceiling.answered_other),
                        int(c.ceiling.transport_errors)
                    ),
                );
                t.row("ceiling request rate", rate(c.ceiling.rate_per_sec));
                t.row(
                    "Hookline delivery rate / ceiling",
                    format!("{:.1} %", c.hookline_delivery_ratio * 100.0),
                );
                t.row(
                    "Hookline attempt rate / ceiling",
                    format!("{:.1} %", c.hookline_attempt_ratio * 100.0),
                );
            }
        }

        let l = &self.ledger;
        t.section("Ledger: accepted events x endpoints == delivered (unique 200) + dead-lettered");
        t.row(
            "expected == delivered + dead",
            format!(
                "{} {} {} + {}",
                int(l.expected),
                if l.expected == l.delivered + l.dead {
                    "=="
                } else {
                    "!="
                },
                int(l.delivered),
                int(l.dead)
            ),
        );
        t.row(
            "dead-lettered but also delivered",
            int(l.dead_also_delivered),
        );
        t.row("delivered but never accepted", int(l.unknown_delivered));
        t.row("balanced", if l.balanced { "yes" } else { "NO" });

        if !self.notes.is_empty() {
            t.section("Notes");
            for note in &self.notes {
                t.text(format!("  - {note}"));
            }
        }
        t.text(format!("\n{}", self.verdict));
        t.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_get_thousands_separators() {
        assert_eq!(int(0), "0");
        assert_eq!(int(999), "999");
        assert_eq!(int(1000), "1,000");
        assert_eq!(int(1234567), "1,234,567");
    }
}
