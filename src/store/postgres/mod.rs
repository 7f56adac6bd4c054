//! `leaf_alloc` on PostgreSQL (directly, or through PgBouncer in transaction pooling mode).
//!
//! # One statement per lease
//!
//! A lease is one autocommit statement whose own answer names the range:
//! `UPDATE leaf_alloc SET max_id = max_id + GREATEST($1, step) ... RETURNING max_id, step`.
//! The DBA's step is a floor under the adapted one (`GREATEST`; with no adapted step, `$1` is
//! NULL, which `GREATEST` ignores), and the `max_id <= i64::MAX - step` guard keeps the sum in
//! range: when it fails (or the tag is unknown, or its step is not positive), a read decides
//! with `lease_without_update` and the tail below `i64::MAX` is taken by a compare-and-set.
//!
//! PostgreSQL commits an autocommit statement at the protocol's `Sync`, before it answers
//! `ReadyForQuery`, and sqlx reads every answer up to `ReadyForQuery` (for `fetch_optional`
//! too), so a commit that fails (a serialization failure found at commit) is the statement's
//! error, never a returned row. A lease exists only once its statement answered in full.
//!
//! # Any isolation level
//!
//! The statements run in whatever `default_transaction_isolation` the server or role sets.
//! Under `repeatable read` and `serializable`, an `UPDATE` of a row that another transaction
//! changed since the statement's snapshot fails with SQLSTATE 40001, and lock cycles fail with
//! 40P01. Both roll the whole statement back, so the lease is retried with backoff
//! (`errors::RETRIES`); an error whose outcome is unknown (a lost connection) is never retried nor
//! used, so a retry can waste a range but never repeat one. The tag writes that must read
//! their own writes (create: insert, then check the tombstone) run in an explicit
//! `READ COMMITTED` transaction, whose every statement sees what committed before it.
//!
//! # PgBouncer
//!
//! With `database.pgbouncer = true` ([`PgStore::connect`]), three things, each needed:
//! - sqlx's statement cache is off: a named prepared statement lives on one server connection,
//!   which PgBouncer hands to another client after each transaction;
//! - every statement is unnamed (`persistent(false)`): with its cache off sqlx 0.9 still names
//!   each persistent statement (`sqlx_s_1`, `sqlx_s_2`, ... per client connection) and never
//!   closes it, so a second client on that server connection fails with `prepared statement
//!   "sqlx_s_1" already exists` (`tests/api/pg_store.rs` shows it);
//! - every statement runs inside `BEGIN ... COMMIT` (`crate::store::sql::Session`): sqlx prepares and
//!   executes in two exchanges (`Parse`/`Describe`/`Sync`, then `Bind`/`Execute`/`Sync`), and
//!   between the two PgBouncer may move the client to another server connection, where the
//!   unnamed statement is missing or is another client's (one with the same parameter types
//!   would run with this one's values). Inside a transaction PgBouncer keeps the connection.
//!
//! The cost is round trips: four per statement instead of one. The lease, the one statement on
//! the ids' path, avoids it: it goes as one simple-protocol `Query` with its values written in
//! (`inline_lease`), one round trip as without PgBouncer. The migrations close the migrator's
//! named statements (`DEALLOCATE ALL`) before they commit.
//!
//! # Schema and tombstones
//!
//! `migrations/postgres` (docs/postgres.md shows it beside Leaf's MySQL DDL). A tag deleted
//! through [`TagAdminStore::delete_tag`](crate::segment::TagAdminStore::delete_tag) leaves a
//! tombstone in `leafid_tag_tombstone` with its high-water mark, written by the same statement
//! that deletes the row; [`TagAdminStore::create_tag`](crate::segment::TagAdminStore::create_tag)
//! refuses to start the tag again below it ([`StoreError::BelowDeletedMaxId`]).
//!
//! # Its parts
//!
//! This file is the store ([`PgStore`]); `dialect` spells the shared statements
//! (`crate::store::sql`) for PostgreSQL; `durability` reads `synchronous_commit` and `fsync`;
//! `errors` says which failures may run again, and retries them.

