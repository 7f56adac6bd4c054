//! `leafid_shape_key`: the check value of each key id's key (`crate::shapes::key_check`),
//! written once by the first server that uses the key id and never changed. The same
//! statements on every database.

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_once_racing};
use super::statement::Statement;
use crate::segment::StoreError;
use crate::store::errors::unavailable;

/// The check value recorded for a key id, with the key id's stored spelling (compared exactly
/// by the caller, whatever the collation).
static SELECT_CHECK: Statement =
    Statement::new("SELECT key_id, check_value FROM leafid_shape_key WHERE key_id = ?");

/// Records a check value only where the key id has none (the derived one-row table keeps the
/// statement the same on MySQL, PostgreSQL and SQLite, as `leafid_tag_format`'s insert).
static INSERT_CHECK: Statement = Statement::new(
    "INSERT INTO leafid_shape_key (key_id, check_value) SELECT ?, ? FROM (SELECT 1 AS one) AS o \
     WHERE NOT EXISTS (SELECT 1 FROM leafid_shape_key WHERE key_id = ?)",
);

/// [`SpecStore::key_check`](crate::segment::SpecStore::key_check).
pub(crate) async fn key_check<D: Dialect>(
    db: Sessions<'_, D>,
    key_id: &str,
) -> Result<Option<String>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, (String, String)>(SELECT_CHECK.text::<D>())
        .persistent(db.persistent())
        .bind(key_id)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(row.filter(|(id, _)| id == key_id).map(|(_, check)| check))
}

/// [`SpecStore::bind_key`](crate::segment::SpecStore::bind_key): the check value recorded
/// after writing `check` where none was.
pub(crate) async fn bind_key<D: Dialect>(
    db: Sessions<'_, D>,
    key_id: &str,
    check: &str,
) -> Result<String, StoreError> {
    // Two servers binding one key id at once: the loser's insert fails (a duplicate key on
    // PostgreSQL, a deadlock on MariaDB) and, run again, finds the winner's row and inserts
    // nothing; both then read the one recorded value.
    let insert = || {
        sqlx::query::<D::Driver>(INSERT_CHECK.text::<D>())
            .persistent(db.persistent())
            .bind(key_id)
            .bind(check)
            .bind(key_id)
    };
    write_once_racing(db, insert).await.map_err(unavailable)?;
    key_check(db, key_id).await?.ok_or_else(|| {
        StoreError::Unavailable(
            "leafid_shape_key has no row for the key id after the insert".into(),
        )
    })
}
