//! Per-endpoint rate limits: the generic cell rate algorithm (GCRA).
//!
//! The whole state of a limit is one number, the *theoretical arrival time*
//! (TAT): the earliest moment the next request may go. Because it is one
//! number, the store can keep it in the endpoint's row and every dispatcher
//! node reserves send slots from the same value under a row lock — so the
//! limit holds for the cluster, not per process. (An in-process limiter such
//! as `governor` implements the same algorithm but keeps the TAT in memory,
//! which would make the limit per node.)

/// Microseconds between two sends at `per_second`.
pub fn interval_micros(per_second: u32) -> i64 {
    1_000_000 / i64::from(per_second.max(1))
}

/// Reserves the next send slot: returns `(slot, new_tat)`, in microseconds.
/// The slot is never before `now`; slots are exactly one interval apart
/// (no burst), so the measured rate equals the limit.
pub fn reserve(tat: Option<i64>, now: i64, per_second: u32) -> (i64, i64) {
    let slot = tat.unwrap_or(now).max(now);
    (slot, slot + interval_micros(per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_spaced_by_the_interval() {
        let mut tat = None;
        let mut slots = Vec::new();
        for _ in 0..4 {
            let (slot, next) = reserve(tat, 1_000_000, 50);
            slots.push(slot);
            tat = Some(next);
        }
        assert_eq!(slots, [1_000_000, 1_020_000, 1_040_000, 1_060_000]);
    }

    #[test]
    fn an_idle_limit_does_not_bank_credit() {
        // The last send was long ago: the next slot is now, not in the past.
        assert_eq!(reserve(Some(5), 1_000_000, 10), (1_000_000, 1_100_000));
    }

    #[test]
    fn interval_handles_extremes() {
        assert_eq!(interval_micros(1), 1_000_000);
        assert_eq!(interval_micros(0), 1_000_000);
        assert_eq!(interval_micros(1_000_000), 1);
    }
}