pub(crate) mod dialect;
pub(crate) mod durability;
pub(crate) mod errors;

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tracing::{debug, instrument};

use self::dialect::PgDialect;
use self::errors::retrying;
use super::errors::{lease_without_update, unavailable};
use super::sql::{self, Dialect, DialectStore, MySqlTagRecord, Session, Sessions};
use crate::segment::{BizTag, Lease, NewTag, StoreError, TagRow};

/// Tail leases that may find the row moved by another server before giving up.
const CAS_RETRIES: u32 = 64;
/// Key of the transaction-level advisory lock the migrations run under, with the database's
/// name hashed in (two leafid databases on one cluster do not wait for each other).
const MIGRATION_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtext('leafid_migrations:' || current_database()))";

/// The lease: the DBA's step as a floor, the sum kept below `i64::MAX`.
const LEASE: &str = "UPDATE leaf_alloc SET max_id = max_id + GREATEST($1, step), \
     update_time = CURRENT_TIMESTAMP \
     WHERE biz_tag = $2 AND step > 0 AND max_id <= 9223372036854775807 - GREATEST($1, step) \
     RETURNING max_id, step";
/// The tail below `i64::MAX`, taken only from the `max_id` that was read.
const LEASE_TAIL: &str = "UPDATE leaf_alloc SET max_id = 9223372036854775807, \
     update_time = CURRENT_TIMESTAMP WHERE biz_tag = $1 AND max_id = $2";
/// Deletes the row and raises its tombstone in one statement (one transaction).
const DELETE_TAG: &str = "WITH gone AS (DELETE FROM leaf_alloc WHERE biz_tag = $1 \
     RETURNING biz_tag, max_id) \
     INSERT INTO leafid_tag_tombstone (biz_tag, max_id) SELECT biz_tag, max_id FROM gone \
     ON CONFLICT (biz_tag) DO UPDATE \
     SET max_id = GREATEST(leafid_tag_tombstone.max_id, EXCLUDED.max_id), \
     deleted_at = CURRENT_TIMESTAMP";

/// The PostgreSQL store: a connection pool, and how statements keep their server connection.
#[derive(Clone, Debug)]
pub struct PgStore {
    pool: PgPool,
    /// Behind PgBouncer's transaction pooling: no statement cache, every statement in a
    /// transaction of its own (see the module docs).
    pgbouncer: bool,
}

