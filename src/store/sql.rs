//! What the two SQL stores share, as plain functions generic over the driver: the `leaf_alloc`
//! reads, the row types sqlx decodes them into, and the [`Dialect`] trait that names the few
//! things the databases spell differently. The writes that grant ids stay in [`super::mysql`]
//! and [`super::sqlite`]: their transaction shapes differ on purpose (see their module docs).

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::mysql::{MySql, MySqlQueryResult};
use sqlx::sqlite::{Sqlite, SqliteQueryResult};
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::unavailable;
use crate::segment::{StoreError, TagRow};

/// Every `leaf_alloc` row, ordered by tag (the same text on both databases).
const SELECT_TAGS: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag";

/// What differs between MySQL and SQLite in the statements both run.
pub(crate) trait Dialect: Database {
    /// One `leaf_alloc` row by tag, in this database's placeholder style.
    const SELECT_TAG: &'static str;
    /// A `leaf_alloc` row as this driver decodes it.
    type TagRecord: for<'r> FromRow<'r, Self::Row> + Into<TagRow> + Send + Unpin;
    /// The statement that opens a worker-lease write's transaction, or `None` for one
    /// autocommit statement (see `worker_sql::write_one`).
    const WRITE_BEGIN: Option<&'static str>;
    /// The uid-generator `WORKER_NODE` insert (binds host and port).
    const INSERT_NODE: &'static str;
    /// The id the `WORKER_NODE` insert gave its row.
    fn inserted_id(done: &Self::QueryResult) -> u64;
    /// How many rows a write changed.
    fn rows_affected(done: &Self::QueryResult) -> u64;
}

impl Dialect for MySql {
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?";
    type TagRecord = MySqlTagRecord;
    // Autocommit statements: an OK means committed, with no window in which a Galera
    // brute-force abort could roll the write back behind a `COMMIT` that still answers OK.
    const WRITE_BEGIN: Option<&'static str> = None;
    const INSERT_NODE: &'static str = "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, CURDATE(), NOW(), NOW())";

    fn inserted_id(done: &MySqlQueryResult) -> u64 {
        done.last_insert_id()
    }

    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }
}

impl Dialect for Sqlite {
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?1";
    type TagRecord = SqliteTagRecord;
    // An explicit transaction whose `COMMIT` is checked: the driver discards a failed
    // autocommit commit (see `super::sqlite`).
    const WRITE_BEGIN: Option<&'static str> = Some("BEGIN IMMEDIATE");
    const INSERT_NODE: &'static str = "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, date('now'), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)";

    fn inserted_id(done: &SqliteQueryResult) -> u64 {
        done.last_insert_rowid() as u64
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// A `leaf_alloc` row on MySQL: `step` is an `INT`, `update_time` a `TIMESTAMP`.
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

/// One row, if present: [`SegmentStore::get_tag`](crate::segment::SegmentStore::get_tag).
pub(crate) async fn get_tag<DB>(
    pool: &Pool<DB>,
    biz_tag: &str,
) -> Result<Option<TagRow>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
{
    let row = sqlx::query_as::<DB, DB::TagRecord>(DB::SELECT_TAG)
        .bind(biz_tag)
        .fetch_optional(pool)
        .await
        .map_err(unavailable)?;
    Ok(row.map(Into::into))
}

/// Every row, ordered by tag: [`SegmentStore::list_tags`](crate::segment::SegmentStore::list_tags).
pub(crate) async fn list_tags<DB>(pool: &Pool<DB>) -> Result<Vec<TagRow>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let rows = sqlx::query_as::<DB, DB::TagRecord>(SELECT_TAGS)
        .fetch_all(pool)
        .await
        .map_err(unavailable)?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Every tag name, reading only the key column:
/// [`SegmentStore::list_tag_names`](crate::segment::SegmentStore::list_tag_names).
pub(crate) async fn list_tag_names<DB>(pool: &Pool<DB>) -> Result<Vec<String>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (String,): for<'r> FromRow<'r, DB::Row>,
{
    sqlx::query_scalar::<DB, String>("SELECT biz_tag FROM leaf_alloc")
        .fetch_all(pool)
        .await
        .map_err(unavailable)
}

/// A cheap round trip: [`SegmentStore::ping`](crate::segment::SegmentStore::ping).
pub(crate) async fn ping<DB>(pool: &Pool<DB>) -> Result<(), StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    sqlx::query::<DB>("SELECT 1")
        .execute(pool)
        .await
        .map_err(unavailable)?;
    Ok(())
}
