//! The store body every SQL database shares, written once: the segment store's roles
//! ([`LeaseStore`], [`TagAdminStore`], [`SpecStore`], [`LaneRegistry`]) and
//! [`WorkerStore`] for any [`DialectStore`], the trait a database implements with only what it
//! does its own way (the write that grants ids, and the admin writes whose transaction shapes
//! differ on purpose: see `mysql` and `sqlite`). The rest are the generic functions of `tags`
//! and `workers`, called from here and nowhere else, so a new database adds its [`Dialect`],
//! its `DialectStore` methods and its migrations.

use super::dialect::Dialect;
use super::session::Sessions;
use super::{formats, keys, lanes, tags, workers};
use crate::segment::{
    FormattedCreate, LaneRegistry, Lease, LeaseStore, NewTag, SpecStore, StoreError, TagAdminStore,
    TagRow,
};
use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};
use async_trait::async_trait;

/// What one SQL database does its own way; the rest of the store traits comes from the
/// blanket implementations below.
#[async_trait]
pub(crate) trait DialectStore: Send + Sync + 'static {
    /// The statement texts that differ, and the sqlx driver they run on.
    type Dialect: Dialect;

    /// Where the shared statements run: the store's pool, and whether every statement must run
    /// in a transaction of its own to keep one server connection from its prepare to its
    /// execute (PostgreSQL behind PgBouncer's transaction pooling, see
    /// `crate::store::postgres`).
    fn sessions(&self) -> Sessions<'_, Self::Dialect>;

    /// [`LeaseStore::lease`]: the write that grants ids.
    async fn lease_range(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError>;

    /// [`TagAdminStore::create_tag`], refusing a start below the tag's tombstone, and a name
    /// whose format is stored (checked inside the insert's own statement or transaction, so a
    /// formatted create racing it is decided by the row's key: see
    /// [`TagAdminStore::create_formatted_tag`]).
    async fn insert_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError>;

    /// [`TagAdminStore::update_tag`].
    async fn change_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError>;

    /// [`TagAdminStore::delete_tag`], leaving a tombstone at the tag's high-water mark.
    async fn remove_tag(&self, biz_tag: &str) -> Result<bool, StoreError>;
}

#[async_trait]
impl<S, D> LeaseStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.lease_range(biz_tag, step).await
    }

    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        tags::return_unused(self.sessions(), biz_tag, from, to).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        tags::ping(self.sessions()).await
    }
}

#[async_trait]
impl<S, D> TagAdminStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        tags::get_tag(self.sessions(), biz_tag).await
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        tags::list_tags(self.sessions()).await
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        tags::list_tag_names(self.sessions()).await
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.insert_tag(tag).await
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.change_tag(biz_tag, step, description).await
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.remove_tag(biz_tag).await
    }

    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        lanes::tombstone(self.sessions(), biz_tag).await
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        lanes::list_tombstones(self.sessions()).await
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<FormattedCreate, StoreError> {
        formats::create_formatted_tag(self.sessions(), tag, format).await
    }
}

#[async_trait]
impl<S, D> SpecStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        formats::get_format(self.sessions(), biz_tag).await
    }

    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        formats::list_formats(self.sessions()).await
    }

    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        formats::put_format(self.sessions(), biz_tag, format).await
    }

    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        keys::key_check(self.sessions(), key_id).await
    }

    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        keys::bind_key(self.sessions(), key_id, check).await
    }
}

#[async_trait]
impl<S, D> LaneRegistry for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        lanes::lane_slot(self.sessions()).await
    }

    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        lanes::claim_lane_slot(self.sessions(), slot).await
    }

    async fn lane_record(&self) -> Result<Option<crate::segment::LaneRecord>, StoreError> {
        lanes::lane_record(self.sessions()).await
    }
}

#[async_trait]
impl<S, D> WorkerStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn assign_disposable(
        &self,
        node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError> {
        workers::assign_disposable(self.sessions(), node, max_worker_id).await
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        workers::acquire_lease(self.sessions(), node, lease_ms, max_worker_id, now_ms).await
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        workers::heartbeat(
            self.sessions(),
            worker_id,
            owner,
            lease_until_ms,
            last_timestamp_ms,
        )
        .await
    }

    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError> {
        workers::release(self.sessions(), worker_id, owner, last_timestamp_ms).await
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        workers::record_clock_back(self.sessions(), worker_id, owner, clock_back).await
    }
}
