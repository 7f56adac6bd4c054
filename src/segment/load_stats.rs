//! `LoadLatency`: a fixed-bucket histogram of lease latencies, kept per tag by the loader.
//!
//! Loads are rare (one per segment), so the histogram lives inside the buffer's load state,
//! under the mutex the loader takes anyway: nothing is added to the per-id path. Metrics read
//! it at scrape time from [`super::BufferSnapshot`].

/// Upper bounds of the buckets, in seconds: a lease is a millisecond on a healthy local
/// database, tens of milliseconds across a network or a Galera cluster, seconds when it stalls.
pub const LOAD_LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Successful lease latencies of one tag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadLatency {
    /// Observations per bucket (not cumulative): `counts[i]` holds latencies in
    /// `(bounds[i-1], bounds[i]]`; the last entry holds those above every bound.
    counts: [u64; LOAD_LATENCY_BUCKETS.len() + 1],
    /// Sum of all observations, seconds.
    sum_secs: f64,
}

impl LoadLatency {
    /// Records one lease that took `secs` seconds.
    pub fn observe(&mut self, secs: f64) {
        let i = LOAD_LATENCY_BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(LOAD_LATENCY_BUCKETS.len());
        self.counts[i] += 1;
        self.sum_secs += secs;
    }

    /// Adds `other`'s observations (a formatted tag's periods, shown as one tag).
    pub fn merge(&mut self, other: &LoadLatency) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        self.sum_secs += other.sum_secs;
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the observations, seconds.
    pub fn sum_secs(&self) -> f64 {
        self.sum_secs
    }

    /// `(upper bound, cumulative count)` per bucket, without the implicit `+Inf` one.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        LOAD_LATENCY_BUCKETS
            .iter()
            .zip(self.counts.iter())
            .scan(0u64, |acc, (&le, &n)| {
                *acc += n;
                Some((le, *acc))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_the_overflow_counts_only_in_the_total() {
        let mut h = LoadLatency::default();
        for secs in [0.0005, 0.001, 0.02, 0.3, 9.0] {
            h.observe(secs);
        }
        let c: Vec<(f64, u64)> = h.cumulative().collect();
        assert_eq!(c[0], (0.001, 2), "the bound is inclusive");
        assert_eq!(c[4], (0.025, 3));
        assert_eq!(c[8], (0.5, 4));
        assert_eq!(c.last().unwrap().1, 4, "9 s is past the last bound");
        assert_eq!(h.count(), 5);
        assert!((h.sum_secs() - 9.3215).abs() < 1e-9);
    }
}
