//! The direct generator: one compare-and-swap per id (or per run of ids), no buffer.
//!
//! As Agrona's `SnowflakeIdGenerator`, the whole mutable state is one `AtomicU64` holding the
//! *next position* `(tick << seq_bits) | sequence`. Positions are plain integers: the position
//! after the last sequence of tick `t` is sequence 0 of tick `t + 1`, so a wrapped sequence
//! shows up as a position whose tick is ahead of the clock, and the generator waits for the
//! clock to get there instead of borrowing the future. The state only ever grows, so every
//! position (and so every id) is handed out at most once, whatever the clock does.
//!
//! Reading the wall clock costs more than the rest of an id (~25-45 ns of ~50). With a clock
//! that moves by itself ([`Clock::moves_by_itself`]), an updater thread keeps the current tick
//! in an atomic (`CoarseTick`) and the id path loads that instead. The cached tick is always a
//! tick the clock has *reached* (a past reading), so an id never carries a tick from the future;
//! a lagging updater only makes ids carry an older tick. Whenever the cached tick is behind the
//! state (its sequence wrapped, the updater stalled, the clock stepped back) the id path reads
//! the clock itself, exactly as without the cache: the waits and the step-back handling are
//! unchanged.
//!
//! With clock-back bits in the layout ([`BitLayout::clock_back_bits`]), the state's bits above
//! the position hold the current clock-back value (the *era*): `(era << era_shift) | position`.
//! A backward step beyond `max_backward_ms` moves the state, in the same CAS that reserves the
//! first id, to `era + 1` at the clock's current tick. The state still only grows (the era is
//! its top part), so every `(era, position)` is still handed out at most once, and ids of two
//! eras differ in the clock-back field: no duplicate, though ids are no longer increasing across
//! the step. Past the last era the step is `ClockMovedBackwards`, as without the bits.
//!
//! In a later era the cached tick is not used: every id reads the clock (see `reserve`).
//!
//! **A random start in each new tick (spread over `id % 2^k`).** When an id is the first of a
//! tick the state has not reached yet (the state's position is in an older tick, or in an older
//! era), its sequence starts at a pseudo-random value below `2^b`, `b = spread_bits(seq_bits)
//! = min(8, seq_bits - 4)` (0 below 5 sequence bits), not at 0: Leaf's answer to ids sharded
//! by `id % 2^k` (ShardingSphere #7750). At under one id per tick, a start at 0 put every id in
//! shard 0 of `id % 16`; a start uniform in `[0, 2^b)` makes `id % 2^k` uniform for every
//! `k <= b` (the sequence is the id's lowest bits). A tick the state already reached keeps its
//! place: a sequence that wrapped leaves the state at sequence 0 of the next tick, and that tick
//! goes on from 0, so a sustained burst loses nothing; only the first tick of a burst holds up to
//! `2^b - 1` fewer ids (`2^s - 2^b + 1` at worst, under 1/16 of a tick: the `- 4`).
//!
//! Why it is safe: the start is `(tick << seq_bits) + r`, `r < 2^b <= 2^seq_bits`, so it is a
//! position of `tick` itself (never of the next tick, nor past the time field) and above every
//! position of an older tick; it is taken only when the state is in an older tick (or, for a new
//! era, under a higher era), so the CAS still moves the state strictly up and the positions
//! `[start, start + count)` it reserves are above every one reserved before. The positions skipped
//! below `r` are never issued (ids are not dense per tick); ordering and uniqueness are those of
//! the state, unchanged. `r` is the `tick`-th output of splitmix64 seeded per generator
//! ([`tick_offset`]): a pure function of the tick, so it needs no state of its own (no new atomic,
//! no ordering to argue) and costs a few multiplies once per tick on the id path, no syscall.
//! It need not be secret (ids carry their time anyway); the per-generator seed keeps workers'
//! offsets apart, so two workers' ids of one tick do not land in the same shard more than chance.
//!
//! A new era never goes below the generator's *floor*, the first tick after
//! [`DirectGenerator::resume_after`]'s tick (or [`DirectGenerator::with_clock_back_floor`]'s):
//! a previous holder of the worker id may have used
//! any clock-back value at or below it, but none at any tick above it (the tick a lease stores
//! covers every era, see [`DirectGenerator::last_tick`]). A step back below the floor is
//! `ClockMovedBackwards`.
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::snowflake::clock::Clock;
use crate::snowflake::error::SnowflakeError;
use crate::snowflake::layout::BitLayout;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// Default tolerance for a clock that steps backwards, in ms (`clock.max_backward_ms`).
pub const DEFAULT_MAX_BACKWARD_MS: u64 = 5;

