//! Errors of the segment engine: small, allocation-free on the id path.

use thiserror::Error;

use super::biz_tag::BizTagError;
use super::store::StoreError;

/// Why the segment engine could not hand out ids.
#[derive(Debug, Error)]
pub enum SegmentError {
    /// The tag failed validation.
    #[error(transparent)]
    InvalidTag(#[from] BizTagError),
    /// No `leaf_alloc` row exists for the tag.
    #[error("unknown biz_tag")]
    UnknownTag,
    /// The next segment would pass `i64::MAX`.
    #[error("biz_tag exhausted: its next segment would pass i64::MAX")]
    Exhausted,
    /// Both segments are spent and no new one arrived within the deadline.
    #[error("no segment ready for this biz_tag (database unreachable or slow)")]
    NotReady {
        /// A hint for `Retry-After`, in seconds.
        retry_after_secs: u64,
    },
    /// A store call (lookup) failed.
    #[error("store error")]
    Store(#[source] StoreError),
}

impl From<StoreError> for SegmentError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Self::UnknownTag,
            StoreError::Exhausted => Self::Exhausted,
            other => Self::Store(other),
        }
    }
}
