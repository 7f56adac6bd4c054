//! `Supply`: one local id stream (a segment tag, or snowflake), double-buffered like the
//! server's `SegmentBuffer`, holding ranges (runs of consecutive ids), never lists of ids.
//!
//! A supply holds the *current* batch (the runs of one 200 answer) and at most one *next*
//! batch. The run in use is installed in a [`Cursor`]: `next_id` is one `fetch_add` and one
//! compare there (see `local.rs` for the orderings). When the run is spent, the first caller
//! to see it takes the supply's lock and installs the next run of the current batch, or
//! promotes the next batch; callers that find nothing wait for the refill (bounded by the wait
//! timeout). The first batch's runs are split at 10% of its ids: installing the piece that
//! starts there starts the single-flight refill, as the server preloads at 10%.
//!
//! # Invariants
//!
//! - **No id twice.** The cursor gives each `(generation, ticket)` to one caller; each
//!   generation is one installed run; runs are installed once each (popped from the queue under
//!   the lock) and the runs of a supply are disjoint: each accepted run holds only ids above
//!   every id accepted before it (the *floor*, below).
//! - **Only received ids.** A run comes only from a 200 body that passed validation
//!   (`servers::validate`), cut at the floor; nothing is extrapolated.
//! - **Increasing per supply.** If one `next_id` call returns before another starts, the
//!   second id is larger: its `fetch_add` is later in the cursor's modification order, so it
//!   has a larger ticket of the same run or a later run, and runs are installed in increasing
//!   order (the queue holds the current batch's runs in order, then the next batch's, whose ids
//!   all lie above the floor of when it was accepted). A caller that took a valid ticket of a
//!   run whose slot was reused before it read it gets that ticket's id from `history`, or,
//!   past it, counts the ticket in `lost` (a gap, never handed out) and takes a later one.
//!
//! # The floor, and failover
//!
//! The servers of one database lease disjoint id ranges, but ranges leased by *different*
//! servers are not ordered relative to what this client already received: after a failover
//! the new server may still be serving a segment below the old server's. Such ids are unique,
//! yet handing them out would break "increasing". So every fetched batch is cut to the ids
//! above the floor (the largest id accepted so far for this supply); the ids cut are counted in
//! [`SupplyStats::discarded_ids`] and never handed out. An answer cut to nothing is followed at
//! once by a catch-up request (`catch_up_count`).
//!
//! # Strict tags: pass-through
//!
//! A strict tag's ids (issue 45) are in real-time order across servers: every id is greater
//! than every id whose answer was complete before its request was sent. A local buffer would
//! break that between two client processes (P1 holds 100..150 and hands out 100; P2 gets 200;
//! P1 then hands out 101 to a call that began after P2's answer). So the first answer with
//! `"strict": true` turns the supply to pass-through for good (`go_strict`): the ids it holds
//! and that answer's (they may have been fetched before some waiting call began) are dropped
//! and counted in `discarded_ids`; the cursor is retired (every take is `Spent`); no refill
//! starts again (`start_refill`); each later `next_id` sends its own request for one id
//! (`pass_through`), and `try_next_id` finds nothing. Safe: the id a call returns was issued
//! after the call began, so the server's order covers it; dropping ids never breaks a rule.
//! As a second line, a call refuses (discards, and asks again) an id at or below the floor it
//! read before sending: every id accepted before was complete before its request was sent, so
//! a correct server never answers one, and one that did (an older server) never reaches a
//! caller.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Fault, ServerFault};
use crate::local::{Cursor, Take};
use crate::servers::{FetchError, Ranges, Request, Run, Servers, Timing, backoff};
use crate::sizing::{Sizing, Usage};

/// Generations remembered for callers whose slot was reused before they read it.
const HISTORY: usize = 256;

/// A part of a run, as installed in the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    first: i64,
    len: u64,
    /// Installing it starts the refill: it begins at 10% of its batch.
    preload: bool,
}

/// One accepted batch, not current yet.
#[derive(Debug)]
struct Batch {
    pieces: VecDeque<Piece>,
    /// Its ids.
    size: u64,
}

