//! `leaf_alloc` in an embedded SQLite file (the default: nothing to install).
//!
//! One connection only: SQLite has one writer, and a pool of several makes a lease wait on the
//! busy lock for seconds under load. WAL journal with `synchronous = FULL`: leases are rare, and
//! a lease lost to a power cut after it was handed out would let a restart issue its ids again.
//! A lease is one atomic `UPDATE ... RETURNING`; the guard on `max_id` also keeps SQLite from
//! turning an overflowing sum into a float.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use tracing::instrument;

use super::{insert_error, lease_without_update, unavailable};
use crate::segment::{Lease, NewTag, SegmentStore, StoreError, TagRow};

const SELECT_TAG: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?1";
const SELECT_TAGS: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag";

/// The SQLite store: a one-connection pool.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
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

    async fn lease_once(
        &self,
        biz_tag: &str,
        step: Option<i64>,
    ) -> Result<Result<Lease, StoreError>, sqlx::Error> {
        let row = match step {
            Some(step) => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + ?1, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?2 AND max_id <= 9223372036854775807 - ?1 RETURNING max_id, step",
            )
            .bind(step)
            .bind(biz_tag),
            None => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = ?1 AND step > 0 AND max_id <= 9223372036854775807 - step RETURNING max_id, step",
            )
            .bind(biz_tag),
        }
        .fetch_optional(&self.pool)
        .await?;
        if let Some(row) = row {
            let (max_id, db_step): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
            return Ok(Ok(Lease {
                max_id,
                leased: step.unwrap_or(db_step),
                db_step: Some(db_step),
            }));
        }
        // Unknown, invalid, or too close to i64::MAX for a full step. The one connection makes
        // this read-then-write safe in this process; the guarded UPDATE keeps it safe against
        // other processes on the same file.
        let found: Option<(i64, i64)> =
            sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?1")
                .bind(biz_tag)
                .fetch_optional(&self.pool)
                .await?;
        let rest = match lease_without_update(found) {
            Ok(rest) => rest,
            Err(verdict) => return Ok(Err(verdict)),
        };
        let done = sqlx::query(
            "UPDATE leaf_alloc SET max_id = 9223372036854775807, update_time = CURRENT_TIMESTAMP \
             WHERE biz_tag = ?1 AND max_id = ?2",
        )
        .bind(biz_tag)
        .bind(rest.old_max_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() != 1 {
            return Err(sqlx::Error::RowNotFound);
        }
        Ok(Ok(Lease {
            max_id: i64::MAX,
            leased: i64::MAX - rest.old_max_id,
            db_step: Some(rest.db_step),
        }))
    }
}

fn tag_row(r: &SqliteRow) -> Result<TagRow, sqlx::Error> {
    let update_time: Option<String> = r.try_get("update_time")?;
    Ok(TagRow {
        biz_tag: r.try_get("biz_tag")?,
        max_id: r.try_get("max_id")?,
        step: r.try_get("step")?,
        description: r.try_get("description")?,
        update_time: update_time
            .and_then(|t| NaiveDateTime::parse_from_str(&t, "%Y-%m-%d %H:%M:%S").ok())
            .map(|t| DateTime::<Utc>::from_naive_utc_and_offset(t, Utc)),
    })
}

#[async_trait]
impl SegmentStore for SqliteStore {
    #[instrument(skip(self), level = "debug")]
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.lease_once(biz_tag, step).await.map_err(unavailable)?
    }

    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        let row = sqlx::query(SELECT_TAG)
            .bind(biz_tag)
            .fetch_optional(&self.pool)
            .await
            .map_err(unavailable)?;
        row.as_ref().map(tag_row).transpose().map_err(unavailable)
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        let rows = sqlx::query(SELECT_TAGS)
            .fetch_all(&self.pool)
            .await
            .map_err(unavailable)?;
        rows.iter()
            .map(tag_row)
            .collect::<Result<_, _>>()
            .map_err(unavailable)
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        sqlx::query(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(&tag.biz_tag)
        .bind(tag.max_id)
        .bind(tag.step)
        .bind(&tag.description)
        .execute(&self.pool)
        .await
        .map_err(insert_error)?;
        self.get_tag(&tag.biz_tag)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        sqlx::query(
            "UPDATE leaf_alloc SET step = COALESCE(?1, step), description = COALESCE(?2, description), \
             update_time = CURRENT_TIMESTAMP WHERE biz_tag = ?3",
        )
        .bind(step)
        .bind(description)
        .bind(biz_tag)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        self.get_tag(biz_tag).await
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM leaf_alloc WHERE biz_tag = ?1")
            .bind(biz_tag)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(done.rows_affected() > 0)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

super::worker_sql::impl_worker_store!(
    SqliteStore,
    "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, date('now'), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
    |r: &sqlx::sqlite::SqliteQueryResult| r.last_insert_rowid() as u64
);
