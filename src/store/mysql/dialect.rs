//! [`MySqlDialect`]: MySQL's spelling of the shared statements, on sqlx's MySQL driver (MariaDB,
//! Galera and TiDB speak it too).

use sqlx::mysql::{MySql, MySqlQueryResult};

use crate::store::sql::{Dialect, MySqlTagRecord, OnDriver};

/// MySQL's dialect: `?` placeholders, autocommit writes.
pub(crate) struct MySqlDialect;

impl OnDriver for MySqlDialect {
    type Driver = MySql;
}

impl Dialect for MySqlDialect {
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
