//! What the SQL stores share, as plain functions generic over the driver: the `leaf_alloc`
//! reads, the row types sqlx decodes them into, and the [`Dialect`] trait that names the few
//! things the databases spell differently. The writes that grant ids stay in [`super::mysql`],
//! [`super::sqlite`] and [`super::postgres`]: their transaction shapes differ on purpose (see
//! their module docs).
//!
//! # Placeholders
//!
//! MySQL and SQLite take `?`; PostgreSQL takes `$1, $2, ...`. A statement the databases share
//! is written once, with `?`, as a [`Statement`]; [`Statement::text`] hands each dialect its
//! own text. PostgreSQL's is made from the `?` text the first time it is needed and kept for
//! the life of the process (a `OnceLock` per statement), so the translation runs once per
//! statement, not per query, and every query still gets a `&'static str` (which sqlx takes as
//! safe SQL, and caches a prepared statement under). Why not one text per dialect written by
//! hand: the shared statements would then exist three times, and a fix to one copy could miss
//! another; why not `$n` everywhere: MySQL has no numbered placeholders.
//!
//! # Sessions
//!
//! The shared statements run through a [`Session`]: a pooled connection, or, when the store
//! says each statement must keep its server connection (PostgreSQL behind PgBouncer in
//! transaction pooling mode, see [`super::postgres`]), a transaction of its own whose `COMMIT`
//! is checked.
use std::sync::OnceLock;

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::database::HasStatementCache;
use sqlx::mysql::{MySql, MySqlQueryResult};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgQueryResult, Postgres};
use sqlx::sqlite::{Sqlite, SqliteQueryResult};
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Transaction, Type};

use super::unavailable;
use crate::segment::{StoreError, TagRow};

/// Every `leaf_alloc` row, ordered by tag (the same text on every database).
const SELECT_TAGS: &str =
    "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc ORDER BY biz_tag";

/// A statement shared by the dialects, written once with `?` placeholders (see the module
/// docs). Declare it as a `static`: its PostgreSQL text is kept inside it.
pub(crate) struct Statement {
    /// The text with `?` placeholders (MySQL, SQLite).
    text: &'static str,
    /// The text with `$1, $2, ...`, made on first use (PostgreSQL).
    numbered: OnceLock<String>,
}

impl Statement {
    /// A statement with `?` placeholders, none of them inside a quoted literal or identifier.
    pub(crate) const fn new(text: &'static str) -> Self {
        Self {
            text,
            numbered: OnceLock::new(),
        }
    }

    /// The text `DB` runs.
    pub(crate) fn text<DB: Dialect>(&'static self) -> &'static str {
        if DB::NUMBERED_PLACEHOLDERS {
            self.numbered.get_or_init(|| number_placeholders(self.text))
        } else {
            self.text
        }
    }
}

/// `?` placeholders as `$1, $2, ...` in order, leaving quoted text (`'...'`, `"..."`) as it is.
fn number_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut n = 0;
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '?') => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
                continue;
            }
            (None, '\'' | '"') => quote = Some(c),
            // A doubled quote inside a literal closes and reopens it: same result.
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Where the shared statements run: the pool, and whether each one needs a transaction of its
/// own (see [`Session`]). A plain pool converts into one that does not.
#[derive(Debug)]
pub(crate) struct Sessions<'a, DB: Database> {
    /// The store's pool.
    pub pool: &'a Pool<DB>,
    /// Every statement inside `BEGIN ... COMMIT`, so it keeps one server connection (PgBouncer).
    pub pinned: bool,
}

impl<DB: Database> Sessions<'_, DB> {
    /// Whether a statement may be prepared under a name and kept (sqlx's `persistent`). Not
    /// when pinned: sqlx 0.9 names every persistent statement and, with its cache off, never
    /// closes it, so behind PgBouncer another client's `sqlx_s_1` on the same server connection
    /// fails with `prepared statement "sqlx_s_1" already exists` (42P05). Unnamed statements
    /// live until the next one on that connection, inside the statement's own transaction.
    pub(crate) fn persistent(self) -> bool {
        !self.pinned
    }
}

