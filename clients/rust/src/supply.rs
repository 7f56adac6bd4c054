//! `Supply`: one local id stream (a segment tag, or snowflake), double-buffered like the
//! server's `SegmentBuffer`.
//!
//! A supply holds the *current* batch (ids from one 200 response) and at most one *next* batch.
//! `next_id` takes an index with one `fetch_add` on the current batch: that is the whole fast
//! path. The caller whose index is the batch's preload mark (10% of it, like the server) starts
//! the single-flight refill, which fetches the next batch in a background task; when the
//! current batch runs out, the first caller to find it exhausted promotes the next one, and
//! callers that find no next batch wait for the refill (bounded by the wait timeout).
//!
//! # Invariants
//!
//! - **No id twice.** An index is taken by exactly one caller (the `fetch_add`), each index of
//!   a batch maps to one of its ids, and the batches of a supply are disjoint: each accepted
//!   batch holds only ids above every id of the batches accepted before it (the *floor*, below).
//! - **Only received ids.** A batch is built only from the ids of a 200 body that passed
//!   validation (`servers::validate`); nothing is computed or extrapolated.
//! - **Increasing per supply.** If one `next_id` call happens-before another, the second id is
//!   larger. Within a batch: the second call's `fetch_add` comes later in the counter's
//!   modification order, so its index (and id) is larger. Across batches: a batch is promoted
//!   only once the current one is exhausted, and every id of a later batch is above every id of
//!   an earlier one (the floor); a call that started after another one returned loads the same
//!   batch or a later one (`ArcSwap` loads are coherent).
//!
//! # The floor, and failover
//!
//! The servers of one database lease disjoint id ranges, but ranges leased by *different*
//! servers are not ordered relative to what this client already received: after a failover
//! the new server may still be serving a segment below the old server's. Such ids are unique,
//! yet handing them out would break "increasing". So every fetched batch is cut to the ids
//! above the floor (the largest id accepted so far for this supply); the ids cut are counted in
//! [`SupplyStats::discarded_ids`] and never handed out (a gap, as a server restart makes). A
//! batch cut to nothing is fetched again at once: the server moves on through its segment with
//! each batch and its next lease from the database is above every range leased before, so this
//! ends after at most (one segment of that server / batch) fetches.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::MAX_BATCH;
use crate::error::{Error, ServerFault};
use crate::servers::{FetchError, Fetched, Request, Servers, Timing, backoff};

/// Ids of one response, handed out in order by index.
#[derive(Debug)]
struct Batch {
    /// The ids, strictly increasing, all above the ids of every earlier batch of the supply.
    ids: Box<[i64]>,
    /// Indexes taken so far; the caller that takes `i < ids.len()` owns `ids[i]`. It runs past
    /// `ids.len()` once exhausted (each late caller adds one; a `usize` cannot wrap in practice).
    /// Relaxed everywhere: an index only needs to be unique and ordered, which the RMW on one
    /// atomic gives; the ids themselves were published with the batch (the `ArcSwap` store).
    taken: CachePadded<AtomicUsize>,
    /// The index whose taker starts the refill: 10% of the batch, as the server preloads.
    preload_at: usize,
}

impl Batch {
    fn new(ids: Vec<i64>) -> Self {
        let preload_at = ids.len() / 10;
        Self {
            ids: ids.into_boxed_slice(),
            taken: CachePadded::new(AtomicUsize::new(0)),
            preload_at,
        }
    }

    fn is_exhausted(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.ids.len()
    }
}

/// Where batches come from.
#[derive(Debug)]
enum Source {
    /// The servers, with this request.
    Remote {
        /// Failover and health.
        servers: Arc<Servers>,
        /// The batch request (segment or snowflake route).
        request: Request,
        /// Backoff between two failed fetch rounds of one refill.
        timing: Timing,
        /// Runs the refill tasks (captured at build time, so `try_next_id` may run on any
        /// thread).
        runtime: tokio::runtime::Handle,
    },
    /// Nothing: the ids given at construction only (benches and tests).
    Fixed,
}

