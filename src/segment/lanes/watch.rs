//! The lanes' watch: what a healed partition must settle within a second, not at the next
//! repair pass (one `segment.refresh_interval_secs`, a minute by default):
//!
//! - **a delete made on one side**: a tag deleted in region B while region A's database was
//!   cut off still has its row in A's database, and region A's servers, asking their own lane
//!   first, would serve it until the repair. Each pass reads every lane's tombstone names; a
//!   name new to this watch is repaired at once ([`Lanes::repair_tags`]: a lane that lacks the
//!   tag and holds its tombstone deletes it on every lane that still holds it, the tombstone
//!   wins). The router already refuses to pass such a tag on from the lane that deleted it
//!   (`router`), so after this pass no lane this server reaches serves it.
//! - **a slot clash a partition hid**: the claims are scanned each pass, so the later claim's
//!   servers refuse within a second of reaching the other database (`claims`).
//!
//! Cost per pass: one small query per lane for its tombstone names (a set bounded by the tags
//! ever deleted) and one per lane for its claim. A name is repaired once: it is remembered as
//! settled when the repair reached every lane, and tried again next pass otherwise.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use super::router::Lanes;

/// How often the watch runs.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// How long a pass waits for one lane's answer (a lane that does not answer is read next pass).
pub const WATCH_WAIT: Duration = Duration::from_millis(800);

/// The tombstones a watch has settled: (slot, name) pairs whose repair reached every lane.
#[derive(Debug, Default)]
pub struct Settled(Mutex<BTreeSet<(u8, String)>>);

impl Lanes {
    /// One watch pass (see the module docs): the claims scanned, and every tombstone not
    /// settled yet repaired. Returns the tags deleted on some lane by this pass.
    pub async fn watch_pass(&self, settled: &Settled) -> Vec<(u8, String)> {
        if let Some(claims) = self.claims() {
            let _ = claims.scan(WATCH_WAIT).await;
        }
        let mut fresh = Vec::new();
        for lane in self.in_order() {
            let listed = tokio::time::timeout(WATCH_WAIT, lane.engine.store().list_tombstones());
            let Ok(Ok(names)) = listed.await else {
                continue;
            };
            let known = settled.0.lock().unwrap_or_else(|p| p.into_inner());
            fresh.extend(
                names
                    .into_iter()
                    .filter(|n| !known.contains(&(lane.slot, n.clone())))
                    .map(|n| (lane.slot, n)),
            );
        }
        let mut deleted = Vec::new();
        for (slot, name) in fresh {
            let repair = tokio::time::timeout(WATCH_WAIT * 4, self.repair_tags(Some(&name)));
            let Ok(r) = repair.await else { continue };
            deleted.extend(r.deleted);
            if r.unreached.is_empty() {
                settled
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert((slot, name));
            }
        }
        deleted
    }
}
