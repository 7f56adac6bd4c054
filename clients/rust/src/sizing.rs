//! The batch a supply asks for: it follows demand (PROTOCOL.md, "The batch a client asks for").

use std::time::Duration;

/// How a supply sizes its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizing {
    /// The smallest size, and the first (the builder's `batch`).
    pub min: usize,
    /// The largest size (the builder's `max_batch`, within the route's limit).
    pub max: usize,
    /// How long a batch should last at the callers' rate.
    pub target: Duration,
}

/// How the batch in use was consumed when a request is about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Ids in the batch.
    pub size: u64,
    /// Ids of it handed out.
    pub used: u64,
    /// Time since it became current.
    pub elapsed: Duration,
}

impl Sizing {
    /// The size of the next request, from the size asked last (`size`), the batch in use
    /// (`None`: no batch yet) and whether a caller had to wait because both batches were spent.
    ///
    /// Projected lifetime `elapsed * size / used` (`used` at least 1, `elapsed` at least 1 ms):
    /// below half the target, or starved: double; above twice the target: halve; then within
    /// `min..=max`.
    pub(crate) fn next(&self, size: usize, usage: Option<Usage>, starved: bool) -> usize {
        let grow = |s: usize| s.saturating_mul(2);
        let next = match (starved, usage) {
            (true, _) => grow(size),
            (false, None) => size,
            (false, Some(u)) => {
                let elapsed = u.elapsed.max(Duration::from_millis(1)).as_secs_f64();
                let lifetime = elapsed * u.size as f64 / u.used.max(1) as f64;
                let target = self.target.as_secs_f64();
                if lifetime < target / 2.0 {
                    grow(size)
                } else if lifetime > target * 2.0 {
                    size / 2
                } else {
                    size
                }
            }
        };
        next.clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Sizing = Sizing {
        min: 100,
        max: 10_000,
        target: Duration::from_secs(1),
    };

    fn used(size: u64, used: u64, ms: u64) -> Option<Usage> {
        Some(Usage {
            size,
            used,
            elapsed: Duration::from_millis(ms),
        })
    }

    #[test]
    fn a_batch_lasting_under_half_the_target_doubles_the_size() {
        // 1000 ids, 500 used in 100 ms: lasts 200 ms.
        assert_eq!(S.next(1000, used(1000, 500, 100), false), 2000);
        // Just under half: 499 ms.
        assert_eq!(S.next(1000, used(1000, 1000, 499), false), 2000);
        // Less than 1 ms counts 1 ms, nothing used counts 1: 10 ids last 10 ms.
        assert_eq!(S.next(1000, used(10, 0, 0), false), 2000);
        // ... and 1000 ids 1 s: kept.
        assert_eq!(S.next(1000, used(1000, 0, 0), false), 1000);
    }

    #[test]
    fn a_batch_lasting_over_twice_the_target_halves_it() {
        // 1000 ids, 100 used in 1 s: lasts 10 s.
        assert_eq!(S.next(1000, used(1000, 100, 1000), false), 500);
        assert_eq!(S.next(1000, used(1000, 1000, 2001), false), 500);
    }

    #[test]
    fn a_batch_lasting_about_the_target_keeps_it() {
        assert_eq!(S.next(1000, used(1000, 1000, 500), false), 1000);
        assert_eq!(S.next(1000, used(1000, 1000, 2000), false), 1000);
        assert_eq!(S.next(1000, None, false), 1000);
    }

    #[test]
    fn starvation_doubles_whatever_the_projection() {
        assert_eq!(S.next(1000, used(1000, 1, 5000), true), 2000);
        assert_eq!(S.next(1000, None, true), 2000);
    }

    #[test]
    fn the_size_stays_within_its_bounds() {
        assert_eq!(S.next(100, used(100, 1, 60_000), false), 100);
        assert_eq!(S.next(150, used(100, 1, 60_000), false), 100);
        assert_eq!(S.next(10_000, used(10_000, 10_000, 1), false), 10_000);
        assert_eq!(S.next(8_000, None, true), 10_000);
        assert_eq!(S.next(usize::MAX / 2 + 1, None, true), 10_000);
    }
}
