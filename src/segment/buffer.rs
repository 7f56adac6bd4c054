//! `SegmentBuffer`: the per-tag double buffer, with a lock-free fast path.
//!
//! The id path lives in `super::tickets` (a ticket counter mapped onto two segment windows)
//! over the seqlocked slots of `super::slot`; both are free of async code so loom can check
//! them. This file adds what surrounds it: the single-flight load state machine, the backoff
//! after failures, the waiters' notification, and the snapshots for `/cache` and metrics.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
// tokio's clock (the std one unless a test pauses time): backoff and the step rule then follow
// the same clock as the waits and timeouts of the allocator.
use tokio::time::Instant;

use super::biz_tag::BizTag;
use super::high_water::{self, Check, Regression};
use super::load_stats::LoadLatency;
use super::runs::IdSink;
use super::step::StepPolicy;
use super::store::Lease;
pub(crate) use super::tickets::Take;
use super::tickets::Tickets;

/// The loader's bookkeeping: touched only around a load, never on the id path.
#[derive(Debug, Default)]
struct LoadState {
    /// The row's step at the last lease: the floor of the adaptive step.
    db_step: i64,
    /// The step of the last lease (Leaf's adaptive step), 0 before the first.
    step: i64,
    /// When the last successful load finished (monotonic, for the step rule).
    last_load: Option<Instant>,
    /// The same instant as wall-clock unix milliseconds, for display.
    last_load_unix_ms: Option<i64>,
    /// How long the last lease took.
    last_load_latency: Option<Duration>,
    /// Successful loads so far.
    loads: u64,
    /// Failed loads in a row (drives the backoff); reset by a success.
    failures: u32,
    /// The last failure, for `/cache`.
    last_error: Option<String>,
    /// The last load failed because the lane was refused (`lane_mismatch`): its reason.
    lane_mismatch: Option<String>,
    /// Failed loads since start (metrics).
    failures_total: u64,
    /// Ids of the segments overwritten so far: each was spent when its slot was reused. With
    /// the tickets used in the two live slots this gives the ids issued, read at scrape time
    /// instead of being counted per id.
    retired_ids: u64,
    /// Latency of the successful leases (metrics).
    latency: LoadLatency,
    /// One past the last id of the highest segment published (0 before any): no id below it
    /// is ever handed out again (the regression guard, `super::high_water`).
    leased_to: i64,
    /// Leases refused or trimmed by the regression guard since start (metrics).
    regressions: u64,
    /// When this tag's last "segment loaded" line was written: one per tag per
    /// [`crate::telemetry::REPEAT_LOG_INTERVAL`], so a caller whose every request leases (the
    /// range route) cannot turn each request into a log line (issue 44).
    load_logged: Option<Instant>,
    /// Loads since that line, not logged (told in the next line as `held_back`).
    loads_unlogged: u64,
}

/// What [`SegmentBuffer::publish_lease`] did with a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Publish {
    /// Published as the next segment (trimmed to the ids above the mark if `regression`).
    Loaded {
        /// Ids in the new segment.
        len: u64,
        /// Set when the lease started at or below the mark and was trimmed.
        regression: Option<Regression>,
        /// `Some(loads held back since the last line)` when this load's line may be written
        /// (one per tag per interval), `None` when it is held back.
        log: Option<u64>,
    },
    /// Nothing published: the lease ended at or below the mark. The load is still in flight
    /// (the single-flight flag held): lease again, or [`SegmentBuffer::fail_load`].
    Refused(Regression),
    /// Nothing published: the tag was closed for the give-back ([`SegmentBuffer::close`]).
    /// The lease's ids are wasted (never handed out); the load is over.
    Closed,
}

/// What [`SegmentBuffer::close`] found: the ids to give back, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unused {
    /// Nothing to give back: nothing leased, or every leased id handed out.
    Nothing,
    /// The ids `[from, to)` were leased by this server and never handed out, and `to` is the
    /// end of its last lease: `max_id` may go back from `to` to `from` if it is still `to`.
    Range {
        /// The first id never handed out.
        from: i64,
        /// One past the last id of the last lease published.
        to: i64,
    },
    /// A lease was in flight when the tag closed: its outcome is unknown, so nothing is given
    /// back (the lease, if it committed, moved `max_id` anyway).
    LoadInFlight,
}

