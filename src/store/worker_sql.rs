//! [`WorkerStore`](crate::snowflake::worker::WorkerStore) for both databases: the SQL is the
//! same (`?` placeholders work on MySQL and SQLite), so one macro writes both impls and only the
//! `WORKER_NODE` insert and the way to read its new id differ.
//!
//! Leases are claimed with compare-and-set updates (`WHERE lease_until_ms = <seen> AND owner =
//! <seen>`) or a primary-key insert, so two servers can never hold one worker id. A claim that
//! loses (no row matched, a duplicate key, or on Galera a certification conflict: 1213 at the
//! statement or the commit) tries again ([`lost_race`]).
//!
//! Every write runs in an explicit transaction whose `COMMIT` result is checked (see the module
//! docs of [`super::sqlite`]: an autocommit statement on SQLite commits when it is reset, and a
//! failed commit there is silent). A claim is reported only once its commit is confirmed; on
//! MySQL the same shape also protects against a session left with `autocommit = 0`.
//!
//! A release clears `owner`: a heartbeat matches on `owner`, so a late heartbeat of the process
//! that released cannot renew a lease that is free (or already claimed by another server).

/// Claims an expired lease: oldest first, never one whose stored time is ahead of our clock.
pub(crate) const SELECT_EXPIRED: &str = "SELECT worker_id, lease_until_ms, last_timestamp_ms, owner \
     FROM leafid_worker_lease WHERE worker_id <= ? AND lease_until_ms < ? AND last_timestamp_ms <= ? \
     ORDER BY lease_until_ms LIMIT 1";
pub(crate) const CLAIM: &str = "UPDATE leafid_worker_lease SET host_name = ?, port = ?, owner = ?, \
     lease_until_ms = ? WHERE worker_id = ? AND lease_until_ms = ? AND owner = ?";
pub(crate) const NEXT_ID: &str = "SELECT COALESCE(MAX(worker_id) + 1, 0) FROM leafid_worker_lease";
pub(crate) const INSERT_LEASE: &str = "INSERT INTO leafid_worker_lease \
     (worker_id, host_name, port, owner, lease_until_ms, last_timestamp_ms) VALUES (?, ?, ?, ?, ?, 0)";
pub(crate) const COUNT_AHEAD: &str = "SELECT COUNT(*) FROM leafid_worker_lease \
     WHERE worker_id <= ? AND lease_until_ms < ? AND last_timestamp_ms > ?";
pub(crate) const HEARTBEAT: &str = "UPDATE leafid_worker_lease SET lease_until_ms = ?, \
     last_timestamp_ms = CASE WHEN last_timestamp_ms > ? THEN last_timestamp_ms ELSE ? END \
     WHERE worker_id = ? AND owner = ?";
pub(crate) const RELEASE: &str = "UPDATE leafid_worker_lease SET lease_until_ms = 0, owner = '', \
     last_timestamp_ms = CASE WHEN last_timestamp_ms > ? THEN last_timestamp_ms ELSE ? END \
     WHERE worker_id = ? AND owner = ?";

/// Wraps a driver error as [`WorkerStoreError::Unavailable`](crate::snowflake::worker::WorkerStoreError).
pub(crate) fn unavailable(e: sqlx::Error) -> crate::snowflake::worker::WorkerStoreError {
    crate::snowflake::worker::WorkerStoreError::Unavailable(Box::new(e))
}

/// Whether a claim's statement or commit failed because another server's claim won: a unique
/// violation of the insert, or a serialization failure (SQLSTATE 40001: on Galera, two nodes'
/// claims of one worker id conflict at certification, and the loser gets error 1213 at the
/// statement or at `COMMIT`). Either way this claim took nothing: try the next candidate.
pub(crate) fn lost_race(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation() || d.code().as_deref() == Some("40001"))
}

/// How often a claim may lose a race before giving up.
pub(crate) const CLAIM_ATTEMPTS: u32 = 32;

