//! The gauges a process samples from the database, and the list of every
//! metric the binary exports (the dashboards, the alert rules and docs/api.md
//! are checked against [`all_names`]).

use std::time::Duration;

use hookline_core::time::{Clock, Timestamp};
use hookline_store::{LaneGauges, Store};
use tokio_util::sync::CancellationToken;

/// Pending or in-flight deliveries by `lane` (`fresh`, `retry`), capped at `GAUGE_CAP`.
pub const QUEUE_DEPTH: &str = "hookline_queue_depth";
/// Pending deliveries due now, by `lane` (expired leases: [`EXPIRED_LEASES`]).
pub const QUEUE_DUE: &str = "hookline_queue_due";
/// Seconds the oldest pending due delivery of a `lane` has waited past its due time (0: none due).
pub const OLDEST_DUE_AGE: &str = "hookline_queue_oldest_due_age_seconds";
/// In-flight deliveries whose lease has expired (a dispatcher died or stalled).
pub const EXPIRED_LEASES: &str = "hookline_leases_expired";
/// Dead deliveries: the DLQ's size, capped.
pub const DLQ_SIZE: &str = "hookline_dlq_size";
/// Enabled endpoints by breaker `state` (`closed`, `open`, `half_open`).
pub const BREAKERS: &str = "hookline_endpoint_breakers";
/// Enabled endpoints with at least `FAILING_AFTER` (20) consecutive failed attempts.
pub const ENDPOINTS_FAILING: &str = "hookline_endpoints_failing";
/// Endpoints disabled (by a 410, by failing too long, or by hand).
pub const ENDPOINTS_DISABLED: &str = "hookline_endpoints_disabled";
/// Endpoints paused by their owner.
pub const ENDPOINTS_PAUSED: &str = "hookline_endpoints_paused";
/// 1 while the last sample reached the database, 0 when it failed.
pub const DATABASE_UP: &str = "hookline_database_up";

/// Every metric this crate emits.
pub const NAMES: &[&str] = &[
    QUEUE_DEPTH,
    QUEUE_DUE,
    OLDEST_DUE_AGE,
    EXPIRED_LEASES,
    DLQ_SIZE,
    BREAKERS,
    ENDPOINTS_FAILING,
    ENDPOINTS_DISABLED,
    ENDPOINTS_PAUSED,
    DATABASE_UP,
];

/// How often the gauges are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);

/// Every metric the binary exports, from the crate that emits it.
pub fn all_names() -> Vec<&'static str> {
    let mut names = Vec::new();
    names.extend_from_slice(hookline_api::metrics::NAMES);
    names.extend_from_slice(hookline_dispatch::metrics::NAMES);
    names.extend_from_slice(NAMES);
    names
}

/// Samples the gauges every [`SAMPLE_EVERY`] until `shutdown`: a scrape only
/// reads what the last sample set, so scraping often costs the database nothing.
/// `upkeep` runs with each sample: the recorder keeps every histogram sample
/// until it is folded in, which otherwise happens only at a scrape (a process
/// nobody scrapes would grow without bound).
pub async fn sample_loop(
    store: Store,
    clock: std::sync::Arc<dyn Clock>,
    shutdown: CancellationToken,
    upkeep: impl Fn(),
) {
    loop {
        upkeep();
        sample(&store, clock.now()).await;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(SAMPLE_EVERY) => {}
        }
    }
}

pub async fn sample(store: &Store, now: Timestamp) {
    let gauges = match store.queue_gauges(now).await {
        Ok(gauges) => gauges,
        Err(error) => {
            tracing::warn!(%error, "sampling the queue gauges failed");
            ::metrics::gauge!(DATABASE_UP).set(0.0);
            return;
        }
    };
    ::metrics::gauge!(DATABASE_UP).set(1.0);
    let lane = |name: &'static str, lane: LaneGauges| {
        ::metrics::gauge!(QUEUE_DEPTH, "lane" => name).set(lane.depth as f64);
        ::metrics::gauge!(QUEUE_DUE, "lane" => name).set(lane.due as f64);
        let age = lane
            .oldest_due_at
            .map_or(0, |at| (now.as_millis() - at.as_millis()).max(0));
        ::metrics::gauge!(OLDEST_DUE_AGE, "lane" => name).set(age as f64 / 1000.0);
    };
    lane("fresh", gauges.fresh);
    lane("retry", gauges.retry);
    ::metrics::gauge!(EXPIRED_LEASES).set(gauges.expired_leases as f64);
    ::metrics::gauge!(DLQ_SIZE).set(gauges.dead as f64);
    for state in ["closed", "open", "half_open"] {
        let count = gauges
            .breakers
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n);
        ::metrics::gauge!(BREAKERS, "state" => state).set(count as f64);
    }
    ::metrics::gauge!(ENDPOINTS_FAILING).set(gauges.failing_endpoints as f64);
    ::metrics::gauge!(ENDPOINTS_DISABLED).set(gauges.disabled_endpoints as f64);
    ::metrics::gauge!(ENDPOINTS_PAUSED).set(gauges.paused_endpoints as f64);
}