impl Batch {
    /// The runs (increasing, disjoint, at least one id), split where 10% of the ids are used.
    fn new(runs: &[Run]) -> Self {
        let size: u64 = runs.iter().map(Run::len).sum();
        let mark = size / 10;
        let mut pieces = VecDeque::with_capacity(runs.len() + 1);
        let mut at = 0;
        for r in runs {
            let len = r.len();
            if (at..at + len).contains(&mark) && mark > at {
                let head = mark - at;
                pieces.push_back(Piece {
                    first: r.first,
                    len: head,
                    preload: false,
                });
                pieces.push_back(Piece {
                    first: r.first + head as i64,
                    len: len - head,
                    preload: true,
                });
            } else {
                pieces.push_back(Piece {
                    first: r.first,
                    len,
                    preload: at == mark,
                });
            }
            at += len;
        }
        Self { pieces, size }
    }
}

/// The batch being served, for the sizing rule.
#[derive(Debug, Clone, Copy)]
struct Current {
    size: u64,
    since: Instant,
    /// `served_before` when it became current.
    base: u64,
}

/// Where batches come from.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per supply: boxing would only add a pointer chase
enum Source {
    /// The servers, with this request.
    Remote {
        /// Failover and health.
        servers: Arc<Servers>,
        /// The batch request (segment or snowflake route) at the starting size.
        request: Request,
        /// The batch rule.
        sizing: Sizing,
        /// Backoff between two failed fetch rounds of one refill.
        timing: Timing,
        /// Runs the refill tasks (captured at build time, so `try_next_id` may run on any
        /// thread).
        runtime: tokio::runtime::Handle,
    },
    /// Nothing: the runs given at construction only (benches and tests).
    Fixed,
}

/// State shared by the refill and the callers that switch runs or wait. A std Mutex: held
/// for a few instructions, never across an await.
#[derive(Debug, Default)]
struct Pending {
    /// Pieces of the current batch not installed yet, in order.
    rest: VecDeque<Piece>,
    /// The batch to serve after the current one, once fetched.
    next: Option<Batch>,
    /// The largest id accepted into a batch so far (0 before the first: ids are positive).
    floor: i64,
    /// Set when the last refill was refused (4xx); waiting callers return it. Cleared when a
    /// new refill starts.
    refused: Option<Error>,
    /// The last server failure of the refills (a lagging server's answer included), for
    /// `Unavailable`; cleared by a success.
    last_fault: Option<ServerFault>,
    /// Ids of the pieces switched out (each spent: all of its tickets were taken).
    served_before: u64,
    /// Length of the piece in the cursor; 0 once counted in `served_before`.
    installed_len: u64,
    /// Recent generations, oldest first: `(generation, base)` (see `local::base_of`).
    history: VecDeque<(u64, i64)>,
    /// Valid tickets whose generation had left the history when their taker read it: a gap
    /// (counted in `served_before`, never handed out).
    lost: u64,
    /// The batch being served.
    current: Option<Current>,
    /// The size of the next request (the batch rule), 0 for a fixed supply.
    size: usize,
    /// A caller waited because both batches were spent: the next request doubles.
    starved: bool,
    /// A preload piece was installed: a refill is due even if one was running then.
    wants_refill: bool,
    /// Pass-through (a strict tag, see the module doc): no local batch, one request per id.
    /// Set for good by `go_strict`.
    strict: bool,
}

impl Pending {
    /// The id of a take whose slot was reused: its generation's run from the history.
    fn recover(&self, generation: u64, ticket: u64) -> Option<i64> {
        self.history
            .iter()
            .rev()
            .find(|h| h.0 == generation)
            .map(|&(_, base)| base + ticket as i64)
    }
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
    /// The ids the supply asks for in its next request (it follows demand between the
    /// builder's `batch` and `max_batch`). Summed stats hold the largest of any supply.
    pub batch_size: u64,
}