/// Waits shorter than this many ms spin (yielding) on the clock instead of sleeping.
const SPIN_WAIT_MS: i64 = 2;

/// The most low bits a new tick's random start spreads: `id % 2^k` is uniform for `k <= 8`
/// (256 shards) at any rate (see the module docs).
pub const MAX_SPREAD_BITS: u8 = 8;

/// The bits of a new tick's random start for a layout with `seq_bits` sequence bits:
/// `min(8, seq_bits - 4)`, 0 below 5 sequence bits. A new tick's first sequence is below
/// `2^spread_bits`, so the first tick of a burst holds at least `2^s - 2^spread_bits + 1` ids,
/// more than 15/16 of the tick (twitter's 12 bits: 8, at least 3841 of 4096).
pub fn spread_bits(seq_bits: u8) -> u8 {
    seq_bits.saturating_sub(4).min(MAX_SPREAD_BITS)
}

/// The smallest number of ids the direct generator can issue in one tick of `layout`: the
/// first tick of a burst, started at the highest random sequence (`2^s - 2^b + 1`, `b` from
/// [`spread_bits`]). Every later tick of a sustained burst holds all `2^s`.
pub fn min_ids_in_a_tick(layout: &BitLayout) -> u64 {
    layout.max_sequence() + 1 - ((1u64 << spread_bits(layout.seq_bits())) - 1)
}