impl PgStore {
    /// Connects a pool to `url` (`postgres://user:pw@host:port/db`); `pgbouncer` for a server
    /// reached through PgBouncer in transaction pooling mode.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
        pgbouncer: bool,
    ) -> Result<Self, sqlx::Error> {
        let pool = Self::pool_options(max_connections, acquire_timeout)
            .connect_with(Self::connect_options(url, pgbouncer)?)
            .await?;
        Ok(Self { pool, pgbouncer })
    }

    /// A pool to `url` that connects on first use instead of now (for a database that cannot be
    /// reached at start), and opens no connection at all while `open` is false: nothing runs
    /// against a schema the migrations have not brought up to date (they run on a pool of their
    /// own, see [`Database::connect_deferred`](crate::store::Database::connect_deferred)).
    pub fn connect_lazy(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
        pgbouncer: bool,
        open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Self, sqlx::Error> {
        let pool = Self::pool_options(max_connections, acquire_timeout)
            .after_connect(move |_conn, _meta| {
                let open = open.load(std::sync::atomic::Ordering::Acquire);
                Box::pin(async move {
                    if open {
                        Ok(())
                    } else {
                        Err(sqlx::Error::Protocol(
                            "database not migrated yet since it became reachable".into(),
                        ))
                    }
                })
            })
            .connect_lazy_with(Self::connect_options(url, pgbouncer)?);
        Ok(Self { pool, pgbouncer })
    }

    fn pool_options(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
        PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(acquire_timeout)
    }

    /// The URL's options, named `leafid` in `pg_stat_activity` unless the URL names it, with no
    /// `extra_float_digits` startup parameter (leafid reads no floats, and PgBouncer refuses
    /// that parameter unless told to ignore it), and no statement cache behind PgBouncer.
    fn connect_options(url: &str, pgbouncer: bool) -> Result<PgConnectOptions, sqlx::Error> {
        let mut opts = PgConnectOptions::from_str(url)?.extra_float_digits(None);
        if opts.get_application_name().is_none() {
            opts = opts.application_name("leafid");
        }
        if pgbouncer {
            opts = opts.statement_cache_capacity(0);
        }
        Ok(opts)
    }

    /// The pool, for other stores on the same database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies `migrations/postgres` in one `READ COMMITTED` transaction that first takes a
    /// transaction-level advisory lock: servers starting at once migrate one after the other
    /// (the lock is the server's, whichever connection or PgBouncer client asks), the next one
    /// finds the migrations applied, and a failed run leaves nothing half applied (DDL is
    /// transactional here; each migration is a savepoint). sqlx's own lock is a session-level
    /// advisory lock, which PgBouncer's transaction pooling would take on one server connection
    /// and try to release on another, so it is off.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL READ COMMITTED")
            .await
            .context("opening the migration transaction")?;
        sqlx::query(MIGRATION_LOCK)
            .execute(&mut *tx)
            .await
            .context("taking the migration lock (pg_advisory_xact_lock)")?;
        if self.pgbouncer {
            // A server connection behind PgBouncer may hold named statements a client without
            // this setting left there; the migrator's own names would collide with them.
            sqlx::raw_sql("DEALLOCATE ALL")
                .execute(&mut *tx)
                .await
                .context("closing prepared statements left on the server connection")?;
        }
        let mut migrator = sqlx::migrate!("migrations/postgres");
        migrator.set_locking(false);
        // `run_direct` on the transaction's connection: `run(&mut *tx)` makes the caller's future
        // fail its `Send` check ("`Acquire` is not general enough"), which sqlx names as the
        // reason this entry point exists.
        migrator.run_direct(None, &mut *tx, false).await?;
        if self.pgbouncer {
            // sqlx's migrator prepares named statements, which its disabled cache never closes:
            // behind PgBouncer they would stay on this server connection and collide with
            // another client's (see `crate::store::sql::Sessions::persistent`).
            sqlx::raw_sql("DEALLOCATE ALL")
                .execute(&mut *tx)
                .await
                .context("closing the migrator's prepared statements")?;
        }
        tx.commit()
            .await
            .context("committing the migrations (nothing applied)")?;
        Ok(())
    }

    /// One lease attempt. The outer error is the driver's (maybe retryable); the inner one is
    /// the verdict on the row (unknown, exhausted, invalid). `Ok(None)`: the row moved between
    /// the read and the tail's compare-and-set; try again.
    async fn lease_once(
        &self,
        biz_tag: &str,
        step: Option<i64>,
    ) -> Result<Option<Result<Lease, StoreError>>, sqlx::Error> {
        let granted: Option<(i64, i32)> = match self.pgbouncer.then(|| inline_lease(biz_tag, step))
        {
            Some(Some(statement)) => {
                let mut conn = self.pool.acquire().await?;
                match sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                    .fetch_optional(&mut *conn)
                    .await?
                {
                    Some(row) => Some(sqlx::FromRow::from_row(&row)?),
                    None => None,
                }
            }
            _ => {
                let mut s = Session::open(self.sessions()).await?;
                let granted = sqlx::query_as(LEASE)
                    .persistent(self.sessions().persistent())
                    .bind(step)
                    .bind(biz_tag)
                    .fetch_optional(s.conn())
                    .await?;
                s.finish().await?;
                granted
            }
        };
        if let Some((max_id, db_step)) = granted {
            let db_step = i64::from(db_step);
            return Ok(Some(Ok(Lease {
                max_id,
                leased: step.map_or(db_step, |s| s.max(db_step)),
                db_step: Some(db_step),
            })));
        }
        // Unknown, invalid, or too close to i64::MAX for a full step.
        let mut s = Session::open(self.sessions()).await?;
        let found: Option<(i64, i32)> =
            sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1")
                .persistent(self.sessions().persistent())
                .bind(biz_tag)
                .fetch_optional(s.conn())
                .await?;
        s.finish().await?;
        let rest = match lease_without_update(found.map(|(m, s)| (m, i64::from(s)))) {
            Ok(rest) => rest,
            Err(verdict) => return Ok(Some(Err(verdict))),
        };
        let mut s = Session::open(self.sessions()).await?;
        let done = sqlx::query(LEASE_TAIL)
            .persistent(self.sessions().persistent())
            .bind(biz_tag)
            .bind(rest.old_max_id)
            .execute(s.conn())
            .await?;
        s.finish().await?;
        Ok((done.rows_affected() == 1).then_some(Ok(Lease {
            max_id: i64::MAX,
            leased: i64::MAX - rest.old_max_id,
            db_step: Some(rest.db_step),
        })))
    }

    async fn insert_tag_once(
        &self,
        tag: &NewTag,
    ) -> Result<Result<TagRow, StoreError>, sqlx::Error> {
        // READ COMMITTED whatever the default: the tombstone check below must see a delete
        // that committed while the insert waited for its row.
        let mut tx = self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL READ COMMITTED")
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ($1, $2, $3, $4)",
        )
        .persistent(self.sessions().persistent())
        .bind(&tag.biz_tag)
        .bind(tag.max_id)
        .bind(tag.step)
        .bind(&tag.description)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {}
            Err(e)
                if e.as_database_error()
                    .is_some_and(|d| d.is_unique_violation()) =>
            {
                return Ok(Err(StoreError::AlreadyExists));
            }
            Err(e) => return Err(e),
        }
        // A delete writes its tombstone in the statement that removes the row, so an insert
        // that found the row gone (it waited for the delete's commit) finds the tombstone here.
        let high_water: Option<i64> =
            sqlx::query_scalar("SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = $1")
                .persistent(self.sessions().persistent())
                .bind(&tag.biz_tag)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(high_water) = high_water.filter(|&hw| tag.max_id < hw) {
            tx.rollback().await?;
            return Ok(Err(StoreError::BelowDeletedMaxId { high_water }));
        }
        // A name whose format is stored comes back only with that format. Read after the
        // insert, which holds the row's key: a formatted create committed before it is seen
        // here (READ COMMITTED), and one still open either holds the key (this insert waited,
        // then failed on it) or will fail on this row's key and roll its format back.
        let formatted: Option<String> =
            sqlx::query_scalar("SELECT biz_tag FROM leafid_tag_format WHERE biz_tag = $1")
                .persistent(self.sessions().persistent())
                .bind(&tag.biz_tag)
                .fetch_optional(&mut *tx)
                .await?;
        if formatted.is_some_and(|t| t == tag.biz_tag) {
            tx.rollback().await?;
            return Ok(Err(StoreError::AlreadyExists));
        }
        let row: MySqlTagRecord = sqlx::query_as(PgDialect::SELECT_TAG)
            .persistent(self.sessions().persistent())
            .bind(&tag.biz_tag)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Ok(row.into()))
    }
}

