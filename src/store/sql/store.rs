//! The store body every SQL database shares, written once: [`SegmentStore`] and
//! [`WorkerStore`] for any [`DialectStore`], the trait a database implements with only what it
//! does its own way (the write that grants ids, and the admin writes whose transaction shapes
//! differ on purpose: see `mysql` and `sqlite`). The reads and the worker-id store are the
//! generic functions of `sql` and `worker_sql`, called from here and nowhere else, so a third
//! database adds its [`Dialect`] constants, its `DialectStore` methods and its migrations.

use async_trait::async_trait;
use sqlx::{Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::sql::{self, Dialect, Session, Sessions, Statement};
use super::unavailable;
use super::worker_sql;
use crate::segment::{Lease, NewTag, SegmentStore, StoreError, TagRow};
use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};

/// [`SegmentStore::return_unused`]: moves `max_id` back from the end of the last lease (`to`)
/// to its first id never handed out (`from`), only if no other lease moved it since.
static RETURN_UNUSED: Statement = Statement::new(
    "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP \
     WHERE biz_tag = ? AND max_id = ?",
);

/// What one SQL database does its own way; the rest of both store traits comes from the
/// blanket implementations below.
#[async_trait]
pub(crate) trait DialectStore: Send + Sync + 'static {
    /// The sqlx driver, with the statement texts that differ.
    type Db: Dialect;

    /// The connection pool.
    fn pool(&self) -> &Pool<Self::Db>;

    /// Whether every shared statement must run in a transaction of its own, to keep one server
    /// connection from its prepare to its execute (PostgreSQL behind PgBouncer's transaction
    /// pooling, see `super::postgres`). `false` unless a store says otherwise.
    fn pinned(&self) -> bool {
        false
    }

    /// Where the shared statements run.
    fn sessions(&self) -> Sessions<'_, Self::Db> {
        Sessions {
            pool: self.pool(),
            pinned: self.pinned(),
        }
    }

    /// [`SegmentStore::lease`]: the write that grants ids.
    async fn lease_range(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError>;

    /// [`SegmentStore::create_tag`], refusing a start below the tag's tombstone.
    async fn insert_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError>;

    /// [`SegmentStore::update_tag`].
    async fn change_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError>;

    /// [`SegmentStore::delete_tag`], leaving a tombstone at the tag's high-water mark.
    async fn remove_tag(&self, biz_tag: &str) -> Result<bool, StoreError>;
}

#[async_trait]
impl<S> SegmentStore for S
where
    S: DialectStore,
    for<'c> &'c mut <S::Db as sqlx::Database>::Connection: Executor<'c, Database = S::Db>,
    <S::Db as sqlx::Database>::Arguments: IntoArguments<S::Db>,
    for<'a> &'a str: Encode<'a, S::Db> + Type<S::Db>,
    for<'a> i64: Encode<'a, S::Db> + Type<S::Db>,
    (String,): for<'r> FromRow<'r, <S::Db as sqlx::Database>::Row>,
{
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.lease_range(biz_tag, step).await
    }

    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        sql::get_tag(self.sessions(), biz_tag).await
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        sql::list_tag_names(self.sessions()).await
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        sql::list_tags(self.sessions()).await
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

    async fn ping(&self) -> Result<(), StoreError> {
        sql::ping(self.sessions()).await
    }

    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        if from >= to || from < 0 {
            return Ok(false);
        }
        let cas = sqlx::query::<S::Db>(RETURN_UNUSED.text::<S::Db>())
            .persistent(self.sessions().persistent())
            .bind(from)
            .bind(biz_tag)
            .bind(to);
        // The same shape as the worker-lease writes: SQLite in an explicit transaction whose
        // COMMIT is checked (`super::sqlite`), MySQL and PostgreSQL one autocommit statement
        // whose answer means committed (on Galera, certified), or a pinned transaction behind
        // PgBouncer.
        let done = match <S::Db as Dialect>::WRITE_BEGIN {
            Some(begin) => {
                let mut tx = self.pool().begin_with(begin).await.map_err(unavailable)?;
                let done = cas.execute(&mut *tx).await.map_err(unavailable)?;
                tx.commit().await.map_err(unavailable)?;
                done
            }
            None => {
                let mut s = Session::open(self.sessions()).await.map_err(unavailable)?;
                let done = cas.execute(s.conn()).await.map_err(unavailable)?;
                s.finish().await.map_err(unavailable)?;
                done
            }
        };
        Ok(<S::Db as Dialect>::rows_affected(&done) == 1)
    }
}

#[async_trait]
impl<S> WorkerStore for S
where
    S: DialectStore,
    for<'c> &'c mut <S::Db as sqlx::Database>::Connection: Executor<'c, Database = S::Db>,
    <S::Db as sqlx::Database>::Arguments: IntoArguments<S::Db>,
    for<'a> &'a str: Encode<'a, S::Db> + Type<S::Db>,
    for<'a> i64: Encode<'a, S::Db> + Type<S::Db>,
    (i64, i64, i64, String): for<'r> FromRow<'r, <S::Db as sqlx::Database>::Row>,
    (i64,): for<'r> FromRow<'r, <S::Db as sqlx::Database>::Row>,
{
    async fn assign_disposable(
        &self,
        node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError> {
        worker_sql::assign_disposable(self.sessions(), node, max_worker_id).await
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        worker_sql::acquire_lease(self.sessions(), node, lease_ms, max_worker_id, now_ms).await
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        worker_sql::heartbeat(
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
        worker_sql::release(self.sessions(), worker_id, owner, last_timestamp_ms).await
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        worker_sql::record_clock_back(self.sessions(), worker_id, owner, clock_back).await
    }
}
