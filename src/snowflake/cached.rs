//! The cached generator: ids made ahead of time by a filler thread, handed out from a ring.
//!
//! This is uid-generator's `CachedUidGenerator` done right:
//!
//! - The ring holds `(max_sequence + 1) << boost_power` ids (capped at [`MAX_RING_SLOTS`]),
//!   so by default it holds `2^boost_power` whole ticks.
//! - The filler walks *positions* `(tick << seq_bits) | sequence` upwards from the tick current
//!   at start (or after a stored tick), putting every sequence of a tick before the next tick:
//!   it "borrows future ticks" instead of waiting for them. Unlike the Java original it keeps
//!   its place inside a tick when the ring fills up, so the lead over the clock grows no faster
//!   than ids are used; and each refill first catches up with the clock, so the ids of a server
//!   that was idle are not minutes behind those of a busy one (the Java original lags behind
//!   the clock by however much less than a tick's worth of ids per tick was used).
//! - The lead is bounded: the filler never puts an id whose tick is more than
//!   `max_ahead_ticks` past the clock (default: the ticks that fit in the ring); past that it
//!   sleeps on the clock. It never composes a tick past the layout's time field: it stops and
//!   callers get [`SnowflakeError::TimeBitsExhausted`] once the ring is drained.
//! - Refills are requested when the ring holds fewer than `padding_factor`% of its capacity,
//!   pad the ring to full, happen once at start-up, and optionally every `schedule_interval`.
//!   The request is a single-flight `AtomicBool`; the filler is one `std::thread` parked on a
//!   `Condvar` (not a tokio task: filling is CPU work and must not stall the async runtime,
//!   and a plain thread keeps this module free of any runtime). It stops on
//!   [`CachedGenerator::shutdown`] or drop, which join it.
//!
//! The clock is read only at start, by the filler to enforce the lead bound, and by `stats`.
//!
//! **Clock-back bits.** With a clock-back field in the layout, a filler held at its lead bound
//! by a clock that stepped back more than `max_backward_ms` below the latest reading it saw
//! moves to the next clock-back value (*era*) and fills from the stepped-back clock. Ids of two
//! eras differ in that field, and within an era positions only grow, so no id is made twice;
//! consumers first drain the earlier era's ids still in the ring, so ids are not increasing
//! across the step. After the last era, or for a step to the floor or below it
//! ([`CachedConfig::clock_back_floor_tick`]: a previous holder of the worker id may have used any
//! value up to it), the filler waits for the clock, as without the bits.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::snowflake::clock::Clock;
use crate::snowflake::error::SnowflakeError;
use crate::snowflake::layout::BitLayout;
use crate::snowflake::ring::RingBuffer;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

mod filler;

/// Largest ring, in slots (2^22 slots of 16 bytes = 64 MiB). Layouts with wide sequence
/// fields get this instead of `(max_sequence + 1) << boost_power`; their ticks then do not fit
/// the ring whole, and the filler simply continues a tick on its next pass.
pub const MAX_RING_SLOTS: usize = 1 << 22;

/// The filler waits for the clock in steps of at most this many ms, to notice a shutdown.
const CLOCK_WAIT_STEP_MS: u64 = 20;

/// Wake consumers waiting on an empty ring after this many puts, not only at the end of a pass.
const NOTIFY_EVERY: u64 = 1024;

/// Settings of a [`CachedGenerator`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedConfig {
    /// Ring size is `(max_sequence + 1) << boost_power`, capped at [`MAX_RING_SLOTS`].
    pub boost_power: u8,
    /// Refill when fewer than this percentage of the ring's slots hold ids (1..=99).
    pub padding_factor: u8,
    /// How long [`CachedGenerator::take`] waits for the filler on an empty ring.
    pub max_wait: Duration,
    /// If set, the filler also tops the ring up this often.
    pub schedule_interval: Option<Duration>,
    /// Never issue ids from this tick or earlier (e.g. a lease's stored last timestamp).
    pub start_after_tick: Option<u64>,
    /// Largest lead over the clock, in ticks; default: the whole ticks the ring holds (>= 1).
    pub max_ahead_ticks: Option<u64>,
    /// A clock reading this many ms below the latest one is a backward step (which moves to the
    /// next clock-back value, when the layout has them and the filler is held by it).
    pub max_backward_ms: u64,
    /// A new clock-back value never starts at or below this tick (every tick a previous holder
    /// of the worker id issued, under any value, is at or below it); `start_after_tick` when
    /// `None`.
    pub clock_back_floor_tick: Option<u64>,
}

