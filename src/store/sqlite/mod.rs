//! `leaf_alloc` in an embedded SQLite file (the default: nothing to install).
//!
//! One connection only: SQLite has one writer, and a pool of several makes a lease wait on the
//! busy lock for seconds under load. WAL journal with `synchronous = FULL`: leases are rare, and
//! a lease lost to a power cut after it was handed out would let a restart issue its ids again.
//!
//! # Every write commits explicitly, and the commit is checked
//!
//! In autocommit mode SQLite commits a statement when the statement is *reset*, and the driver
//! discards the result of that reset. A lease that was one `UPDATE ... RETURNING` read with
//! `fetch_optional` therefore handed out its range before the commit ran, and a commit that
//! failed (`SQLITE_FULL` on a full disk, an I/O error) rolled the row back while the server used
//! the range: the next lease got the same range again (measured: 1,620 duplicate ids out of
//! 3,050 on a full 4 MiB tmpfs). So every write here (lease, tag create, update, delete, and the
//! worker-lease writes of `crate::store::sql`) runs inside an explicit transaction, each
//! statement runs to completion (`fetch_all`/`execute`, never a half-read cursor), and the
//! result of `COMMIT` is checked: a failed commit is [`StoreError::Unavailable`] and the lease is
//! never used. The connection is then replaced (see [`SqliteStore::connect`]), so the server
//! recovers by itself once the disk has room again. A lease opens with `BEGIN IMMEDIATE`, taking
//! the write lock before it reads, so another process on the same file cannot slip a lease in
//! between. The guard on `max_id` also keeps SQLite from turning an overflowing sum into a float.
//!
//! A tag deleted through [`TagAdminStore::delete_tag`](crate::segment::TagAdminStore::delete_tag) leaves a tombstone in
//! `leafid_tag_tombstone` with its high-water mark; [`TagAdminStore::create_tag`](crate::segment::TagAdminStore::create_tag) refuses to start
//! the tag again below it ([`StoreError::BelowDeletedMaxId`]).
//!
//! Its parts: this file is the store ([`SqliteStore`]); `dialect` spells the shared statements
//! (`crate::store::sql`) for SQLite; `durability` reads `synchronous` and `journal_mode` back
//! from the connection.

pub(crate) mod dialect;
pub(crate) mod durability;

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, Row};
use tracing::instrument;

use self::dialect::SqliteDialect;
use super::errors::{insert_error, lease_without_update, unavailable};
use super::sql::{Dialect, DialectStore, Sessions, SqliteTagRecord};
use crate::segment::{Lease, NewTag, StoreError, TagRow};

/// The SQLite store: a one-connection pool.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
}

/// The file a `sqlite:` URL names; `None` for an in-memory database.
pub fn file_of(url: &str) -> Result<Option<std::path::PathBuf>, sqlx::Error> {
    let opts = SqliteConnectOptions::from_str(url)?;
    let file = opts.get_filename();
    Ok((!url.contains(":memory:") && !file.as_os_str().is_empty()).then(|| file.to_path_buf()))
}

impl SqliteStore {
    /// Opens (creating if needed, with its parent directory) the database at `url`.
    pub async fn connect(url: &str, acquire_timeout: Duration) -> Result<Self, sqlx::Error> {
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        if let Some(dir) = opts
            .get_filename()
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(acquire_timeout)
            // SQLITE_FULL and I/O errors roll a transaction back inside SQLite, so the driver's
            // own ROLLBACK then fails and it keeps counting a transaction that is gone: every
            // later BEGIN on that connection would be refused. A connection that comes back
            // still "in a transaction" is closed instead, and the pool opens a fresh one.
            .after_release(|conn, _meta| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(opts)
            .await?;
        Ok(Self { pool })
    }

    /// Applies `migrations/sqlite` (creates the table and seeds `leaf-segment-test`).
    pub async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }

