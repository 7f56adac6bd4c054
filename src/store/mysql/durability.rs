//! Whether a MySQL/MariaDB commit survives a crash: `innodb_flush_log_at_trx_commit`, and
//! `sync_binlog` when the binary log is on, read from the server (see the table in
//! [`durability`](crate::store::durability)). `innodb_flush_log_at_trx_commit = 1` (and
//! MariaDB's `3`) and `sync_binlog = 1` are durable. With `log_bin = OFF`, `sync_binlog` does
//! nothing and is not reported.
//!
//! **Galera.** A Galera cluster acknowledges a commit only after every node of the primary
//! component has received and certified its writeset, so the commit is in the memory of every
//! node before leafid sees the OK. With `innodb_flush_log_at_trx_commit = 2` each node has also
//! written it to its operating system at commit, so a crashed `mariadbd` loses nothing, and an
//! OS crash of one node loses nothing either: the node rejoins by IST/SST from peers that have
//! the commit. Losing it takes every node that holds it crashing its OS at once. So on a node
//! with `wsrep_on = ON` in a `Primary` component of at least **2** nodes
//! (`wsrep_cluster_size >= 2`), `innodb_flush_log_at_trx_commit = 2` and any `sync_binlog` are
//! accepted. Why 2 and not 3: a node killed out of three leaves two, and the commit is still on
//! two machines; a rule of 3 would refuse leases during exactly the single-node failure Galera is
//! there to ride out. A lone node (size 1), a non-primary component, or
//! `innodb_flush_log_at_trx_commit = 0` (a `mariadbd` crash on every node at once, a bad deploy
//! or an OOM wave, loses commits) are reported as on a single server.

use sqlx::Row;

use crate::store::durability_report::{DurabilityReport, LossySetting};

/// The MySQL/MariaDB values a check reads; `None` when the server has no such variable (TiDB,
/// a server without Galera).
#[derive(Clone, Debug, Default)]
pub(crate) struct MySqlSettings {
    pub flush_log_at_trx_commit: Option<String>,
    pub sync_binlog: Option<String>,
    pub log_bin: Option<String>,
    pub wsrep_on: Option<String>,
    pub cluster_size: Option<String>,
    pub cluster_status: Option<String>,
}

fn is_on(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1")
}

impl MySqlSettings {
    /// A Galera node in a primary component of at least two nodes (see the module docs).
    fn replicated_by_galera(&self) -> bool {
        is_on(self.wsrep_on.as_deref())
            && self
                .cluster_status
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("Primary"))
            && self
                .cluster_size
                .as_deref()
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n >= 2)
    }

    /// The settings that can lose a commit.
    pub(crate) fn judge(&self) -> Vec<LossySetting> {
        let galera = self.replicated_by_galera();
        let mut lossy = Vec::new();
        match self.flush_log_at_trx_commit.as_deref() {
            Some(v @ "0") => lossy.push(LossySetting {
                name: "innodb_flush_log_at_trx_commit",
                value: v.into(),
                why: "the redo log is written and flushed once a second, so a mysqld crash loses \
                      up to a second of commits",
                fix: "innodb_flush_log_at_trx_commit = 1",
            }),
            Some(v @ "2") if !galera => lossy.push(LossySetting {
                name: "innodb_flush_log_at_trx_commit",
                value: v.into(),
                why: "the redo log is flushed to disk once a second, so an OS crash or power \
                      loss loses up to a second of commits",
                fix: "innodb_flush_log_at_trx_commit = 1 (2 is accepted on a Galera node of a \
                      primary component of 2 or more nodes)",
            }),
            _ => {}
        }
        if is_on(self.log_bin.as_deref()) && !galera {
            match self.sync_binlog.as_deref() {
                Some("1") | None => {}
                Some(v) => lossy.push(LossySetting {
                    name: "sync_binlog",
                    value: v.into(),
                    why: "the binary log is not flushed at each commit, so after an OS crash it \
                          lacks commits: recovery rolls them back and replicas built from it \
                          never get them",
                    fix: "sync_binlog = 1",
                }),
            }
        }
        lossy
    }
}

