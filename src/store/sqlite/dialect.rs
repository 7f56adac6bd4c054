//! [`SqliteDialect`]: SQLite's spelling of the shared statements, on sqlx's SQLite driver.

use sqlx::sqlite::{Sqlite, SqliteQueryResult};

use crate::store::sql::{Dialect, OnDriver, SqliteTagRecord};

/// SQLite's dialect: `?` placeholders, every write in a transaction whose `COMMIT` is checked.
pub(crate) struct SqliteDialect;

impl OnDriver for SqliteDialect {
    type Driver = Sqlite;
}

impl Dialect for SqliteDialect {
    const NUMBERED_PLACEHOLDERS: bool = false;
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = ?1";
    type TagRecord = SqliteTagRecord;
    // An explicit transaction whose `COMMIT` is checked: the driver discards a failed
    // autocommit commit (see `crate::store::sqlite`).
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
