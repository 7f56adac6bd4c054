//! The boot-time clock every strict lease is measured on: `CLOCK_BOOTTIME`, which counts while
//! the process is stopped (`SIGSTOP`) and while the machine is suspended, and which no wall
//! clock step moves (NTP steps `CLOCK_REALTIME` only; it slews the rate of this one by at most
//! 500 ppm). `std::time::Instant` is `CLOCK_MONOTONIC` on Linux, which stops during a suspend:
//! a server suspended past its lease would wake up believing it still holds it.

use std::time::Duration;

/// Time since boot, including suspends ([`clock_gettime(CLOCK_BOOTTIME)`]); never goes back.
///
/// [`clock_gettime(CLOCK_BOOTTIME)`]: https://man7.org/linux/man-pages/man2/clock_gettime.2.html
pub fn boot_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every Linux since
    // 2.6.39. On failure (it cannot fail with these arguments) the answer is `Duration::MAX`,
    // the safe side everywhere: every hold has ended (`now >= deadline`, the deadlines being
    // saturating sums), and no version has been seen for long (`now - since` saturates to 0).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    if rc != 0 {
        return Duration::MAX;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_clock_moves_forward_with_real_time() {
        let a = boot_now();
        std::thread::sleep(Duration::from_millis(20));
        let b = boot_now();
        assert!(a > Duration::ZERO, "a boot clock reads more than zero");
        assert!(b - a >= Duration::from_millis(20), "{a:?} -> {b:?}");
    }
}
