//! One strict tag on one server: whether this server owns it, the ranges it leased while it
//! did, and what it last saw of the owner row. Everything sits under one mutex, held for no
//! `await` and no I/O: a take, an install, an acquisition and a loss are each one critical
//! section, so their order is the mutex's order.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

use super::clock::boot_now;
use super::owner::OwnerRow;

/// This server's hold on a tag it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// The epoch of the takeover.
    pub epoch: i64,
    /// The boot-clock instant past which this server hands out nothing (the last successful
    /// write's send time plus the lease, minus the margin).
    pub deadline: Duration,
    /// What a forwarded request must present.
    pub peer_key: String,
}

/// What this server last read of the owner row, and since when (boot clock) it has read that
/// same epoch and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The row.
    pub row: OwnerRow,
    /// When this server first read this epoch and version (after the read returned).
    pub since: Duration,
}

/// A permission to lease the next range: at most one is out per generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTicket {
    generation: u64,
}

/// The answer of [`StrictTag::take`].
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// Ids handed out (at least one), and a ticket to lease the next range ahead when the
    /// ranges held run low.
    Ids(Vec<i64>, Option<LeaseTicket>),
    /// Nothing held: lease with this ticket, then take again.
    Lease(LeaseTicket),
    /// Nothing held and a lease is on its way: wait for [`StrictTag::lease_settled`].
    WaitLease,
    /// Owned, but the deadline passed: renew (the epoch's) before taking again.
    Expired(i64),
    /// Not owned here.
    NotOwner,
}

/// Why a leased range was not installed.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The tag was lost (or lost and taken again) since the ticket: the range may lie below
    /// ids another owner handed out. Dropped, unused.
    Stale,
    /// The range ends at or below what this server leased before for the tag: the database
    /// went back (a restored backup, a failover to a stale replica). Dropped, unused.
    Regressed {
        /// One past the last id of the refused range.
        end: i64,
        /// One past the highest id this server leased before.
        leased_to: i64,
    },
}

#[derive(Debug, Default)]
struct State {
    owner: Option<Ownership>,
    ranges: VecDeque<Range<i64>>,
    leasing: bool,
    /// Moves on every acquisition and every loss: a lease sent under another generation is
    /// dropped (it may predate another owner's ids).
    generation: u64,
    /// One past the highest id this server ever leased for the tag: the regression guard.
    leased_to: i64,
    /// The length of the last range installed (the low-water mark is 90% of it).
    last_len: i64,
    seen: Option<Seen>,
}

/// One strict tag on this server.
#[derive(Debug, Default)]
pub struct StrictTag {
    state: Mutex<State>,
    settled: Notify,
}

impl StrictTag {
    /// A tag this server has not owned yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic under this lock cannot leave the state half-written (every section writes
        // its fields after its checks), so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Up to `count` ids, if this server owns the tag and its deadline has not passed.
    ///
    /// **Why an id handed out here is above every id completed elsewhere before the request:**
    /// the ids are taken, *then* the boot clock is read; they are handed out only if that read
    /// is before the deadline, and the deadline ends before any other server may take over
    /// (`super` states the bound). So every id handed out here was taken while this server
    /// was the only one serving the tag, and another owner's ids all come from ranges leased
    /// after its takeover, above every range leased before it. Ids taken past the deadline are
    /// dropped, never handed out (a gap).
    ///
    /// When fewer ids than 90% of the last range remain after the take, a ticket to lease
    /// ahead comes with them (Leaf's rule: the next range is on its way once 10% is used).
    pub fn take(&self, count: usize) -> Take {
        let mut st = self.lock();
        let Some(own) = &st.owner else {
            return Take::NotOwner;
        };
        let (deadline, epoch) = (own.deadline, own.epoch);
        let mut out = Vec::with_capacity(count.min(4096));
        while out.len() < count {
            let Some(front) = st.ranges.front_mut() else {
                break;
            };
            let n = (count - out.len()).min((front.end - front.start) as usize);
            out.extend(front.start..front.start + n as i64);
            front.start += n as i64;
            if front.start >= front.end {
                st.ranges.pop_front();
            }
        }
        if boot_now() >= deadline {
            // Taken past the deadline: dropped (never handed out), and the caller renews.
            return Take::Expired(epoch);
        }
        if out.is_empty() {
            if st.leasing {
                return Take::WaitLease;
            }
            st.leasing = true;
            return Take::Lease(LeaseTicket {
                generation: st.generation,
            });
        }
        let left: i64 = st.ranges.iter().map(|r| r.end - r.start).sum();
        let low_water = st.last_len - st.last_len / 10;
        let ahead = (left < low_water && !st.leasing).then(|| {
            st.leasing = true;
            LeaseTicket {
                generation: st.generation,
            }
        });
        Take::Ids(out, ahead)
    }