/// Runs one write statement: inside `BEGIN ...; COMMIT` when `$begin` is `Some` (SQLite, whose
/// driver discards a failed autocommit commit, e.g. a full disk, so only an explicit `COMMIT`
/// reports it), else as one autocommit statement (MySQL: its OK means committed, with no window
/// in which a Galera brute-force abort could roll the write back behind a `COMMIT` that still
/// answers OK, as it did to the segment lease's transaction; see `MySqlStore::lease_cas`).
macro_rules! write_one {
    ($self:ident, $begin:expr, $query:expr) => {{
        match $begin {
            Some(begin) => match $self.pool.begin_with(begin).await {
                Ok(mut tx) => match $query.execute(&mut *tx).await {
                    Ok(done) => tx.commit().await.map(|()| done),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            },
            None => $query.execute(&$self.pool).await,
        }
    }};
}

pub(crate) use write_one;

/// Writes `impl WorkerStore for $store`; `$begin` opens a write transaction around each write
/// (`None`: autocommit statements, see [`write_one`]), `$insert_node` is
/// the `WORKER_NODE` insert and `$new_id` reads the new row id from the query result.
macro_rules! impl_worker_store {
    ($store:ty, $begin:expr, $insert_node:expr, $new_id:expr) => {
        #[async_trait::async_trait]
        impl $crate::snowflake::worker::WorkerStore for $store {
            async fn assign_disposable(
                &self,
                node: &$crate::snowflake::worker::NodeInfo,
                max_worker_id: u64,
            ) -> Result<u64, $crate::snowflake::worker::WorkerStoreError> {
                use $crate::snowflake::worker::WorkerStoreError;
                use $crate::store::worker_sql::unavailable;
                let done = $crate::store::worker_sql::write_one!(
                    self,
                    $begin,
                    sqlx::query($insert_node).bind(&node.host).bind(&node.port)
                )
                .map_err(unavailable)?;
                let new_id = $new_id;
                let id: u64 = new_id(&done);
                if id > max_worker_id {
                    return Err(WorkerStoreError::Exhausted(format!(
                        "WORKER_NODE gave id {id}, above the layout's largest worker id {max_worker_id}; \
                         use the lease strategy (ids are reused) or more worker bits"
                    )));
                }
                Ok(id)
            }

            async fn acquire_lease(
                &self,
                node: &$crate::snowflake::worker::NodeInfo,
                lease_ms: i64,
                max_worker_id: u64,
                now_ms: i64,
            ) -> Result<$crate::snowflake::worker::WorkerLease, $crate::snowflake::worker::WorkerStoreError> {
                use $crate::snowflake::worker::{WorkerLease, WorkerStoreError};
                use $crate::store::worker_sql::*;
                let db = unavailable;
                let max = i64::try_from(max_worker_id).unwrap_or(i64::MAX);
                let until = now_ms.saturating_add(lease_ms);
                for _ in 0..CLAIM_ATTEMPTS {
                    let expired: Option<(i64, i64, i64, String)> = sqlx::query_as(SELECT_EXPIRED)
                        .bind(max)
                        .bind(now_ms)
                        .bind(now_ms)
                        .fetch_optional(&self.pool)
                        .await
                        .map_err(db)?;
                    if let Some((worker_id, old_until, last_ts, old_owner)) = expired {
                        let claimed = write_one!(
                            self,
                            $begin,
                            sqlx::query(CLAIM)
                                .bind(&node.host)
                                .bind(&node.port)
                                .bind(&node.owner)
                                .bind(until)
                                .bind(worker_id)
                                .bind(old_until)
                                .bind(&old_owner)
                        );
                        let done = match claimed {
                            Ok(done) => done,
                            Err(e) if lost_race(&e) => continue,
                            Err(e) => return Err(db(e)),
                        };
                        if done.rows_affected() == 1 {
                            return Ok(WorkerLease { worker_id: worker_id as u64, last_timestamp_ms: last_ts });
                        }
                        continue; // another server claimed it first
                    }
                    let (next,): (i64,) = sqlx::query_as(NEXT_ID).fetch_one(&self.pool).await.map_err(db)?;
                    if next > max {
                        let (ahead,): (i64,) = sqlx::query_as(COUNT_AHEAD)
                            .bind(max)
                            .bind(now_ms)
                            .bind(now_ms)
                            .fetch_one(&self.pool)
                            .await
                            .map_err(db)?;
                        return Err(WorkerStoreError::Exhausted(format!(
                            "all {} worker ids are leased{}",
                            max_worker_id + 1,
                            if ahead > 0 {
                                format!(" ({ahead} expired ones refused: their last timestamp is ahead of this clock)")
                            } else {
                                String::new()
                            }
                        )));
                    }
                    let inserted = write_one!(
                        self,
                        $begin,
                        sqlx::query(INSERT_LEASE)
                            .bind(next)
                            .bind(&node.host)
                            .bind(&node.port)
                            .bind(&node.owner)
                            .bind(until)
                    );
                    match inserted {
                        Ok(_) => {
                            return Ok(WorkerLease { worker_id: next as u64, last_timestamp_ms: 0 });
                        }
                        Err(e) if lost_race(&e) => continue,
                        Err(e) => return Err(db(e)),
                    }
                }
                Err(WorkerStoreError::Exhausted(format!(
                    "lost {CLAIM_ATTEMPTS} races for a worker id; too many servers starting at once"
                )))
            }

            async fn heartbeat(
                &self,
                worker_id: u64,
                owner: &str,
                lease_until_ms: i64,
                last_timestamp_ms: i64,
            ) -> Result<bool, $crate::snowflake::worker::WorkerStoreError> {
                use $crate::store::worker_sql::unavailable;
                let done = $crate::store::worker_sql::write_one!(
                    self,
                    $begin,
                    sqlx::query($crate::store::worker_sql::HEARTBEAT)
                        .bind(lease_until_ms)
                        .bind(last_timestamp_ms)
                        .bind(last_timestamp_ms)
                        .bind(worker_id as i64)
                        .bind(owner)
                )
                .map_err(unavailable)?;
                Ok(done.rows_affected() == 1)
            }

            async fn release(
                &self,
                worker_id: u64,
                owner: &str,
                last_timestamp_ms: i64,
            ) -> Result<(), $crate::snowflake::worker::WorkerStoreError> {
                use $crate::store::worker_sql::unavailable;
                $crate::store::worker_sql::write_one!(
                    self,
                    $begin,
                    sqlx::query($crate::store::worker_sql::RELEASE)
                        .bind(last_timestamp_ms)
                        .bind(last_timestamp_ms)
                        .bind(worker_id as i64)
                        .bind(owner)
                )
                .map_err(unavailable)?;
                Ok(())
            }
        }
    };
}

pub(crate) use impl_worker_store;
