//! [`PgDialect`]: PostgreSQL's spelling of the shared statements, on sqlx's PostgreSQL driver
//! (directly or through PgBouncer).

use sqlx::postgres::{PgQueryResult, Postgres};

use crate::store::sql::{Dialect, MySqlTagRecord, OnDriver};

/// PostgreSQL's dialect: `$n` placeholders, autocommit writes, `RETURNING` for new ids.
pub(crate) struct PgDialect;

impl OnDriver for PgDialect {
    type Driver = Postgres;
}

impl Dialect for PgDialect {
    const NUMBERED_PLACEHOLDERS: bool = true;
    const SELECT_TAG: &'static str =
        "SELECT biz_tag, max_id, step, description, update_time FROM leaf_alloc WHERE biz_tag = $1";
    // The same row types as MySQL's: step an INT, update_time an instant.
    type TagRecord = MySqlTagRecord;
    // Autocommit statements: PostgreSQL commits one at its `Sync`, and sqlx reads every answer
    // up to `ReadyForQuery`, so a failed commit is the statement's error (see
    // `crate::store::postgres`).
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
