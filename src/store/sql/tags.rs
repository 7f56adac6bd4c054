//! The `leaf_alloc` statements every database shares: the reads (one row, every row, the tag
//! names, a ping), the give-back of a lease's unused tail, and the row types sqlx decodes a row
//! into. The writes that grant ids stay in each database's folder: their transaction shapes
//! differ on purpose (see their module docs).

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::FromRow;

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_one};
use super::statement::Statement;
use crate::segment::{StoreError, TagRow};
use crate::store::errors::unavailable;

/// Every `leaf_alloc` row, ordered by tag (the same text on every database).
const SELECT_TAGS: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag";

/// The compare-and-set of [`return_unused`].
static RETURN_UNUSED: Statement = Statement::new(
    "UPDATE leaf_alloc SET max_id = ?, update_time = CURRENT_TIMESTAMP \
     WHERE biz_tag = ? AND max_id = ?",
);

/// A `leaf_alloc` row on MySQL and PostgreSQL: `step` is an `INT`, `update_time` a `TIMESTAMP`.
#[derive(FromRow)]
pub(crate) struct MySqlTagRecord {
    biz_tag: String,
    max_id: i64,
    step: i32,
    description: Option<String>,
    update_time: Option<DateTime<Utc>>,
}

impl From<MySqlTagRecord> for TagRow {
    fn from(r: MySqlTagRecord) -> Self {
        Self {
            biz_tag: r.biz_tag,
            max_id: r.max_id,
            step: i64::from(r.step),
            description: r.description,
            update_time: r.update_time,
        }
    }
}

/// A `leaf_alloc` row on SQLite: `update_time` is text (`CURRENT_TIMESTAMP`, UTC); text in
/// another shape reads as no time rather than failing the row.
#[derive(FromRow)]
pub(crate) struct SqliteTagRecord {
    biz_tag: String,
    max_id: i64,
    step: i64,
    description: Option<String>,
    update_time: Option<String>,
}

impl From<SqliteTagRecord> for TagRow {
    fn from(r: SqliteTagRecord) -> Self {
        Self {
            biz_tag: r.biz_tag,
            max_id: r.max_id,
            step: r.step,
            description: r.description,
            update_time: r
                .update_time
                .and_then(|t| NaiveDateTime::parse_from_str(&t, "%Y-%m-%d %H:%M:%S").ok())
                .map(|t| DateTime::<Utc>::from_naive_utc_and_offset(t, Utc)),
        }
    }
}

/// One row, if present: [`TagAdminStore::get_tag`](crate::segment::TagAdminStore::get_tag).
pub(crate) async fn get_tag<'p, D: Dialect>(
    db: impl Into<Sessions<'p, D>>,
    biz_tag: &str,
) -> Result<Option<TagRow>, StoreError> {
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, D::TagRecord>(D::SELECT_TAG)
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(row.map(Into::into))
}

/// Every row, ordered by tag: [`TagAdminStore::list_tags`](crate::segment::TagAdminStore::list_tags).
pub(crate) async fn list_tags<'p, D: Dialect>(
    db: impl Into<Sessions<'p, D>>,
) -> Result<Vec<TagRow>, StoreError> {
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<D::Driver, D::TagRecord>(SELECT_TAGS)
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Every tag name, reading only the key column:
/// [`TagAdminStore::list_tag_names`](crate::segment::TagAdminStore::list_tag_names).
pub(crate) async fn list_tag_names<'p, D: Dialect>(
    db: impl Into<Sessions<'p, D>>,
) -> Result<Vec<String>, StoreError> {
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let names = sqlx::query_scalar::<D::Driver, String>("SELECT biz_tag FROM leaf_alloc")
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(names)
}

/// A cheap round trip: [`LeaseStore::ping`](crate::segment::LeaseStore::ping).
pub(crate) async fn ping<'p, D: Dialect>(db: impl Into<Sessions<'p, D>>) -> Result<(), StoreError> {
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    sqlx::query::<D::Driver>("SELECT 1")
        .persistent(db.persistent())
        .execute(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(())
}

/// [`LeaseStore::return_unused`](crate::segment::LeaseStore::return_unused): moves
/// `max_id` back from the end of the last lease (`to`) to its first id never handed out
/// (`from`), only if no other lease moved it since.
pub(crate) async fn return_unused<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
    from: i64,
    to: i64,
) -> Result<bool, StoreError> {
    if from >= to || from < 0 {
        return Ok(false);
    }
    let cas = sqlx::query::<D::Driver>(RETURN_UNUSED.text::<D>())
        .persistent(db.persistent())
        .bind(from)
        .bind(biz_tag)
        .bind(to);
    // The same shape as the worker-lease writes: SQLite in an explicit transaction whose
    // COMMIT is checked (`crate::store::sqlite`), MySQL and PostgreSQL one autocommit statement
    // whose answer means committed (on Galera, certified), or a pinned transaction behind
    // PgBouncer.
    let done = write_one(db, cas).await.map_err(unavailable)?;
    Ok(D::rows_affected(&done) == 1)
}