/// Buckets of the latency histograms, in seconds: 1 ms to 2 min.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Buckets of the publish-to-X histograms, in seconds: 1 ms to a day (retries
/// can take that long).
pub const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0,
    3600.0, 21600.0, 86400.0,
];

/// Buckets of the per-turn batch sizes.
pub const BATCH_BUCKETS: &[f64] = &[
    0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0,
];

/// The recorder with every histogram's buckets.
pub fn recorder() -> metrics_exporter_prometheus::PrometheusRecorder {
    use hookline_dispatch::metrics as dispatch;
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    let full = |name: &str| Matcher::Full(name.to_owned());
    let builder = PrometheusBuilder::new();
    let builder = [
        hookline_api::metrics::REQUEST_DURATION,
        dispatch::ATTEMPT_DURATION,
        dispatch::TURN_DURATION,
    ]
    .into_iter()
    .try_fold(builder, |b, name| {
        b.set_buckets_for_metric(full(name), LATENCY_BUCKETS)
    })
    .and_then(|b| {
        [
            dispatch::PUBLISH_TO_FIRST_ATTEMPT,
            dispatch::PUBLISH_TO_SUCCESS,
        ]
        .into_iter()
        .try_fold(b, |b, name| {
            b.set_buckets_for_metric(full(name), WAIT_BUCKETS)
        })
    })
    .and_then(|b| b.set_buckets_for_metric(full(dispatch::TURN_DELIVERIES), BATCH_BUCKETS))
    .expect("bucket lists are not empty");
    builder.build_recorder()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::Path;

    fn root() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    #[test]
    fn docs_api_md_lists_exactly_the_metrics_the_binary_exports() {
        let api = std::fs::read_to_string(root().join("docs/api.md")).unwrap();
        let section = api
            .split("### Metrics (`GET /metrics`, Prometheus text)")
            .nth(1)
            .and_then(|rest| rest.split("\n### ").next())
            .expect("docs/api.md has a metrics section");
        let documented: BTreeSet<&str> = section
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|line| line.split('`').next())
            .collect();
        let exported: BTreeSet<&str> = all_names().into_iter().collect();
        assert_eq!(documented, exported);
        assert_eq!(all_names().len(), exported.len(), "a name has two homes");
    }

    /// Every `hookline_…` name the dashboards and alert rules use is one the
    /// binary exports (histogram series by their `_bucket`/`_sum`/`_count`).
    #[test]
    fn dashboards_and_alert_rules_name_only_exported_metrics() {
        let exported: BTreeSet<&str> = all_names().into_iter().collect();
        let mut files = 0;
        let mut used = BTreeSet::new();
        for entry in std::fs::read_dir(root().join("dashboards")).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            files += 1;
            let mut rest = text.as_str();
            while let Some(at) = rest.find("hookline_") {
                let name: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[at + name.len()..];
                used.insert((
                    path.file_name().unwrap().to_string_lossy().into_owned(),
                    name,
                ));
            }
        }
        assert!(files >= 3, "the dashboard, the rules and their tests");
        for (file, name) in &used {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| exported.contains(base))
                .unwrap_or(name);
            assert!(
                exported.contains(base),
                "{file} names {name}, which Hookline does not export"
            );
        }
        let used_names: BTreeSet<&str> = used.iter().map(|(_, n)| n.as_str()).collect();
        assert!(
            used_names.len() > 10,
            "the dashboards use the metrics: {used_names:?}"
        );
    }
}
