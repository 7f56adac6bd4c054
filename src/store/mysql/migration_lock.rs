//! A cluster-wide lock around MySQL migrations, held in a row of `leafid_migration_lock`.
//!
//! sqlx's own migration lock (`GET_LOCK`) holds only on the server that took it. On Galera every
//! node is a server, so servers starting at once on different nodes ran the same migrations
//! together: one server's `CREATE TABLE IF NOT EXISTS _sqlx_migrations` (a DDL replicated in
//! total order) aborted another's bookkeeping `UPDATE`, leaving its migration marked dirty for
//! good, and no server could start again. A row lock replicates like any write, so one server
//! at a time migrates whichever node it writes to.
//!
//! Rules:
//! - The lock is one row (`id = 1`) taken by an autocommit `INSERT` (the first wins; on Galera
//!   a second node's insert fails certification or hits the duplicate key) and released by
//!   deleting it. A holder that crashed leaves the row: it expires after [`HOLD`] and the next
//!   server takes it over with a compare-and-set on the expiry it read.
//! - The lock table is created only when it is missing (a DDL each start would abort other
//!   servers' statements on Galera).
//! - Under the lock, a migration left dirty by a run that failed or crashed is cleared and run
//!   again: leafid's MySQL migrations are idempotent (`IF NOT EXISTS`, `MODIFY` to the same
//!   type) and no other server is migrating.

use std::time::Duration;

use sqlx::MySqlPool;
use tokio::time::Instant;
use tracing::info;

use super::errors::is_retryable;

/// How long a holder may keep the lock before another server may take it over.
pub(crate) const HOLD: Duration = Duration::from_secs(60);
/// How long a server waits for the lock before giving up on start-up.
const WAIT: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(200);

const CREATE: &str = "CREATE TABLE IF NOT EXISTS leafid_migration_lock (\
     id TINYINT NOT NULL PRIMARY KEY, owner VARCHAR(64) NOT NULL, until_ms BIGINT NOT NULL\
     ) ENGINE = InnoDB";

/// The lock, held until [`MigrationLock::release`].
pub(crate) struct MigrationLock<'a> {
    pool: &'a MySqlPool,
    owner: String,
}

impl<'a> MigrationLock<'a> {
    /// Waits for the lock (at most two minutes) and takes it.
    pub(crate) async fn acquire(pool: &'a MySqlPool) -> Result<Self, sqlx::Error> {
        let owner = format!("{}-{}", std::process::id(), now_ms());
        let exists: i64 = retry(|| {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.TABLES \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leafid_migration_lock'",
            )
            .fetch_one(pool)
        })
        .await?;
        if exists == 0 {
            retry(|| sqlx::query(CREATE).execute(pool)).await?;
        }
        let deadline = Instant::now() + WAIT;
        let mut waited = false;
        loop {
            let until = now_ms() + HOLD.as_millis() as i64;
            let inserted = sqlx::query(
                "INSERT INTO leafid_migration_lock (id, owner, until_ms) VALUES (1, ?, ?)",
            )
            .bind(&owner)
            .bind(until)
            .execute(pool)
            .await;
            match inserted {
                Ok(_) => return Ok(Self { pool, owner }),
                Err(e) if !lost(&e) => return Err(e),
                Err(_) => {}
            }
            // Held: take it over if its holder let it expire (crashed), else wait.
            let taken = sqlx::query(
                "UPDATE leafid_migration_lock SET owner = ?, until_ms = ? \
                 WHERE id = 1 AND until_ms < ?",
            )
            .bind(&owner)
            .bind(until)
            .bind(now_ms())
            .execute(pool)
            .await;
            match taken {
                Ok(done) if done.rows_affected() == 1 => {
                    info!("took over an expired migration lock");
                    return Ok(Self { pool, owner });
                }
                Ok(_) => {}
                Err(e) if !lost(&e) => return Err(e),
                Err(_) => {}
            }
            if Instant::now() >= deadline {
                return Err(sqlx::Error::Protocol(format!(
                    "another server held the migration lock (leafid_migration_lock) for {} s",
                    WAIT.as_secs()
                )));
            }
            if !waited {
                info!("another server is migrating the database; waiting");
                waited = true;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Clears migrations a failed or crashed run left dirty, so they run again.
    pub(crate) async fn clear_dirty(&self) -> Result<u64, sqlx::Error> {
        let table: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '_sqlx_migrations'",
        )
        .fetch_one(self.pool)
        .await?;
        if table == 0 {
            return Ok(0);
        }
        let done = retry(|| {
            sqlx::query("DELETE FROM _sqlx_migrations WHERE success = FALSE").execute(self.pool)
        })
        .await?;
        Ok(done.rows_affected())
    }

    /// Releases the lock (only if still ours).
    pub(crate) async fn release(self) -> Result<(), sqlx::Error> {
        retry(|| {
            sqlx::query("DELETE FROM leafid_migration_lock WHERE id = 1 AND owner = ?")
                .bind(&self.owner)
                .execute(self.pool)
        })
        .await?;
        Ok(())
    }
}

/// Lost a race for the row: a duplicate key, or a Galera certification conflict / deadlock.
fn lost(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
        || is_retryable(e)
}

/// Retries a statement a few times on conflicts (a replicated DDL may abort it on Galera).
async fn retry<T, F, Fut>(mut f: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempt = 0u32;
    loop {
        match f().await {
            Err(e) if attempt < 10 && is_retryable(&e) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
            }
            other => return other,
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