impl<DB: Database> Clone for Sessions<'_, DB> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<DB: Database> Copy for Sessions<'_, DB> {}

impl<'a, DB: Database> From<&'a Pool<DB>> for Sessions<'a, DB> {
    fn from(pool: &'a Pool<DB>) -> Self {
        Self {
            pool,
            pinned: false,
        }
    }
}

/// One connection for one statement, or a transaction around it when the statement must keep
/// its server connection. [`Session::finish`] commits that transaction; a session dropped
/// without it rolls back.
pub(crate) enum Session<DB: Database> {
    /// A pooled connection in autocommit mode.
    Plain(PoolConnection<DB>),
    /// A transaction that pins the server connection (PgBouncer transaction pooling).
    Pinned(Transaction<'static, DB>),
}

impl<DB: Database> Session<DB> {
    /// Takes a connection from `sessions`' pool, opening a transaction when it is pinned.
    pub(crate) async fn open(sessions: Sessions<'_, DB>) -> Result<Self, sqlx::Error> {
        Ok(if sessions.pinned {
            Self::Pinned(sessions.pool.begin().await?)
        } else {
            Self::Plain(sessions.pool.acquire().await?)
        })
    }

    /// The connection to run the statement on.
    pub(crate) fn conn(&mut self) -> &mut DB::Connection {
        match self {
            Self::Plain(c) => c,
            Self::Pinned(tx) => tx,
        }
    }

    /// Commits the transaction, if any; its error is the statement's.
    pub(crate) async fn finish(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Pinned(tx) => tx.commit().await,
        }
    }
}

/// What differs between the databases in the statements they share.
pub(crate) trait Dialect: Database + HasStatementCache {
    /// Placeholders are `$1, $2, ...` (PostgreSQL), not `?` (see [`Statement`]).
    const NUMBERED_PLACEHOLDERS: bool;
    /// One `leaf_alloc` row by tag, in this database's placeholder style.
    const SELECT_TAG: &'static str;
    /// A `leaf_alloc` row as this driver decodes it.
    type TagRecord: for<'r> FromRow<'r, Self::Row> + Into<TagRow> + Send + Unpin;
    /// The statement that opens a worker-lease write's transaction, or `None` for one
    /// autocommit statement (see `worker_sql::write_one`).
    const WRITE_BEGIN: Option<&'static str>;
    /// The uid-generator `WORKER_NODE` insert (binds host and port).
    const INSERT_NODE: &'static str;
    /// The insert answers its row's id as a row (`RETURNING ID`, PostgreSQL) rather than in its
    /// result ([`Dialect::inserted_id`]).
    const INSERT_NODE_RETURNS_ID: bool;
    /// The id the `WORKER_NODE` insert gave its row, from its result; `None` where the result
    /// does not carry it (the insert returns it as a row instead).
    fn inserted_id(done: &Self::QueryResult) -> Option<u64>;
    /// How many rows a write changed.
    fn rows_affected(done: &Self::QueryResult) -> u64;
}

impl Dialect for MySql {
    const NUMBERED_PLACEHOLDERS: bool = false;
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?";
    type TagRecord = MySqlTagRecord;
    // Autocommit statements: an OK means committed, with no window in which a Galera
    // brute-force abort could roll the write back behind a `COMMIT` that still answers OK.
    const WRITE_BEGIN: Option<&'static str> = None;
    const INSERT_NODE: &'static str = "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, CURDATE(), NOW(), NOW())";
    const INSERT_NODE_RETURNS_ID: bool = false;

    fn inserted_id(done: &MySqlQueryResult) -> Option<u64> {
        Some(done.last_insert_id())
    }

    fn rows_affected(done: &MySqlQueryResult) -> u64 {
        done.rows_affected()
    }
}