impl Default for CachedConfig {
    fn default() -> Self {
        Self {
            boost_power: 3,
            padding_factor: 50,
            max_wait: Duration::from_millis(100),
            schedule_interval: None,
            start_after_tick: None,
            max_ahead_ticks: None,
            max_backward_ms: crate::snowflake::direct::DEFAULT_MAX_BACKWARD_MS,
            clock_back_floor_tick: None,
        }
    }
}

/// A snapshot of a cached generator's state, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedStats {
    /// Slots in the ring.
    pub capacity: usize,
    /// Ids ready in the ring.
    pub available: usize,
    /// Tick of the last id put in the ring (store it as a lease's last timestamp), if any.
    pub last_filled_tick: Option<u64>,
    /// How far the last filled tick is ahead of the clock, in ticks (0 if not ahead).
    pub ticks_ahead: u64,
    /// The filler reached the end of the layout's time field.
    pub time_bits_exhausted: bool,
    /// The clock-back value the filler puts ids under (0 until the clock steps back).
    pub clock_back: u64,
    /// Ids taken from the ring since start.
    pub taken: u64,
}

/// State shared by the generator's handle and its filler thread.
struct Shared {
    /// Ids made ahead; the filler is its only producer.
    ring: RingBuffer,
    /// Field widths; `compose` checks every field.
    layout: BitLayout,
    /// `<= layout.max_worker_id()` (checked in `new`).
    worker_id: u64,
    /// The worker field the filler composes with: the worker id under the current era.
    /// Written only by the filler. Relaxed: read only by the filler.
    worker_field: AtomicU64,
    /// The clock-back value (era) ids are put under; only grows, at most `max_era`. Written
    /// only by the filler (Relaxed: `stats` reads it for monitoring).
    era: AtomicU64,
    /// `layout.max_clock_back()`.
    max_era: u64,
    /// Last tick + 1 of every era left behind (0: none); raised before the era's `next_pos`
    /// moves back (Relaxed: the Release store of `next_pos` publishes it).
    high_water: AtomicU64,
    /// The first position of the current era; positions below it were never used in it (in
    /// era 0: the start, after a resumed lease's last tick). Filler-only writer.
    era_start_pos: AtomicU64,
    /// The latest clock reading the filler saw (unix ms); a reading more than
    /// `max_backward_ms` below it is a backward step. Filler-only (and `new`).
    max_seen_ms: crate::sync::AtomicI64,
    /// See [`CachedConfig::max_backward_ms`].
    max_backward_ms: u64,
    /// The first position a new era may start at: past `start_after_tick` (see the module docs).
    floor_pos: u64,
    /// Read at start and by the filler for the lead bound; the filler sleeps on it.
    clock: Arc<dyn Clock>,
    /// `layout.seq_bits()`.
    seq_bits: u32,
    /// `layout.max_sequence()`, the sequence mask of a position.
    seq_mask: u64,
    /// Next position the filler puts, `(tick << seq_bits) | sequence`. Written only by the
    /// filler (or `new`, before the filler exists); only grows, so no id is made twice.
    next_pos: AtomicU64,
    /// Refill when the ring holds fewer ids than this.
    threshold: usize,
    /// The filler puts no id whose tick is more than this many ticks past the clock.
    max_ahead_ticks: u64,
    /// Single-flight refill request: set by consumers (one swap), cleared by the filler
    /// before each pass, so a request made after the clear is served by a later pass.
    fill_requested: AtomicBool,
    /// Set once the next position's tick is past the time field; the ring is not refilled.
    time_exhausted: AtomicBool,
    /// Set by `shutdown`; the filler exits at its next check.
    stopping: AtomicBool,
    /// The filler parks here; consumers notify it after setting `fill_requested`. The mutex
    /// guards no data: it orders "check the flag, then wait" against "set it, then notify".
    filler_wake: (Mutex<()>, Condvar),
    /// Consumers waiting on an empty ring park here; the filler notifies after putting ids.
    /// The filler notifies while holding the mutex, and consumers try the ring while holding it,
    /// so a wake-up cannot be lost.
    ids_ready: (Mutex<()>, Condvar),
    /// Bounded wait of `take` on an empty ring.
    max_wait: Duration,
    /// Scheduled top-up period, if any.
    schedule_interval: Option<Duration>,
}

