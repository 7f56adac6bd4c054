//! `leaf_alloc` on MySQL / MariaDB / TiDB.
//!
//! A lease is one transaction: a guarded `UPDATE ... SET max_id = max_id + step` (the row lock
//! makes leases of all servers disjoint), then a `SELECT` of the new `max_id`. Transactions that
//! fail with a deadlock or serialization error (1213 / SQLSTATE 40001, as Galera reports
//! certification conflicts; 1205 lock wait timeout) are retried whole with backoff: a failed
//! transaction leased nothing, and a lease whose commit outcome is unknown is never used, so a
//! retry can waste a range but never repeat one.
//!
//! Every session is set to `autocommit = 1` when it connects: a server whose DBA set
//! `SET GLOBAL autocommit = 0` would otherwise leave each single-statement write (the
//! `LAST_INSERT_ID` lease, the worker-lease claim, heartbeat and release) in an open
//! transaction that is never committed, so ids would be handed out from a write no other server
//! sees, and a tag created on one pooled connection would be invisible on the next. Multi-statement
//! writes (tag create and delete, the lease fallback) run in explicit transactions whose commit
//! is checked.
//!
//! A tag deleted through [`SegmentStore::delete_tag`] leaves a tombstone in
//! `leafid_tag_tombstone` with its high-water mark; [`SegmentStore::create_tag`] refuses to start
//! the tag again below it ([`StoreError::BelowDeletedMaxId`]).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::MigrateError;
use sqlx::mysql::{MySqlConnectOptions, MySqlDatabaseError, MySqlPool, MySqlPoolOptions};
use sqlx::{MySql, Row, Transaction};
use tracing::{debug, info, instrument};

use super::{insert_error, lease_without_update, unavailable};
use crate::segment::{Lease, NewTag, SegmentStore, StoreError, TagRow};

const SELECT_TAG: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?";
const SELECT_TAGS: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag";
const RETRIES: u32 = 6;
/// Migration attempts after a lost race: 100 ms, 200 ms, ... (about 8 s in all).
const MIGRATE_RETRIES: u32 = 12;

/// The MySQL store: a connection pool.
#[derive(Clone, Debug)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// Lease adapted steps with one autocommit `UPDATE ... LAST_INSERT_ID(...)` instead of a
    /// four-round-trip transaction (see [`MySqlStore::lease_single_statement`]).
    single_statement: bool,
}