impl Dialect for Sqlite {
    const NUMBERED_PLACEHOLDERS: bool = false;
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?1";
    type TagRecord = SqliteTagRecord;
    // An explicit transaction whose `COMMIT` is checked: the driver discards a failed
    // autocommit commit (see `super::sqlite`).
    const WRITE_BEGIN: Option<&'static str> = Some("BEGIN IMMEDIATE");
    const INSERT_NODE: &'static str = "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES (?, ?, 2, date('now'), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)";
    const INSERT_NODE_RETURNS_ID: bool = false;

    fn inserted_id(done: &SqliteQueryResult) -> Option<u64> {
        Some(done.last_insert_rowid() as u64)
    }

    fn rows_affected(done: &SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

impl Dialect for Postgres {
    const NUMBERED_PLACEHOLDERS: bool = true;
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = $1";
    // The same row types as MySQL's: step an INT, update_time an instant.
    type TagRecord = MySqlTagRecord;
    // Autocommit statements: PostgreSQL commits one at its `Sync`, and sqlx reads every answer
    // up to `ReadyForQuery`, so a failed commit is the statement's error (see `super::postgres`).
    const WRITE_BEGIN: Option<&'static str> = None;
    const INSERT_NODE: &'static str = "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
     VALUES ($1, $2, 2, CURRENT_DATE, now(), now()) RETURNING ID";
    const INSERT_NODE_RETURNS_ID: bool = true;

    fn inserted_id(_: &PgQueryResult) -> Option<u64> {
        None
    }

    fn rows_affected(done: &PgQueryResult) -> u64 {
        done.rows_affected()
    }
}

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

/// One row, if present: [`SegmentStore::get_tag`](crate::segment::SegmentStore::get_tag).
pub(crate) async fn get_tag<'p, DB>(
    db: impl Into<Sessions<'p, DB>>,
    biz_tag: &str,
) -> Result<Option<TagRow>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
{
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<DB, DB::TagRecord>(DB::SELECT_TAG)
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(row.map(Into::into))
}

/// Every row, ordered by tag: [`SegmentStore::list_tags`](crate::segment::SegmentStore::list_tags).
pub(crate) async fn list_tags<'p, DB>(
    db: impl Into<Sessions<'p, DB>>,
) -> Result<Vec<TagRow>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<DB, DB::TagRecord>(SELECT_TAGS)
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Every tag name, reading only the key column:
/// [`SegmentStore::list_tag_names`](crate::segment::SegmentStore::list_tag_names).
pub(crate) async fn list_tag_names<'p, DB>(
    db: impl Into<Sessions<'p, DB>>,
) -> Result<Vec<String>, StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
    (String,): for<'r> FromRow<'r, DB::Row>,
{
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let names = sqlx::query_scalar::<DB, String>("SELECT biz_tag FROM leaf_alloc")
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(names)
}

/// A cheap round trip: [`SegmentStore::ping`](crate::segment::SegmentStore::ping).
pub(crate) async fn ping<'p, DB>(db: impl Into<Sessions<'p, DB>>) -> Result<(), StoreError>
where
    DB: Dialect,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    DB::Arguments: IntoArguments<DB>,
{
    let db = db.into();
    let mut s = Session::open(db).await.map_err(unavailable)?;
    sqlx::query::<DB>("SELECT 1")
        .persistent(db.persistent())
        .execute(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::number_placeholders;

    #[test]
    fn placeholders_are_numbered_in_order_outside_quoted_text() {
        assert_eq!(
            number_placeholders(
                "UPDATE t SET a = ?, b = '?', c = \"?\" WHERE d = ? AND e = 'it''s ?'"
            ),
            "UPDATE t SET a = $1, b = '?', c = \"?\" WHERE d = $2 AND e = 'it''s ?'"
        );
        assert_eq!(number_placeholders("SELECT 1"), "SELECT 1");
    }
}
