//! Whether a SQLite commit survives a crash: `PRAGMA synchronous` and `PRAGMA journal_mode` of
//! the store's connection (see the table in [`durability`](crate::store::durability)).
//!
//! leafid opens its file with `journal_mode = WAL` and `synchronous = FULL`
//! ([`SqliteStore::connect`](super::SqliteStore::connect)), so the check confirms what leafid
//! set; only a build that changed that would be reported. An in-memory database
//! (`sqlite::memory:`, journal `memory`) loses everything when the process stops and is
//! reported.

use crate::store::durability_report::{DurabilityReport, LossySetting};

/// SQLite's settings as `PRAGMA synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA) and
/// `PRAGMA journal_mode` report them.
pub(crate) fn judge(synchronous: i64, journal_mode: &str) -> Vec<LossySetting> {
    let mut lossy = Vec::new();
    let mode = journal_mode.to_ascii_lowercase();
    if !matches!(mode.as_str(), "wal" | "delete" | "truncate" | "persist") {
        lossy.push(LossySetting {
            name: "journal_mode",
            value: mode,
            why: "without a rollback journal or WAL on disk, a crash mid-commit loses or \
                  corrupts the database",
            fix: "journal_mode = WAL (a file database, not :memory:)",
        });
    }
    if synchronous < 2 {
        lossy.push(LossySetting {
            name: "synchronous",
            value: match synchronous {
                0 => "OFF".into(),
                1 => "NORMAL".into(),
                n => n.to_string(),
            },
            why: "commits are not flushed to disk before they are acknowledged, so an OS crash \
                  or power loss rolls them back",
            fix: "synchronous = FULL",
        });
    }
    lossy
}

/// Reads the SQLite settings of the store's connection.
pub(crate) async fn check(pool: &sqlx::SqlitePool) -> Result<DurabilityReport, sqlx::Error> {
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(pool)
        .await?;
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await?;
    Ok(DurabilityReport {
        database: "sqlite",
        lossy: judge(synchronous, &journal_mode),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::durability_report::names;

    #[test]
    fn sqlite_is_durable_with_full_sync_and_a_journal_on_disk() {
        assert!(judge(2, "wal").is_empty(), "what leafid sets");
        assert!(judge(3, "WAL").is_empty());
        assert!(judge(2, "delete").is_empty());
        assert_eq!(names(&judge(1, "wal")), ["synchronous=NORMAL"]);
        assert_eq!(
            names(&judge(0, "memory")),
            ["journal_mode=memory", "synchronous=OFF"]
        );
        assert_eq!(names(&judge(2, "off")), ["journal_mode=off"]);
    }

    #[tokio::test]
    async fn a_sqlite_connection_opened_without_full_sync_is_reported() {
        use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
        let dir = tempfile::tempdir().unwrap();
        let opts = SqliteConnectOptions::new()
            .filename(dir.path().join("d.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Off);
        let pool = sqlx::SqlitePool::connect_with(opts).await.unwrap();
        let report = check(&pool).await.unwrap();
        assert_eq!(names(&report.lossy), ["synchronous=OFF"]);
        assert!(report.refusal().contains("set synchronous = FULL"));
    }
}