impl MySqlStore {
    /// Connects a pool to `url` (`mysql://user:pw@host:port/db`).
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, sqlx::Error> {
        let opts: MySqlConnectOptions = url.parse()?;
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(acquire_timeout)
            // Whatever the server's global default, a statement outside an explicit transaction
            // commits when it completes (see the module docs).
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    sqlx::query("SET SESSION autocommit = 1")
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            })
            .connect_with(opts)
            .await?;
        Ok(Self {
            pool,
            single_statement: true,
        })
    }

    /// Chooses the lease statement for adapted steps: single-statement (`true`, the default) or
    /// the UPDATE+SELECT transaction (`false`).
    pub fn with_single_statement_lease(mut self, on: bool) -> Self {
        self.single_statement = on;
        self
    }

    /// One round trip: `max_id = LAST_INSERT_ID(max_id + step)` returns the new `max_id` in the
    /// OK packet. The `step <= ?` guard keeps the DBA's step a floor: if the row's step was
    /// raised above the adapted one, nothing matches and the caller falls back to the
    /// transaction, which leases the row's step instead. `Ok(None)`: fall back. The session is
    /// in autocommit mode (forced on connect), so the statement is committed when it returns.
    async fn lease_single_statement(
        &self,
        biz_tag: &str,
        step: i64,
    ) -> Result<Option<Lease>, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE leaf_alloc SET max_id = LAST_INSERT_ID(max_id + ?) \
             WHERE biz_tag = ? AND step <= ? AND max_id <= 9223372036854775807 - ?",
        )
        .bind(step)
        .bind(biz_tag)
        .bind(step)
        .bind(step)
        .execute(&self.pool)
        .await?;
        Ok((done.rows_affected() == 1).then(|| Lease {
            max_id: done.last_insert_id() as i64,
            leased: step,
            db_step: None,
        }))
    }

    /// Applies `migrations/mysql` (idempotent on a table Leaf created).
    ///
    /// On Galera, sqlx's migration lock (`GET_LOCK`) holds only on the node that took it, so
    /// servers starting at once on different nodes run the same migration together: the loser's
    /// `_sqlx_migrations` row fails certification (1213) or hits the winner's (1062), or it sees
    /// the winner's row not yet marked done (`Dirty`). These are retried for a few seconds: the
    /// migrations are idempotent (`IF NOT EXISTS`) and the loser's failed transaction left
    /// nothing behind. Not covered: a winner whose own run then fails leaves its row dirty for
    /// good (seen when another server's `CREATE TABLE IF NOT EXISTS _sqlx_migrations`, a
    /// cluster-wide DDL, aborts the winner's final update), so on Galera let one server migrate
    /// before the others start.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = sqlx::migrate!("migrations/mysql");
        let mut attempt = 0;
        loop {
            match migrator.run(&self.pool).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt < MIGRATE_RETRIES && migration_raced(&e) => {
                    attempt += 1;
                    info!(attempt, error = %e, "migrations raced another server, retrying");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The pool, for other stores on the same database.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// One lease transaction. The outer error is the driver's (maybe retryable); the inner one
    /// is the verdict on the row (unknown, exhausted, invalid).
    async fn lease_once(
        &self,
        biz_tag: &str,
        step: Option<i64>,
    ) -> Result<Result<Lease, StoreError>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let updated = match step {
            // The DBA's step is a floor under the adapted one: GREATEST(?, step).
            Some(step) => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + GREATEST(?, step) \
                 WHERE biz_tag = ? AND max_id <= 9223372036854775807 - GREATEST(?, step)",
            )
            .bind(step)
            .bind(biz_tag)
            .bind(step),
            None => sqlx::query(
                "UPDATE leaf_alloc SET max_id = max_id + step \
                 WHERE biz_tag = ? AND step > 0 AND max_id <= 9223372036854775807 - step",
            )
            .bind(biz_tag),
        }
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let lease = if updated == 1 {
            let (max_id, db_step) = select_max_id(&mut tx, biz_tag, false)
                .await?
                .ok_or(sqlx::Error::RowNotFound)?;
            Lease {
                max_id,
                leased: step.map_or(db_step, |s| s.max(db_step)),
                db_step: Some(db_step),
            }
        } else {
            // Unknown, invalid, or too close to i64::MAX for a full step: lock and look.
            let found = select_max_id(&mut tx, biz_tag, true).await?;
            match lease_without_update(found) {
                Ok(rest) => {
                    sqlx::query(
                        "UPDATE leaf_alloc SET max_id = 9223372036854775807 WHERE biz_tag = ?",
                    )
                    .bind(biz_tag)
                    .execute(&mut *tx)
                    .await?;
                    Lease {
                        max_id: i64::MAX,
                        leased: i64::MAX - rest.old_max_id,
                        db_step: Some(rest.db_step),
                    }
                }
                Err(verdict) => {
                    tx.rollback().await?;
                    return Ok(Err(verdict));
                }
            }
        };
        tx.commit().await?;
        Ok(Ok(lease))
    }
}

async fn select_max_id(
    tx: &mut Transaction<'_, MySql>,
    biz_tag: &str,
    for_update: bool,
) -> Result<Option<(i64, i64)>, sqlx::Error> {
    let sql = if for_update {
        "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE"
    } else {
        "SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?"
    };
    let row = sqlx::query(sql)
        .bind(biz_tag)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| Ok((r.try_get::<i64, _>(0)?, i64::from(r.try_get::<i32, _>(1)?))))
        .transpose()
}

/// A migration that lost a race with another server's (see [`MySqlStore::migrate`]).
fn migration_raced(e: &MigrateError) -> bool {
    match e {
        MigrateError::Dirty(_) => true,
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => {
            is_retryable(e)
                || e.as_database_error()
                    .is_some_and(|d| d.is_unique_violation())
        }
        _ => false,
    }
}

/// Deadlocks, lock wait timeouts and serialization failures: the transaction may be retried.
fn is_retryable(e: &sqlx::Error) -> bool {
    let Some(db) = e.as_database_error() else {
        return false;
    };
    if db.code().as_deref() == Some("40001") {
        return true;
    }
    db.try_downcast_ref::<MySqlDatabaseError>()
        .is_some_and(|m| matches!(m.number(), 1213 | 1205))
}

