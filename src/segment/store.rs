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
    /// [`TagAdminStore::create_tag`] asked to start a deleted tag below the highest `max_id` it
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
    /// The lane slot this database records (`leafid_lane`) is not the one this server is
    /// configured with for it (`lanes.slot`, or no lanes at all), so no lease is taken: two
    /// lanes with one slot, or a server without lanes beside them, could hand out one id twice.
    /// Not an outage: the database answered, and asking again gives the same answer until an
    /// operator changes the configuration, with one exception: another region's lane that
    /// records no slot yet (`recorded: None`) is recorded at its own region's first lease.
    #[error("{}", lane_mismatch(*.recorded, *.configured))]
    LaneMismatch {
        /// The slot the database records, `None` if it records none.
        recorded: Option<u8>,
        /// The slot this server is configured to use the database as, `None` for a server
        /// without lanes.
        configured: Option<u8>,
    },
    /// Two reachable lane databases record one slot (two claim ids, see [`LaneRecord`]), and
    /// this server's own database is the later claim (or the claims are too close in time to
    /// order), or would become it: its lane is refused, since two databases serving one slot
    /// hand out one id twice. Not an outage: it holds until an operator resolves the clash.
    #[error(
        "lane slot clash: slot {slot} is recorded by two databases ({detail}): this server's \
         own lane is refused (two databases serving one slot could hand out one id twice)"
    )]
    SlotClash {
        /// The slot both databases record.
        slot: u8,
        /// Which databases, and why this one is refused.
        detail: String,
    },
    /// The database runs with a setting that can lose a committed lease in a crash, and
    /// `database.allow_lossy_commits` is off: nothing was leased. The message names each
    /// setting, its value, the fix and the override (`crate::store::durability`).
    #[error("{0}")]
    LossyDatabase(String),
}

/// The message of [`StoreError::LaneMismatch`].
fn lane_mismatch(recorded: Option<u8>, configured: Option<u8>) -> String {
    match (recorded, configured) {
        (Some(recorded), None) => format!(
            "lane mismatch: this database is lane slot {recorded} (leafid_lane), and this server \
             has no lanes.slot: it would issue ids beside the lanes' and is refused"
        ),
        (Some(recorded), Some(configured)) => format!(
            "lane mismatch: this database is lane slot {recorded}, configured as slot \
             {configured}: refused (two lanes with one slot could hand out one id)"
        ),
        (None, Some(configured)) => format!(
            "lane slot {configured}'s database records no slot yet: its own region's servers \
             record it at their first lease"
        ),
        (None, None) => "lane mismatch: no slot recorded and none configured".to_owned(),
    }
}

/// Persistent state of the segment engine, as four roles, each a trait of its own with no
/// default bodies, so that a store (or a forwarding wrapper such as
/// [`LaneStore`](super::lanes::LaneStore)) that forgets one method does not compile:
///
/// - [`LeaseStore`]: the id path (`leaf_alloc`'s `max_id`): lease, give back, ping;
/// - [`TagAdminStore`]: the rows as the admin API and the refresh see them, and the
///   tombstones a delete leaves (`leafid_tag_tombstone`);
/// - [`SpecStore`]: a tag's stored spec, today the format of a formatted tag
///   (`leafid_tag_format`), and the check value of each permutation key id
///   (`leafid_shape_key`);
/// - [`LaneRegistry`]: which lane slot a database is (`leafid_lane`).
///
/// `SegmentStore` is all four, implemented for every type that implements them, so
/// `Arc<dyn SegmentStore>` is what the engine holds.
pub trait SegmentStore: LeaseStore + TagAdminStore + SpecStore + LaneRegistry {}

impl<T: LeaseStore + TagAdminStore + SpecStore + LaneRegistry> SegmentStore for T {}

/// The id path: leases from `leaf_alloc` and their give-back.
///
/// Implementations must make leases from any number of servers disjoint (the row lock of one
/// transaction, or one atomic statement) and must never let `max_id` pass `i64::MAX`.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Adds `step` (or the row's own step when `None`; never less than the row's step) to
    /// `max_id` and returns the new range. The range is returned only once it is durably
    /// committed.
    /// Near `i64::MAX` the lease is cut to what remains; with nothing left, [`StoreError::Exhausted`].
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError>;
    /// Gives back the unused end of a server's last lease: one compare-and-set,
    /// `UPDATE leaf_alloc SET max_id = from WHERE biz_tag = ? AND max_id = to`, so the next lease
    /// (by any server) starts at `from` again. `to` must be the `max_id` of the caller's last
    /// [`Lease`] and every id in `[from, to)` leased by the caller and never handed out. `true`
    /// once the change is durably committed; `false` if the row is not at `to` any more (another
    /// server leased, or the tag is gone) or `from >= to`: then nothing changed. One statement:
    /// applied whole or not at all, whatever happens to the caller.
    ///
    /// A store that cannot give back answers `Ok(false)`, which is always safe, and says so in
    /// its implementation.
    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError>;
    /// A cheap round trip, for readiness.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// The `leaf_alloc` rows as the admin API and the periodic refresh see them, and the