/// [`LEASE`] as one simple-protocol statement with its values written in, for PgBouncer: a
/// simple `Query` is one message, which PgBouncer runs whole on one server connection as its
/// own implicit transaction, committed before the answer (PostgreSQL reports a commit error
/// before `CommandComplete`, and sqlx reads the answer to its end before returning the row). So
/// it needs neither `BEGIN ... COMMIT` nor a prepared statement: one round trip instead of
/// four. `None` unless `biz_tag` is a valid tag (`[A-Za-z0-9._:-]`, at most 128 bytes, checked
/// by [`BizTag::parse`]): such a tag needs no escaping inside quotes, and any other is leased
/// by the parameterized path (where the engine's tags never go: they are all valid).
fn inline_lease(biz_tag: &str, step: Option<i64>) -> Option<String> {
    let tag = BizTag::parse(biz_tag).ok()?;
    let step = step.map_or_else(|| "NULL".to_owned(), |s| s.to_string());
    Some(
        LEASE
            .replace("$1", &format!("{step}::bigint"))
            .replace("$2", &format!("'{tag}'")),
    )
}

#[async_trait]
impl DialectStore for PgStore {
    type Dialect = PgDialect;

    fn sessions(&self) -> Sessions<'_, PgDialect> {
        Sessions {
            pool: &self.pool,
            pinned: self.pgbouncer,
        }
    }

    #[instrument(skip(self), level = "debug")]
    async fn lease_range(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        let mut moved = 0;
        loop {
            match retrying("lease", || self.lease_once(biz_tag, step))
                .await
                .map_err(unavailable)?
            {
                Some(verdict) => return verdict,
                None if moved < CAS_RETRIES => {
                    moved += 1;
                    debug!(
                        moved,
                        "the tail lease lost a compare-and-set, reading again"
                    );
                }
                None => {
                    return Err(StoreError::Unavailable(
                        format!("the row moved under {moved} leases in a row: too much contention")
                            .into(),
                    ));
                }
            }
        }
    }

    async fn insert_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        retrying("create tag", || self.insert_tag_once(tag))
            .await
            .map_err(unavailable)?
    }

    async fn change_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        // rows_affected says whether the row exists, but the row is read back anyway.
        retrying("update tag", || async {
            let mut s = Session::open(self.sessions()).await?;
            sqlx::query(
                "UPDATE leaf_alloc SET step = COALESCE($1, step), \
                 description = COALESCE($2, description), update_time = CURRENT_TIMESTAMP \
                 WHERE biz_tag = $3",
            )
            .persistent(self.sessions().persistent())
            .bind(step)
            .bind(description)
            .bind(biz_tag)
            .execute(s.conn())
            .await?;
            s.finish().await
        })
        .await
        .map_err(unavailable)?;
        sql::get_tag::<PgDialect>(self.sessions(), biz_tag).await
    }

    async fn remove_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        // One statement: the row goes and its tombstone rises in the same transaction, and a
        // lease that changed the row first is waited for (its max_id is the one tombstoned).
        let done = retrying("delete tag", || async {
            let mut s = Session::open(self.sessions()).await?;
            let done = sqlx::query(DELETE_TAG)
                .persistent(self.sessions().persistent())
                .bind(biz_tag)
                .execute(s.conn())
                .await?;
            s.finish().await?;
            Ok(done)
        })
        .await
        .map_err(unavailable)?;
        Ok(done.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inline_lease_is_the_lease_with_its_values_written_in() {
        let sql = inline_lease("pay.order:eu-1_x", Some(5000)).expect("a valid tag");
        assert_eq!(
            sql,
            LEASE
                .replace("$1", "5000::bigint")
                .replace("$2", "'pay.order:eu-1_x'")
        );
        assert!(!sql.contains('$'), "{sql}");
        assert!(
            inline_lease("t", None)
                .unwrap()
                .contains("GREATEST(NULL::bigint, step)")
        );
    }

    #[test]
    fn a_tag_that_would_need_escaping_is_never_inlined() {
        for tag in [
            "a'b",
            "a\\b",
            "x' OR '1'='1",
            "",
            "a b",
            "é",
            &"t".repeat(129),
        ] {
            assert_eq!(inline_lease(tag, Some(1)), None, "{tag:?}");
        }
    }
}
