//! Whether a PostgreSQL commit survives a crash: `synchronous_commit` and `fsync` as the
//! sessions run with them (see the table in [`durability`](crate::store::durability)).

use sqlx::Row;

use crate::store::durability_report::{DurabilityReport, LossySetting};

/// PostgreSQL's settings as `SHOW synchronous_commit` and `SHOW fsync` report them. Every
/// `synchronous_commit` but `off` flushes the local WAL before the commit returns.
pub(crate) fn judge(synchronous_commit: &str, fsync: &str) -> Vec<LossySetting> {
    let mut lossy = Vec::new();
    if synchronous_commit.eq_ignore_ascii_case("off") {
        lossy.push(LossySetting {
            name: "synchronous_commit",
            value: synchronous_commit.into(),
            why: "a commit returns before its WAL is flushed, so a server crash loses the last \
                  commits (up to 3 x wal_writer_delay)",
            fix: "synchronous_commit = on",
        });
    }
    if fsync.eq_ignore_ascii_case("off") {
        lossy.push(LossySetting {
            name: "fsync",
            value: fsync.into(),
            why: "nothing is flushed to disk, so an OS crash or power loss loses commits and \
                  can corrupt the cluster",
            fix: "fsync = on",
        });
    }
    lossy
}

/// Reads the PostgreSQL settings the sessions run with (`current_setting`, as `SHOW` reports
/// them). One simple-protocol query: nothing is prepared, so it works through PgBouncer in
/// transaction pooling mode too.
pub(crate) async fn check(pool: &sqlx::PgPool) -> Result<DurabilityReport, sqlx::Error> {
    let row =
        sqlx::raw_sql("SELECT current_setting('synchronous_commit'), current_setting('fsync')")
            .fetch_one(pool)
            .await?;
    let (synchronous_commit, fsync): (String, String) = (row.try_get(0)?, row.try_get(1)?);
    Ok(DurabilityReport {
        database: "postgres",
        lossy: judge(&synchronous_commit, &fsync),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::durability_report::names;

    #[test]
    fn postgres_loses_commits_with_synchronous_commit_or_fsync_off() {
        assert!(judge("on", "on").is_empty());
        assert!(judge("local", "on").is_empty());
        assert!(judge("remote_apply", "on").is_empty());
        assert_eq!(
            names(&judge("off", "off")),
            ["synchronous_commit=off", "fsync=off"]
        );
    }
}
