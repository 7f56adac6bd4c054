//! `leafid_tag_format`: the format of each formatted tag (`crate::shapes`), written once and
//! never changed, the same statements on every database.

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_once_racing};
use super::statement::Statement;
use crate::segment::StoreError;
use crate::store::errors::unavailable;

/// A tag's format, with the tag's stored spelling (compared exactly by the caller: MySQL's
/// default collation would match `Orders` to `orders`).
static SELECT_FORMAT: Statement =
    Statement::new("SELECT biz_tag, format FROM leafid_tag_format WHERE biz_tag = ?");

/// Records a format only where the tag has none: a derived one-row table keeps the statement
/// the same on MySQL (which wants a `FROM` before `WHERE`), PostgreSQL and SQLite.
static INSERT_FORMAT: Statement = Statement::new(
    "INSERT INTO leafid_tag_format (biz_tag, format) SELECT ?, ? FROM (SELECT 1 AS one) AS o \
     WHERE NOT EXISTS (SELECT 1 FROM leafid_tag_format WHERE biz_tag = ?)",
);

/// [`SpecStore::get_format`](crate::segment::SpecStore::get_format).
pub(crate) async fn get_format<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
) -> Result<Option<String>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, (String, String)>(SELECT_FORMAT.text::<D>())
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(row
        .filter(|(tag, _)| tag == biz_tag)
        .map(|(_, format)| format))
}

/// [`SpecStore::list_formats`](crate::segment::SpecStore::list_formats).
pub(crate) async fn list_formats<D: Dialect>(
    db: Sessions<'_, D>,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<D::Driver, (String, String)>(
        "SELECT biz_tag, format FROM leafid_tag_format",
    )
    .persistent(db.persistent())
    .fetch_all(s.conn())
    .await
    .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(rows)
}

/// [`SpecStore::put_format`](crate::segment::SpecStore::put_format): `true` if written,
/// `false` if the tag had a format already (left as it was).
pub(crate) async fn put_format<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
    format: &str,
) -> Result<bool, StoreError> {
    // Two servers writing one tag's format at once: the loser's insert fails (a duplicate key
    // on PostgreSQL, a deadlock on MariaDB) and, run again, finds the winner's row: `false`.
    let insert = || {
        sqlx::query::<D::Driver>(INSERT_FORMAT.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag)
            .bind(format)
            .bind(biz_tag)
    };
    let done = write_once_racing(db, insert).await.map_err(unavailable)?;
    Ok(D::rows_affected(&done) == 1)
}
