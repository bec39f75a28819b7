//! An endpoint's timeline: its attempts counted in time buckets over the last
//! hour, day or week, and the marks of what happened to its sending — the
//! breaker opening and closing, the endpoint disabled, enabled, paused and
//! resumed — so "when did it start failing?" has an answer.
//!
//! Marks are written in the transaction that made the change (the completion
//! that opened a breaker, the update that paused an endpoint): the
//! [`completion`](crate::completion) and [`switches`](crate::switches) plans
//! carry them. Buckets are aligned to whole multiples of their width since the
//! Unix epoch, so two readers a moment apart see the same boundaries; the last
//! bucket holds now.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// What happened to an endpoint's sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = MarkKind))]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    /// The circuit breaker opened: nothing is sent until its probe.
    BreakerOpened,
    /// The circuit breaker closed: a probe (or an attempt) succeeded.
    BreakerClosed,
    /// Disabled: `reason` says why (`gone`, `failing`, `manual`).
    Disabled,
    /// Enabled again.
    Enabled,
    /// Paused by hand: deliveries are held.
    Paused,
    /// Resumed: held deliveries go.
    Resumed,
}

impl MarkKind {
    pub const ALL: [MarkKind; 6] = [
        MarkKind::BreakerOpened,
        MarkKind::BreakerClosed,
        MarkKind::Disabled,
        MarkKind::Enabled,
        MarkKind::Paused,
        MarkKind::Resumed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            MarkKind::BreakerOpened => "breaker_opened",
            MarkKind::BreakerClosed => "breaker_closed",
            MarkKind::Disabled => "disabled",
            MarkKind::Enabled => "enabled",
            MarkKind::Paused => "paused",
            MarkKind::Resumed => "resumed",
        }
    }

    pub fn parse(text: &str) -> Option<MarkKind> {
        MarkKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// A change to mark, as a plan carries it (its time is the transaction's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub kind: MarkKind,
    /// Why, for a disable.
    pub reason: Option<&'static str>,
}

impl Mark {
    pub const fn of(kind: MarkKind) -> Mark {
        Mark { kind, reason: None }
    }

    pub const fn disabled(reason: &'static str) -> Mark {
        Mark {
            kind: MarkKind::Disabled,
            reason: Some(reason),
        }
    }
}

/// The spans a timeline covers, and the width of their buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = TimelineWindow))]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// 60 buckets of a minute.
    Hour,
    /// 96 buckets of 15 minutes.
    #[default]
    Day,
    /// 168 buckets of an hour.
    Week,
}

impl Window {
    pub const fn bucket(self) -> Duration {
        match self {
            Window::Hour => Duration::from_secs(60),
            Window::Day => Duration::from_secs(15 * 60),
            Window::Week => Duration::from_secs(3600),
        }
    }

    pub const fn buckets(self) -> u32 {
        match self {
            Window::Hour => 60,
            Window::Day => 96,
            Window::Week => 168,
        }
    }

    /// The buckets at `now`: where the first starts, and where the last ends.
    pub fn layout(self, now: Timestamp) -> Layout {
        let width = self.bucket().as_millis() as i64;
        let last = now.as_millis().div_euclid(width) * width;
        let since = last - width * (i64::from(self.buckets()) - 1);
        Layout {
            since: Timestamp::from_millis(since),
            until: Timestamp::from_millis(last + width),
            width,
            count: self.buckets(),
        }
    }
}

/// Where a window's buckets lie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The first bucket's start.
    pub since: Timestamp,
    /// The last bucket's end (after now).
    pub until: Timestamp,
    /// A bucket's width, in milliseconds.
    pub width: i64,
    pub count: u32,
}

impl Layout {
    /// Bucket `index`'s start.
    pub fn start(&self, index: u32) -> Timestamp {
        Timestamp::from_millis(self.since.as_millis() + self.width * i64::from(index))
    }

    /// The bucket that holds `at`, if one does.
    pub fn index(&self, at: Timestamp) -> Option<u32> {
        let offset = at.as_millis() - self.since.as_millis();
        let index = offset.div_euclid(self.width);
        (offset >= 0 && index < i64::from(self.count)).then_some(index as u32)
    }

