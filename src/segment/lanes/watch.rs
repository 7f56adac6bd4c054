//! The lanes' watch: what a healed partition must settle within a second, not at the next
//! repair pass (one `segment.refresh_interval_secs`, a minute by default):
//!
//! - **a delete made on one side**: a tag deleted in region B while region A's database was
//!   cut off still has its row in A's database, and region A's servers, asking their own lane
//!   first, would serve it until the repair. Each pass reads every lane's tombstone names; a
//!   name new to this watch is repaired at once (`Lanes::repair_tags`: a lane that lacks the
//!   tag and holds its tombstone deletes it on every lane that still holds it, the tombstone
//!   wins). The router already refuses to pass such a tag on from the lane that deleted it
//!   (`router`), so after this pass no lane this server reaches serves it.
//! - **a slot clash a partition hid**: the claims are scanned each pass, so the later claim's
//!   servers refuse within a second of reaching the other database (`claims`).
//!
//! Cost per pass: one small query per lane for its tombstone names (a set bounded by the tags
//! ever deleted) and one per lane for its claim. A name is repaired once: it is remembered as
//! settled when the repair reached every lane. One that missed a lane is tried again only once
//! a lane it missed answers (a lane down for hours costs no repair per pass), and a pass
//! repairs at most [`REPAIRS_PER_PASS`] names (a server starting beside thousands of old
//! tombstones settles them over a few passes, not in one burst).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use super::router::Lanes;

/// How often the watch runs while every lane answers.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How often it runs while a lane does not answer (a partition): the heal is seen within this
/// (plus the time to connect), so a delete made on the far side stops this side about that
/// soon after the link is back.
pub const WATCH_INTERVAL_APART: Duration = Duration::from_millis(100);

/// How long a pass waits for the lanes' answers (a lane that does not answer in time is read
/// next pass; a slow one is read by the repair pass, which waits longer).
pub const WATCH_WAIT: Duration = Duration::from_millis(300);

/// Most names one pass repairs.
pub const REPAIRS_PER_PASS: usize = 64;

/// What a watch knows of the tombstones it read.
#[derive(Debug, Default)]
pub struct Settled(Mutex<Known>);

#[derive(Debug, Default)]
struct Known {
    /// (slot, name) pairs whose repair reached every lane.
    done: BTreeSet<(u8, String)>,
    /// Pairs whose repair missed lanes: the slots it missed.
    missed: BTreeMap<(u8, String), BTreeSet<u8>>,
}

impl Lanes {
    /// One watch pass (see the module docs): the claims scanned, and every tombstone not
    /// settled yet repaired. Returns the tags deleted on some lane by this pass, and when to run
    /// the next one ([`WATCH_INTERVAL_APART`] while a lane did not answer).
    pub async fn watch_pass(&self, settled: &Settled) -> (Vec<(u8, String)>, Duration) {
        // The claims and every lane's tombstones read at once: a lane that does not answer
        // costs the pass one wait, not one per read.
        let scan = async {
            if let Some(claims) = self.claims() {
                let _ = claims.scan(WATCH_WAIT).await;
            }
        };
        let mut reads = tokio::task::JoinSet::new();
        for lane in self.in_order() {
            let (slot, store) = (lane.slot, lane.engine.store().clone());
            reads.spawn(async move {
                let listed = tokio::time::timeout(WATCH_WAIT, store.list_tombstones()).await;
                (slot, listed)
            });
        }
        let ((), listed) = tokio::join!(scan, reads.join_all());
        let mut next = WATCH_INTERVAL;
        let mut names_of = Vec::new();
        let mut answered = BTreeSet::new();
        for (slot, listed) in listed {
            match listed {
                Ok(Ok(names)) => {
                    answered.insert(slot);
                    names_of.push((slot, names));
                }
                _ => next = WATCH_INTERVAL_APART,
            }
        }
        let fresh: Vec<(u8, String)> = {
            let known = settled.0.lock().unwrap_or_else(|p| p.into_inner());
            names_of
                .into_iter()
                .flat_map(|(slot, names)| names.into_iter().map(move |n| (slot, n)))
                .filter(|key| !known.done.contains(key))
                // Missed lanes before: again only once one of them answers.
                .filter(|key| {
                    known
                        .missed
                        .get(key)
                        .is_none_or(|m| m.iter().any(|s| answered.contains(s)))
                })
                .take(REPAIRS_PER_PASS)
                .collect()
        };
        let mut deleted = Vec::new();
        for key in fresh {
            let repair = tokio::time::timeout(WATCH_WAIT * 4, self.repair_tags(Some(&key.1)));
            let missed = match repair.await {
                Ok(r) => {
                    deleted.extend(r.deleted);
                    r.unreached
                }
                // No answer in time: every lane but those that answered may have missed it.
                Err(_) => self.in_order().map(|l| l.slot).collect(),
            };
            let mut known = settled.0.lock().unwrap_or_else(|p| p.into_inner());
            if missed.is_empty() {
                known.missed.remove(&key);
                known.done.insert(key);
            } else {
                known.missed.insert(key, missed);
            }
        }
        (deleted, next)
    }
}