    /// Installs a range `[start, end)` leased with `ticket` (confirmed by the database): kept
    /// only if the ticket's generation is still the current one and the range lies above every
    /// range leased before (trimmed to the ids above them).
    pub fn install(&self, ticket: LeaseTicket, range: Range<i64>) -> Result<(), Refused> {
        let mut st = self.lock();
        let result = if st.generation != ticket.generation || st.owner.is_none() {
            Err(Refused::Stale)
        } else if range.end <= st.leased_to {
            Err(Refused::Regressed {
                end: range.end,
                leased_to: st.leased_to,
            })
        } else {
            let start = range.start.max(st.leased_to).max(1);
            st.leased_to = range.end;
            st.last_len = range.end - start;
            if start < range.end {
                st.ranges.push_back(start..range.end);
            }
            Ok(())
        };
        if st.generation == ticket.generation {
            st.leasing = false;
        }
        drop(st);
        self.settled.notify_waiters();
        result
    }

    /// A lease with `ticket` failed: the next take may lease again.
    pub fn lease_failed(&self, ticket: LeaseTicket) {
        let mut st = self.lock();
        if st.generation == ticket.generation {
            st.leasing = false;
        }
        drop(st);
        self.settled.notify_waiters();
    }

    /// Waits (at most `within`) for the lease in flight to settle.
    pub async fn lease_settled(&self, within: Duration) {
        let settled = self.settled.notified();
        tokio::pin!(settled);
        settled.as_mut().enable();
        if !self.lock().leasing {
            return;
        }
        let _ = tokio::time::timeout(within, settled).await;
    }

    /// This server took the tag over at `epoch`: a new generation, nothing held (its first
    /// range is leased after the takeover committed, so above everything before it).
    pub fn acquired(&self, own: Ownership) {
        let mut st = self.lock();
        st.generation += 1;
        st.ranges.clear();
        st.leasing = false;
        st.owner = Some(own);
        drop(st);
        self.settled.notify_waiters();
    }

    /// A renewal sent at `sent` (boot clock) for `epoch` succeeded: the deadline moves to
    /// `sent + hold` (never back).
    pub fn renewed(&self, epoch: i64, sent: Duration, hold: Duration) {
        let mut st = self.lock();
        if let Some(own) = st.owner.as_mut().filter(|o| o.epoch == epoch) {
            own.deadline = own.deadline.max(sent.saturating_add(hold));
        }
    }

    /// This server no longer holds the tag at `epoch` (another took it over, or it released
    /// it): nothing is served from here again until it takes the tag over anew.
    pub fn lost(&self, epoch: i64) {
        let mut st = self.lock();
        if st.owner.as_ref().is_some_and(|o| o.epoch == epoch) {
            st.owner = None;
            st.generation += 1;
            st.ranges.clear();
            st.leasing = false;
        }
        drop(st);
        self.settled.notify_waiters();
    }

    /// The ownership, if this server holds the tag.
    pub fn ownership(&self) -> Option<Ownership> {
        self.lock().owner.clone()
    }

    /// Records a read of the owner row (returned at `now`, boot clock): what was seen, with
    /// the instant this epoch and version were first seen.
    pub fn observe(&self, row: OwnerRow, now: Duration) -> Seen {
        let mut st = self.lock();
        let since = match &st.seen {
            Some(s) if s.row.epoch == row.epoch && s.row.version == row.version => s.since,
            _ => now,
        };
        let seen = Seen { row, since };
        st.seen = Some(seen.clone());
        seen
    }

    /// What this server last read of the owner row.
    pub fn seen(&self) -> Option<Seen> {
        self.lock().seen.clone()
    }

    /// Ids held in memory (for the monitor).
    pub fn held(&self) -> i64 {
        self.lock().ranges.iter().map(|r| r.end - r.start).sum()
    }
}

#[cfg(test)]
mod tests;
