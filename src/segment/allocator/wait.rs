//! Waiting for ids when a tag's segments are spent: bounded by `wait_timeout`, woken by the
//! buffer's notification (never a spin), and failing fast while the tag's lease is known to be
//! failing (see the module docs of [`super`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::SegmentAllocator;
use crate::segment::buffer::SegmentBuffer;
use crate::segment::error::SegmentError;
use crate::segment::runs::IdSink;

impl SegmentAllocator {
    /// Fills `out` to `count` ids, waiting for loads as needed, bounded by `wait_timeout`
    /// from the last progress.
    pub(super) async fn fill<S: IdSink>(
        &self,
        tag: &str,
        count: u64,
        out: &mut S,
    ) -> Result<(), SegmentError> {
        let buf = self.buffer(tag).await?;
        self.fill_buffer(&buf, count, out).await
    }

    /// [`Self::fill`] on a resolved buffer.
    pub(super) async fn fill_buffer<S: IdSink>(
        &self,
        buf: &Arc<SegmentBuffer>,
        count: u64,
        out: &mut S,
    ) -> Result<(), SegmentError> {
        let wait = self.inner.config.wait_timeout;
        let mut deadline = Instant::now() + wait;
        // Whether this request started the load in flight: while the lease is failing, only
        // the request that started the attempt waits for it.
        let mut probing = false;
        loop {
            // Register for the wake-up before checking, so a load finishing in between is seen.
            let notified = buf.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if buf.is_removed() {
                return Err(SegmentError::UnknownTag(buf.tag().clone()));
            }
            if buf.is_closed() {
                // The server is stopping and gave the tag's unused ids back.
                return Err(SegmentError::NotReady {
                    retry_after_secs: 1,
                });
            }
            let before = out.taken();
            let preload = buf.take_many(count - out.taken(), out);
            if out.taken() == count {
                if preload {
                    self.start_load(buf);
                }
                return Ok(());
            }
            if buf.is_exhausted() {
                return Err(SegmentError::Exhausted);
            }
            probing |= self.start_load(buf);
            if buf.is_failing() && !probing {
                // Fail fast: the tag's last lease failed and this request did not start the
                // attempt now due (the backoff holds, or another request's attempt runs). It
                // answers at once instead of holding the caller for `wait_timeout`; a retry is
                // armed for the end of the backoff so the first lease after a recovery comes
                // no later than if this request had waited for it.
                self.arm_retry(buf);
                return Err(not_ready(buf));
            }
            let now = Instant::now();
            if out.taken() > before {
                deadline = now + wait;
            }
            if now >= deadline {
                return Err(not_ready(buf));
            }
            let mut left = deadline - now;
            if !buf.is_loading() {
                // A backoff is on: wake when it ends to start the next attempt ourselves.
                left = left.min(buf.backoff_left().max(Duration::from_millis(1)));
            }
            let _ = tokio::time::timeout(left, notified).await;
            if !buf.is_loading() {
                // Our attempt (if any) ended: a later one is not ours to wait for.
                probing = false;
            }
        }
    }

    /// Schedules one load for the end of the tag's backoff, unless one is scheduled already.
    pub(super) fn arm_retry(&self, buf: &Arc<SegmentBuffer>) {
        if !buf.arm_retry() {
            return;
        }
        let this = self.clone();
        let buf = buf.clone();
        let wait = buf.backoff_left();
        self.inner.runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            buf.disarm_retry();
            if buf.is_failing() {
                this.start_load(&buf);
            }
        });
    }
}

/// No ids in time: `lane_mismatch` when the tag's last lease was refused by its lane (a
/// configuration fault, not worth waiting for), else `segments_not_ready`.
fn not_ready(buf: &SegmentBuffer) -> SegmentError {
    match buf.lane_mismatch() {
        Some(why) => SegmentError::LaneMismatch(why),
        None => SegmentError::NotReady {
            retry_after_secs: retry_after(buf.backoff_left()),
        },
    }
}

/// `Retry-After` for a backoff of `left`: whole seconds, rounded up, at least 1.
fn retry_after(left: Duration) -> u64 {
    left.as_millis().div_ceil(1000).max(1) as u64
}