/// Reads the MySQL/MariaDB settings (text protocol: `SHOW` is not preparable everywhere).
pub(crate) async fn check(pool: &sqlx::MySqlPool) -> Result<DurabilityReport, sqlx::Error> {
    let mut found = MySqlSettings::default();
    let variables = sqlx::raw_sql(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
         ('innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin', 'wsrep_on')",
    )
    .fetch_all(pool)
    .await?;
    for row in &variables {
        let (name, value) = (text(row, 0)?, text(row, 1)?);
        match name.to_ascii_lowercase().as_str() {
            "innodb_flush_log_at_trx_commit" => found.flush_log_at_trx_commit = Some(value),
            "sync_binlog" => found.sync_binlog = Some(value),
            "log_bin" => found.log_bin = Some(value),
            "wsrep_on" => found.wsrep_on = Some(value),
            _ => {}
        }
    }
    if is_on(found.wsrep_on.as_deref()) {
        let status = sqlx::raw_sql(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_cluster_status')",
        )
        .fetch_all(pool)
        .await?;
        for row in &status {
            let (name, value) = (text(row, 0)?, text(row, 1)?);
            match name.to_ascii_lowercase().as_str() {
                "wsrep_cluster_size" => found.cluster_size = Some(value),
                "wsrep_cluster_status" => found.cluster_status = Some(value),
                _ => {}
            }
        }
    }
    Ok(DurabilityReport {
        database: "mysql",
        lossy: found.judge(),
    })
}

/// A `SHOW` column as text (MariaDB sends some as binary strings).
fn text(row: &sqlx::mysql::MySqlRow, i: usize) -> Result<String, sqlx::Error> {
    match row.try_get::<String, _>(i) {
        Ok(s) => Ok(s),
        Err(_) => Ok(String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(i)?).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::durability_report::names;

    fn mysql(flush: &str, sync_binlog: &str, log_bin: &str) -> MySqlSettings {
        MySqlSettings {
            flush_log_at_trx_commit: Some(flush.into()),
            sync_binlog: Some(sync_binlog.into()),
            log_bin: Some(log_bin.into()),
            ..MySqlSettings::default()
        }
    }

    #[test]
    fn mysql_flush_at_every_commit_is_durable_and_0_or_2_is_not() {
        assert!(mysql("1", "1", "ON").judge().is_empty());
        assert!(mysql("3", "1", "ON").judge().is_empty(), "MariaDB's 3 is 1");
        assert_eq!(
            names(&mysql("0", "1", "OFF").judge()),
            ["innodb_flush_log_at_trx_commit=0"]
        );
        assert_eq!(
            names(&mysql("2", "1", "OFF").judge()),
            ["innodb_flush_log_at_trx_commit=2"]
        );
    }

    #[test]
    fn sync_binlog_matters_only_with_the_binlog_on() {
        assert!(mysql("1", "0", "OFF").judge().is_empty());
        assert_eq!(names(&mysql("1", "0", "ON").judge()), ["sync_binlog=0"]);
        assert_eq!(names(&mysql("1", "100", "ON").judge()), ["sync_binlog=100"]);
        assert_eq!(
            names(&mysql("0", "0", "ON").judge()),
            ["innodb_flush_log_at_trx_commit=0", "sync_binlog=0"]
        );
    }

    #[test]
    fn galera_of_two_or_more_primary_nodes_accepts_flush_2_but_never_0() {
        let galera = |size: &str, status: &str, flush: &str| MySqlSettings {
            wsrep_on: Some("ON".into()),
            cluster_size: Some(size.into()),
            cluster_status: Some(status.into()),
            ..mysql(flush, "0", "ON")
        };
        assert!(galera("3", "Primary", "2").judge().is_empty());
        assert!(galera("2", "Primary", "2").judge().is_empty());
        assert_eq!(
            names(&galera("1", "Primary", "2").judge()),
            ["innodb_flush_log_at_trx_commit=2", "sync_binlog=0"],
            "a lone node is a single server"
        );
        assert_eq!(
            names(&galera("3", "non-Primary", "2").judge()),
            ["innodb_flush_log_at_trx_commit=2", "sync_binlog=0"]
        );
        assert_eq!(
            names(&galera("3", "Primary", "0").judge()),
            ["innodb_flush_log_at_trx_commit=0"]
        );
        let off = MySqlSettings {
            wsrep_on: Some("OFF".into()),
            ..galera("3", "Primary", "2")
        };
        assert_eq!(
            names(&off.judge()),
            ["innodb_flush_log_at_trx_commit=2", "sync_binlog=0"]
        );
    }

    #[test]
    fn a_server_without_the_variables_is_not_reported() {
        assert!(MySqlSettings::default().judge().is_empty());
    }

    #[test]
    fn the_refusal_names_setting_value_fix_and_override() {
        let report = DurabilityReport {
            database: "mysql",
            lossy: mysql("0", "1", "OFF").judge(),
        };
        let text = report.refusal();
        for part in [
            "innodb_flush_log_at_trx_commit = 0",
            "set innodb_flush_log_at_trx_commit = 1",
            "database.allow_lossy_commits = true",
        ] {
            assert!(text.contains(part), "{text}");
        }
        assert_eq!(report.settings(), "innodb_flush_log_at_trx_commit = 0");
    }
}
