//! Errors of the segment engine: small, allocation-free on the id path (an error that names its
//! tag allocates only when it is built, on the cold path).

use thiserror::Error;

use super::biz_tag::{BizTag, BizTagError};
use super::spec::error::SpecError;
use super::store::StoreError;

/// Why the segment engine could not hand out ids.
#[derive(Debug, Error)]
pub enum SegmentError {
    /// The tag failed validation.
    #[error(transparent)]
    InvalidTag(#[from] BizTagError),
    /// No `leaf_alloc` row exists for the tag (named, as the request spelt it).
    #[error("unknown biz_tag \"{0}\"")]
    UnknownTag(BizTag),
    /// The next segment would pass `i64::MAX`.
    #[error("biz_tag exhausted: its next segment would pass i64::MAX")]
    Exhausted,
    /// Both segments are spent and no new one arrived within the deadline.
    #[error("no segment ready for this biz_tag (database unreachable or slow)")]
    NotReady {
        /// A hint for `Retry-After`, in seconds.
        retry_after_secs: u64,
    },
    /// The database's settings can lose a committed lease in a crash, so no lease is taken
    /// (the lease gate, `crate::lease_gate`); names the setting and its fix.
    #[error("no lease from this database: {0}")]
    LossyDatabase(String),
    /// The tag is formatted (`crate::shapes`): its ids are text, served by
    /// [`SegmentAllocator::next_texts`](super::SegmentAllocator::next_texts), never numbers.
    #[error("biz_tag \"{0}\" is formatted: its ids are text")]
    Formatted(BizTag),
    /// The current period of a formatted tag used up the sequence's width: no id until the
    /// next period starts. The width never grows and the sequence never wraps.
    #[error("sequence of period {period} is exhausted: the next period starts at {next_start}")]
    SequenceExhausted {
        /// The period's key.
        period: String,
        /// When the next period starts (RFC 3339).
        next_start: String,
        /// Seconds until then (for `Retry-After`), at least 1.
        retry_after_secs: u64,
    },
    /// A formatted tag's stored format could not be read or used (named).
    #[error("biz_tag \"{tag}\" has an unusable format: {why}")]
    BadFormat {
        /// The tag.
        tag: BizTag,
        /// Why.
        why: SpecError,
    },
    /// A permuted tag whose key this server does not hold (`[shapes.keys]`): served by no
    /// other means, so another server with the key may answer.
    #[error(
        "biz_tag \"{tag}\" is permuted with key \"{key_id}\", which this server does not hold \
         (shapes.keys.{key_id} in its configuration)"
    )]
    KeyUnavailable {
        /// The tag.
        tag: BizTag,
        /// The key's id.
        key_id: String,
    },
    /// A permuted tag whose key here is not the one its database records for the key id
    /// ([`SpecError::KeyMismatch`]): served and decoded by no other means, so a server with
    /// the right key may answer.
    #[error("biz_tag \"{tag}\" is permuted, and {why}")]
    KeyMismatch {
        /// The tag.
        tag: BizTag,
        /// The key id, and both check values.
        why: SpecError,
    },
    /// The lane's database records another slot than configured, or another reachable lane
    /// database records the own slot (`super::lanes::claims`): no lease is taken. Not an
    /// outage; asking again gives the same answer until an operator acts.
    #[error("{0}")]
    LaneMismatch(String),
    /// A store call (lookup) failed.
    #[error("store error")]
    Store(#[source] StoreError),
}

impl SegmentError {
    /// A store error of a call about `tag`: `NotFound` becomes [`Self::UnknownTag`] naming it,
    /// `Exhausted` [`Self::Exhausted`], anything else [`Self::Store`].
    pub fn from_store(e: StoreError, tag: &BizTag) -> Self {
        match e {
            StoreError::NotFound => Self::UnknownTag(tag.clone()),
            StoreError::Exhausted => Self::Exhausted,
            e @ (StoreError::LaneMismatch { .. } | StoreError::SlotClash { .. }) => {
                Self::LaneMismatch(e.to_string())
            }
            other => Self::Store(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_not_found_names_the_tag() {
        let tag = BizTag::parse("orders").unwrap();
        let e = SegmentError::from_store(StoreError::NotFound, &tag);
        assert!(
            matches!(&e, SegmentError::UnknownTag(t) if t == &tag),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "unknown biz_tag \"orders\"");
        assert!(matches!(
            SegmentError::from_store(StoreError::Exhausted, &tag),
            SegmentError::Exhausted
        ));
        assert!(matches!(
            SegmentError::from_store(StoreError::BadRow("x".into()), &tag),
            SegmentError::Store(StoreError::BadRow(_))
        ));
    }
}
