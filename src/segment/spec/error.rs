//! [`SpecError`]: why a tag's spec cannot be made, stored or used. A file of its own, below
//! both `spec` and `segment::error` (which carries it in `SegmentError::BadFormat`), so the
//! two never import each other.

use crate::segment::biz_tag::{BizTag, BizTagError, MAX_BIZ_TAG_LEN};
use crate::shapes::period::PeriodError;
use crate::shapes::permute::PermuteError;
use crate::shapes::{FormatError, Reset};

/// Why a spec cannot be made, stored or used.
///
/// Whose fault it is follows from where it comes from: from [`super::TagSpec::check_new`] or
/// [`crate::segment::allocator::FormatConflict::Spec`] it is the caller's (a format an admin gave);
/// inside [`crate::segment::SegmentError::BadFormat`] it is the server's (a stored spec it cannot use).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The JSON is not a format (serde's reason).
    #[error("{why}")]
    Json {
        /// serde's reason.
        why: String,
    },
    /// The format breaks its own rules ([`crate::shapes::TagFormat::validate`]).
    #[error(transparent)]
    InvalidFormat(#[from] FormatError),
    /// The zone is unknown, or the calendar out of range.
    #[error(transparent)]
    Zone(#[from] PeriodError),
    /// The tag's name leaves no room for its period rows within `leaf_alloc.biz_tag`.
    #[error(
        "a formatted biz_tag with a {reset:?} reset is at most {max_tag_len} bytes (its periods \
         are rows named biz_tag@period within leaf_alloc's {MAX_BIZ_TAG_LEN})"
    )]
    RowNameTooLong {
        /// The format's reset.
        reset: Reset,
        /// The longest tag it allows.
        max_tag_len: usize,
    },
    /// A start value past the width: every period would be spent before its first id.
    #[error(
        "max_id {max_id} is past the width of this format (its largest sequence number is \
         {max}): every period would be spent before its first id"
    )]
    StartBeyondWidth {
        /// The start value asked.
        max_id: i64,
        /// The width's largest sequence number.
        max: u64,
    },
    /// A permuted format under a key this server does not hold.
    #[error(
        "this server holds no key \"{key_id}\": add shapes.keys.{key_id} (a key file) to the \
         configuration of every server first"
    )]
    KeyMissing {
        /// The key's id.
        key_id: String,
    },
    /// This server's key for a key id is not the one the database records for it (its check
    /// value differs, `crate::shapes::key_check`): the key id's tags are refused here.
    #[error(
        "the key file of key id \"{key_id}\" does not match the key this database was first \
         used with (check value {recorded}; this server's key has {check}): every server needs \
         the very same key file; see docs/shapes.md#rotating-a-key"
    )]
    KeyMismatch {
        /// The key's id.
        key_id: String,
        /// This server's check value of it.
        check: String,
        /// The check value the database records.
        recorded: String,
    },
    /// The permutation cannot be made (its domain).
    #[error(transparent)]
    Permute(#[from] PermuteError),
    /// A stored spec under a name that is not a tag.
    #[error(transparent)]
    InvalidTag(#[from] BizTagError),
    /// The tag is plain: its ids are numbers, it has no format.
    #[error("biz_tag \"{tag}\" is not formatted: its ids are numbers")]
    NotFormatted {
        /// The tag.
        tag: BizTag,
    },
}
