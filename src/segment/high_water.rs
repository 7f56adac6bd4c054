//! The regression guard: a server never hands out an id of a tag at or below the highest id it
//! already leased for that tag.
//!
//! # The invariant
//!
//! Every buffer keeps `leased_to`, one past the last id of the highest segment it published (its
//! high-water mark is `leased_to - 1`). Leases of one row only ever grow `max_id`, so a lease
//! committed after this server's previous one starts at or above `leased_to`. A lease that
//! starts below it proves the database lost committed leases: an asynchronous replica promoted
//! before it had them, a backup restored, a DBA lowering `max_id` by hand. The part of such a
//! lease at or below the mark is never handed out:
//!
//! - a lease that ends at or below the mark is **refused** whole ([`Check::Refused`]); the loader
//!   leases again at once asking for a step that jumps past the mark in one lease
//!   ([`jump_step`], bounded by [`MAX_STEP`]), so recovery takes one extra round trip, not one
//!   per lost segment. The refused range is consumed in the database, which also keeps it from
//!   the other servers: those ids were this server's before the loss;
//! - a lease that straddles the mark is **trimmed** to the ids above it ([`Check::Trimmed`]).
//!
//! Both count as one regression (`leafid_segment_regressions_total{biz_tag}`) and are logged at
//! most once per [`REPEAT_LOG_INTERVAL`](crate::telemetry::REPEAT_LOG_INTERVAL) (the rest are
//! counted only).
//!
//! # Tag generations
//!
//! A tag deleted and created again gets a new buffer; the mark of the old one is carried over
//! to it ([`RetiredMarks`], per tag name, for the life of the process). Re-creating a tag
//! through leafid already starts it at or above the deleted row's `max_id` (the tombstone),
//! which is at or above every server's mark, so a legitimate re-creation never meets the guard.
//! A row deleted and inserted again by hand below that (no tombstone) would hand out this
//! server's ids again: the guard treats it as any other regression and jumps past the mark.
//!
//! # What it cannot catch
//!
//! Only this server's own ids are known to it: an id another server handed out from a lost
//! lease above this server's mark is issued again (one duplicate per such id, across servers).
//! A restarted server has no mark. docs/deploy.md measures both on a real failover.

use std::collections::HashMap;
use std::sync::Mutex;

use tracing::warn;

use super::biz_tag::BizTag;
use super::tag_rules::MAX_STEP;
use crate::telemetry::LogLimiter;

/// A lease that began at or below this server's high-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Regression {
    /// The leased range `[start, end)`.
    pub start: i64,
    /// One past its last id: the row's `max_id` after the lease.
    pub end: i64,
    /// The buffer's `leased_to` when the lease came: every id below it was this server's.
    pub leased_to: i64,
}

/// Leases one load may ask past a refused one before it backs off like a failed load (each
/// jumps up to [`MAX_STEP`] ids; the next load starts over).
pub(crate) const MAX_JUMPS: u32 = 4;

/// Logs a regression, at most once per interval across tags (the metric counts every one).
pub(crate) fn report(tag: &BizTag, r: &Regression, action: &'static str) {
    if let Some(suppressed) = LogLimiter::global().allow("segment_regression") {
        warn!(
            biz_tag = %tag,
            lease_start = r.start,
            lease_end = r.end - 1,
            high_water = r.leased_to - 1,
            action,
            suppressed,
            "segment lease at or below this server's high-water mark: the database lost \
             committed leases (a failover to a replica that lacked them?)"
        );
    }
}

/// What a leased range `[start, end)` is worth to a buffer whose ids all lie below `leased_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// Entirely above the mark: the normal case.
    Fresh,
    /// Starts at or below the mark and ends above it: only `[usable_from, end)` may be used.
    Trimmed {
        /// The first id above the mark (`leased_to`).
        usable_from: i64,
    },
    /// Ends at or below the mark: not one id may be used.
    Refused,
}

/// Checks the range `[start, end)` against `leased_to` (0 before any lease).
pub(crate) fn check(start: i64, end: i64, leased_to: i64) -> Check {
    if start >= leased_to {
        Check::Fresh
    } else if end > leased_to {
        Check::Trimmed {
            usable_from: leased_to,
        }
    } else {
        Check::Refused
    }
}

/// The step to ask after a lease ending at `refused_end` was refused: enough to reach
/// `leased_to` plus a normal `step` above it, in one lease, never more than [`MAX_STEP`] (a
/// larger loss takes several leases). Other servers leasing meanwhile only move the row up, so
/// the next lease starts at or above `refused_end`.
pub(crate) fn jump_step(refused_end: i64, leased_to: i64, step: i64) -> i64 {
    let gap = leased_to.saturating_sub(refused_end).max(0);
    gap.saturating_add(step.max(1)).min(MAX_STEP)
}

/// The marks of buffers dropped from the tag map (a deleted tag), by tag name, so the next
/// generation of the tag starts with them. One entry per deleted tag name for the life of the
/// process (a name and an `i64`). A std Mutex: taken only when a tag is dropped or its buffer
/// created, never on the id path, never across an await.
#[derive(Debug, Default)]
pub(crate) struct RetiredMarks(Mutex<HashMap<Box<str>, i64>>);

impl RetiredMarks {
    /// Records `leased_to` of a dropped buffer of `tag` (keeping the larger of two).
    pub(crate) fn retire(&self, tag: &str, leased_to: i64) {
        if leased_to <= 0 {
            return;
        }
        let mut marks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mark = marks.entry(tag.into()).or_insert(leased_to);
        *mark = (*mark).max(leased_to);
    }

    /// The `leased_to` a new buffer of `tag` starts with (0: none).
    pub(crate) fn of(&self, tag: &str) -> i64 {
        let marks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        marks.get(tag).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_fresh_trimmed_or_refused_by_where_it_ends() {
        assert_eq!(check(1, 11, 0), Check::Fresh);
        assert_eq!(
            check(11, 21, 11),
            Check::Fresh,
            "right after the last lease"
        );
        assert_eq!(check(5, 21, 11), Check::Trimmed { usable_from: 11 });
        assert_eq!(check(10, 12, 11), Check::Trimmed { usable_from: 11 });
        assert_eq!(check(1, 11, 11), Check::Refused, "ends exactly at the mark");
        assert_eq!(check(1, 5, 11), Check::Refused);
    }

    #[test]
    fn the_jump_reaches_past_the_mark_in_one_lease_within_the_step_maximum() {
        // Row at 41 after the refused lease, this server had leased up to 101 (ids <= 100).
        assert_eq!(jump_step(41, 101, 10), 70);
        assert_eq!(
            41 + jump_step(41, 101, 10) - 10,
            101,
            "a full step above the mark"
        );
        assert_eq!(jump_step(101, 101, 10), 10);
        assert_eq!(jump_step(200, 101, 10), 10, "already past: a normal step");
        assert_eq!(jump_step(1, i64::MAX, 10), MAX_STEP);
        assert_eq!(jump_step(1, 2, 0), 2, "never a zero step");
    }

    #[test]
    fn retired_marks_keep_the_larger_mark_per_tag() {
        let m = RetiredMarks::default();
        assert_eq!(m.of("t"), 0);
        m.retire("t", 100);
        m.retire("t", 50);
        m.retire("u", 0);
        assert_eq!((m.of("t"), m.of("u")), (100, 0));
        m.retire("t", 150);
        assert_eq!(m.of("t"), 150);
    }
}