/// The bound on the leases of a row whose usable ids end (a formatted tag's period row: its
/// sequence numbers stop at the width, `crate::segment::allocator` formatted tags).
///
/// Why: a period's numbers are shared by every server, and a lease takes numbers for good (a
/// `kill -9` loses what it held). Without a bound, one burst on one server leases the rest of
/// the day and the others answer `sequence_exhausted` while the numbers sit in its memory. With
/// it, no lease takes more than [`LeaseCap::SHARE`]th of what was left when it was planned (or
/// [`LeaseCap::FLOOR`] numbers when that is more, so a small width is not leased one number at
/// a time), so a server holds (current and next segment) at most twice that, and a crash loses
/// at most as much. The bound only ever makes a lease smaller, so it changes no id's uniqueness: every id
/// still comes from a lease the database confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeaseCap {
    /// One past the last id worth leasing (the width's largest sequence number + 1).
    pub end: i64,
    /// The first lease's step, and the floor of the adaptive step below the share: the tag's
    /// step, at most [`LeaseCap::SHARE`]th of the whole range.
    pub first: i64,
}

impl LeaseCap {
    /// A lease takes at most `1/SHARE` of what is left of the range: 1/32, about 3%.
    pub const SHARE: i64 = 32;
    /// ... or this many numbers when that is more (and that many are left).
    pub const FLOOR: i64 = 100;

    /// The cap of a range starting at `start` (the row's `max_id` at creation) and ending
    /// before `end`, for a tag whose DBA step is `step`.
    pub fn new(start: i64, end: i64, step: i64) -> Self {
        let whole = end.saturating_sub(start).max(0);
        Self {
            end,
            first: step.min(Self::most(whole)).max(1),
        }
    }

    /// The most one lease may take when `left` numbers are left.
    fn most(left: i64) -> i64 {
        (left / Self::SHARE).max(left.min(Self::FLOOR))
    }

    /// The step to ask for: `wanted` (the adaptive step), never below `first` nor above the
    /// share of what is left after `leased_to`, and at least 1 (a range used up leases one id
    /// at a time: the request then finds no usable id and answers that the range is spent).
    pub fn bound(&self, wanted: i64, leased_to: i64) -> i64 {
        let left = self.end.saturating_sub(leased_to).max(0);
        wanted.max(self.first).min(Self::most(left)).max(1)
    }
}

/// What a loader should lease, decided by [`SegmentBuffer::plan_load`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoadPlan {
    /// Step to lease, or `None` for the row's own step (first load).
    pub step: Option<i64>,
}

/// Per-tag double buffer. The ticket scheme is described in `super::tickets`.
#[derive(Debug)]
pub struct SegmentBuffer {
    /// The tag this buffer serves.
    tag: BizTag,
    /// The ticket counter and the two segment slots: the lock-free id path. Slots are written
    /// only by the holder of `loading` (the single loader), through `Tickets::publish`.
    tickets: Tickets,
    /// True while one load for this tag is in flight (single-flight).
    loading: AtomicBool,
    /// After a failed load, no new load starts before this instant (ms since `created`); 0
    /// while the last load succeeded (or none ran), so non-zero also means the tag's lease is
    /// known to be failing (the allocator's fail-fast rule). Relaxed: advisory for waiting; a
    /// stale read makes one request wait or answer 503 once, and no id depends on it.
    retry_at_ms: AtomicU64,
    /// A load is scheduled for the end of the current backoff (at most one per buffer), so a
    /// request answered at once during an outage does not delay the first lease after it.
    retry_armed: AtomicBool,
    /// Base of `retry_at_ms`.
    created: Instant,
    /// Woken after every load attempt, so waiting requests re-check without spinning.
    notify: Notify,
    /// The loader's state. A std Mutex: held only briefly, never across an await.
    load_state: Mutex<LoadState>,
    /// Set when the tag disappeared from the database.
    removed: AtomicBool,
    /// Set when the row's `max_id` reached `i64::MAX`: no further segment exists.
    exhausted: AtomicBool,
    /// Set when the server stops: no new load starts (the give-back waits for the loads in
    /// flight).
    stopping: AtomicBool,
    /// Set (under `load_state`) by [`Self::close`]: no segment is published any more and the
    /// ticket counter is closed, so no id is handed out again.
    closed: AtomicBool,
    /// The bound on every lease of a row whose usable ids end ([`LeaseCap`]); `None` for a
    /// plain tag. Fixed at creation, so no load is ever planned without it.
    cap: Option<LeaseCap>,
}