/// State shared by the refill and the callers that promote or wait. A std Mutex: held for a
/// few instructions, never across an await.
#[derive(Debug, Default)]
struct Pending {
    /// The batch to serve after the current one, once fetched.
    next: Option<Arc<Batch>>,
    /// The largest id accepted into a batch so far (0 before the first: ids are positive).
    /// Fetched ids at or below it are discarded.
    floor: i64,
    /// Set when the last refill was refused (4xx); waiting callers return it. Cleared when a
    /// new refill starts.
    refused: Option<Error>,
    /// The last server failure of the refills, for `Unavailable`; cleared by a success.
    last_fault: Option<ServerFault>,
    /// Ids of the batches served before the current one (each was exhausted when the next
    /// was promoted, so all of its ids were handed out).
    served_before: u64,
}

/// Counters, Relaxed: statistics only, nothing is decided on them.
#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    ids_received: AtomicU64,
    discarded_ids: AtomicU64,
    failed_rounds: AtomicU64,
    failovers: AtomicU64,
}

/// A snapshot of a supply's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SupplyStats {
    /// Ids handed to callers (`next_id` and `try_next_id` answers).
    pub ids_served: u64,
    /// Batches accepted (at least one id above the floor).
    pub batches: u64,
    /// Ids received in 200 bodies, discarded ones included.
    pub ids_received: u64,
    /// Ids received but never handed out because they were not above the floor (a server
    /// behind the one used before, after a failover).
    pub discarded_ids: u64,
    /// Fetch rounds in which no server delivered a batch.
    pub failed_rounds: u64,
    /// Requests sent to another server because the one asked before failed (no answer, a 5xx,
    /// a 4xx of that server only, an invalid body).
    pub failovers: u64,
}

impl std::ops::AddAssign for SupplyStats {
    /// Sums two supplies' counters (a client's total).
    fn add_assign(&mut self, o: Self) {
        self.ids_served += o.ids_served;
        self.batches += o.batches;
        self.ids_received += o.ids_received;
        self.discarded_ids += o.discarded_ids;
        self.failed_rounds += o.failed_rounds;
        self.failovers += o.failovers;
    }
}

/// One id stream.
#[derive(Debug)]
pub(crate) struct Supply {
    /// The batch being served. Replaced only by a promotion, under the `pending` lock, and only
    /// once exhausted.
    current: ArcSwap<Batch>,
    /// The next batch, the floor, the refill's outcome.
    pending: Mutex<Pending>,
    /// True while one refill task runs (single-flight). Acquire on taking it / Release on
    /// giving it back, so a refill sees what the previous one wrote (the rest is under `pending`
    /// anyway: this only keeps two fetches from running at once).
    refilling: AtomicBool,
    /// Woken (`notify_waiters`) when a refill ends, successful or not.
    notify: Notify,
    /// How long `next_id` waits for a batch when the current one is spent.
    wait_timeout: Duration,
    /// Where batches come from.
    source: Source,
    /// Cancelled when the client and all its handles are gone: a running refill stops.
    stop: CancellationToken,
    /// Statistics.
    counters: Counters,
}

impl Supply {
    pub(crate) fn remote(
        servers: Arc<Servers>,
        request: Request,
        timing: Timing,
        runtime: tokio::runtime::Handle,
        wait_timeout: Duration,
        stop: CancellationToken,
    ) -> Self {
        Self::with(
            Vec::new(),
            Source::Remote {
                servers,
                request,
                timing,
                runtime,
            },
            wait_timeout,
            stop,
        )
    }

    /// A supply of exactly `ids` (strictly increasing), which never fetches.
    pub(crate) fn fixed(ids: Vec<i64>) -> Self {
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        Self::with(ids, Source::Fixed, Duration::ZERO, CancellationToken::new())
    }

    fn with(
        ids: Vec<i64>,
        source: Source,
        wait_timeout: Duration,
        stop: CancellationToken,
    ) -> Self {
        let floor = ids.last().copied().unwrap_or(0);
        Self {
            current: ArcSwap::from_pointee(Batch::new(ids)),
            pending: Mutex::new(Pending {
                floor,
                ..Pending::default()
            }),
            refilling: AtomicBool::new(false),
            notify: Notify::new(),
            wait_timeout,
            source,
            stop,
            counters: Counters::default(),
        }
    }

    /// The fast path: an id of the current batch, or `None` when it is spent.
    pub(crate) fn try_next_id(self: &Arc<Self>) -> Option<i64> {
        let batch = self.current.load();
        let i = batch.taken.fetch_add(1, Ordering::Relaxed);
        let id = *batch.ids.get(i)?;
        if i == batch.preload_at {
            self.start_refill();
        }
        Some(id)
    }

