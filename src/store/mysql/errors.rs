//! What MySQL's errors mean: which failures rolled back a statement that may simply run again
//! (deadlocks, lock wait timeouts, and Galera's certification conflicts, which it reports as
//! deadlocks), and which failed migrations lost a race with another server's.

use sqlx::migrate::MigrateError;
use sqlx::mysql::MySqlDatabaseError;

/// A migration that lost a race with another server's (see
/// [`MySqlStore::migrate`](super::MySqlStore::migrate)).
pub(crate) fn migration_raced(e: &MigrateError) -> bool {
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
pub(crate) fn is_retryable(e: &sqlx::Error) -> bool {
    let Some(db) = e.as_database_error() else {
        return false;
    };
    if db.code().as_deref() == Some("40001") {
        return true;
    }
    db.try_downcast_ref::<MySqlDatabaseError>()
        .is_some_and(|m| matches!(m.number(), 1213 | 1205))
}
