//! What the stores' failures mean to the engines, the same on every database: a driver error is
//! [`StoreError::Unavailable`], a duplicate key on insert is [`StoreError::AlreadyExists`], and
//! a lease whose guarded `UPDATE` matched no row is decided from the row read after it
//! ([`lease_without_update`]). Each database's own classification (which errors may be retried)
//! is in its folder's `errors.rs`.

use crate::segment::StoreError;

/// Wraps a driver error as [`StoreError::Unavailable`].
pub(crate) fn unavailable(e: sqlx::Error) -> StoreError {
    StoreError::Unavailable(Box::new(e))
}

/// Maps a failed insert to [`StoreError::AlreadyExists`] when it is a duplicate key.
pub(crate) fn insert_error(e: sqlx::Error) -> StoreError {
    if e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
    {
        StoreError::AlreadyExists
    } else {
        unavailable(e)
    }
}

/// Whether a failed write lost a race with another server's write of the same key, so that the
/// statement, run again, finds that write: a duplicate key (PostgreSQL, when two inserts both
/// passed their `NOT EXISTS` before either committed), or a deadlock or serialization failure
/// (SQLSTATE `40001`: MariaDB's 1213 when two `INSERT ... WHERE NOT EXISTS` took the same gap
/// lock; `40P01`: PostgreSQL's deadlock). The statement was rolled back whole.
pub(crate) fn lost_race(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| {
        d.is_unique_violation() || matches!(d.code().as_deref(), Some("40001" | "40P01"))
    })
}

/// What the lease statements found when the guarded `UPDATE` matched no row.
pub(crate) fn lease_without_update(row: Option<(i64, i64)>) -> Result<LeaseRemainder, StoreError> {
    match row {
        None => Err(StoreError::NotFound),
        Some((_, step)) if step <= 0 => Err(StoreError::BadRow(format!(
            "step is {step}; it must be >= 1"
        ))),
        Some((max_id, _)) if max_id == i64::MAX => Err(StoreError::Exhausted),
        Some((max_id, step)) => Ok(LeaseRemainder {
            old_max_id: max_id,
            db_step: step,
        }),
    }
}

/// The tail of the i64 range still leasable when a full step no longer fits.
pub(crate) struct LeaseRemainder {
    pub old_max_id: i64,
    pub db_step: i64,
}