    /// The next id: the fast path, else promote the next batch or wait for the refill.
    pub(crate) async fn next_id(self: &Arc<Self>) -> Result<i64, Error> {
        match self.try_next_id() {
            Some(id) => Ok(id),
            None => self.next_id_slow().await,
        }
    }

    async fn next_id_slow(self: &Arc<Self>) -> Result<i64, Error> {
        let started = Instant::now();
        let deadline = started + self.wait_timeout;
        // A refusal counts only from a refill this call waited for, not one from before.
        let mut waited = false;
        loop {
            // Registered before the checks below, so a refill ending between a check and the
            // await still wakes this caller.
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(id) = self.try_next_id() {
                return Ok(id);
            }
            {
                let mut p = self.lock_pending();
                // Promote only over an exhausted batch: the one just found spent, unless another
                // caller promoted already (then retry the fast path on the new one).
                if !self.current.load().is_exhausted() {
                    continue;
                }
                if let Some(next) = p.next.take() {
                    p.served_before += self.current.load().ids.len() as u64;
                    self.current.store(next);
                    continue;
                }
                if let (true, Some(e)) = (waited, &p.refused) {
                    return Err(e.clone());
                }
            }
            self.start_refill();
            waited = true;
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(Error::Unavailable {
                    waited: started.elapsed(),
                    last: self.lock_pending().last_fault.clone(),
                });
            }
        }
    }

    /// Starts the refill task unless one runs or the next batch is already there.
    fn start_refill(self: &Arc<Self>) {
        let Source::Remote { runtime, .. } = &self.source else {
            return;
        };
        if self.refilling.swap(true, Ordering::Acquire) {
            return;
        }
        {
            let mut p = self.lock_pending();
            if p.next.is_some() {
                drop(p);
                self.refilling.store(false, Ordering::Release);
                return;
            }
            p.refused = None;
        }
        let this = self.clone();
        runtime.spawn(async move { this.refill().await });
    }

    /// Fetches one batch above the floor into `next`, retrying failed rounds with backoff
    /// for at most the wait timeout (then the next caller that needs a batch starts another).
    async fn refill(self: Arc<Self>) {
        let Source::Remote {
            servers,
            request,
            timing,
            ..
        } = &self.source
        else {
            unreachable!("only remote supplies refill")
        };
        let deadline = Instant::now() + self.wait_timeout;
        let mut failures = 0;
        let mut filled = false;
        // The batch size, or more while catching up (below).
        let mut catching_up: Option<Request> = None;
        while !self.stop.is_cancelled() {
            let asked = catching_up.as_ref().unwrap_or(request);
            let floor = self.lock_pending().floor;
            let wait = match servers.fetch(asked, floor, &self.counters.failovers).await {
                Ok(fetched) => {
                    let mut p = self.lock_pending();
                    let last = match fetched {
                        Fetched::Ids(mut ids) => {
                            self.counters
                                .ids_received
                                .fetch_add(ids.len() as u64, Ordering::Relaxed);
                            let last = *ids.last().expect("a batch has at least one id");
                            // Ids are strictly increasing: the ones at or below the floor are a
                            // prefix.
                            let cut = ids.partition_point(|&id| id <= p.floor);
                            if cut > 0 {
                                self.counters
                                    .discarded_ids
                                    .fetch_add(cut as u64, Ordering::Relaxed);
                                ids.drain(..cut);
                            }
                            if let Some(&top) = ids.last() {
                                p.floor = top;
                                p.next = Some(Arc::new(Batch::new(ids)));
                                p.last_fault = None;
                                self.counters.batches.fetch_add(1, Ordering::Relaxed);
                                filled = true;
                                break;
                            }
                            last
                        }
                        // Its tail showed it wholly at or below the floor: discarded unparsed.
                        Fetched::Behind(b) => {
                            self.counters
                                .ids_received
                                .fetch_add(b.ids, Ordering::Relaxed);
                            self.counters
                                .discarded_ids
                                .fetch_add(b.ids, Ordering::Relaxed);
                            b.last
                        }
                    };
                    // Nothing above the floor: that server is behind the one used before (its
                    // segment is lower, or its snowflake ring still holds ids of older ticks):
                    // the catch-up (`catch_up_count`). The deadline below still bounds the loop.
                    catching_up =
                        Some(request.with_count(catch_up_count(p.floor, last, request.count)));
                    Duration::ZERO
                }
                Err(FetchError::Rejected(e)) => {
                    self.lock_pending().refused = Some(e);
                    break;
                }
                Err(FetchError::Unavailable(fault)) => {
                    self.counters.failed_rounds.fetch_add(1, Ordering::Relaxed);
                    self.lock_pending().last_fault = fault;
                    failures += 1;
                    backoff(timing, failures)
                }
            };
            let wake = Instant::now() + wait;
            if wake >= deadline {
                break;
            }
            if wait.is_zero() {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::select! {
                () = self.stop.cancelled() => break,
                () = tokio::time::sleep_until(wake) => {}
            }
        }
        self.refilling.store(false, Ordering::Release);
        self.notify.notify_waiters();
        // A caller may have passed the preload mark of a batch promoted while this task still
        // held the flag: its start_refill was then a no-op, so start the next one here.
        if filled && self.wants_next() {
            self.start_refill();
        }
    }

    /// No next batch, and the current one is past its preload mark.
    fn wants_next(&self) -> bool {
        let p = self.lock_pending();
        let cur = self.current.load();
        p.next.is_none() && cur.taken.load(Ordering::Relaxed) > cur.preload_at
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> SupplyStats {
        let c = &self.counters;
        // Under the lock: a promotion (which adds to `served_before`) cannot run in between.
        let ids_served = {
            let p = self.lock_pending();
            let cur = self.current.load();
            let taken = cur.taken.load(Ordering::Relaxed).min(cur.ids.len());
            p.served_before + taken as u64
        };
        SupplyStats {
            ids_served,
            failovers: c.failovers.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            ids_received: c.ids_received.load(Ordering::Relaxed),
            discarded_ids: c.discarded_ids.load(Ordering::Relaxed),
            failed_rounds: c.failed_rounds.load(Ordering::Relaxed),
        }
    }
}

/// The catch-up rule: after an answer lying wholly at or below the floor (its server is behind
/// the one used before: a lower segment of a lagging or restored database, or snowflake ids of
/// older ticks), the next request follows at once, without a pause, and asks for enough ids to
/// pass the floor: those from the answer's `last` id up to the floor, plus a `batch`, within
/// `batch..=MAX_BATCH` (the server's limit). A segment server's next ids follow its last ones,
/// so a gap within one request is passed in one step; a larger one takes one `MAX_BATCH`
/// request per 100,000 ids, each discarded (counted in `discarded_ids`) after reading only its
/// tail ([`behind_tail`](crate::servers::behind_tail)).
fn catch_up_count(floor: i64, last: i64, batch: usize) -> usize {
    // floor >= last > 0: no overflow.
    let gap = usize::try_from(floor - last).unwrap_or(MAX_BATCH);
    gap.saturating_add(batch).clamp(batch, MAX_BATCH.max(batch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catch_up_asks_past_the_floor_in_one_request_within_the_server_limit() {
        // Answer ended at 500, floor 1000, batch 100: 500 ids to reach the floor, then a batch.
        assert_eq!(catch_up_count(1000, 500, 100), 600);
        assert_eq!(catch_up_count(1000, 1000, 100), 100);
        assert_eq!(catch_up_count(6_000_000, 1_000_000, 100), MAX_BATCH);
        assert_eq!(catch_up_count(i64::MAX, 1, 100), MAX_BATCH);
        assert_eq!(catch_up_count(10, 5, MAX_BATCH), MAX_BATCH);
    }

    #[tokio::test]
    async fn a_fixed_supply_hands_out_its_ids_once_then_fails() {
        let s = Arc::new(Supply::fixed(vec![3, 4, 9]));
        assert_eq!(s.try_next_id(), Some(3));
        assert_eq!(s.next_id().await.unwrap(), 4);
        assert_eq!(s.next_id().await.unwrap(), 9);
        assert!(matches!(
            s.next_id().await,
            Err(Error::Unavailable { last: None, .. })
        ));
        assert_eq!(s.try_next_id(), None);
        assert_eq!(s.stats().ids_served, 3, "the failed calls served nothing");
    }

    #[test]
    fn concurrent_takers_split_a_batch_without_overlap() {
        let n = 100_000;
        let s = Arc::new(Supply::fixed((1..=n).collect()));
        let mut all: Vec<i64> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        while let Some(id) = s.try_next_id() {
                            mine.push(id);
                        }
                        assert!(mine.windows(2).all(|w| w[0] < w[1]));
                        mine
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        all.sort_unstable();
        assert_eq!(all, (1..=n).collect::<Vec<_>>());
    }
}
