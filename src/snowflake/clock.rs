//! Clocks for the snowflake engine: the system clock and a manual one for tests.
//!
//! Generators read time only through [`Clock`], so tests can hold time still, step it, or
//! jump it backwards, and every wait a generator does goes through [`Clock::sleep_ms`].
//!
//! Two readings: the wall clock ([`Clock::now_unix_ms`]), which ids encode and which may step
//! either way, and a monotonic clock ([`Clock::monotonic_ms`]) that never steps back and keeps
//! counting while the process is paused or the machine sleeps. Worker-lease deadlines are kept
//! on the monotonic one, so a wall-clock step cannot stretch a lease this server holds.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in unix milliseconds.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the unix epoch (negative before it).
    fn now_unix_ms(&self) -> i64;
    /// Blocks the calling thread for about `ms` milliseconds of this clock's time.
    fn sleep_ms(&self, ms: u64);
    /// Milliseconds on a clock that never moves backwards and counts time the process spent
    /// stopped (`SIGSTOP`, a suspended machine); its origin is arbitrary.
    fn monotonic_ms(&self) -> i64;
    /// Whether the clock moves on its own, in real time. A generator may then keep a reading
    /// of it current from a thread and read that instead of the clock on every id (the direct
    /// generator's coarse tick). A clock that moves only when a test moves it says `false`, so
    /// the generator reads it every time and the test sees each step at once.
    fn moves_by_itself(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Clock")
    }
}

/// The operating system's wall clock (`SystemTime`), which may step backwards under NTP.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix_ms(&self) -> i64 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        }
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }

    #[inline]
    fn monotonic_ms(&self) -> i64 {
        boot_time_ms()
    }
}

/// `CLOCK_BOOTTIME` in ms: monotonic, and unlike `CLOCK_MONOTONIC` (what `Instant` reads) it
/// keeps counting while the machine is suspended, so a lease deadline taken from it passes
/// during a sleep instead of after it. A vDSO call on Linux: no system call.
#[cfg(target_os = "linux")]
fn boot_time_ms() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every Linux since 2.6.39.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_BOOTTIME) failed");
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

/// Elsewhere: `Instant` (monotonic; whether it counts suspended time depends on the platform).
#[cfg(not(target_os = "linux"))]
fn boot_time_ms() -> i64 {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    i64::try_from(origin.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// A clock that moves only when told to, for tests.
///
/// [`Clock::sleep_ms`] advances this clock by the requested amount instead of blocking, so a
/// generator waiting for the next tick (or waiting out a backwards step) always terminates.
/// Its monotonic reading moves with [`ManualClock::advance`] and `sleep_ms` (time passing) but
/// not with [`ManualClock::set`] or [`ManualClock::rewind`] (a wall-clock step).
/// It uses `std` atomics directly, not the `sync` shim: it is test scaffolding, never part of a
/// loom model, and must work in plain tests even when the crate is built with `cfg(loom)`.
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

    fn moves_by_itself(&self) -> bool {
        false
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
    fn system_monotonic_clock_never_goes_back_and_tracks_sleep() {
        let a = SystemClock.monotonic_ms();
        std::thread::sleep(Duration::from_millis(20));
        let b = SystemClock.monotonic_ms();
        assert!(b - a >= 19, "{a} -> {b}");
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now_unix_ms() > 1_577_836_800_000);
    }
}
