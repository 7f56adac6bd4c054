//! The storage contract of the segment engine; `crate::store` implements it per database.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use thiserror::Error;

use super::tag_rules::NewTag;

/// One `leaf_alloc` row as the engine and the admin API see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagRow {
    /// The business tag (primary key).
    pub biz_tag: String,
    /// The first id not yet leased to any server: the next lease starts here.
    pub max_id: i64,
    /// The DBA's step: the floor of the adaptive step and the size of a first lease.
    pub step: i64,
    /// Free text for humans.
    pub description: Option<String>,
    /// When the row last changed (a lease or an admin write).
    pub update_time: Option<DateTime<Utc>>,
}

/// A range of ids leased from the database: `[max_id - leased, max_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// `max_id` after the lease: one past the last id of the segment.
    pub max_id: i64,
    /// How many ids the lease added: the step asked, or the row's step when that is larger (the
    /// DBA's step is a floor); smaller only at the end of the i64 range.
    pub leased: i64,
    /// The row's step as stored, when the lease read it (every lease but MySQL's single-statement
    /// one, which only guarantees that the row's step was not above the step leased).
    pub db_step: Option<i64>,
}

/// What can go wrong in a store call.
#[derive(Debug, Error)]
pub enum StoreError {
    /// No row for this tag.
    #[error("no leaf_alloc row for this biz_tag")]
    NotFound,
    /// A row for this tag exists already.
    #[error("a leaf_alloc row for this biz_tag exists")]
    AlreadyExists,
    /// `max_id` is at `i64::MAX`: the tag cannot issue another id.
    #[error("biz_tag exhausted: max_id reached i64::MAX")]
    Exhausted,
    /// The row holds values the engine cannot use (e.g. `step <= 0`).
    #[error("leaf_alloc row is invalid: {0}")]
    BadRow(String),
    /// [`SegmentStore::create_tag`] asked to start a deleted tag below the highest `max_id` it
    /// reached before deletion, which would issue its ids a second time. Creating it with
    /// `max_id >= high_water` is the override.
    #[error(
        "this biz_tag was deleted at max_id {high_water}; starting it below that would re-issue its ids"
    )]
    BelowDeletedMaxId {
        /// The deleted tag's high-water mark: every id it handed out is below it.
        high_water: i64,
    },
    /// The database could not be reached or failed; the call may be retried.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database runs with a setting that can lose a committed lease in a crash, and
    /// `database.allow_lossy_commits` is off: nothing was leased. The message names each
    /// setting, its value, the fix and the override (`crate::store::durability`).
    #[error("{0}")]
    LossyDatabase(String),
}

/// Persistent state of the segment engine: the `leaf_alloc` table.
///
/// Implementations must make leases from any number of servers disjoint (the row lock of one
/// transaction, or one atomic statement) and must never let `max_id` pass `i64::MAX`.
#[async_trait]
pub trait SegmentStore: Send + Sync + 'static {
    /// Adds `step` (or the row's own step when `None`; never less than the row's step) to
    /// `max_id` and returns the new range. The range is returned only once it is durably
    /// committed.
    /// Near `i64::MAX` the lease is cut to what remains; with nothing left, [`StoreError::Exhausted`].
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError>;
    /// One row, if present.
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError>;
    /// All rows, ordered by tag.
    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError>;
    /// Every tag name, in any order: what the periodic refresh needs (the SQL stores read only
    /// the key column, a fraction of decoding whole rows when there are 100,000 tags).
    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .list_tags()
            .await?
            .into_iter()
            .map(|r| r.biz_tag)
            .collect())
    }
    /// Inserts a row (its values checked by [`NewTag::new`]); [`StoreError::AlreadyExists`] if
    /// the tag is taken,
    /// [`StoreError::BelowDeletedMaxId`] if the tag was deleted at a higher `max_id` than asked.
    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError>;
    /// Changes step and/or description (checked by the caller, see
    /// [`TagUpdate`](super::TagUpdate)); `Ok(None)` if the tag does not exist.
    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError>;
    /// Deletes a row, keeping its `max_id` as the tag's high-water mark (the larger of any
    /// earlier one), recorded before the row goes; `false` if it did not exist.
    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError>;
    /// A cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;
    /// Gives back the unused end of a server's last lease: one compare-and-set,
    /// `UPDATE leaf_alloc SET max_id = from WHERE biz_tag = ? AND max_id = to`, so the next lease
    /// (by any server) starts at `from` again. `to` must be the `max_id` of the caller's last
    /// [`Lease`] and every id in `[from, to)` leased by the caller and never handed out. `true`
    /// once the change is durably committed; `false` if the row is not at `to` any more (another
    /// server leased, or the tag is gone) or `from >= to`: then nothing changed. One statement:
    /// applied whole or not at all, whatever happens to the caller.
    ///
    /// The default gives nothing back (`false`), which is always safe.
    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        let _ = (biz_tag, from, to);
        Ok(false)
    }
    /// The format of a formatted tag (`crate::shapes::TagFormat` as JSON), `None` for a plain
    /// tag. Compared exactly with the stored spelling of the tag.
    ///
    /// The default keeps no formats: every tag is plain.
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        let _ = biz_tag;
        Ok(None)
    }
    /// Every formatted tag and its format (JSON), for the periodic refresh.
    ///
    /// The default keeps no formats.
    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(Vec::new())
    }
    /// The lane slot recorded in this database (`crate::segment::lanes`), `None` when it is no
    /// lane. The default: no lane.
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        Ok(None)
    }
    /// Records `slot` as this database's lane slot unless one is recorded already; returns the
    /// slot recorded (which may differ from `slot`: the caller refuses a mismatch). The default
    /// keeps no lanes: an error.
    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        let _ = slot;
        Err(StoreError::Unavailable(
            "this store keeps no lane slot".into(),
        ))
    }
    /// The high-water mark a deleted tag left (its tombstone), `None` if it was never deleted
    /// here. The default: none.
    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        let _ = biz_tag;
        Ok(None)
    }
    /// Records a tag's format once and for good: `true` if written, `false` if the tag had a
    /// format already (left unchanged: a tag's format never changes, since ids written under
    /// two formats could read alike). Written before the tag's row, so a tag never serves
    /// before its format exists.
    ///
    /// The default keeps no formats: an error.
    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        let _ = (biz_tag, format);
        Err(StoreError::Unavailable(
            "this store keeps no tag formats".into(),
        ))
    }
}