impl std::ops::AddAssign for SupplyStats {
    /// Sums two supplies' counters (a client's total); `batch_size` is the larger one.
    fn add_assign(&mut self, o: Self) {
        self.ids_served += o.ids_served;
        self.batches += o.batches;
        self.ids_received += o.ids_received;
        self.discarded_ids += o.discarded_ids;
        self.failed_rounds += o.failed_rounds;
        self.failovers += o.failovers;
        self.batch_size = self.batch_size.max(o.batch_size);
    }
}

/// What a switch under the lock did.
enum Advance {
    /// A run is installed (a new one, or the one in use was not spent): take again. `true`:
    /// it was the preload piece, start the refill.
    Ready(bool),
    /// Nothing left locally.
    Empty,
}

/// One id stream.
#[derive(Debug)]
pub(crate) struct Supply {
    /// The run in use: the hot path.
    cursor: Cursor,
    /// The runs to come, the next batch, the floor, the refill's outcome.
    pending: Mutex<Pending>,
    /// True while one refill task runs (single-flight). Acquire on taking it / Release on
    /// giving it back (the rest is under `pending`: this only keeps two fetches apart).
    refilling: AtomicBool,
    /// Woken (`notify_waiters`) when a refill ends, successful or not.
    notify: Notify,
    /// How long `next_id` waits for a batch when the local ones are spent.
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
        sizing: Sizing,
        timing: Timing,
        runtime: tokio::runtime::Handle,
        wait_timeout: Duration,
        stop: CancellationToken,
    ) -> Self {
        let size = sizing.min;
        let s = Self::with(
            Source::Remote {
                servers,
                request,
                sizing,
                timing,
                runtime,
            },
            wait_timeout,
            stop,
        );
        s.lock_pending().size = size;
        s
    }

    /// A supply of exactly `runs` (increasing, disjoint, positive), which never fetches.
    pub(crate) fn fixed(runs: &[Run]) -> Self {
        let s = Self::with(Source::Fixed, Duration::ZERO, CancellationToken::new());
        if !runs.is_empty() {
            let mut p = s.lock_pending();
            let mut batch = Batch::new(runs);
            batch.pieces.iter_mut().for_each(|p| p.preload = false);
            p.floor = runs.last().map_or(0, |r| r.last);
            p.next = Some(batch);
            s.advance(&mut p);
        }
        s
    }

    fn with(source: Source, wait_timeout: Duration, stop: CancellationToken) -> Self {
        Self {
            cursor: Cursor::new(),
            pending: Mutex::new(Pending::default()),
            refilling: AtomicBool::new(false),
            notify: Notify::new(),
            wait_timeout,
            source,
            stop,
            counters: Counters::default(),
        }
    }

    /// An id without waiting: the hot path, else the next run under the lock; `None` when
    /// both local batches are spent (a refill is then started if none runs).
    #[inline]
    pub(crate) fn try_next_id(self: &Arc<Self>) -> Option<i64> {
        match self.cursor.take() {
            Take::Id(id) => Some(id),
            other => {
                let id = self.take_slow(other);
                if id.is_none() {
                    self.start_refill();
                }
                id
            }
        }
    }

    /// An id from the local batches, without starting a refill when they are spent.
    fn take_local(self: &Arc<Self>) -> Option<i64> {
        match self.cursor.take() {
            Take::Id(id) => Some(id),
            other => self.take_slow(other),
        }
    }

    /// After a take that did not get an id: recover a stale take, or switch to the next run
    /// and take again.
    #[cold]
    fn take_slow(self: &Arc<Self>, mut take: Take) -> Option<i64> {
        loop {
            let preload = {
                let mut p = self.lock_pending();
                if let Take::Stale { generation, ticket } = take {
                    match p.recover(generation, ticket) {
                        Some(id) => return Some(id),
                        None => p.lost += 1,
                    }
                }
                match self.advance(&mut p) {
                    Advance::Ready(preload) => preload,
                    Advance::Empty => return None,
                }
            };
            if preload {
                self.start_refill();
            }
            take = self.cursor.take();
            if let Take::Id(id) = take {
                return Some(id);
            }
        }
    }

    /// Under the lock: if the run in use is spent, install the next piece of the current
    /// batch, or promote the next batch.
    fn advance(&self, p: &mut Pending) -> Advance {
        if self.cursor.taken(p.installed_len) < p.installed_len {
            // Not spent: another caller switched since this one's take.
            return Advance::Ready(false);
        }
        // Spent: every ticket of it was taken (tickets only grow), none will be again.
        p.served_before += p.installed_len;
        p.installed_len = 0;
        let piece = match p.rest.pop_front() {
            Some(piece) => piece,
            None => {
                let Some(batch) = p.next.take() else {
                    return Advance::Empty;
                };
                p.current = Some(Current {
                    size: batch.size,
                    since: Instant::now(),
                    base: p.served_before,
                });
                p.rest = batch.pieces;
                p.rest.pop_front().expect("a batch has at least one piece")
            }
        };
        let generation = self.cursor.switch(piece.first, piece.len);
        p.installed_len = piece.len;
        if p.history.len() == HISTORY {
            p.history.pop_front();
        }
        p.history
            .push_back((generation, crate::local::base_of(piece.first, piece.len)));
        if piece.preload {
            p.wants_refill = true;
        }
        Advance::Ready(piece.preload)
    }

    /// The next id: the local path, else the next run, else wait for the refill.
    pub(crate) async fn next_id(self: &Arc<Self>) -> Result<i64, Error> {
        match self.cursor.take() {
            Take::Id(id) => Ok(id),
            other => match self.take_slow(other) {
                Some(id) => Ok(id),
                None => self.wait_for_batch().await,
            },
        }
    }

    #[cold]
    async fn wait_for_batch(self: &Arc<Self>) -> Result<i64, Error> {
        let deadline = Instant::now() + self.wait_timeout;
        // A refusal counts only from a refill this call waited for, not one from before.
        let mut waited = false;
        loop {
            // Registered before the checks below, so a refill ending between a check and the
            // await still wakes this caller.
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(id) = self.take_local() {
                return Ok(id);
            }
            let strict_floor = {
                let p = self.lock_pending();
                p.strict.then_some(p.floor)
            };
            if let Some(floor) = strict_floor {
                // Pass-through: this call's own request, sent after the call began.
                return self.pass_through(floor, deadline).await;
            }
            {
                let mut p = self.lock_pending();
                if let (true, Some(e)) = (waited, &p.refused) {
                    return Err(e.clone());
                }
                if !waited && p.current.is_some() {
                    // Both batches spent and a caller waits: the next request doubles. (A supply
                    // that never had a batch is cold, not starved: it starts at `batch`.)
                    p.starved = true;
                }
            }
            self.start_refill();
            waited = true;
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return match self.take_local() {
                    Some(id) => Ok(id),
                    None => Err(Error::Unavailable {
                        waited: self.wait_timeout,
                        last: self.lock_pending().last_fault.clone(),
                    }),
                };
            }
        }
    }

    /// A strict supply's call: one request for one id, sent now (after the call began),
    /// through the usual server order and failover; a refusal reaches the caller; failed
    /// rounds are retried with backoff until `deadline`. The id is handed out only when above
    /// `floor`, the floor read before the request was sent (see the module doc).
    async fn pass_through(self: &Arc<Self>, floor: i64, deadline: Instant) -> Result<i64, Error> {
        let Source::Remote {
            servers,
            request,
            timing,
            ..
        } = &self.source
        else {
            unreachable!("only a remote supply turns strict")
        };
        let one = request.with_count(1);
        let mut failures = 0;
        loop {
            let wait = match servers
                .fetch::<Ranges>(&one, &self.counters.failovers)
                .await
            {
                Ok((answer, server)) => {
                    let received: u64 = answer.runs.iter().map(Run::len).sum();
                    let c = &self.counters;
                    c.ids_received.fetch_add(received, Ordering::Relaxed);
                    c.batches.fetch_add(1, Ordering::Relaxed);
                    let id = answer.runs[0].first;
                    let mut p = self.lock_pending();
                    if id > floor {
                        // One call, one id: any further id of the answer (never more than
                        // asked) is dropped.
                        c.discarded_ids.fetch_add(received - 1, Ordering::Relaxed);
                        p.floor = p.floor.max(id);
                        p.served_before += 1;
                        p.last_fault = None;
                        return Ok(id);
                    }
                    c.discarded_ids.fetch_add(received, Ordering::Relaxed);
                    p.last_fault = Some(ServerFault {
                        server: server.to_owned(),
                        fault: Fault::Behind { last: id, floor },
                    });
                    Duration::ZERO
                }
                Err(FetchError::Rejected(e)) => return Err(e),
                Err(FetchError::Unavailable(fault)) => {
                    self.counters.failed_rounds.fetch_add(1, Ordering::Relaxed);
                    self.lock_pending().last_fault = fault;
                    failures += 1;
                    backoff(timing, failures)
                }
            };
            let unavailable = || Error::Unavailable {
                waited: self.wait_timeout,
                last: self.lock_pending().last_fault.clone(),
            };
            let wake = Instant::now() + wait;
            if wake >= deadline {
                return Err(unavailable());
            }
            if !wait.is_zero() {
                tokio::select! {
                    () = self.stop.cancelled() => return Err(unavailable()),
                    () = tokio::time::sleep_until(wake) => {}
                }
            }
        }
    }

    /// Under the lock: turns the supply to pass-through for good after an answer of
    /// `received` ids up to `last` marked strict. Its ids and every id held locally are
    /// dropped (counted in `discarded_ids`: never handed out, never reused by a server); the
    /// cursor is retired, so every later take is `Spent` and the slow path sees `strict`; the
    /// floor rises to `last`.
    fn go_strict(&self, p: &mut Pending, received: u64, last: i64) {
        let taken = self.cursor.retire(p.installed_len);
        let mut held = p.installed_len - taken;
        held += p.rest.iter().map(|piece| piece.len).sum::<u64>();
        if let Some(next) = p.next.take() {
            held += next.size;
        }
        p.served_before += taken;
        p.installed_len = 0;
        p.rest.clear();
        p.current = None;
        p.floor = p.floor.max(last);
        p.strict = true;
        self.counters
            .discarded_ids
            .fetch_add(received + held, Ordering::Relaxed);
    }

    /// Starts the refill task unless one runs, the next batch is already there, or the supply
    /// is strict (no id is fetched ahead of its call).
    fn start_refill(self: &Arc<Self>) {
        let Source::Remote { runtime, .. } = &self.source else {
            return;
        };
        if self.refilling.swap(true, Ordering::Acquire) {
            return;
        }
        {
            let mut p = self.lock_pending();
            if p.next.is_some() || p.strict {
                drop(p);
                self.refilling.store(false, Ordering::Release);
                return;
            }
            p.refused = None;
            p.wants_refill = false;
        }
        let this = self.clone();
        runtime.spawn(async move { this.refill().await });
    }

    /// The batch in use, for the sizing rule.
    fn usage(&self, p: &Pending) -> Option<Usage> {
        let c = p.current?;
        let served = p.served_before + self.cursor.taken(p.installed_len);
        Some(Usage {
            size: c.size,
            used: served.saturating_sub(c.base),
            elapsed: c.since.elapsed(),
        })
    }

    /// Fetches one batch above the floor into `next`, retrying failed rounds with backoff
    /// for at most the wait timeout (then the next caller that needs a batch starts another).
    async fn refill(self: Arc<Self>) {
        let Source::Remote {
            servers,
            request,
            sizing,
            timing,
            ..
        } = &self.source
        else {
            unreachable!("only remote supplies refill")
        };
        let deadline = Instant::now() + self.wait_timeout;
        let mut failures = 0;
        let mut filled = false;
        // The batch rule decides the size once per refill; a catch-up asks more (below)
        // without changing it.
        let sized = {
            let mut p = self.lock_pending();
            let size = sizing.next(p.size, self.usage(&p), p.starved);
            p.size = size;
            p.starved = false;
            request.with_count(size)
        };
        let mut asked = sized.clone();
        while !self.stop.is_cancelled() {
            let wait = match servers
                .fetch::<Ranges>(&asked, &self.counters.failovers)
                .await
            {
                Ok((answer, server)) => {
                    let runs = answer.runs;
                    let mut p = self.lock_pending();
                    let received: u64 = runs.iter().map(Run::len).sum();
                    self.counters
                        .ids_received
                        .fetch_add(received, Ordering::Relaxed);
                    let last = runs.last().expect("a valid body has a run").last;
                    if answer.strict {
                        self.go_strict(&mut p, received, last);
                        break;
                    }
                    let (kept, discarded) = cut(runs, p.floor);
                    self.counters
                        .discarded_ids
                        .fetch_add(discarded, Ordering::Relaxed);
                    if let Some(top) = kept.last() {
                        p.floor = top.last;
                        p.next = Some(Batch::new(&kept));
                        p.last_fault = None;
                        self.counters.batches.fetch_add(1, Ordering::Relaxed);
                        filled = true;
                        break;
                    }
                    // Nothing above the floor: that server is behind the one used before (its
                    // segment is lower, or its snowflake clock is): the catch-up. The deadline
                    // below still bounds the loop.
                    p.last_fault = Some(ServerFault {
                        server: server.to_owned(),
                        fault: Fault::Behind {
                            last,
                            floor: p.floor,
                        },
                    });
                    asked =
                        sized.with_count(catch_up_count(p.floor, last, sized.count, sized.limit));
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
        // A preload piece installed while this task still held the flag found start_refill a
        // no-op: start the next one here.
        if filled && self.lock_pending().wants_refill {
            self.start_refill();
        }
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> SupplyStats {
        let c = &self.counters;
        // Under the lock: a switch (which adds to `served_before`) cannot run in between.
        let (ids_served, batch_size) = {
            let p = self.lock_pending();
            let taken = p.served_before + self.cursor.taken(p.installed_len);
            (taken.saturating_sub(p.lost), p.size as u64)
        };
        SupplyStats {
            ids_served,
            failovers: c.failovers.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            ids_received: c.ids_received.load(Ordering::Relaxed),
            discarded_ids: c.discarded_ids.load(Ordering::Relaxed),
            failed_rounds: c.failed_rounds.load(Ordering::Relaxed),
            batch_size,
        }
    }
}

/// The runs above `floor` (a run across it is trimmed), and how many ids were cut.
fn cut(runs: Vec<Run>, floor: i64) -> (Vec<Run>, u64) {
    let mut discarded = 0;
    let mut kept = Vec::with_capacity(runs.len());
    for mut r in runs {
        if r.last <= floor {
            discarded += r.len();
            continue;
        }
        if r.first <= floor {
            discarded += (floor - r.first) as u64 + 1;
            r.first = floor + 1;
        }
        kept.push(r);
    }
    (kept, discarded)
}

/// The catch-up rule: after an answer lying wholly at or below the floor (its server is behind
/// the one used before: a lower segment of a lagging or restored database, or snowflake ids of
/// older ticks), the next request follows at once, without a pause, and asks for enough ids to
/// pass the floor: those from the answer's `last` id up to the floor, plus the current size,
/// within `size..=limit` (the route's limit per request). A segment server's next ids follow
/// its last ones, so a gap within one request is passed in one step; a larger one takes one
/// request of `limit` ids per `limit` ids of gap.
pub(crate) fn catch_up_count(floor: i64, last: i64, size: usize, limit: usize) -> usize {
    // floor >= last > 0: no overflow.
    let gap = usize::try_from(floor - last).unwrap_or(limit);
    gap.saturating_add(size).clamp(size.min(limit), limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: i64, last: i64) -> Run {
        Run { first, last }
    }

    #[test]
    fn the_catch_up_asks_past_the_floor_in_one_request_within_the_route_limit() {
        // Answer ended at 500, floor 1000, size 100: 500 ids to reach the floor, then a batch.
        assert_eq!(catch_up_count(1000, 500, 100, 1_000_000), 600);
        assert_eq!(catch_up_count(1000, 1000, 100, 1_000_000), 100);
        assert_eq!(
            catch_up_count(6_000_000, 1_000_000, 100, 1_000_000),
            1_000_000
        );
        assert_eq!(catch_up_count(6_000_000, 1_000_000, 100, 100_000), 100_000);
        assert_eq!(catch_up_count(i64::MAX, 1, 100, 1_000_000), 1_000_000);
    }

    #[test]
    fn runs_at_or_below_the_floor_are_cut_and_counted() {
        let runs = vec![run(1, 5), run(8, 12), run(20, 20)];
        assert_eq!(cut(runs.clone(), 0), (runs.clone(), 0));
        assert_eq!(cut(runs.clone(), 5), (vec![run(8, 12), run(20, 20)], 5));
        assert_eq!(cut(runs.clone(), 9), (vec![run(10, 12), run(20, 20)], 7));
        assert_eq!(cut(runs.clone(), 12), (vec![run(20, 20)], 10));
        assert_eq!(cut(runs, 20), (vec![], 11));
    }

    #[test]
    fn a_batch_is_split_where_a_tenth_of_it_is_used() {
        let pieces = |runs: &[Run]| -> Vec<(i64, u64, bool)> {
            Batch::new(runs)
                .pieces
                .iter()
                .map(|p| (p.first, p.len, p.preload))
                .collect()
        };
        assert_eq!(pieces(&[run(1, 100)]), [(1, 10, false), (11, 90, true)]);
        assert_eq!(
            pieces(&[run(1, 5), run(11, 105)]),
            [(1, 5, false), (11, 5, false), (16, 90, true)]
        );
        assert_eq!(
            pieces(&[run(1, 10), run(21, 110)]),
            [(1, 10, false), (21, 90, true)]
        );
        // Fewer than 10 ids: the refill starts with the batch.
        assert_eq!(pieces(&[run(7, 9)]), [(7, 3, true)]);
    }

    #[tokio::test]
    async fn a_fixed_supply_hands_out_its_ids_once_then_fails() {
        let s = Arc::new(Supply::fixed(&[run(3, 4), run(9, 9)]));
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
    fn a_take_whose_slot_was_reused_gets_its_id_from_the_history() {
        let s = Arc::new(Supply::fixed(
            &(0..40)
                .map(|k| run(10 * k + 1, 10 * k + 1))
                .collect::<Vec<_>>(),
        ));
        // Generation 1 holds id 1; pretend its valid ticket read a reused slot.
        let ticket = crate::local::LIMIT - 1;
        assert_eq!(
            s.take_slow(Take::Stale {
                generation: 1,
                ticket
            }),
            Some(1)
        );
        // A generation past the history: the ticket is lost (a gap, not served), and the
        // caller takes the cursor's next id instead.
        assert_eq!(
            s.take_slow(Take::Stale {
                generation: 1000,
                ticket
            }),
            Some(1)
        );
        assert_eq!(s.lock_pending().lost, 1);
    }

    #[test]
    fn concurrent_takers_split_runs_without_overlap_and_in_order() {
        // Many short runs: the takers switch runs under the lock all the time.
        let runs: Vec<Run> = (0..20_000).map(|k| run(7 * k + 1, 7 * k + 5)).collect();
        let want: Vec<i64> = runs.iter().flat_map(|r| r.first..=r.last).collect();
        let s = Arc::new(Supply::fixed(&runs));
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
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n, "an id handed out twice");
        // Every id is handed out, but for tickets lost by a taker descheduled across the
        // whole history (a gap, counted, not served).
        let lost = s.lock_pending().lost as usize;
        let missing = want
            .iter()
            .filter(|id| all.binary_search(id).is_err())
            .count();
        assert_eq!((all.len() + lost, missing), (want.len(), lost), "ids lost");
        assert_eq!(s.stats().ids_served, all.len() as u64);
    }
}
