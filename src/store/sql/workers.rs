//! [`WorkerStore`](crate::snowflake::worker::WorkerStore) for every database: the SQL is the
//! same (written once with `?` placeholders, numbered for PostgreSQL by [`Statement`]), so one
//! set of functions generic over the [`Dialect`] serves every impl, and only what [`Dialect`] names
//! differs (the `WORKER_NODE` insert, the way to read its new id, and how a write commits).
//!
//! Leases are claimed with compare-and-set updates (`WHERE lease_until_ms = <seen> AND owner =
//! <seen>`) or a primary-key insert, so two servers can never hold one worker id. A claim that
//! loses (no row matched, a duplicate key, or on Galera a certification conflict: 1213 at the
//! statement or the commit) tries again ([`lost_race`]).
//!
//! How a write commits differs by database ([`write_one`]). On SQLite every write runs in an
//! explicit transaction whose `COMMIT` result is checked (see the module docs of
//! [`sqlite`](crate::store::sqlite): an autocommit statement there commits when it is reset,
//! and a failed commit is silent), so a claim is reported only once its commit is confirmed.
//! On MySQL every write is one autocommit statement (the session is forced to `autocommit = 1`
//! on connect, see [`mysql`](crate::store::mysql)): its OK means committed.
//!
//! A release clears `owner`: a heartbeat matches on `owner`, so a late heartbeat of the process
//! that released cannot renew a lease that is free (or already claimed by another server).

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_one};
use super::statement::Statement;
use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStoreError};

/// Claims an expired lease: oldest first, never one whose stored time is ahead of our clock.
static SELECT_EXPIRED: Statement = Statement::new(
    "SELECT worker_id, lease_until_ms, last_timestamp_ms, owner \
     FROM leafid_worker_lease WHERE worker_id <= ? AND lease_until_ms < ? AND last_timestamp_ms <= ? \
     ORDER BY lease_until_ms LIMIT 1",
);
static CLAIM: Statement = Statement::new(
    "UPDATE leafid_worker_lease SET host_name = ?, port = ?, owner = ?, \
     lease_until_ms = ? WHERE worker_id = ? AND lease_until_ms = ? AND owner = ?",
);
static NEXT_ID: Statement =
    Statement::new("SELECT COALESCE(MAX(worker_id) + 1, 0) FROM leafid_worker_lease");
static INSERT_LEASE: Statement = Statement::new(
    "INSERT INTO leafid_worker_lease \
     (worker_id, host_name, port, owner, lease_until_ms, last_timestamp_ms) VALUES (?, ?, ?, ?, ?, 0)",
);
static COUNT_AHEAD: Statement = Statement::new(
    "SELECT COUNT(*) FROM leafid_worker_lease \
     WHERE worker_id <= ? AND lease_until_ms < ? AND last_timestamp_ms > ?",
);
static HEARTBEAT: Statement = Statement::new(
    "UPDATE leafid_worker_lease SET lease_until_ms = ?, \
     last_timestamp_ms = CASE WHEN last_timestamp_ms > ? THEN last_timestamp_ms ELSE ? END \
     WHERE worker_id = ? AND owner = ?",
);
static SET_CLOCK_BACK: Statement = Statement::new(
    "UPDATE leafid_worker_lease SET clock_back = ? WHERE worker_id = ? AND owner = ?",
);
static RELEASE: Statement = Statement::new(
    "UPDATE leafid_worker_lease SET lease_until_ms = 0, owner = '', \
     last_timestamp_ms = CASE WHEN last_timestamp_ms > ? THEN last_timestamp_ms ELSE ? END \
     WHERE worker_id = ? AND owner = ?",
);

/// How often a claim may lose a race before giving up.
const CLAIM_ATTEMPTS: u32 = 32;

/// Wraps a driver error as [`WorkerStoreError::Unavailable`].
fn unavailable(e: sqlx::Error) -> WorkerStoreError {
    WorkerStoreError::Unavailable(Box::new(e))
}