    /// Counts per bucket: `counts` are `(bucket index, delivered, failed)`
    /// as the store groups them (any order, indexes out of range dropped);
    /// every bucket is in the answer, empty ones as zeros.
    pub fn fill(&self, counts: &[(i64, u64, u64)]) -> Vec<Bucket> {
        let mut buckets: Vec<Bucket> = (0..self.count)
            .map(|index| Bucket {
                start: self.start(index),
                delivered: 0,
                failed: 0,
            })
            .collect();
        for &(index, delivered, failed) in counts {
            if let Some(bucket) = usize::try_from(index).ok().and_then(|i| buckets.get_mut(i)) {
                bucket.delivered += delivered;
                bucket.failed += failed;
            }
        }
        buckets
    }
}

/// One bucket's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = TimelineBucket))]
pub struct Bucket {
    pub start: Timestamp,
    /// Attempts answered 2xx.
    pub delivered: u64,
    /// Attempts that were not (retried or dead-lettered).
    pub failed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;

    #[test]
    fn a_windows_buckets_are_aligned_and_the_last_holds_now() {
        let now = Timestamp::from_millis(1_800_000_000_000 + 7 * MINUTE + 1_234);
        for window in [Window::Hour, Window::Day, Window::Week] {
            let layout = window.layout(now);
            let width = window.bucket().as_millis() as i64;
            assert_eq!(layout.width, width);
            assert_eq!(layout.since.as_millis() % width, 0, "{window:?}");
            assert_eq!(layout.index(now), Some(window.buckets() - 1), "{window:?}");
            assert_eq!(
                layout.until.as_millis() - layout.since.as_millis(),
                width * i64::from(window.buckets())
            );
            // The span covers at least the window back from now.
            let span = width * i64::from(window.buckets() - 1);
            assert!(now.as_millis() - layout.since.as_millis() >= span);
        }
        assert_eq!(Window::Hour.layout(now).count, 60);
        assert_eq!(Window::Day.layout(now).width, 15 * MINUTE);
        assert_eq!(Window::Week.layout(now).count, 168);
    }

    #[test]
    fn times_fall_in_their_bucket_and_outside_none() {
        let layout = Window::Hour.layout(Timestamp::from_millis(100 * MINUTE + 5));
        assert_eq!(layout.since, Timestamp::from_millis(41 * MINUTE));
        assert_eq!(layout.index(Timestamp::from_millis(41 * MINUTE)), Some(0));
        assert_eq!(
            layout.index(Timestamp::from_millis(42 * MINUTE - 1)),
            Some(0)
        );
        assert_eq!(layout.index(Timestamp::from_millis(42 * MINUTE)), Some(1));
        assert_eq!(layout.index(Timestamp::from_millis(41 * MINUTE - 1)), None);
        assert_eq!(layout.index(Timestamp::from_millis(101 * MINUTE)), None);
    }

    #[test]
    fn counts_fill_their_buckets_and_the_rest_are_zero() {
        let layout = Window::Hour.layout(Timestamp::from_millis(100 * MINUTE));
        let buckets = layout.fill(&[(59, 3, 1), (0, 2, 0), (59, 1, 0), (60, 9, 9), (-1, 9, 9)]);
        assert_eq!(buckets.len(), 60);
        assert_eq!((buckets[0].delivered, buckets[0].failed), (2, 0));
        assert_eq!((buckets[59].delivered, buckets[59].failed), (4, 1));
        assert_eq!(buckets[59].start, Timestamp::from_millis(100 * MINUTE));
        let total: u64 = buckets.iter().map(|b| b.delivered + b.failed).sum();
        assert_eq!(total, 7, "out of range counts are dropped");
    }

    #[test]
    fn mark_kinds_round_trip_as_text() {
        for kind in MarkKind::ALL {
            assert_eq!(MarkKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
        assert_eq!(MarkKind::parse("exploded"), None);
    }
}
