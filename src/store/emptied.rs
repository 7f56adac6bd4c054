//! A store that looks emptied is refused, never re-seeded.
//!
//! Every id a tag ever handed out is below its `leaf_alloc.max_id`. A store that lost its rows
//! (a file truncated by a bad restore or a disk error, a dropped table) would, if taken as new,
//! be migrated and seeded again, and a re-created tag would hand out 1, 2, 3 a second time, with
//! the tombstones that guard re-creation gone too. So before migrating:
//!
//! - an **existing SQLite file of zero bytes** is refused ([`check_sqlite_file`]);
//! - a database whose **migration history** (`_sqlx_migrations`, with a migration applied to its
//!   end) says leafid set it up, but which has **no `leaf_alloc` table**, is refused (all three
//!   databases);
//! - an existing, non-empty **SQLite file without a `leaf_alloc` table** is refused: it is
//!   either a store that lost its table or another application's database.
//!
//! A new store stays explicit and simple: a SQLite path with no file, or a MySQL/PostgreSQL
//! database with neither table (a Leaf database with only `leaf_alloc` is migrated as always).
//! An operator who really means to start afresh deletes the file, or drops `_sqlx_migrations`
//! with the table; the error says so. A `leaf_alloc` that exists but is empty is not refused: a
//! new MySQL or PostgreSQL store is exactly that, and a DBA may delete every row on purpose.

use std::path::Path;

use anyhow::bail;
use sqlx::Row;
use sqlx::mysql::MySqlPool;
use sqlx::postgres::PgPool;
use sqlx::sqlite::SqlitePool;

/// Refuses an existing SQLite file of zero bytes at `path` (before it is opened: SQLite would
/// take it as a new, empty database). A missing file is a new store.
pub fn check_sqlite_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => bail!(
            "the SQLite store {} exists but is empty (0 bytes): it may be a store truncated by a \
             bad restore or a disk error, and starting it as a new store would hand out its tags' \
             ids again. Restore it from a backup; if it never issued an id, delete the file to \
             create a new store",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// What the database holds before migrating, read by the `of_*` function of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tables {
    /// `_sqlx_migrations` exists and has rows.
    history: bool,
    /// `leaf_alloc` exists.
    leaf_alloc: bool,
    /// Any table at all exists (SQLite only; `true` elsewhere).
    any: bool,
}

const HISTORY: &str = "_sqlx_migrations";

/// Migrations applied to the end: a row sqlx writes before it runs a migration (MySQL, where
/// DDL cannot be rolled back) is `success = false` until it finished, so a server starting
/// while another migrates (three Galera nodes at once) does not take the first migration's
/// row for a history whose `leaf_alloc` is gone. The first migration creates `leaf_alloc`.
const APPLIED: &str = "SELECT COUNT(*) FROM _sqlx_migrations WHERE success";

impl Tables {
    /// Refuses a database that looks emptied (see the module docs), before it is migrated.
    /// `existing_sqlite_file`: the SQLite file existed (non-empty) before it was opened.
    pub(crate) fn refuse_if_emptied(self, existing_sqlite_file: bool) -> anyhow::Result<()> {
        if self.history && !self.leaf_alloc {
            bail!(
                "the database has leafid's migration history (_sqlx_migrations) but no \
                 leaf_alloc table: the table was dropped or lost, and creating it again would \
                 hand out its tags' ids again. Restore leaf_alloc (and leafid_tag_tombstone) \
                 from a backup; to start a new store on purpose, drop _sqlx_migrations too"
            );
        }
        if existing_sqlite_file && !self.leaf_alloc {
            let what = if self.any {
                "has tables but no leaf_alloc: it is another application's database or a store \
                 that lost its table"
            } else {
                "has no tables: it may be a store emptied by a bad restore or a disk error"
            };
            bail!(
                "the existing SQLite file {what}, and starting it as a new store could hand out \
                 ids again. Restore it from a backup or point database.url at the right file; to \
                 create a new store, use a path where no file exists"
            );
        }
        Ok(())
    }

    /// Reads which of the tables a SQLite file has.
    pub(crate) async fn of_sqlite(pool: &SqlitePool) -> anyhow::Result<Self> {
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                .fetch_all(pool)
                .await?;
        let has = |n: &str| names.iter().any(|x| x == n);
        let history = has(HISTORY)
            && sqlx::query_scalar::<_, i64>(APPLIED)
                .fetch_one(pool)
                .await?
                > 0;
        Ok(Self {
            history,
            leaf_alloc: has("leaf_alloc"),
            any: !names.is_empty(),
        })
    }

    /// Reads which of the tables a MySQL database has.
    pub(crate) async fn of_mysql(pool: &MySqlPool) -> anyhow::Result<Self> {
        let row = sqlx::query(
            "SELECT \
               (SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = '_sqlx_migrations'), \
               (SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = 'leaf_alloc')",
        )
        .fetch_one(pool)
        .await?;
        let (history_table, leaf_alloc): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        let history = history_table > 0
            && sqlx::query_scalar::<_, i64>(APPLIED)
                .fetch_one(pool)
                .await?
                > 0;
        Ok(Self {
            history,
            leaf_alloc: leaf_alloc > 0,
            any: true,
        })
    }

    /// Reads which of the tables a PostgreSQL database has.
    pub(crate) async fn of_postgres(pool: &PgPool) -> anyhow::Result<Self> {
        // Simple-protocol statements (`raw_sql`, no parameters): behind PgBouncer's
        // transaction pooling even an unnamed prepared statement can lose its server
        // connection between its parse and its execution ("unnamed prepared statement does
        // not exist", seen with servers starting at once).
        let row = sqlx::raw_sql(
            "SELECT to_regclass('_sqlx_migrations') IS NOT NULL, \
                    to_regclass('leaf_alloc') IS NOT NULL",
        )
        .fetch_one(pool)
        .await?;
        let (history_table, leaf_alloc): (bool, bool) = (row.try_get(0)?, row.try_get(1)?);
        let history = history_table
            && sqlx::raw_sql(APPLIED)
                .fetch_one(pool)
                .await?
                .try_get::<i64, _>(0)?
                > 0;
        Ok(Self {
            history,
            leaf_alloc,
            any: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_byte_file_is_refused_and_a_missing_one_is_new() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leafid.db");
        check_sqlite_file(&path).unwrap();
        std::fs::write(&path, b"").unwrap();
        let e = check_sqlite_file(&path).unwrap_err().to_string();
        assert!(e.contains("exists but is empty (0 bytes)"), "{e}");
        std::fs::write(&path, b"x").unwrap();
        check_sqlite_file(&path).unwrap();
    }
}