/// Whether a claim's statement or commit failed because another server's claim won: a unique
/// violation of the insert, a serialization failure (SQLSTATE 40001: on Galera, two nodes'
/// claims of one worker id conflict at certification, and the loser gets error 1213 at the
/// statement or at `COMMIT`; on PostgreSQL under `repeatable read` or `serializable`, a claim of
/// a row another claim changed since the statement began) or a PostgreSQL deadlock (40P01).
/// Either way this claim took nothing: try the next candidate.
fn lost_race(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| {
        d.is_unique_violation() || matches!(d.code().as_deref(), Some("40001" | "40P01"))
    })
}

/// [`WorkerStore::assign_disposable`](crate::snowflake::worker::WorkerStore::assign_disposable).
pub(crate) async fn assign_disposable<D: Dialect>(
    db: Sessions<'_, D>,
    node: &NodeInfo,
    max_worker_id: u64,
) -> Result<u64, WorkerStoreError> {
    let id = if D::INSERT_NODE_RETURNS_ID {
        // One autocommit statement (or one pinned transaction) that answers the new id.
        let mut s = Session::open(db).await.map_err(unavailable)?;
        let id: i64 = sqlx::query_scalar(D::INSERT_NODE)
            .persistent(db.persistent())
            .bind(node.host.as_str())
            .bind(node.port.as_str())
            .fetch_one(s.conn())
            .await
            .map_err(unavailable)?;
        s.finish().await.map_err(unavailable)?;
        u64::try_from(id).map_err(|_| {
            WorkerStoreError::Exhausted(format!("WORKER_NODE gave the negative id {id}"))
        })?
    } else {
        let insert = sqlx::query::<D::Driver>(D::INSERT_NODE)
            .persistent(db.persistent())
            .bind(node.host.as_str())
            .bind(node.port.as_str());
        let done = write_one(db, insert).await.map_err(unavailable)?;
        D::inserted_id(&done).ok_or_else(|| {
            WorkerStoreError::Unavailable("the WORKER_NODE insert answered no id".into())
        })?
    };
    if id > max_worker_id {
        return Err(WorkerStoreError::Exhausted(format!(
            "WORKER_NODE gave id {id}, above the layout's largest worker id {max_worker_id}; \
             use the lease strategy (ids are reused) or more worker bits"
        )));
    }
    Ok(id)
}