/// tombstones a delete leaves behind.
#[async_trait]
pub trait TagAdminStore: Send + Sync + 'static {
    /// One row, if present.
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError>;
    /// All rows, ordered by tag.
    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError>;
    /// Every tag name, in any order: what the periodic refresh needs (the SQL stores read only
    /// the key column, a fraction of decoding whole rows when there are 100,000 tags). A store
    /// with no cheaper way maps [`TagAdminStore::list_tags`].
    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError>;
    /// Inserts a row (its values checked by [`NewTag::new`]); [`StoreError::AlreadyExists`] if
    /// the tag is taken (also when another caller creates it at the same moment: exactly one
    /// of them succeeds), and also when a format is stored for this exact name (a deleted
    /// formatted tag keeps its format for good: the name comes back only with that format,
    /// through [`TagAdminStore::create_formatted_tag`]), checked inside the insert's own
    /// statement or transaction,
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
    /// The high-water mark a deleted tag left (its tombstone), `None` if it was never deleted
    /// here. Compared exactly with the stored spelling of the tag.
    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError>;
    /// Every tag name with a tombstone here, in any order, stored spellings: what the lanes'
    /// watch reads each second to carry a delete made on this lane to the others
    /// (`crate::segment::lanes::watch`). Bounded by the tags ever deleted.
    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError>;
    /// Creates a formatted tag: its format (`format`, the JSON `leafid_tag_format` holds) and
    /// its `leaf_alloc` row in ONE transaction, so no reader ever sees one without the other
    /// and a create that loses a race leaves nothing behind. Inside it:
    ///
    /// - the format is inserted where the name has none; a stored format equal to `format`
    ///   (compared as [`TagFormat`](crate::shapes::TagFormat)s, not as text) is accepted (a
    ///   retried create, or a deleted formatted tag created again); another one is
    ///   [`FormattedCreate::OtherFormat`] (or [`StoreError::AlreadyExists`] while the tag's
    ///   row exists, as for any create of an existing tag) and nothing is written;
    /// - the row is inserted under the tombstone rule of [`TagAdminStore::create_tag`]
    ///   ([`StoreError::BelowDeletedMaxId`]); a row already there (also one a racing create
    ///   inserted a moment before) is [`StoreError::AlreadyExists`], and the whole transaction,
    ///   the format with it, rolls back.
    ///
    /// The row's primary key decides every race, with a plain create too (which refuses a name
    /// whose format is stored, see `create_tag`): exactly one create wins, and a row has a
    /// format exactly when the formatted create won. Deadlocks, lock wait timeouts and
    /// serialization failures are retried a bounded number of times: a loser then finds the
    /// winner (`AlreadyExists`), never an outage.
    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<FormattedCreate, StoreError>;
}

/// What [`TagAdminStore::create_formatted_tag`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormattedCreate {
    /// The format (written now, or the same one found) and the row (written now).
    Created(TagRow),
    /// The name keeps another format, for good (here the stored JSON): nothing was written.
    OtherFormat(String),
}

/// A tag's stored spec: today the format of a formatted tag (`crate::shapes::TagFormat` as
/// JSON), written once with the tag's row and never changed.
#[async_trait]
pub trait SpecStore: Send + Sync + 'static {
    /// The format of a formatted tag, `None` for a plain tag. Compared exactly with the stored
    /// spelling of the tag.
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError>;
    /// Every formatted tag and its format (JSON), in any order, for the periodic refresh.
    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError>;
    /// Records a tag's format once and for good: `true` if written, `false` if the tag had a
    /// format already (left unchanged: a tag's format never changes, since ids written under
    /// two formats could read alike). A new formatted tag is created with its format in one
    /// transaction ([`TagAdminStore::create_formatted_tag`]); this writes a format alone (tests;
    /// the server no longer does). Two callers racing with different formats: exactly one gets
    /// `true`, and both read the winner's format afterwards.
    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError>;
    /// The check value recorded for the key id `key_id` (`leafid_shape_key`,
    /// `crate::shapes::key_check`), `None` when no server has used the key id with this
    /// database yet. Compared exactly with the stored spelling of the key id. Reads only (the
    /// `leafid keys check` command must not bind a key by looking at it).
    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError>;
    /// Records `check` as the check value of the key id `key_id` unless one is recorded, and
    /// returns the one recorded (which differs from `check` when another key was used under
    /// the key id first: the caller refuses the key). Written once and never changed. Servers
    /// racing to record different values all read back the one written; none fails because
    /// another wrote first.
    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError>;
}

/// Which lane slot a database is (`crate::segment::lanes`): recorded once, never changed.
#[async_trait]
pub trait LaneRegistry: Send + Sync + 'static {
    /// The lane slot recorded in this database, `None` when it is no lane.
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError>;
    /// Records `slot` as this database's lane slot unless one is recorded already; returns the
    /// slot recorded (which may differ from `slot`: the caller refuses a mismatch with
    /// [`StoreError::LaneMismatch`]). Servers racing to record different slots all read back
    /// the one slot that was recorded; none fails because another wrote first.
    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError>;
    /// The slot recorded with the identity of the claim that recorded it, `None` when no slot
    /// is recorded. A slot recorded without a claim id (before migration 0007) is given one
    /// here, once: servers racing all read back the one written.
    async fn lane_record(&self) -> Result<Option<LaneRecord>, StoreError>;
}

/// A database's lane slot and the identity of the claim that recorded it ([`LaneRegistry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneRecord {
    /// The slot.
    pub slot: u8,
    /// The claim's identity, [`LaneRecord::new_claim_id`]: one per database, written once.
    pub claim_id: String,
}

impl LaneRecord {
    /// A new claim id: the time in ms (13 digits, so ids order by it) and 128 random bits.
    pub fn new_claim_id() -> String {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("{ms:013}-{:032x}", rand::random::<u128>())
    }

    /// The claim's time in ms since the epoch, from its id (`None` for an id not made by
    /// [`LaneRecord::new_claim_id`]).
    pub fn claimed_ms(&self) -> Option<u64> {
        self.claim_id.split('-').next()?.parse().ok()
    }
}