/// A snowflake generator serving ids from a ring filled ahead of time by its own thread.
pub struct CachedGenerator {
    /// Ring, settings and flags, shared with the filler thread.
    shared: Arc<Shared>,
    /// The filler thread; taken and joined by `shutdown`.
    filler: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for CachedGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedGenerator")
            .field("worker_id", &self.shared.worker_id)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    // The mutexes guard no data, so a panic elsewhere cannot leave anything inconsistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CachedGenerator {
    /// Builds the ring, fills it, and starts the filler thread.
    pub fn new(
        layout: BitLayout,
        worker_id: u64,
        clock: Arc<dyn Clock>,
        config: CachedConfig,
    ) -> Result<Self, SnowflakeError> {
        if worker_id > layout.max_worker_id() {
            return Err(SnowflakeError::WorkerIdTooLarge {
                worker_id,
                max: layout.max_worker_id(),
            });
        }
        if !(1..=99).contains(&config.padding_factor) {
            return Err(SnowflakeError::InvalidConfig(
                "padding_factor must be within 1..=99",
            ));
        }
        if config.max_ahead_ticks == Some(0) {
            return Err(SnowflakeError::InvalidConfig(
                "max_ahead_ticks must be at least 1",
            ));
        }
        let seq_bits = u32::from(layout.seq_bits());
        let tick_size = layout.max_sequence() + 1;
        let capacity = if seq_bits + u32::from(config.boost_power) >= MAX_RING_SLOTS.ilog2() {
            MAX_RING_SLOTS
        } else {
            // At least 2: the ring needs two slots (a 0-bit sequence with boost 0 has one id a tick).
            ((tick_size << config.boost_power) as usize).max(2)
        };
        let max_ahead_ticks = config
            .max_ahead_ticks
            .unwrap_or((capacity as u64 / tick_size).max(1));

        let now_ms = clock.now_unix_ms();
        let now_tick = layout.delta_at(now_ms)?;
        let start_tick = match config.start_after_tick {
            Some(t) => now_tick.max(t.saturating_add(1)),
            None => now_tick,
        };
        if start_tick > now_tick.saturating_add(max_ahead_ticks) {
            // The stored tick is further ahead of our clock than we may borrow.
            let by_ms = layout.tick_start_unix_ms(start_tick - max_ahead_ticks) - now_ms;
            return Err(SnowflakeError::ClockMovedBackwards {
                by_ms: by_ms.max(1) as u64,
            });
        }
        if start_tick > layout.max_time_delta() {
            return Err(SnowflakeError::TimeBitsExhausted);
        }
        let start_pos = start_tick << seq_bits;
        let shared = Arc::new(Shared {
            ring: RingBuffer::new(capacity),
            seq_mask: layout.max_sequence(),
            layout,
            worker_id,
            worker_field: AtomicU64::new(worker_id),
            era: AtomicU64::new(0),
            max_era: layout.max_clock_back(),
            high_water: AtomicU64::new(0),
            era_start_pos: AtomicU64::new(start_pos),
            max_seen_ms: crate::sync::AtomicI64::new(now_ms),
            max_backward_ms: config.max_backward_ms,
            floor_pos: config
                .clock_back_floor_tick
                .or(config.start_after_tick)
                .map_or(0, |t| {
                    t.saturating_add(1).min(layout.max_time_delta() + 1) << seq_bits
                }),
            clock,
            seq_bits,
            next_pos: AtomicU64::new(start_pos),
            threshold: capacity * usize::from(config.padding_factor) / 100,
            max_ahead_ticks,
            fill_requested: AtomicBool::new(false),
            time_exhausted: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            filler_wake: (Mutex::new(()), Condvar::new()),
            ids_ready: (Mutex::new(()), Condvar::new()),
            max_wait: config.max_wait,
            schedule_interval: config.schedule_interval,
        });
        // Pad to full before serving; never waits for the clock (the default lead covers a full
        // ring; a smaller configured lead leaves the rest to the filler thread).
        shared.fill(false);
        tracing::info!(
            capacity,
            start_tick,
            max_ahead_ticks,
            worker_id,
            "cached snowflake generator started"
        );
        let filler_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("leafid-snowflake-filler".into())
            .spawn(move || filler_shared.run_filler())
            .map_err(|_| SnowflakeError::InvalidConfig("could not spawn the filler thread"))?;
        Ok(Self {
            shared,
            filler: Mutex::new(Some(handle)),
        })
    }

