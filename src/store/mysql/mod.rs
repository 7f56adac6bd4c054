//! `leaf_alloc` on MySQL / MariaDB / Galera / TiDB.
//!
//! Every write that grants ids is one autocommit statement whose own result names the range, so
//! no lease depends on a multi-statement transaction staying intact:
//! - adapted steps: `UPDATE ... SET max_id = LAST_INSERT_ID(max_id + step)` (one round trip,
//!   `MySqlStore::lease_single_statement`);
//! - everything else (first leases, the DBA's step, the tail below `i64::MAX`, and every lease
//!   when `database.mysql_single_statement_lease = false`): read `max_id`, then a
//!   compare-and-set `UPDATE ... SET max_id = new WHERE max_id = old`
//!   (`MySqlStore::lease_cas`, which says why Leaf's `UPDATE` + `SELECT` transaction is gone).
//!
//! Statements that fail with a deadlock or serialization error (1213 / SQLSTATE 40001, as Galera
//! reports certification conflicts; 1205 lock wait timeout) are retried with backoff; a
//! compare-and-set that finds the row moved reads it again. A failed statement leased nothing,
//! and a lease whose outcome is unknown (a lost connection) is never used, so a retry can waste
//! a range but never repeat one.
//!
//! Every session is set to `autocommit = 1` when it connects: a server whose DBA set
//! `SET GLOBAL autocommit = 0` would otherwise leave each single-statement write (the
//! `LAST_INSERT_ID` lease, the worker-lease claim, heartbeat and release) in an open
//! transaction that is never committed, so ids would be handed out from a write no other server
//! sees, and a tag created on one pooled connection would be invisible on the next.
//!
//! A tag deleted through [`TagAdminStore::delete_tag`](crate::segment::TagAdminStore::delete_tag) leaves a tombstone in
//! `leafid_tag_tombstone` with its high-water mark; [`TagAdminStore::create_tag`](crate::segment::TagAdminStore::create_tag) refuses to start
//! the tag again below it ([`StoreError::BelowDeletedMaxId`]).
//!
//! Its parts: this file is the store ([`MySqlStore`]); `dialect` spells the shared statements
//! (`crate::store::sql`) for MySQL; `durability` reads the settings that decide whether a
//! commit survives a crash (and why Galera may relax one); `errors` says which failures may run
//! again; `migration_lock` is the cluster-wide lock the migrations run under.

pub(crate) mod dialect;
pub(crate) mod durability;
pub(crate) mod errors;
pub(crate) mod migration_lock;

use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use tracing::{debug, info, instrument, warn};

use self::dialect::MySqlDialect;
use self::errors::{is_retryable, migration_raced};
use self::migration_lock::MigrationLock;
use super::errors::{insert_error, lease_without_update, unavailable};
use super::sql::{self, DialectStore, Sessions};
use crate::segment::{Lease, NewTag, StoreError, TagRow};