impl SegmentBuffer {
    /// An empty buffer: the first request triggers the first load.
    pub fn new(tag: BizTag) -> Self {
        Self::above(tag, 0)
    }

    /// An empty buffer that hands out no id below `leased_to` (a tag's next generation starts
    /// with the mark of the previous one, see `super::high_water`).
    pub(crate) fn above(tag: BizTag, leased_to: i64) -> Self {
        Self {
            tag,
            tickets: Tickets::new(),
            loading: AtomicBool::new(false),
            retry_at_ms: AtomicU64::new(0),
            retry_armed: AtomicBool::new(false),
            created: Instant::now(),
            notify: Notify::new(),
            load_state: Mutex::new(LoadState {
                leased_to,
                ..LoadState::default()
            }),
            removed: AtomicBool::new(false),
            exhausted: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            cap: None,
        }
    }

    /// This buffer with every lease bounded by `cap` (a period row's buffer).
    pub(crate) fn capped(mut self, cap: LeaseCap) -> Self {
        self.cap = Some(cap);
        self
    }

    /// The tag served.
    pub fn tag(&self) -> &BizTag {
        &self.tag
    }

    /// Takes one id if a published segment has it. Lock-free: one `fetch_add` and a few loads.
    #[inline]
    pub(crate) fn try_next(&self) -> Take {
        self.tickets.try_next()
    }

    /// Appends up to `want` ids to `out`, taking only tickets that published segments cover.
    /// Returns whether a preload should be started; stops early (fewer ids) when it must wait.
    pub(crate) fn take_many<S: IdSink>(&self, want: u64, out: &mut S) -> bool {
        self.tickets.take_many(want, out)
    }

