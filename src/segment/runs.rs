//! Where a batch's ids go: a list of ids, or runs of consecutive ids.
//!
//! The id path hands out tickets in runs (`super::tickets`): each run of tickets inside one
//! segment becomes a run of consecutive ids. An [`IdSink`] receives those runs; a `Vec<i64>`
//! spells every id out (the list routes), [`IdRuns`] keeps each run as its first and last id
//! (the range routes), so a batch of a million ids costs a few runs, not a million pushes.

/// Receives the runs of consecutive ids a batch takes, in increasing order.
pub trait IdSink {
    /// Ids received so far.
    fn taken(&self) -> u64;
    /// Appends the ids `first ..= first + len - 1` (`len >= 1`, all above every id before).
    fn push_run(&mut self, first: i64, len: u64);
}

impl IdSink for Vec<i64> {
    fn taken(&self) -> u64 {
        self.len() as u64
    }

    fn push_run(&mut self, first: i64, len: u64) {
        self.extend((0..len as i64).map(|k| first + k));
    }
}

/// One run of consecutive ids, both ends included (an end past `i64::MAX` would not fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRun {
    /// The first id of the run.
    pub first: i64,
    /// The last id of the run (at or above `first`).
    pub last: i64,
}

impl IdRun {
    /// Ids in the run.
    pub fn len(&self) -> u64 {
        (self.last - self.first) as u64 + 1
    }

    /// Never true: a run holds at least one id (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A batch as runs: adjacent runs (the end of one segment and the start of the next when the
/// database leased them back to back) are merged, so the runs are disjoint, increasing and
/// never touching.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdRuns {
    runs: Vec<IdRun>,
    taken: u64,
    strict: bool,
}

impl IdRuns {
    /// No ids yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs, increasing.
    pub fn runs(&self) -> &[IdRun] {
        &self.runs
    }

    /// The ids of a strict tag (`super::strict`), as runs: the answer says so, and a client
    /// hands them out to the one call that asked (it must not buffer them).
    pub fn strict(ids: &[i64]) -> Self {
        let mut runs = Self::new();
        for &id in ids {
            runs.push_run(id, 1);
        }
        runs.strict = true;
        runs
    }

    /// Whether these are a strict tag's ids.
    pub fn is_strict(&self) -> bool {
        self.strict
    }
}

impl IdSink for IdRuns {
    fn taken(&self) -> u64 {
        self.taken
    }

    fn push_run(&mut self, first: i64, len: u64) {
        debug_assert!(len >= 1, "an empty run");
        let last = first + (len as i64 - 1);
        self.taken += len;
        match self.runs.last_mut() {
            Some(prev) if prev.last.checked_add(1) == Some(first) => prev.last = last,
            _ => self.runs.push(IdRun { first, last }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_only_when_adjacent() {
        let mut r = IdRuns::new();
        r.push_run(1, 3);
        r.push_run(4, 2);
        r.push_run(10, 1);
        r.push_run(i64::MAX - 1, 2);
        assert_eq!(
            r.runs(),
            &[
                IdRun { first: 1, last: 5 },
                IdRun {
                    first: 10,
                    last: 10
                },
                IdRun {
                    first: i64::MAX - 1,
                    last: i64::MAX
                },
            ]
        );
        assert_eq!(r.taken(), 8);
        assert_eq!(r.runs()[0].len(), 5);
    }

    #[test]
    fn a_list_and_its_runs_hold_the_same_ids() {
        let ids = [3, 4, 5, 9, 11, 12];
        let mut r = IdRuns::new();
        for id in ids {
            r.push_run(id, 1);
        }
        let back: Vec<i64> = r.runs().iter().flat_map(|x| x.first..=x.last).collect();
        assert_eq!(back, ids);
        let mut v: Vec<i64> = Vec::new();
        v.push_run(7, 3);
        assert_eq!(v, [7, 8, 9]);
        assert_eq!(v.taken(), 3);
    }
}