const RETRIES: u32 = 6;
/// Compare-and-set leases that may find the row moved by another server before giving up.
const CAS_RETRIES: u32 = 64;
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

    /// A pool to `url` that connects on first use instead of now (for a database that cannot be
    /// reached at start), and opens no connection at all while `open` is false: nothing runs
    /// against a schema the migrations have not brought up to date (they run on a pool of their
    /// own, see [`Database::connect_deferred`](crate::store::Database::connect_deferred)).
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
        open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Self, sqlx::Error> {
        let opts: MySqlConnectOptions = url.parse()?;
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(acquire_timeout)
            .after_connect(move |conn, _meta| {
                let open = open.load(std::sync::atomic::Ordering::Acquire);
                Box::pin(async move {
                    if !open {
                        return Err(sqlx::Error::Protocol(
                            "database not migrated yet since it became reachable".into(),
                        ));
                    }
                    sqlx::query("SET SESSION autocommit = 1")
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            })
            .connect_lazy_with(opts);
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

    /// Applies `migrations/mysql` (idempotent on a table Leaf created) under a cluster-wide
    /// lock (`migration_lock`): sqlx's `GET_LOCK` holds only on one server, which on
    /// Galera let servers starting at once on different nodes migrate together and leave a
    /// migration dirty for good. Under the lock, a migration a failed run left dirty runs again.
    /// Conflicts that still reach sqlx's migrator (1213, a duplicate `_sqlx_migrations` row) are
    /// retried for a few seconds.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let lock = MigrationLock::acquire(&self.pool)
            .await
            .context("taking the migration lock (leafid_migration_lock)")?;
        let result = self.migrate_locked(&lock).await;
        let released = lock.release().await;
        result?;
        released.context("releasing the migration lock")?;
        Ok(())
    }

    async fn migrate_locked(&self, lock: &MigrationLock<'_>) -> anyhow::Result<()> {
        let cleared = lock.clear_dirty().await?;
        if cleared > 0 {
            warn!(cleared, "running again migrations a failed run left dirty");
        }
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

    /// One lease attempt without a transaction: read the row, then move `max_id` from the value
    /// read to `value + step` with one autocommit compare-and-set `UPDATE`. The range is ours
    /// exactly when that statement changed the row: it is committed when it returns, and its
    /// `WHERE max_id = ?` held on the row it changed. `Ok(None)`: another server moved the row
    /// between the read and the write (or this node had not applied its write yet); read again.
    ///
    /// Why not `BEGIN; UPDATE ...; SELECT max_id; COMMIT` (Leaf's own lease): on Galera, a
    /// transaction rolled back by a conflicting write from another node (a brute-force abort)
    /// between the `UPDATE` and the `SELECT` did not always report the abort. The `SELECT` then
    /// ran outside the lost transaction, read the other node's committed `max_id` and the
    /// `COMMIT` succeeded, so two servers leased the same range (`tests/api/galera.rs` saw 5
    /// duplicate ids in about one run in four). The outer error is the driver's (maybe
    /// retryable); the inner one is the verdict on the row (unknown, exhausted, invalid).
    async fn lease_cas(
        &self,
        biz_tag: &str,
        step: Option<i64>,
    ) -> Result<Option<Result<Lease, StoreError>>, sqlx::Error> {
        let found: Option<(i64, i32)> =
            sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?")
                .bind(biz_tag)
                .fetch_optional(&self.pool)
                .await?;
        let (old_max_id, db_step) =
            match lease_without_update(found.map(|(m, s)| (m, i64::from(s)))) {
                Ok(rest) => (rest.old_max_id, rest.db_step),
                Err(verdict) => return Ok(Some(Err(verdict))),
            };
        // The DBA's step is a floor under the adapted one; near i64::MAX the tail is leased.
        let max_id = old_max_id.saturating_add(step.map_or(db_step, |s| s.max(db_step)));
        let done = sqlx::query("UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = ? AND max_id = ?")
            .bind(max_id)
            .bind(biz_tag)
            .bind(old_max_id)
            .execute(&self.pool)
            .await?;
        Ok((done.rows_affected() == 1).then_some(Ok(Lease {
            max_id,
            leased: max_id - old_max_id,
            db_step: Some(db_step),
        })))
    }
}

#[async_trait]
impl DialectStore for MySqlStore {
    type Dialect = MySqlDialect;

    fn sessions(&self) -> Sessions<'_, MySqlDialect> {
        Sessions::from(&self.pool)
    }

    #[instrument(skip(self), level = "debug")]
    async fn lease_range(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
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
        let mut moved = 0;
        loop {
            match self.lease_cas(biz_tag, step).await {
                Ok(Some(verdict)) => return verdict,
                // Another server leased in between: it made progress, so read again at once,
                // backing off only when this keeps happening (many servers on one hot tag).
                Ok(None) if moved < CAS_RETRIES => {
                    moved += 1;
                    debug!(moved, "lease lost a compare-and-set, reading again");
                    if moved % 4 == 0 {
                        tokio::time::sleep(Duration::from_millis(u64::from(moved))).await;
                    }
                }
                Ok(None) => {
                    return Err(StoreError::Unavailable(
                        format!("the row moved under {moved} leases in a row: too much contention")
                            .into(),
                    ));
                }
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

    // The admin writes below are autocommit statements, each safe on its own, ordered so that
    // no interleaving with leases or each other loses a tombstone (see `lease_cas` for why no
    // write here leans on a multi-statement transaction).

    async fn insert_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        // One statement: the row is inserted only if no tombstone lies above its max_id and no
        // format is stored for this exact name (a deleted formatted tag keeps its format: the
        // name comes back only with it). A delete writes its tombstone before it removes the
        // row, so a create that finds the row gone finds the tombstone too. The statement reads
        // both tables with locking reads (`INSERT ... SELECT`), so a formatted create's format
        // still uncommitted is waited for; either way the row's key decides a race with it.
        // A deadlock or lock wait timeout rolled the statement back: it runs again (then it
        // finds the winner's row: `AlreadyExists`), a bounded number of times.
        let mut attempt = 0;
        let done = loop {
            let done = sqlx::query(
                "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) \
                 SELECT ?, ?, ?, ? FROM DUAL WHERE NOT EXISTS \
                 (SELECT 1 FROM leafid_tag_tombstone WHERE biz_tag = ? AND max_id > ?) \
                 AND NOT EXISTS (SELECT 1 FROM leafid_tag_format WHERE biz_tag = ? \
                 AND CAST(biz_tag AS BINARY) = CAST(? AS BINARY))",
            )
            .bind(&tag.biz_tag)
            .bind(tag.max_id)
            .bind(tag.step)
            .bind(&tag.description)
            .bind(&tag.biz_tag)
            .bind(tag.max_id)
            .bind(&tag.biz_tag)
            .bind(&tag.biz_tag)
            .execute(&self.pool)
            .await;
            match done {
                Err(e) if is_retryable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    debug!(biz_tag = %tag.biz_tag, attempt, error = %e, "tag create raced, retrying");
                    tokio::time::sleep(Duration::from_millis(5 * u64::from(attempt))).await;
                }
                done => break done.map_err(insert_error)?,
            }
        };
        if done.rows_affected() == 0 {
            let high_water: Option<i64> =
                sqlx::query_scalar("SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = ?")
                    .bind(&tag.biz_tag)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(unavailable)?;
            return Err(match high_water.filter(|&hw| hw > tag.max_id) {
                Some(high_water) => StoreError::BelowDeletedMaxId { high_water },
                // No tombstone above: the name's stored format refused it.
                None => StoreError::AlreadyExists,
            });
        }
        let row = sql::get_tag::<MySqlDialect>(&self.pool, &tag.biz_tag).await?;
        // Deleted again in between: answer with what was inserted.
        Ok(row.unwrap_or_else(|| TagRow {
            biz_tag: tag.biz_tag.clone(),
            max_id: tag.max_id,
            step: tag.step,
            description: tag.description.clone(),
            update_time: None,
        }))
    }

    async fn change_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        // rows_affected is 0 when nothing changed, so existence is decided by the read after.
        sqlx::query(
            "UPDATE leaf_alloc SET step = COALESCE(?, step), description = COALESCE(?, description) WHERE biz_tag = ?",
        )
        .bind(step)
        .bind(description)
        .bind(biz_tag)
        .execute(&self.pool)
        .await
        .map_err(unavailable)?;
        sql::get_tag::<MySqlDialect>(&self.pool, biz_tag).await
    }

    async fn remove_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        for _ in 0..CAS_RETRIES {
            let found: Option<(String, i64)> =
                sqlx::query_as("SELECT biz_tag, max_id FROM leaf_alloc WHERE biz_tag = ?")
                    .bind(biz_tag)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(unavailable)?;
            let Some((stored_tag, max_id)) = found else {
                return Ok(false);
            };
            // Tombstone first: it keeps the highest max_id the tag ever reached, over every
            // deletion, and it is committed before the row can go.
            sqlx::query(
                "INSERT INTO leafid_tag_tombstone (biz_tag, max_id) VALUES (?, ?) \
                 ON DUPLICATE KEY UPDATE max_id = GREATEST(max_id, VALUES(max_id)), \
                 deleted_at = CURRENT_TIMESTAMP",
            )
            .bind(&stored_tag)
            .bind(max_id)
            .execute(&self.pool)
            .await
            .map_err(unavailable)?;
            // Then the row, only as tombstoned: a lease in between moved max_id above the
            // tombstone, so read and tombstone again.
            let done = sqlx::query("DELETE FROM leaf_alloc WHERE biz_tag = ? AND max_id = ?")
                .bind(&stored_tag)
                .bind(max_id)
                .execute(&self.pool)
                .await
                .map_err(unavailable)?;
            if done.rows_affected() == 1 {
                return Ok(true);
            }
        }
        Err(StoreError::Unavailable(
            format!("leases moved the row {CAS_RETRIES} times while it was being deleted").into(),
        ))
    }
}