    /// Claims the right to load (single-flight), unless one is running or the backoff is on.
    pub(crate) fn try_begin_load(&self) -> bool {
        if self.loading.load(Ordering::Relaxed)
            || self.removed.load(Ordering::Relaxed)
            || self.exhausted.load(Ordering::Relaxed)
            || self.stopping.load(Ordering::Relaxed)
        {
            return false;
        }
        if self.now_ms() < self.retry_at_ms.load(Ordering::Relaxed) {
            return false;
        }
        // Acquire on success: the new loader sees everything the previous loader published.
        self.loading
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Milliseconds until the backoff after a failure ends (0 when a load may start now).
    pub(crate) fn backoff_left(&self) -> Duration {
        let left = self
            .retry_at_ms
            .load(Ordering::Relaxed)
            .saturating_sub(self.now_ms());
        Duration::from_millis(left)
    }

    /// Whether the tag's last load failed and none has succeeded since.
    pub(crate) fn is_failing(&self) -> bool {
        // `fail_load` stores `now + backoff` (at least 50 ms: never 0); a success stores 0.
        self.retry_at_ms.load(Ordering::Relaxed) != 0
    }

    /// Claims the one retry scheduled for the end of the backoff; `false` if one is armed.
    pub(crate) fn arm_retry(&self) -> bool {
        !self.retry_armed.swap(true, Ordering::Relaxed)
    }

    /// Releases the claim of [`Self::arm_retry`] (the scheduled retry ran).
    pub(crate) fn disarm_retry(&self) {
        self.retry_armed.store(false, Ordering::Relaxed);
    }

    /// Decides whether a load is still needed and with which step. `None`: not needed (the next
    /// segment is already published, e.g. a stale reader asked twice).
    pub(crate) fn plan_load(&self, policy: &StepPolicy) -> Option<LoadPlan> {
        let st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        if !self.tickets.wants_next() {
            return None;
        }
        let step = st.last_load.map(|at| {
            let since = at.elapsed();
            policy.next_step(st.step, st.db_step, Some(since))
        });
        // A capped row always asks explicitly (its stored step is 1, so the store's floor never
        // raises the ask): the first lease its `first` step, the others the adaptive step,
        // each bounded by the share of what is left.
        let step = match &self.cap {
            None => step,
            Some(cap) => Some(cap.bound(step.unwrap_or(cap.first), st.leased_to)),
        };
        Some(LoadPlan { step })
    }

    /// [`Self::publish_lease`] of a lease planned with the adaptive step (not a jump past the
    /// mark), for tests.
    #[cfg(test)]
    pub(crate) fn publish(&self, lease: Lease, asked: Option<i64>, latency: Duration) -> Publish {
        self.publish_lease(lease, asked, latency, false)
    }

    /// Publishes a leased range as the next segment and wakes waiters, keeping only its ids
    /// above the high-water mark (`super::high_water`): a lease with none is refused and the
    /// load stays in flight. `asked` is the adaptive step the lease was planned with; with
    /// `jump`, the lease was asked to reach past the mark after a refusal, so trimming it is
    /// expected and not another regression.
    pub(crate) fn publish_lease(
        &self,
        lease: Lease,
        asked: Option<i64>,
        latency: Duration,
        jump: bool,
    ) -> Publish {
        let mut st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Relaxed) {
            // The tag closed while this lease was in flight: its ids are never handed out, and
            // the give-back left the row alone (`Unused::LoadInFlight`).
            drop(st);
            self.finish_load();
            return Publish::Closed;
        }
        let start = (lease.max_id - lease.leased).max(1);
        let end = lease.max_id;
        let regression = (start < st.leased_to && !jump).then_some(Regression {
            start,
            end,
            leased_to: st.leased_to,
        });
        let id_start = match high_water::check(start, end, st.leased_to) {
            Check::Fresh => start,
            Check::Trimmed { usable_from } => usable_from,
            Check::Refused => {
                st.regressions += 1;
                return Publish::Refused(Regression {
                    start,
                    end,
                    leased_to: st.leased_to,
                });
            }
        };
        if regression.is_some() {
            st.regressions += 1;
        }
        let len = end.saturating_sub(id_start).max(0) as u64;
        if len > 0 {
            st.retired_ids += self.tickets.publish(id_start, len);
        }
        st.leased_to = st.leased_to.max(end);
        if let Some(db_step) = lease.db_step {
            st.db_step = db_step;
        }
        let step = asked.unwrap_or(st.db_step);
        let now = Instant::now();
        let log = match st.load_logged {
            Some(at) if now.duration_since(at) < crate::telemetry::REPEAT_LOG_INTERVAL => {
                st.loads_unlogged += 1;
                None
            }
            _ => {
                st.load_logged = Some(now);
                Some(std::mem::take(&mut st.loads_unlogged))
            }
        };
        if st.step != 0 && st.step != step && log.is_some() {
            tracing::info!(
                biz_tag = %self.tag, old_step = st.step, new_step = step, db_step = st.db_step,
                "segment step changed"
            );
        }
        st.step = step;
        st.latency.observe(latency.as_secs_f64());
        st.last_load = Some(Instant::now());
        st.last_load_unix_ms = Some(chrono::Utc::now().timestamp_millis());
        st.last_load_latency = Some(latency);
        st.loads += 1;
        st.failures = 0;
        st.last_error = None;
        st.lane_mismatch = None;
        self.retry_at_ms.store(0, Ordering::Relaxed);
        drop(st);
        self.finish_load();
        Publish::Loaded {
            len,
            regression,
            log,
        }
    }

    /// One past the highest id this buffer ever leased (0 before any lease): its high-water
    /// mark plus one.
    pub(crate) fn leased_to(&self) -> i64 {
        self.load_state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leased_to
    }

