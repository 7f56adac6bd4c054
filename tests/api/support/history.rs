//! A history checker for strict tags (issue 45): every request's send time, completion time,
//! server and ids, and the check that the ids respect real-time order.
//!
//! **The rule checked:** no id twice, and for every two requests A and B where A's answer was
//! complete before B was sent, every id of B is greater than every id of A. One sweep in
//! O(n log n): the requests by send time, against the largest id of those complete before it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request that got ids.
#[derive(Debug, Clone)]
pub struct Op {
    /// Just before the request was sent.
    pub start: Instant,
    /// Just after its answer was read whole.
    pub end: Instant,
    /// The server asked (an index the test chose).
    pub server: usize,
    /// The ids answered, as answered.
    pub ids: Vec<i64>,
}

/// The requests of one run, recorded from many tasks.
#[derive(Debug, Clone, Default)]
pub struct History(Arc<Mutex<Vec<Op>>>);

impl History {
    /// Records one request's ids.
    pub fn record(&self, op: Op) {
        self.0.lock().unwrap().push(op);
    }

    /// Every request so far.
    pub fn ops(&self) -> Vec<Op> {
        self.0.lock().unwrap().clone()
    }

    /// The number of requests recorded so far.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// The first request recorded that was sent after `t` (its completion), if any.
    pub fn first_sent_after(&self, t: Instant) -> Option<Instant> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|op| op.start >= t)
            .map(|op| op.end)
            .min()
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// Requests checked.
    pub ops: usize,
    /// Ids checked.
    pub ids: usize,
    /// Ids seen more than once.
    pub duplicates: usize,
    /// Requests with an id at or below an id of a request complete before it was sent.
    pub violations: usize,
    /// The first violation, described.
    pub first: Option<String>,
    /// The longest time between two completions (no strict id handed out meanwhile).
    pub longest_gap: Duration,
}

/// Checks `ops` (see the module docs).
pub fn check(ops: &[Op]) -> Verdict {
    let mut v = Verdict {
        ops: ops.len(),
        ..Verdict::default()
    };
    let mut all: Vec<i64> = ops.iter().flat_map(|o| o.ids.iter().copied()).collect();
    v.ids = all.len();
    all.sort_unstable();
    v.duplicates = all.windows(2).filter(|w| w[0] == w[1]).count();
    let mut by_start: Vec<&Op> = ops.iter().filter(|o| !o.ids.is_empty()).collect();
    by_start.sort_by_key(|o| o.start);
    let mut by_end: Vec<&Op> = by_start.clone();
    by_end.sort_by_key(|o| o.end);
    let mut done = 0;
    let mut max_done: Option<(i64, &Op)> = None;
    for b in &by_start {
        while done < by_end.len() && by_end[done].end < b.start {
            let a = by_end[done];
            let top = *a.ids.iter().max().unwrap();
            if max_done.is_none_or(|(m, _)| top > m) {
                max_done = Some((top, a));
            }
            done += 1;
        }
        let low = *b.ids.iter().min().unwrap();
        if let Some((m, a)) = max_done
            && low <= m
        {
            v.violations += 1;
            if v.first.is_none() {
                v.first = Some(format!(
                    "id {low} from server {} was sent {:?} after id {m} from server {} had come back",
                    b.server,
                    b.start - a.end,
                    a.server
                ));
            }
        }
    }
    v.longest_gap = by_end
        .windows(2)
        .map(|w| w[1].end - w[0].end)
        .max()
        .unwrap_or_default();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(t0: Instant, start_ms: u64, end_ms: u64, ids: &[i64]) -> Op {
        Op {
            start: t0 + Duration::from_millis(start_ms),
            end: t0 + Duration::from_millis(end_ms),
            server: 0,
            ids: ids.to_vec(),
        }
    }

    #[test]
    fn the_checker_finds_an_id_below_one_already_answered_and_allows_overlaps() {
        let t0 = Instant::now();
        // Overlapping requests may come back in any order.
        let fine = [
            op(t0, 0, 10, &[5]),
            op(t0, 1, 5, &[7]),
            op(t0, 20, 21, &[8, 9]),
        ];
        let v = check(&fine);
        assert_eq!((v.violations, v.duplicates), (0, 0), "{v:?}");
        // 6 was asked after 7 came back.
        let bad = [op(t0, 0, 5, &[7]), op(t0, 6, 8, &[6])];
        assert_eq!(check(&bad).violations, 1);
        let twice = [op(t0, 0, 5, &[7]), op(t0, 0, 8, &[7])];
        assert_eq!(check(&twice).duplicates, 1);
    }
}
