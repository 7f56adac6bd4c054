//! Giving unused ids back when the server stops (`segment.return_unused_on_shutdown`): each
//! tag's `max_id` moves back to its first id never handed out, by a compare-and-set that leaves
//! alone a row another server leased meanwhile.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::SegmentAllocator;
use crate::segment::buffer::{SegmentBuffer, Unused};

/// What [`SegmentAllocator::give_back_unused`] did, tag by tag, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GiveBack {
    /// Tags whose `max_id` went back.
    pub returned_tags: usize,
    /// Ids given back (the sum of the ranges).
    pub returned_ids: u64,
    /// Tags with nothing to give back (every leased id handed out, or nothing leased).
    pub nothing: usize,
    /// Tags whose row had moved past this server's last lease (another server leased): left
    /// alone.
    pub moved: usize,
    /// Tags skipped because a lease was still in flight.
    pub in_flight: usize,
    /// Tags whose compare-and-set failed or did not answer in time (their ids are wasted).
    pub failed: usize,
}

impl SegmentAllocator {
    /// Sets `segment.return_unused_on_shutdown`: whether [`Self::shutdown`] gives the unused
    /// ids back (off until set).
    pub fn set_return_unused_on_shutdown(&self, on: bool) {
        self.inner.give_back.store(on, Ordering::Relaxed);
    }

    /// Stops the engine when the server stops: with `segment.return_unused_on_shutdown`, gives
    /// the unused ids back ([`Self::give_back_unused`], bounded by twice `load_timeout`).
    pub async fn shutdown(&self) {
        if !self.inner.give_back.load(Ordering::Relaxed) {
            return;
        }
        let bound = self.inner.config.load_timeout * 2;
        let began = Instant::now();
        let r = self.give_back_unused(bound).await;
        info!(
            returned_tags = r.returned_tags,
            returned_ids = r.returned_ids,
            nothing = r.nothing,
            moved = r.moved,
            in_flight = r.in_flight,
            failed = r.failed,
            took_ms = began.elapsed().as_secs_f64() * 1e3,
            "unused segment ids given back"
        );
    }

    /// Closes every tag and gives its unused ids back: for each tag whose row still ends at
    /// this server's last lease, `max_id` goes back to the first id never handed out, with a
    /// compare-and-set ([`LeaseStore::return_unused`](crate::segment::LeaseStore::return_unused)) that leaves a row another server
    /// leased meanwhile alone. From the call on, this engine hands out no id and starts no
    /// lease (requests get [`SegmentError::NotReady`](crate::segment::SegmentError::NotReady)): it is for a stopping server, after the
    /// drain. Loads in flight are awaited up to `bound`; a tag whose load is still running then
    /// gives nothing back. The compare-and-sets run at most `max_concurrent_loads` at once, the
    /// whole within `bound`; a tag not reached keeps its ids unused (wasted, as without this).
    pub async fn give_back_unused(&self, bound: Duration) -> GiveBack {
        let deadline = Instant::now() + bound;
        let tags = {
            let _w = self.inner.write_lock();
            self.inner.closing.store(true, Ordering::Relaxed);
            self.inner.tags.load_full()
        };
        let buffers: Vec<Arc<SegmentBuffer>> = tags.values().cloned().collect();
        for buf in &buffers {
            buf.stop_loading();
        }
        // Loads in flight finish (each bounded by load_timeout) so their segments are given
        // back too; they wake the buffer's waiters when they end.
        for buf in &buffers {
            while buf.is_loading() && Instant::now() < deadline {
                let notified = buf.notify().notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !buf.is_loading() {
                    break;
                }
                let _ = tokio::time::timeout_at(deadline, notified).await;
            }
        }
        let mut report = GiveBack::default();
        let mut ranges = Vec::new();
        for buf in &buffers {
            match buf.close() {
                Unused::Nothing => report.nothing += 1,
                Unused::LoadInFlight => {
                    warn!(biz_tag = %buf.tag(), "lease in flight at shutdown: nothing given back");
                    report.in_flight += 1;
                }
                Unused::Range { from, to } => ranges.push((buf.tag().clone(), from, to)),
            }
        }
        let store = &self.inner.store;
        let width = self.inner.config.max_concurrent_loads.max(1);
        let mut pending = ranges.into_iter();
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < width {
                let Some((tag, from, to)) = pending.next() else {
                    break;
                };
                let store = store.clone();
                running.spawn(async move {
                    let r = tokio::time::timeout_at(
                        deadline,
                        store.return_unused(tag.as_str(), from, to),
                    )
                    .await;
                    (tag, from, to, r)
                });
            }
            let Some(done) = running.join_next().await else {
                break;
            };
            let Ok((tag, from, to, r)) = done else {
                report.failed += 1;
                continue;
            };
            match r {
                Ok(Ok(true)) => {
                    debug!(biz_tag = %tag, from, to, "unused ids given back");
                    report.returned_tags += 1;
                    report.returned_ids += (to - from) as u64;
                }
                Ok(Ok(false)) => {
                    debug!(biz_tag = %tag, from, to, "row moved past this server's lease: left alone");
                    report.moved += 1;
                }
                Ok(Err(e)) => {
                    warn!(biz_tag = %tag, error = %e, "giving unused ids back failed");
                    report.failed += 1;
                }
                Err(_) => {
                    warn!(biz_tag = %tag, "giving unused ids back timed out");
                    report.failed += 1;
                }
            }
        }
        report
    }
}