    /// The pool, for other stores on the same file.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// One lease transaction. The outer error is the driver's (including a failed `COMMIT`);
    /// the inner one is the verdict on the row (unknown, exhausted, invalid).
    async fn lease_once(
        &self,
        biz_tag: &str,
        step: Option<i64>,
    ) -> Result<Result<Lease, StoreError>, sqlx::Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        // An adapted step never goes below the DBA's step: `MAX(?1, step)`.
        let rows = match step {
            Some(step) => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + MAX(?1, step), update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?2 AND max_id <= 9223372036854775807 - MAX(?1, step) RETURNING max_id, step",
            )
            .bind(step)
            .bind(biz_tag),
            None => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?1 AND step > 0 AND max_id <= 9223372036854775807 - step RETURNING max_id, step",
            )
            .bind(biz_tag),
        }
        // fetch_all, not fetch_optional: the statement runs to SQLITE_DONE inside the transaction.
        .fetch_all(&mut *tx)
        .await?;
        let lease = if let Some(row) = rows.first() {
            let (max_id, db_step): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
            Lease {
                max_id,
                leased: step.map_or(db_step, |s| s.max(db_step)),
                db_step: Some(db_step),
            }
        } else {
            // Unknown, invalid, or too close to i64::MAX for a full step. The write lock taken by
            // BEGIN IMMEDIATE keeps this read-then-write atomic.
            let found: Option<(i64, i64)> =
                sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?1")
                    .bind(biz_tag)
                    .fetch_optional(&mut *tx)
                    .await?;
            let rest = match lease_without_update(found) {
                Ok(rest) => rest,
                Err(verdict) => {
                    tx.rollback().await?;
                    return Ok(Err(verdict));
                }
            };
            let done = sqlx::query(
                "UPDATE leaf_alloc SET max_id = 9223372036854775807, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?1 AND max_id = ?2",
            )
            .bind(biz_tag)
            .bind(rest.old_max_id)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() != 1 {
                return Err(sqlx::Error::RowNotFound);
            }
            Lease {
                max_id: i64::MAX,
                leased: i64::MAX - rest.old_max_id,
                db_step: Some(rest.db_step),
            }
        };
        // The lease exists only once SQLite confirmed the commit.
        tx.commit().await?;
        Ok(Ok(lease))
    }
}

#[async_trait]
impl DialectStore for SqliteStore {
    type Dialect = SqliteDialect;

    fn sessions(&self) -> Sessions<'_, SqliteDialect> {
        Sessions::from(&self.pool)
    }

    #[instrument(skip(self), level = "debug")]
    async fn lease_range(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.lease_once(biz_tag, step).await.map_err(unavailable)?
    }

    async fn insert_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(unavailable)?;
        let high_water: Option<i64> =
            sqlx::query_scalar("SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = ?1")
                .bind(&tag.biz_tag)
                .fetch_optional(&mut *tx)
                .await
                .map_err(unavailable)?;
        if let Some(high_water) = high_water.filter(|&hw| tag.max_id < hw) {
            tx.rollback().await.map_err(unavailable)?;
            return Err(StoreError::BelowDeletedMaxId { high_water });
        }
        // A name whose format is stored (a deleted formatted tag keeps it for good) comes back
        // only with that format. Read inside this `BEGIN IMMEDIATE` transaction, which no other
        // writer interleaves with: a formatted create commits its format and row together,
        // before or after this one.
        let formatted: Option<String> =
            sqlx::query_scalar("SELECT biz_tag FROM leafid_tag_format WHERE biz_tag = ?1")
                .bind(&tag.biz_tag)
                .fetch_optional(&mut *tx)
                .await
                .map_err(unavailable)?;
        if formatted.is_some_and(|t| t == tag.biz_tag) {
            tx.rollback().await.map_err(unavailable)?;
            return Err(StoreError::AlreadyExists);
        }
        sqlx::query(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(&tag.biz_tag)
        .bind(tag.max_id)
        .bind(tag.step)
        .bind(&tag.description)
        .execute(&mut *tx)
        .await
        .map_err(insert_error)?;
        let row: SqliteTagRecord = sqlx::query_as(SqliteDialect::SELECT_TAG)
            .bind(&tag.biz_tag)
            .fetch_one(&mut *tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(row.into())
    }

    async fn change_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(unavailable)?;
        sqlx::query(
            "UPDATE leaf_alloc SET step = COALESCE(?1, step), description = COALESCE(?2, description), \
             update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?3",
        )
        .bind(step)
        .bind(description)
        .bind(biz_tag)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        let row: Option<SqliteTagRecord> = sqlx::query_as(SqliteDialect::SELECT_TAG)
            .bind(biz_tag)
            .fetch_optional(&mut *tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(row.map(Into::into))
    }

    async fn remove_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(unavailable)?;
        let found: Option<(String, i64)> =
            sqlx::query_as("SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag = ?1")
                .bind(biz_tag)
                .fetch_optional(&mut *tx)
                .await
                .map_err(unavailable)?;
        let Some((stored_tag, max_id)) = found else {
            tx.rollback().await.map_err(unavailable)?;
            return Ok(false);
        };
        // The tombstone keeps the highest max_id the tag ever reached, over every deletion.
        sqlx::query(
            "INSERT INTO leafid_tag_tombstone (biz_tag, max_id) VALUES (?1, ?2) \
             ON CONFLICT (biz_tag) DO UPDATE SET max_id = MAX(max_id, excluded.max_id), \
             deleted_at = CURRENT_TIMESTAMP",
        )
        .bind(&stored_tag)
        .bind(max_id)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        sqlx::query("DELETE FROM leaf_alloc WHERE biz_tag = ?1")
            .bind(&stored_tag)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_sqlite_file_leafid_opens_is_reported_durable() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("d.db").display());
        let store = SqliteStore::connect(&url, Duration::from_secs(3))
            .await
            .unwrap();
        let report = durability::check(store.pool()).await.unwrap();
        assert!(report.is_durable(), "{report:?}");
    }
}