fn tag_row(r: &sqlx::mysql::MySqlRow) -> Result<TagRow, sqlx::Error> {
    Ok(TagRow {
        biz_tag: r.try_get("biz_tag")?,
        max_id: r.try_get("max_id")?,
        step: i64::from(r.try_get::<i32, _>("step")?),
        description: r.try_get("description")?,
        update_time: r.try_get::<Option<DateTime<Utc>>, _>("update_time")?,
    })
}

#[async_trait]
impl SegmentStore for MySqlStore {
    #[instrument(skip(self), level = "debug")]
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        let mut attempt = 0;
        if let (true, Some(step)) = (self.single_statement, step) {
            loop {
                match self.lease_single_statement(biz_tag, step).await {
                    Ok(Some(lease)) => return Ok(lease),
                    Ok(None) => break,
                    Err(e) if is_retryable(&e) && attempt < RETRIES => {
                        attempt += 1;
                        debug!(attempt, error = %e, "lease conflict, retrying");
                        tokio::time::sleep(Duration::from_millis(5u64 << attempt)).await;
                    }
                    Err(e) => return Err(unavailable(e)),
                }
            }
        }
        loop {
            match self.lease_once(biz_tag, step).await {
                Ok(verdict) => return verdict,
                Err(e) if is_retryable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    let backoff = Duration::from_millis(5u64 << attempt);
                    debug!(attempt, error = %e, "lease conflict, retrying");
                    tokio::time::sleep(backoff).await;
                }
                Err(e) => return Err(unavailable(e)),
            }
        }
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
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        // A locking read sees the latest committed tombstone (and locks its gap when there is
        // none), so a delete committing meanwhile cannot slip past this check.
        let high_water: Option<i64> = sqlx::query_scalar(
            "SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = ? FOR UPDATE",
        )
        .bind(&tag.biz_tag)
        .fetch_optional(&mut *tx)
        .await
        .map_err(unavailable)?;
        if let Some(high_water) = high_water.filter(|&hw| tag.max_id < hw) {
            tx.rollback().await.map_err(unavailable)?;
            return Err(StoreError::BelowDeletedMaxId { high_water });
        }
        sqlx::query(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)",
        )
        .bind(&tag.biz_tag)
        .bind(tag.max_id)
        .bind(tag.step)
        .bind(&tag.description)
        .execute(&mut *tx)
        .await
        .map_err(insert_error)?;
        let row = sqlx::query(SELECT_TAG)
            .bind(&tag.biz_tag)
            .fetch_one(&mut *tx)
            .await
            .map_err(unavailable)?;
        let row = tag_row(&row).map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(row)
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        // rows_affected is 0 when nothing changed, so existence is decided by the SELECT after.
        sqlx::query(
            "UPDATE leaf_alloc SET step = COALESCE(?, step), description = COALESCE(?, description) WHERE biz_tag = ?",
        )
        .bind(step)
        .bind(description)
        .bind(biz_tag)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        let row = sqlx::query(SELECT_TAG)
            .bind(biz_tag)
            .fetch_optional(&mut *tx)
            .await
            .map_err(unavailable)?;
        let row = row.as_ref().map(tag_row).transpose().map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(row)
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await.map_err(unavailable)?;
        let found: Option<(String, i64)> =
            sqlx::query_as("SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE")
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
            "INSERT INTO leafid_tag_tombstone (biz_tag, max_id) VALUES (?, ?) \
             ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, VALUES(max_id)), \
             deleted_at = CURRENT_TIMESTAMP",
        )
        .bind(&stored_tag)
        .bind(max_id)
        .execute(&mut *tx)
        .await
        .map_err(unavailable)?;
        sqlx::query("DELETE FROM leaf_alloc WHERE biz_tag = ?")
            .bind(&stored_tag)
            .execute(&mut *tx)
            .await
            .map_err(unavailable)?;
        tx.commit().await.map_err(unavailable)?;
        Ok(true)
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
    MySqlStore,
    "START TRANSACTION",
    "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, CURDATE(), NOW(), NOW())",
    |r: &sqlx::mysql::MySqlQueryResult| r.last_insert_id()
);