    /// An id if one is ready, without blocking (requests a refill when the ring runs low).
    pub fn try_take(&self) -> Option<u64> {
        match self.shared.ring.try_take_at() {
            Some((id, pos)) => {
                // The fill level reads the producer's `tail`, a line the filler keeps writing:
                // look at it once per 64 takes, not on every id (the padding leaves ample slack).
                if pos % 64 == 0 && self.shared.ring.len() < self.shared.threshold {
                    self.shared.request_fill();
                }
                Some(id)
            }
            None => {
                self.shared.request_fill();
                None
            }
        }
    }

    /// The next id: one ring take; on an empty ring, waits up to `max_wait` for the filler.
    pub fn take(&self) -> Result<u64, SnowflakeError> {
        match self.try_take() {
            Some(id) => Ok(id),
            None => self.take_slow(),
        }
    }

    /// Appends `n` ids to `out`. On error, the ids already appended stay there (all unique).
    pub fn take_many(&self, n: usize, out: &mut Vec<u64>) -> Result<(), SnowflakeError> {
        out.reserve(n);
        for i in 0..n {
            match self.shared.ring.try_take() {
                Some(id) => out.push(id),
                None => out.push(self.take_slow()?),
            }
            if i.is_multiple_of(NOTIFY_EVERY as usize)
                && self.shared.ring.len() < self.shared.threshold
            {
                self.shared.request_fill();
            }
        }
        if self.shared.ring.len() < self.shared.threshold {
            self.shared.request_fill();
        }
        Ok(())
    }

    /// Ring and filler state for metrics.
    pub fn stats(&self) -> CachedStats {
        let s = &self.shared;
        // Acquire: pairs with the filler's Release store when it enters an era, so the
        // high-water mark of the era it left is seen with the new era's first positions.
        let next = s.next_pos.load(Ordering::Acquire);
        // Relaxed: ordered by the Acquire above (see `Shared::high_water`).
        let era_start = s.era_start_pos.load(Ordering::Relaxed);
        let left = s.high_water.load(Ordering::Relaxed);
        let current = (next > era_start).then(|| (next - 1) >> s.seq_bits);
        let last_filled_tick = current.max((left > 0).then(|| left - 1));
        let now_tick = s.layout.delta_at(s.clock.now_unix_ms()).unwrap_or(0);
        CachedStats {
            capacity: s.ring.capacity(),
            available: s.ring.len(),
            last_filled_tick,
            ticks_ahead: last_filled_tick.map_or(0, |t| t.saturating_sub(now_tick)),
            time_bits_exhausted: s.time_exhausted.load(Ordering::Relaxed),
            clock_back: s.era.load(Ordering::Relaxed),
            taken: s.ring.taken(),
        }
    }

    /// This generator's worker id.
    pub fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    /// The layout ids are composed with.
    pub fn layout(&self) -> &BitLayout {
        &self.shared.layout
    }

    /// Stops and joins the filler thread; ids left in the ring can still be taken. Idempotent.
    pub fn shutdown(&self) {
        // Release: pairs with the filler's Acquire loads, which then exit.
        self.shared.stopping.store(true, Ordering::Release);
        {
            let _g = lock(&self.shared.filler_wake.0);
            self.shared.filler_wake.1.notify_all();
        }
        {
            let _g = lock(&self.shared.ids_ready.0);
            self.shared.ids_ready.1.notify_all();
        }
        let handle = self
            .filler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("snowflake filler thread panicked");
        }
    }

    /// The ring is empty: ask for a fill and wait for it, up to `max_wait`.
    fn take_slow(&self) -> Result<u64, SnowflakeError> {
        let s = &self.shared;
        let start = Instant::now();
        let deadline = start
            .checked_add(s.max_wait)
            .unwrap_or(start + Duration::from_secs(3600));
        let mut guard = lock(&s.ids_ready.0);
        loop {
            // Acquire: pairs with the filler's Release, so the ids it put before raising the
            // flag are visible to the take just below, which must find the ring empty first.
            let exhausted = s.time_exhausted.load(Ordering::Acquire);
            // Acquire: pairs with `shutdown`'s Release (the same reasoning).
            let stopping = s.stopping.load(Ordering::Acquire);
            if let Some(id) = s.ring.try_take() {
                return Ok(id);
            }
            if exhausted {
                return Err(SnowflakeError::TimeBitsExhausted);
            }
            if stopping {
                return Err(SnowflakeError::ShutDown);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(SnowflakeError::Exhausted);
            }
            s.request_fill();
            guard = s
                .ids_ready
                .1
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for CachedGenerator {
    fn drop(&mut self) {
        self.shutdown();
    }
}
