//! Clocks a test drives by hand, for the snowflake engine's [`Clock`].
//!
//! - [`ManualClock`]: moves only when told to; sleeping advances it, so waits always end.
//! - [`FrozenClock`]: moves only when told to; sleeping really sleeps (1 ms), so a background
//!   thread waiting on it keeps waiting while time stands still.
//! - [`SteppedClock`]: the system clock plus an offset the test shifts, as an NTP step would.
//!
//! They use `std` atomics directly, not the `sync` shim: they are test scaffolding, never part
//! of a loom model, and must work in plain tests even when the crate is built with `cfg(loom)`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::snowflake::clock::{Clock, SystemClock};

/// A clock that moves only when told to, for tests.
///
/// [`Clock::sleep_ms`] advances this clock by the requested amount instead of blocking, so a
/// generator waiting for the next tick (or waiting out a backwards step) always terminates.
/// Its monotonic reading moves with [`ManualClock::advance`] and `sleep_ms` (time passing) but
/// not with [`ManualClock::set`] or [`ManualClock::rewind`] (a wall-clock step).
#[derive(Debug)]
pub struct ManualClock {
    /// Current time in unix ms; any value, including one earlier than before.
    now_ms: AtomicI64,
    /// How many times `sleep_ms` was called, so tests can see that a generator waited.
    sleeps: AtomicU64,
    /// The monotonic reading: only ever increases.
    mono_ms: AtomicI64,
}

impl ManualClock {
    /// A clock reading `unix_ms`.
    pub fn new(unix_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(unix_ms),
            sleeps: AtomicU64::new(0),
            mono_ms: AtomicI64::new(0),
        }
    }

    /// Sets the wall time (a step: the monotonic reading does not move); may move it backwards.
    pub fn set(&self, unix_ms: i64) {
        // Relaxed: the clock value is the only data; no other memory is published with it.
        self.now_ms.store(unix_ms, Ordering::Relaxed);
    }

    /// Lets `ms` pass: both the wall and the monotonic readings move forwards.
    pub fn advance(&self, ms: u64) {
        self.now_ms.fetch_add(ms as i64, Ordering::Relaxed);
        self.mono_ms.fetch_add(ms as i64, Ordering::Relaxed);
    }

    /// Lets `ms` pass on the monotonic clock only (the wall clock was stepped back by as much
    /// meanwhile, or the process was stopped while the wall clock stood still).
    pub fn advance_monotonic(&self, ms: u64) {
        self.mono_ms.fetch_add(ms as i64, Ordering::Relaxed);
    }

    /// Steps the wall time backwards by `ms` (the monotonic reading does not move).
    pub fn rewind(&self, ms: u64) {
        self.now_ms.fetch_sub(ms as i64, Ordering::Relaxed);
    }

    /// How many times [`Clock::sleep_ms`] has been called.
    pub fn sleep_count(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }
}

impl Clock for ManualClock {
    fn now_unix_ms(&self) -> i64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    fn sleep_ms(&self, ms: u64) {
        self.sleeps.fetch_add(1, Ordering::Relaxed);
        // Advance by at least 1 ms so that a caller looping on "sleep until t" always progresses.
        self.advance(ms.max(1));
    }

    fn monotonic_ms(&self) -> i64 {
        self.mono_ms.load(Ordering::Relaxed)
    }

    /// It moves only when the test moves it: generators read it on every id.
    fn moves_by_itself(&self) -> bool {
        false
    }
}

/// A clock that moves only when the test moves it, whose sleep really sleeps (1 ms) while time
/// stands still: lets a test watch a background filler stop at its lead bound over the clock.
/// Its monotonic reading is its wall reading.
#[derive(Debug)]
pub struct FrozenClock {
    /// Current time in unix ms.
    now_ms: AtomicI64,
}

impl FrozenClock {
    /// A clock reading `unix_ms`.
    pub fn new(unix_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(unix_ms),
        }
    }

    /// Lets `ms` pass.
    pub fn advance(&self, ms: u64) {
        // Relaxed: the clock value is the only data; no other memory is published with it.
        self.now_ms.fetch_add(ms as i64, Ordering::Relaxed);
    }
}

impl Clock for FrozenClock {
    fn now_unix_ms(&self) -> i64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    fn sleep_ms(&self, _ms: u64) {
        std::thread::sleep(Duration::from_millis(1));
    }

    fn monotonic_ms(&self) -> i64 {
        self.now_ms.load(Ordering::Relaxed)
    }

    /// It moves only when the test moves it: generators read it on every id.
    fn moves_by_itself(&self) -> bool {
        false
    }
}

/// The system clock plus an offset the test shifts, as an NTP step would: time goes on, from
/// wherever the step put it. Waiting on it really sleeps (at most 20 ms a call); its monotonic
/// reading is the system's, which a step does not move.
#[derive(Debug, Default)]
pub struct SteppedClock {
    /// Added to the system clock's wall reading, in ms.
    offset_ms: AtomicI64,
}

impl SteppedClock {
    /// The system clock, not yet stepped.
    pub fn now() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Steps the wall clock by `ms` (backwards when negative).
    pub fn shift(&self, ms: i64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for SteppedClock {
    fn now_unix_ms(&self) -> i64 {
        SystemClock.now_unix_ms() + self.offset_ms.load(Ordering::SeqCst)
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms.min(20)));
    }

    fn monotonic_ms(&self) -> i64 {
        SystemClock.monotonic_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_both_ways_and_sleep_advances_it() {
        let c = ManualClock::new(1_000);
        c.advance(5);
        assert_eq!(c.now_unix_ms(), 1_005);
        c.rewind(10);
        assert_eq!(c.now_unix_ms(), 995);
        c.sleep_ms(7);
        assert_eq!(c.now_unix_ms(), 1_002);
        assert_eq!(c.sleep_count(), 1);
        c.set(42);
        assert_eq!(c.now_unix_ms(), 42);
        assert_eq!(
            c.monotonic_ms(),
            12,
            "steps do not move the monotonic clock"
        );
        c.advance_monotonic(3);
        assert_eq!((c.now_unix_ms(), c.monotonic_ms()), (42, 15));
    }

    #[test]
    fn a_stepped_clock_moves_its_wall_reading_only() {
        let c = SteppedClock::now();
        let (wall, mono) = (c.now_unix_ms(), c.monotonic_ms());
        c.shift(-10_000);
        assert!(
            c.now_unix_ms() <= wall - 9_000,
            "{wall} -> {}",
            c.now_unix_ms()
        );
        assert!(c.monotonic_ms() >= mono);
    }

    #[test]
    fn a_frozen_clock_stands_still_while_sleeping() {
        let c = FrozenClock::new(5_000);
        c.sleep_ms(100);
        assert_eq!((c.now_unix_ms(), c.monotonic_ms()), (5_000, 5_000));
        c.advance(1_000);
        assert_eq!(c.now_unix_ms(), 6_000);
    }
}