    /// Starts no load from now on (the server is stopping); a load in flight runs on.
    pub(crate) fn stop_loading(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Closes the tag for the give-back: from this call on no id is handed out (a request
    /// holding a ticket taken before keeps its id, a later one finds none) and no segment is
    /// published. Then says which ids were leased by this server and never handed out, computed
    /// from the ticket counter as closed: a ticket taken counts as handed out, even if its
    /// request is still mapping it.
    ///
    /// Call [`Self::stop_loading`] first and wait for the load in flight, if any: a load still
    /// running here makes the answer [`Unused::LoadInFlight`].
    pub(crate) fn close(&self) -> Unused {
        // Under the load lock: a loader publishes only under it, and sees `closed` once it has
        // it, so the slots read below are the last ones ever published.
        let st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        self.stopping.store(true, Ordering::Relaxed);
        self.closed.store(true, Ordering::Relaxed);
        let first_free = self.tickets.close();
        if self.loading.load(Ordering::Acquire) {
            return Unused::LoadInFlight;
        }
        unused_tail(self.tickets.views(), first_free, st.leased_to)
    }

    /// Whether [`Self::close`] ran: the tag hands out no more ids on this server.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// [`Self::fail_load`] for a lease the lane refused: waiters answer `lane_mismatch`.
    pub(crate) fn fail_load_mismatch(&self, error: String) {
        self.fail_load_as(error, true);
    }

    /// Why the last load failed, when the lane refused it (a mismatch or a clash of slots).
    pub(crate) fn lane_mismatch(&self) -> Option<String> {
        let st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        st.lane_mismatch.clone()
    }

    /// Records a failed load: backoff doubles from 50 ms up to 5 s; waiters are woken.
    pub(crate) fn fail_load(&self, error: String) {
        self.fail_load_as(error, false);
    }

    fn fail_load_as(&self, error: String, mismatch: bool) {
        let mut st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        st.lane_mismatch = mismatch.then(|| error.clone());
        st.failures = st.failures.saturating_add(1);
        st.failures_total += 1;
        st.last_error = Some(error);
        let backoff = (50u64 << st.failures.min(7)).min(5_000);
        self.retry_at_ms
            .store(self.now_ms() + backoff, Ordering::Relaxed);
        drop(st);
        self.finish_load();
    }

    /// Ends a load that found nothing to do.
    pub(crate) fn finish_load(&self) {
        // Release: the next loader (Acquire CAS) sees the slots and state written by this one.
        self.loading.store(false, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Marks the tag as deleted from the database and wakes waiters.
    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Relaxed);
        self.notify.notify_waiters();
    }

    /// Marks the tag as exhausted (its `max_id` is `i64::MAX`) and wakes waiters.
    pub(crate) fn mark_exhausted(&self) {
        self.exhausted.store(true, Ordering::Relaxed);
        self.finish_load();
    }

    /// Whether no further segment can be leased for the tag.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// Whether the tag was deleted from the database.
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    /// The notification fired after each load attempt.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }

    /// Whether a load is in flight.
    pub fn is_loading(&self) -> bool {
        self.loading.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.created.elapsed().as_millis() as u64
    }

    /// Ids left in the published segments (current remainder plus a ready next segment).
    pub fn remaining(&self) -> u64 {
        self.tickets.remaining()
    }

    /// A snapshot for the monitor pages and metrics.
    pub fn snapshot(&self) -> BufferSnapshot {
        // The lock first: the loader holds it while it retires and rewrites a slot, so the
        // retired count and the slots read below agree.
        let st = self.load_state.lock().unwrap_or_else(|e| e.into_inner());
        let issued = self.tickets.issued();
        let views = self.tickets.views();
        let live_used: u64 = views
            .iter()
            .map(|v| issued.clamp(v.ticket_start, v.ticket_end) - v.ticket_start)
            .sum();
        let segments = views
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let len = v.ticket_end - v.ticket_start;
                let used = issued.clamp(v.ticket_start, v.ticket_end) - v.ticket_start;
                let state = if len == 0 {
                    SegmentState::Empty
                } else if used == len {
                    SegmentState::Spent
                } else if used > 0 || v.contains(issued) {
                    SegmentState::Current
                } else {
                    SegmentState::Ready
                };
                SegmentSnapshot {
                    slot: i,
                    state,
                    min_id: (len > 0).then_some(v.id_start),
                    max_id: (len > 0).then(|| v.id_start + len as i64 - 1),
                    next_id: (len > 0 && used < len).then(|| v.id_start + used as i64),
                    size: len,
                    used,
                    remaining: len - used,
                }
            })
            .collect();
        BufferSnapshot {
            biz_tag: self.tag.to_string(),
            segments,
            next_ready: views[0].ticket_end.max(views[1].ticket_end) > issued
                && views.iter().any(|v| v.ticket_start > issued),
            loading: self.is_loading(),
            step: st.step,
            db_step: st.db_step,
            loads: st.loads,
            consecutive_failures: st.failures,
            last_error: st.last_error.clone(),
            last_load_unix_ms: st.last_load_unix_ms,
            last_load_latency_ms: st.last_load_latency.map(|d| d.as_secs_f64() * 1e3),
            remaining: self.remaining(),
            ids_issued: st.retired_ids + live_used,
            load_failures_total: st.failures_total,
            regressions_total: st.regressions,
            load_latency: st.latency.clone(),
        }
    }
}

