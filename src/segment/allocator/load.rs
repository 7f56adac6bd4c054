//! One load of a tag's next segment: lease it within `load_timeout`, publish it, or record why
//! not (the backoff); the regression guard's jumps past a high-water mark happen here.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{info, warn};

use super::Inner;
use crate::segment::buffer::{Publish, SegmentBuffer};
use crate::segment::high_water;
use crate::segment::store::StoreError;
use crate::telemetry::LogLimiter;

impl Inner {
    /// One load: lease a segment and publish it, or record why not. A lease at or below the
    /// buffer's high-water mark is refused and leased again at once with a step that jumps past
    /// the mark (`super::high_water`), at most [`high_water::MAX_JUMPS`] times, all within one
    /// `load_timeout`.
    pub(super) async fn load(self: Arc<Self>, buf: Arc<SegmentBuffer>) {
        let guard = LoadGuard(Some(buf.clone()));
        let _permit = self.loads.acquire().await;
        let Some(plan) = buf.plan_load(&self.config.policy) else {
            guard.disarm().finish_load();
            return;
        };
        let started = Instant::now();
        let deadline = started + self.config.load_timeout;
        let mut ask = plan.step;
        let mut jumps = 0;
        let failure = loop {
            let leased =
                tokio::time::timeout_at(deadline, self.store.lease(buf.tag().as_str(), ask)).await;
            let lease = match leased {
                Ok(Ok(lease)) => lease,
                Ok(Err(e)) => break LoadFailure::Store(e),
                Err(_) => break LoadFailure::TimedOut,
            };
            match buf.publish_lease(lease, plan.step, started.elapsed(), jumps > 0) {
                Publish::Loaded {
                    len,
                    regression,
                    log,
                } => {
                    if let Some(r) = regression {
                        high_water::report(buf.tag(), &r, "trimmed to the ids above the mark");
                    }
                    // One line per tag per interval; the loads between are counted in
                    // `held_back` (and every one in `leafid_segment_loads_total`).
                    // Every load at debug (`RUST_LOG=info,leafid::segment=debug`).
                    let step = plan.step.unwrap_or(lease.leased);
                    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
                    match log {
                        Some(held_back) => info!(
                            max_id = lease.max_id, size = len, step, db_step = ?lease.db_step,
                            latency_ms, held_back, "segment loaded"
                        ),
                        None => tracing::debug!(
                            max_id = lease.max_id, size = len, step, db_step = ?lease.db_step,
                            latency_ms, "segment loaded"
                        ),
                    }
                    guard.disarm();
                    return;
                }
                Publish::Closed => {
                    info!(
                        max_id = lease.max_id,
                        leased = lease.leased,
                        "segment leased after the tag closed for the give-back: wasted"
                    );
                    guard.disarm();
                    return;
                }
                Publish::Refused(r) => {
                    high_water::report(buf.tag(), &r, "refused, leasing past the mark");
                    jumps += 1;
                    if jumps > high_water::MAX_JUMPS {
                        break LoadFailure::BelowMark(r.leased_to - 1);
                    }
                    let step = plan.step.or(lease.db_step).unwrap_or(lease.leased);
                    ask = Some(high_water::jump_step(r.end, r.leased_to, step));
                }
            }
        };
        let latency = started.elapsed();
        let buf = guard.disarm();
        match failure {
            LoadFailure::Store(StoreError::NotFound) => {
                warn!("tag vanished from the database");
                buf.mark_removed();
                buf.finish_load();
                self.remove_tag(buf.tag().as_str(), Some(&buf));
            }
            LoadFailure::Store(StoreError::Exhausted) => {
                warn!("biz_tag exhausted: max_id is at i64::MAX");
                buf.mark_exhausted();
            }
            // A lane refused (a mismatch or a clash of slots): kept apart so that callers get
            // `lane_mismatch`, not `segments_not_ready`, and are not sent to wait for it.
            LoadFailure::Store(
                e @ (StoreError::LaneMismatch { .. } | StoreError::SlotClash { .. }),
            ) => {
                if let Some(held_back) = LogLimiter::global().allow("segment lease refused: lane") {
                    warn!(error = %e, held_back, "segment lease refused: lane mismatch");
                }
                buf.fail_load_mismatch(e.to_string());
            }
            // A database that is down (or refused as lossy) fails every tag's load on each
            // backoff: one line per interval for all tags, the rest counted in
            // `leafid_segment_load_failures_total`.
            LoadFailure::Store(e) => {
                if let Some(held_back) = LogLimiter::global().allow("segment load failed") {
                    warn!(
                        error = %e, latency_ms = latency.as_secs_f64() * 1e3, held_back,
                        "segment load failed"
                    );
                }
                buf.fail_load(e.to_string());
            }
            LoadFailure::TimedOut => {
                if let Some(held_back) = LogLimiter::global().allow("segment load timed out") {
                    warn!(
                        timeout_ms = self.config.load_timeout.as_millis() as u64,
                        held_back, "segment load timed out"
                    );
                }
                buf.fail_load("lease timed out".into());
            }
            LoadFailure::BelowMark(mark) => {
                warn!(
                    high_water = mark,
                    jumps, "leases still at or below the high-water mark; backing off"
                );
                buf.fail_load(format!(
                    "leases stay at or below this server's high-water mark {mark}"
                ));
            }
        }
    }
}

/// Why a load ended without a segment.
pub(super) enum LoadFailure {
    /// The store answered an error.
    Store(StoreError),
    /// No answer within `load_timeout`.
    TimedOut,
    /// Every lease, jumps included, ended at or below this high-water mark.
    BelowMark(i64),
}

/// Releases the single-flight flag if a load task is dropped mid-way (runtime shutdown).
pub(super) struct LoadGuard(Option<Arc<SegmentBuffer>>);

impl LoadGuard {
    pub(super) fn disarm(mut self) -> Arc<SegmentBuffer> {
        self.0.take().expect("armed")
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        if let Some(buf) = self.0.take() {
            buf.fail_load("load task cancelled".into());
        }
    }
}
