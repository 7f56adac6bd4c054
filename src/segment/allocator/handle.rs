//! [`TagHandle`]: one tag of a [`SegmentAllocator`], resolved once (benches and embedders that
//! serve one tag skip the tag map's lookup per id).

use std::sync::Arc;

use super::SegmentAllocator;
use crate::segment::buffer::{SegmentBuffer, Take};
use crate::segment::error::SegmentError;

/// One tag of a [`SegmentAllocator`], resolved once.
#[derive(Clone)]
pub struct TagHandle {
    pub(super) engine: SegmentAllocator,
    pub(super) buffer: Arc<SegmentBuffer>,
}

impl TagHandle {
    /// The fast path: one `fetch_add` and a few loads; `None` when the segment is spent (use
    /// [`Self::next_id`]) or the tag was deleted.
    #[inline]
    pub fn try_next_id(&self) -> Option<i64> {
        match self.buffer.try_next() {
            Take::Id { id, preload } => {
                if preload {
                    self.engine.start_load(&self.buffer);
                }
                Some(id)
            }
            Take::Beyond => None,
        }
    }

    /// The next id, waiting for a load if the segments are spent (the lease gate's refusal as
    /// in [`SegmentAllocator::next_id`]).
    pub async fn next_id(&self) -> Result<i64, SegmentError> {
        if let Some(id) = self.try_next_id() {
            return Ok(id);
        }
        if let Some(why) = self.engine.inner.config.lease_gate.refusal() {
            return Err(SegmentError::LossyDatabase(why));
        }
        let mut out = Vec::with_capacity(1);
        self.engine
            .fill_buffer(&self.buffer, 1, &mut out)
            .await
            .map_err(|e| self.engine.refusal_or(e))?;
        Ok(out[0])
    }

    /// The tag's buffer.
    pub fn buffer(&self) -> &Arc<SegmentBuffer> {
        &self.buffer
    }
}
