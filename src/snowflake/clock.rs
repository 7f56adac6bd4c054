//! Clocks for the snowflake engine: the [`Clock`] trait and the system clock (the fakes tests
//! drive by hand live in `crate::testing::clock`).
//!
//! Generators read time only through [`Clock`], so tests can hold time still, step it, or
//! jump it backwards, and every wait a generator does goes through [`Clock::sleep_ms`].
//!
//! Two readings: the wall clock ([`Clock::now_unix_ms`]), which ids encode and which may step
//! either way, and a monotonic clock ([`Clock::monotonic_ms`]) that never steps back and keeps
//! counting while the process is paused or the machine sleeps. Worker-lease deadlines are kept
//! on the monotonic one, so a wall-clock step cannot stretch a lease this server holds.

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

#[cfg(test)]
mod tests {
    use super::*;

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