/// [`WorkerStore::acquire_lease`](crate::snowflake::worker::WorkerStore::acquire_lease).
pub(crate) async fn acquire_lease<D: Dialect>(
    db: Sessions<'_, D>,
    node: &NodeInfo,
    lease_ms: i64,
    max_worker_id: u64,
    now_ms: i64,
) -> Result<WorkerLease, WorkerStoreError> {
    let err = unavailable;
    let max = i64::try_from(max_worker_id).unwrap_or(i64::MAX);
    let until = now_ms.saturating_add(lease_ms);
    for _ in 0..CLAIM_ATTEMPTS {
        let mut s = Session::open(db).await.map_err(err)?;
        let expired: Option<(i64, i64, i64, String)> = sqlx::query_as(SELECT_EXPIRED.text::<D>())
            .persistent(db.persistent())
            .bind(max)
            .bind(now_ms)
            .bind(now_ms)
            .fetch_optional(s.conn())
            .await
            .map_err(err)?;
        s.finish().await.map_err(err)?;
        if let Some((worker_id, old_until, last_ts, old_owner)) = expired {
            let claim = sqlx::query(CLAIM.text::<D>())
                .persistent(db.persistent())
                .bind(node.host.as_str())
                .bind(node.port.as_str())
                .bind(node.owner.as_str())
                .bind(until)
                .bind(worker_id)
                .bind(old_until)
                .bind(old_owner.as_str());
            let done = match write_one(db, claim).await {
                Ok(done) => done,
                Err(e) if lost_race(&e) => continue,
                Err(e) => return Err(err(e)),
            };
            if D::rows_affected(&done) == 1 {
                return Ok(WorkerLease {
                    worker_id: worker_id as u64,
                    last_timestamp_ms: last_ts,
                    previous_lease_until_ms: old_until,
                });
            }
            continue; // another server claimed it first
        }
        let mut s = Session::open(db).await.map_err(err)?;
        let (next,): (i64,) = sqlx::query_as(NEXT_ID.text::<D>())
            .persistent(db.persistent())
            .fetch_one(s.conn())
            .await
            .map_err(err)?;
        s.finish().await.map_err(err)?;
        if next > max {
            let mut s = Session::open(db).await.map_err(err)?;
            let (ahead,): (i64,) = sqlx::query_as(COUNT_AHEAD.text::<D>())
                .persistent(db.persistent())
                .bind(max)
                .bind(now_ms)
                .bind(now_ms)
                .fetch_one(s.conn())
                .await
                .map_err(err)?;
            s.finish().await.map_err(err)?;
            return Err(WorkerStoreError::Exhausted(format!(
                "all {} worker ids are leased{}",
                max_worker_id + 1,
                if ahead > 0 {
                    format!(
                        " ({ahead} expired ones refused: their last timestamp is ahead of this clock)"
                    )
                } else {
                    String::new()
                }
            )));
        }
        let insert = sqlx::query(INSERT_LEASE.text::<D>())
            .persistent(db.persistent())
            .bind(next)
            .bind(node.host.as_str())
            .bind(node.port.as_str())
            .bind(node.owner.as_str())
            .bind(until);
        match write_one(db, insert).await {
            Ok(_) => {
                return Ok(WorkerLease {
                    worker_id: next as u64,
                    last_timestamp_ms: 0,
                    previous_lease_until_ms: 0,
                });
            }
            Err(e) if lost_race(&e) => continue,
            Err(e) => return Err(err(e)),
        }
    }
    Err(WorkerStoreError::Exhausted(format!(
        "lost {CLAIM_ATTEMPTS} races for a worker id; too many servers starting at once"
    )))
}

/// [`WorkerStore::heartbeat`](crate::snowflake::worker::WorkerStore::heartbeat).
pub(crate) async fn heartbeat<D: Dialect>(
    db: Sessions<'_, D>,
    worker_id: u64,
    owner: &str,
    lease_until_ms: i64,
    last_timestamp_ms: i64,
) -> Result<bool, WorkerStoreError> {
    let renew = sqlx::query(HEARTBEAT.text::<D>())
        .persistent(db.persistent())
        .bind(lease_until_ms)
        .bind(last_timestamp_ms)
        .bind(last_timestamp_ms)
        .bind(worker_id as i64)
        .bind(owner);
    let done = write_one(db, renew).await.map_err(unavailable)?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`WorkerStore::release`](crate::snowflake::worker::WorkerStore::release).
pub(crate) async fn release<D: Dialect>(
    db: Sessions<'_, D>,
    worker_id: u64,
    owner: &str,
    last_timestamp_ms: i64,
) -> Result<(), WorkerStoreError> {
    let release = sqlx::query(RELEASE.text::<D>())
        .persistent(db.persistent())
        .bind(last_timestamp_ms)
        .bind(last_timestamp_ms)
        .bind(worker_id as i64)
        .bind(owner);
    write_one(db, release).await.map_err(unavailable)?;
    Ok(())
}

/// [`WorkerStore::record_clock_back`](crate::snowflake::worker::WorkerStore::record_clock_back).
pub(crate) async fn record_clock_back<D: Dialect>(
    db: Sessions<'_, D>,
    worker_id: u64,
    owner: &str,
    clock_back: u64,
) -> Result<bool, WorkerStoreError> {
    let set = sqlx::query(SET_CLOCK_BACK.text::<D>())
        .persistent(db.persistent())
        .bind(clock_back as i64)
        .bind(worker_id as i64)
        .bind(owner);
    let done = write_one(db, set).await.map_err(unavailable)?;
    Ok(D::rows_affected(&done) == 1)
}
