//! An endpoint's attempts summarised: success rate and latency percentiles.
//!
//! Pure: the store hands over the attempts of a window (the most recent up to a
//! cap, see `hookline_store`'s `endpoint_attempt_sample`), this computes the
//! figures. Percentiles are nearest-rank over the sample's durations, in whole
//! milliseconds (the attempt log's precision).

/// One attempt as the summary reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub duration_ms: u64,
    /// The endpoint answered 2xx.
    pub delivered: bool,
}

/// What a window's attempts say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub attempts: u64,
    pub delivered: u64,
    /// `delivered / attempts`; `None` without attempts.
    pub success_rate: Option<f64>,
    /// Nearest-rank percentiles of the attempts' durations; `None` without attempts.
    pub p50_ms: Option<u64>,
    pub p95_ms: Option<u64>,
    pub p99_ms: Option<u64>,
}

/// Summarises a window's attempts.
pub fn summarize(samples: &[Sample]) -> Summary {
    let attempts = samples.len() as u64;
    let delivered = samples.iter().filter(|s| s.delivered).count() as u64;
    let mut durations: Vec<u64> = samples.iter().map(|s| s.duration_ms).collect();
    durations.sort_unstable();
    let rank = |p: f64| -> Option<u64> {
        if durations.is_empty() {
            return None;
        }
        // Nearest rank: the smallest value with at least p of the sample at or below it.
        let index = ((p * durations.len() as f64).ceil() as usize).clamp(1, durations.len()) - 1;
        Some(durations[index])
    };
    Summary {
        attempts,
        delivered,
        success_rate: (attempts > 0).then(|| delivered as f64 / attempts as f64),
        p50_ms: rank(0.50),
        p95_ms: rank(0.95),
        p99_ms: rank(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(duration_ms: u64) -> Sample {
        Sample {
            duration_ms,
            delivered: true,
        }
    }

    #[test]
    fn nearest_rank_percentiles_and_the_success_rate() {
        let mut samples: Vec<Sample> = (1..=100).map(ok).collect();
        for s in samples.iter_mut().take(10) {
            s.delivered = false;
        }
        let summary = summarize(&samples);
        assert_eq!((summary.attempts, summary.delivered), (100, 90));
        assert_eq!(summary.success_rate, Some(0.9));
        assert_eq!(
            (summary.p50_ms, summary.p95_ms, summary.p99_ms),
            (Some(50), Some(95), Some(99))
        );
    }

    #[test]
    fn small_and_empty_samples() {
        assert_eq!(
            summarize(&[]),
            Summary {
                attempts: 0,
                delivered: 0,
                success_rate: None,
                p50_ms: None,
                p95_ms: None,
                p99_ms: None
            }
        );
        let one = summarize(&[ok(7)]);
        assert_eq!(
            (one.p50_ms, one.p99_ms, one.success_rate),
            (Some(7), Some(7), Some(1.0))
        );
        let unordered = summarize(&[ok(30), ok(10), ok(20)]);
        assert_eq!((unordered.p50_ms, unordered.p95_ms), (Some(20), Some(30)));
    }
}