/// The ids at the end of the last lease that no ticket below `first_free` maps to: from the
/// first unused id of the newest segment, or of the one before it when the newest is untouched
/// and follows it without a gap in ids (both leased by this server, so every id between them is
/// its own). `leased_to` is the end of the newest segment as published (the last lease's
/// `max_id`); any disagreement gives nothing back.
fn unused_tail(views: [super::slot::SlotView; 2], first_free: u64, leased_to: i64) -> Unused {
    let (newest, older) = if views[1].ticket_end > views[0].ticket_end {
        (views[1], views[0])
    } else {
        (views[0], views[1])
    };
    let len = newest.ticket_end - newest.ticket_start;
    if len == 0 || first_free >= newest.ticket_end {
        return Unused::Nothing;
    }
    let Some(to) = i64::try_from(len)
        .ok()
        .and_then(|l| newest.id_start.checked_add(l))
        .filter(|&end| end == leased_to)
    else {
        return Unused::Nothing;
    };
    let mut from = newest.id_of(first_free.max(newest.ticket_start));
    let older_len = older.ticket_end - older.ticket_start;
    let contiguous = older_len > 0
        && i64::try_from(older_len)
            .ok()
            .and_then(|l| older.id_start.checked_add(l))
            == Some(newest.id_start);
    if first_free < older.ticket_end && contiguous {
        from = older.id_of(first_free.max(older.ticket_start));
    }
    Unused::Range { from, to }
}

/// Where a segment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentState {
    /// Nothing loaded in this slot yet.
    Empty,
    /// Ids are being handed out from it.
    Current,
    /// Loaded ahead and waiting to become current.
    Ready,
    /// Every id handed out.
    Spent,
}

/// One slot of a [`BufferSnapshot`].
#[derive(Debug, Clone)]
pub struct SegmentSnapshot {
    /// Slot index (0 or 1).
    pub slot: usize,
    /// Current, ready, spent or empty.
    pub state: SegmentState,
    /// First id of the segment.
    pub min_id: Option<i64>,
    /// Last id of the segment.
    pub max_id: Option<i64>,
    /// Next id it will hand out.
    pub next_id: Option<i64>,
    /// Ids in the segment.
    pub size: u64,
    /// Ids handed out (or lost to races) so far.
    pub used: u64,
    /// Ids left.
    pub remaining: u64,
}

/// The live state of one tag's buffer, for `/cache` and metrics.
#[derive(Debug, Clone)]
pub struct BufferSnapshot {
    /// The tag.
    pub biz_tag: String,
    /// Both slots.
    pub segments: Vec<SegmentSnapshot>,
    /// Whether the next segment is loaded and waiting.
    pub next_ready: bool,
    /// Whether a load is in flight.
    pub loading: bool,
    /// The adaptive step of the last lease.
    pub step: i64,
    /// The DBA's step as last read.
    pub db_step: i64,
    /// Successful loads since start.
    pub loads: u64,
    /// Failed loads in a row.
    pub consecutive_failures: u32,
    /// The last load error, if the last load failed.
    pub last_error: Option<String>,
    /// When the last load finished (unix ms).
    pub last_load_unix_ms: Option<i64>,
    /// How long the last lease took.
    pub last_load_latency_ms: Option<f64>,
    /// Ids left in memory.
    pub remaining: u64,
    /// Ids taken from this tag's segments since the buffer was created (an id lost to a race or
    /// to a request that gave up counts too: it is never issued again).
    pub ids_issued: u64,
    /// Failed loads since start.
    pub load_failures_total: u64,
    /// Leases that began at or below this server's high-water mark of the tag (the database
    /// lost committed leases), refused or trimmed since the buffer was created.
    pub regressions_total: u64,
    /// Latency histogram of the successful loads (metrics only).
    pub load_latency: LoadLatency,
}

#[cfg(test)]
mod tests;