/// The sequence a new `tick` starts at, below `mask + 1` (`mask = 2^b - 1`): the `tick`-th
/// output of splitmix64 (Steele, Lea and Flood; the finaliser of Stafford's "Mix13") from
/// `seed`, masked. Each output bit depends on every bit of `seed + tick * gamma`, so the low
/// bits are uniform and unrelated from tick to tick, whatever ticks a quiet caller hits.
#[inline]
pub fn tick_offset(seed: u64, tick: u64, mask: u64) -> u64 {
    let mut z = seed.wrapping_add(tick.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & mask
}

/// A lock-free snowflake generator that reads the clock for every id.
///
/// Ids strictly increase per generator: each comes from a successful CAS on a counter that
/// only grows. Good for millisecond layouts; with a seconds layout a burst past
/// `max_sequence + 1` ids in one second waits for the next second (use the cached generator).
#[derive(Debug)]
pub struct DirectGenerator {
    /// `(era << era_shift) | position`: the clock-back value in use, over the next position to
    /// issue in it, `(tick << seq_bits) | sequence`. Only ever increases. Within an era its tick
    /// is never behind a tick already used; when it is ahead of the clock, the previous tick's
    /// sequence wrapped (or the clock stepped back) and callers wait, or move to the next era.
    /// 0 means nothing issued.
    state: CachePadded<AtomicU64>,
    /// `last tick + 1` of every era left behind (0: none): with the state's own last tick, the
    /// last tick issued over all eras, which a lease stores so that no later holder of this
    /// worker id issues a tick this run used. Raised (`fetch_max`) before the CAS that leaves an
    /// era; Relaxed: that CAS's Release publishes it to whoever sees the new era (Acquire).
    high_water: AtomicU64,
    /// Where the era starts in the state: above every position (`end_pos` included).
    era_shift: u32,
    /// The position part of the state: `(1 << era_shift) - 1`.
    pos_mask: u64,
    /// Where the era lands in an id: the clock-back field, above the worker id.
    era_id_shift: u32,
    /// `layout.max_clock_back()`: the last era (0 without clock-back bits).
    max_era: u64,
    /// The first position a new era may start at (see the module docs): past every tick a
    /// previous holder of this worker id used. Set by `resume_after`, before any id.
    floor_pos: u64,
    /// Field widths; checked by `compose` for every id, so no field can overflow.
    layout: BitLayout,
    /// This generator's worker id; `<= layout.max_worker_id()` (checked in `new`).
    worker_id: u64,
    /// Where time comes from, and how the generator sleeps.
    clock: Arc<dyn Clock>,
    /// A backwards step up to this many ms is waited out once; more is an error.
    max_backward_ms: u64,
    /// `layout.seq_bits()`, cached for the shifts on the hot path.
    seq_bits: u32,
    /// `2^spread_bits(seq_bits) - 1`: a new tick's first sequence is at most this (see the
    /// module docs); 0 when the layout has too few sequence bits to spread.
    spread_mask: u64,
    /// This generator's seed for [`tick_offset`]: random per generator, fixed for its life.
    spread_seed: u64,
    /// `layout.max_sequence()`: the mask of the sequence part of a position.
    seq_mask: u64,
    /// `layout.worker_bits()`: a position's tick part shifted left by this lands in the id's
    /// time field (see [`DirectGenerator::compose`]).
    worker_bits: u32,
    /// The id's fixed bits: the prefix and this worker id, composed once by `layout.compose`.
    fixed_bits: u64,
    /// First position past the layout's last tick: `(max_time_delta + 1) << seq_bits`. A
    /// position below it has a tick the time field holds.
    end_pos: u64,
    /// The clock's current tick as an updater thread last read it (see the module docs).
    coarse: Arc<CoarseTick>,
    /// The updater thread, if the clock moves by itself and the thread could be started;
    /// stopped and joined when the generator drops.
    updater: Option<JoinHandle<()>>,
}

/// The wall clock's tick, read by one updater thread and loaded by the id path.
#[derive(Debug)]
struct CoarseTick {
    /// `(tick + 1) << seq_bits` for the `tick` of the updater's latest clock reading: the first
    /// position past that tick. 0 when there is none to use (no updater, a reading before the
    /// epoch or past the layout's last tick). Every non-zero value stands for a tick the wall
    /// clock has reached, so the id path may issue from it. Kept as a position rather than a
    /// tick so the id path compares without a shift. Written only by the
    /// updater (Release: see [`CoarseTick::load_end_pos`]).
    end_pos: CachePadded<AtomicU64>,
    /// The layout's sequence bits.
    seq_bits: u32,
    /// Set when the generator drops: the updater exits at its next wake-up.
    stop: AtomicBool,
    /// Set by the updater when it stops refreshing (see [`CoarseTick::run`]); the id path,
    /// finding the tick cleared, takes the flag and wakes it.
    parked: AtomicBool,
}

/// Refreshes after which the updater parks until an id is asked for (a second for a
/// millisecond layout): an idle server does not wake a thousand times a second.
const REFRESHES_BEFORE_PARKING: u32 = 1_000;

impl CoarseTick {
    fn new(seq_bits: u32) -> Self {
        Self {
            end_pos: CachePadded::new(AtomicU64::new(0)),
            seq_bits,
            stop: AtomicBool::new(false),
            parked: AtomicBool::new(false),
        }
    }

    /// The cached tick's first position past it (0: none). Acquire, paired with the updater's
    /// Release store: the clock reading behind the value happens before the id made from it is
    /// published (the state CAS's Release), which keeps the precise path's argument (a position
    /// seen was made from a clock reading taken before this thread's own reading) true for
    /// coarse positions.
    #[inline]
    fn load_end_pos(&self) -> u64 {
        self.end_pos.load(Ordering::Acquire)
    }

    /// The cached `tick + 1` (0: none), for tests that check which tick the updater holds.
    #[cfg(test)]
    fn load(&self) -> u64 {
        self.load_end_pos() >> self.seq_bits
    }

    /// Records a reading of the clock: `unix_ms` as the layout's tick, or "none" (0) outside
    /// the layout's time range. Returns when the next tick starts (unix ms).
    fn record(&self, layout: &BitLayout, unix_ms: i64) -> i64 {
        let (value, next_ms) = match layout.delta_at(unix_ms) {
            Ok(tick) if tick <= layout.max_time_delta() => {
                (tick + 1, layout.tick_start_unix_ms(tick + 1))
            }
            // Before the epoch or past the last tick: the id path reads the clock and reports it.
            _ => (0, unix_ms + 1),
        };
        self.end_pos
            .store(value << self.seq_bits, Ordering::Release);
        next_ms
    }

    /// The updater: records the clock's tick, then sleeps until the next tick starts (every
    /// millisecond for a millisecond layout, at most a second), until `stop`. After
    /// [`REFRESHES_BEFORE_PARKING`] refreshes it clears the tick and parks: the next id reads
    /// the clock itself and wakes it ([`CoarseTick::wake`]), so under steady traffic one id in
    /// that many pays a clock read and a wake-up, and an idle generator costs no wake-ups.
    fn run(&self, layout: BitLayout, clock: &dyn Clock) {
        let mut refreshes = 0u32;
        // Acquire: pairs with the Release in `Drop for DirectGenerator` (nothing else is
        // published with the flag; it keeps the exit prompt and the reasoning local).
        while !self.stop.load(Ordering::Acquire) {
            if refreshes == REFRESHES_BEFORE_PARKING {
                refreshes = 0;
                // Cleared before the flag is raised: an id that finds the flag down still saw
                // a usable tick or reads the clock, and the next one finds the flag up.
                self.end_pos.store(0, Ordering::Release);
                self.parked.store(true, Ordering::Release);
                // Acquire: pairs with the AcqRel swap in `wake`. A wake-up before `park` only
                // makes it return at once (the thread's token), so none is lost.
                while self.parked.load(Ordering::Acquire) && !self.stop.load(Ordering::Acquire) {
                    std::thread::park();
                }
                continue;
            }
            let now_ms = clock.now_unix_ms();
            let next_ms = self.record(&layout, now_ms);
            refreshes += 1;
            // A real sleep, never `clock.sleep_ms`: a test clock would move under the test.
            let wait = (next_ms - now_ms).clamp(1, 1_000) as u64;
            std::thread::park_timeout(Duration::from_millis(wait));
        }
    }

    /// Wakes a parked updater (`updater`, its thread); a no-op while it runs.
    fn wake(&self, updater: &JoinHandle<()>) {
        // Relaxed pre-check: the common case (not parked) writes nothing. AcqRel on the swap:
        // exactly one caller takes the flag and unparks.
        if self.parked.load(Ordering::Relaxed) && self.parked.swap(false, Ordering::AcqRel) {
            updater.thread().unpark();
        }
    }
}

impl DirectGenerator {
    /// A generator for `worker_id` under `layout`; rejects a worker id the layout cannot hold.
    pub fn new(
        layout: BitLayout,
        worker_id: u64,
        clock: Arc<dyn Clock>,
        max_backward_ms: u64,
    ) -> Result<Self, SnowflakeError> {
        if worker_id > layout.max_worker_id() {
            return Err(SnowflakeError::WorkerIdTooLarge {
                worker_id,
                max: layout.max_worker_id(),
            });
        }
        let seq_bits = u32::from(layout.seq_bits());
        let seq_mask = layout.max_sequence();
        // The prefix and worker id through the checked composer, so they are known to fit.
        let fixed_bits = layout.compose(0, worker_id, 0)?;
        let end_pos = (layout.max_time_delta() + 1) << seq_bits;
        // t + s + 1 <= t + w + s <= 63: the era (at most 3 bits, inside w) fits above.
        let era_shift = u32::from(layout.time_bits()) + seq_bits + 1;
        let coarse = Arc::new(CoarseTick::new(seq_bits));
        let updater = if clock.moves_by_itself() {
            // The first reading before any id, so the first ids already skip the clock.
            coarse.record(&layout, clock.now_unix_ms());
            let (tick, clock) = (coarse.clone(), clock.clone());
            let spawned = std::thread::Builder::new()
                .name("leafid-snowflake-tick".into())
                .spawn(move || tick.run(layout, &*clock));
            match spawned {
                Ok(handle) => Some(handle),
                Err(e) => {
                    // Without the updater the cached tick would go stale: read the clock.
                    coarse.end_pos.store(0, Ordering::Release);
                    tracing::warn!(error = %e, "no clock updater thread: reading the clock per id");
                    None
                }
            }
        } else {
            None
        };
        Ok(Self {
            state: CachePadded::new(AtomicU64::new(0)),
            high_water: AtomicU64::new(0),
            era_shift,
            pos_mask: (1u64 << era_shift) - 1,
            era_id_shift: seq_bits + u32::from(layout.worker_id_bits()),
            max_era: layout.max_clock_back(),
            floor_pos: 0,
            layout,
            worker_id,
            clock,
            max_backward_ms,
            seq_bits,
            spread_mask: (1u64 << spread_bits(layout.seq_bits())) - 1,
            // Once per generator, from the thread's OS-seeded generator: not on the id path.
            spread_seed: rand::random(),
            seq_mask,
            worker_bits: u32::from(layout.worker_bits()),
            fixed_bits,
            end_pos,
            coarse,
            updater,
        })
    }

    /// Uses `seed` for the random start of each new tick instead of a random one (tests that
    /// want the same offsets twice; any seed spreads as well as another).
    pub fn with_spread_seed(mut self, seed: u64) -> Self {
        self.spread_seed = seed;
        self
    }

    /// Never issues an id from `tick` or earlier (for a worker id whose last use is known,
    /// e.g. a lease's stored timestamp). Call before the first id.
    pub fn resume_after(mut self, tick: u64) -> Self {
        let next = tick.saturating_add(1).min(self.layout.max_time_delta() + 1) << self.seq_bits;
        // Relaxed: `self` is owned here; nothing is shared yet.
        self.state.store(next, Ordering::Relaxed);
        self.floor_pos = next;
        self
    }

    /// Lets a new clock-back value start at any tick after `tick` (lower than the resume point
    /// when every tick a previous holder issued is known to be at or below `tick`). Call after
    /// [`DirectGenerator::resume_after`], before the first id.
    pub fn with_clock_back_floor(mut self, tick: u64) -> Self {
        let floor = tick.saturating_add(1).min(self.layout.max_time_delta() + 1) << self.seq_bits;
        self.floor_pos = self.floor_pos.min(floor);
        self
    }

    /// The next id. Inline: in the common case (the state in the cached tick) this is one CAS
    /// and a few instructions; everything else is in `Self::precise_start`, out of line.
    #[inline]
    pub fn next_id(&self) -> Result<u64, SnowflakeError> {
        let (pos, _) = self.reserve(1)?;
        self.compose(pos)
    }

    /// Appends `n` ids to `out`, reserving a run of sequence numbers per CAS when it can.
    ///
    /// On error, the ids already appended stay in `out`: they are issued and unique.
    pub fn next_ids(&self, n: usize, out: &mut Vec<u64>) -> Result<(), SnowflakeError> {
        out.reserve(n);
        let mut left = n as u64;
        while left > 0 {
            let (start, count) = self.reserve(left)?;
            for pos in start..start + count {
                out.push(self.compose(pos)?);
            }
            left -= count;
        }
        Ok(())
    }

    /// The last tick an id was issued from in any era, if any (to store as a lease's last
    /// timestamp): never lower than a tick issued before, whatever the clock did.
    pub fn last_tick(&self) -> Option<u64> {
        // Acquire: pairs with the Release of the CAS that entered the era, which the high-water
        // mark of the era before was raised ahead of.
        let raw = self.state.load(Ordering::Acquire);
        let pos = raw & self.pos_mask;
        let current = (pos > 0).then(|| (pos - 1) >> self.seq_bits);
        // Relaxed: ordered by the Acquire above (see `high_water`).
        let left = self.high_water.load(Ordering::Relaxed);
        let left = (left > 0).then(|| left - 1);
        current.max(left)
    }

    /// The clock-back value ids are issued under now (0 until the clock steps back beyond
    /// `max_backward_ms` with clock-back bits in the layout).
    pub fn clock_back(&self) -> u64 {
        // Relaxed: a monitoring read.
        self.state.load(Ordering::Relaxed) >> self.era_shift
    }

    /// This generator's worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// The layout ids are composed with.
    pub fn layout(&self) -> &BitLayout {
        &self.layout
    }

    /// Sets the cached tick as a (stalled or lagging) updater would have left it: `None` for no
    /// usable reading. Tests only: they must set only ticks their clock has reached.
    #[cfg(test)]
    fn set_coarse_tick(&self, tick: Option<u64>) {
        let value = tick.map_or(0, |t| t + 1);
        self.coarse
            .end_pos
            .store(value << self.seq_bits, Ordering::Release);
    }

    /// The id of position `pos`: its tick in the time field, its sequence in the sequence field,
    /// over the fixed prefix and worker bits. Equal to `layout.compose(tick, worker, seq)`
    /// (unit-tested), without re-checking the fixed fields per id; the one per-id check left,
    /// `pos < end_pos`, keeps the tick inside the time field, so no id can spill into the
    /// prefix or the sign bit.
    /// `raw` is a state value: its era goes to the clock-back field (`max_era` at most, so it
    /// stays inside the worker field's high bits).
    #[inline]
    fn compose(&self, raw: u64) -> Result<u64, SnowflakeError> {
        let pos = raw & self.pos_mask;
        if pos >= self.end_pos {
            return Err(SnowflakeError::TimeBitsExhausted);
        }
        let era = raw >> self.era_shift;
        debug_assert!(era <= self.max_era);
        Ok(self.fixed_bits
            | (era << self.era_id_shift)
            | ((pos & !self.seq_mask) << self.worker_bits)
            | (pos & self.seq_mask))
    }

    /// The first position of `tick` for a state in an older tick: `tick`'s first position plus
    /// its random start, below `2^spread_bits` (see the module docs). `tick <= max_time_delta`,
    /// so the position is below `end_pos`, inside the era's position bits. Out of line: once
    /// per tick at most under load, so the inlined id path stays small.
    #[cold]
    #[inline(never)]
    fn new_tick_start(&self, tick: u64) -> u64 {
        (tick << self.seq_bits) | tick_offset(self.spread_seed, tick, self.spread_mask)
    }

    /// Claims up to `want` consecutive positions of one tick; returns the first and the count.
    #[inline]
    fn reserve(&self, want: u64) -> Result<(u64, u64), SnowflakeError> {
        debug_assert!(want > 0);
        let mut waited_back = false;
        loop {
            // Acquire (paired with the Release of the CAS): a thread that sees a position made
            // from a clock reading also reads the clock after it, so only a real step back makes
            // the clock look behind the state.
            let raw = self.state.load(Ordering::Acquire);
            // The cached tick's positions are `[end - 2^seq_bits, end)`; `end` is 0 without one.
            let end = self.coarse.load_end_pos();
            // `raw < end` only in era 0 (`end < 2^era_shift`). After a step back, in a later
            // era, every id reads the clock itself: a cached tick read before the step would
            // carry the new era forward to the old ticks, and the next reading would see the
            // clock behind again and spend another era.
            let start = if raw < end {
                // The cached tick (at most `max_tick`) is at or past the state's and the clock
                // has reached it: issue from it without reading the clock, on from the state's
                // position when the state is in it (a wrap left it at sequence 0, or ids were
                // taken), else from its random start (`first + r`, `r < 2^seq_bits`: still in
                // the tick, above `raw`). `end >= 2^seq_bits` when non-zero: no wrap.
                let first = end - (self.seq_mask + 1);
                if raw >= first {
                    raw
                } else {
                    self.new_tick_start(first >> self.seq_bits)
                }
            } else {
                match self.precise_start(raw, &mut waited_back)? {
                    Some(start) => start,
                    None => continue,
                }
            };
            let left_in_tick = self.seq_mask + 1 - (start & self.seq_mask);
            let count = want.min(left_in_tick);
            // AcqRel on success: Release publishes "made after a clock reading of this tick"
            // (see the load), and the high-water mark of an era this CAS leaves; Acquire keeps
            // our later clock reads after it. Failure: Relaxed, the loop reloads with Acquire.
            // A new tick's random start needs nothing more: it is computed from `raw`, `end`
            // and fields fixed before the generator is shared (the seed and the mask), and the
            // CAS from `raw` lands it only if no other thread moved the state meanwhile.
            match self.state.compare_exchange_weak(
                raw,
                start + count,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok((start, count)),
                Err(_) => std::hint::spin_loop(),
            }
        }
    }

    /// The first state to claim from `raw`, from a reading of the clock itself (in the next era
    /// after a step back beyond `max_backward_ms`, when there is one); `None` after waiting
    /// (for the next tick, or out a small step back): the caller reloads the state.
    #[cold]
    fn precise_start(
        &self,
        raw: u64,
        waited_back: &mut bool,
    ) -> Result<Option<u64>, SnowflakeError> {
        let era_bits = raw & !self.pos_mask;
        let pos = raw & self.pos_mask;
        if let Some(updater) = &self.updater {
            self.coarse.wake(updater);
        }
        let max_tick = self.layout.max_time_delta();
        let now_ms = self.clock.now_unix_ms();
        let now_tick = self.layout.delta_at(now_ms)?;
        if now_tick > max_tick {
            return Err(SnowflakeError::TimeBitsExhausted);
        }
        let pos_tick = pos >> self.seq_bits;
        if pos_tick < now_tick {
            // A tick the state has not reached: its random start, above every position of
            // `pos_tick` (see the module docs), in the same era.
            return Ok(Some(era_bits | self.new_tick_start(now_tick)));
        }
        if pos_tick == now_tick {
            return Ok(Some(raw));
        }
        // pos > 0 here: position 0 has tick 0, never ahead of the clock.
        let last_tick = (pos - 1) >> self.seq_bits;
        if last_tick > now_tick {
            let by_ms = (self.layout.tick_start_unix_ms(last_tick) - now_ms).max(1) as u64;
            let era = raw >> self.era_shift;
            let above_floor = now_tick << self.seq_bits >= self.floor_pos;
            if (by_ms > self.max_backward_ms || *waited_back) && era < self.max_era && above_floor {
                // The next era, from the stepped-back clock. Its high-water mark first (see
                // `high_water`); the caller's CAS from `raw` makes the move, once.
                self.high_water.fetch_max(last_tick + 1, Ordering::Relaxed);
                tracing::warn!(
                    by_ms,
                    clock_back = era + 1,
                    max_clock_back = self.max_era,
                    "clock moved backwards; issuing under the next clock-back value"
                );
                // Nothing was issued under `era + 1`: its first tick starts at random too.
                return Ok(Some(
                    ((era + 1) << self.era_shift) | self.new_tick_start(now_tick),
                ));
            }
            if *waited_back || by_ms > self.max_backward_ms {
                tracing::warn!(by_ms, "clock moved backwards; refusing ids");
                return Err(SnowflakeError::ClockMovedBackwards { by_ms });
            }
            tracing::info!(by_ms, "clock moved backwards; waiting it out");
            self.clock.sleep_ms(by_ms);
            *waited_back = true;
            return Ok(None);
        }
        // The sequence of `last_tick` is used up: wait for the next tick.
        if pos_tick > max_tick {
            return Err(SnowflakeError::TimeBitsExhausted);
        }
        self.wait_until(self.layout.tick_start_unix_ms(pos_tick), now_ms);
        Ok(None)
    }

    /// Waits until the clock reads `target_ms`: spins briefly for a short wait, else sleeps.
    fn wait_until(&self, target_ms: i64, now_ms: i64) {
        let wait = target_ms - now_ms;
        if wait <= 0 {
            return;
        }
        if wait <= SPIN_WAIT_MS {
            let started = Instant::now();
            let limit = Duration::from_millis(wait as u64 + 1);
            while started.elapsed() <= limit {
                std::thread::yield_now();
                if self.clock.now_unix_ms() >= target_ms {
                    return;
                }
            }
            // The clock did not move on its own within the wait (a manual clock): sleep on it.
        }
        let left = target_ms - self.clock.now_unix_ms();
        if left > 0 {
            self.clock.sleep_ms(left as u64);
        }
    }
}

impl Drop for DirectGenerator {
    fn drop(&mut self) {
        // Release: pairs with the updater's Acquire load of the flag.
        self.coarse.stop.store(true, Ordering::Release);
        if let Some(updater) = self.updater.take() {
            updater.thread().unpark();
            if updater.join().is_err() {
                tracing::error!("snowflake clock updater thread panicked");
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
