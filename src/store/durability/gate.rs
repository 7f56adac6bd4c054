//! Does a committed lease survive a crash? The database settings that decide it, read at start,
//! before the first lease after any failed database call, and every [`CHECK_EVERY`] in the
//! background; and the gate that refuses leases while one of them can lose a commit.
//!
//! leafid hands out the ids of a lease as soon as the database has committed it. A database
//! that acknowledges a commit before it is durable can come back from a crash with `max_id`
//! below ids already handed out, and a restarted leafid hands them out again. A DBA can set
//! that up without leafid noticing; this module notices.
//!
//! # What counts as lossy
//!
//! | database | setting | lossy values | lost on |
//! | --- | --- | --- | --- |
//! | MySQL/MariaDB | `innodb_flush_log_at_trx_commit` | `0` | a `mysqld` crash (up to ~1 s of commits) |
//! | MySQL/MariaDB | `innodb_flush_log_at_trx_commit` | `2` | an OS crash or power loss (up to ~1 s) |
//! | MySQL/MariaDB | `sync_binlog` (only with `log_bin = ON`) | `0`, `N > 1` | an OS crash: the binlog misses commits, crash recovery rolls back what it lacks, and replicas built from it diverge |
//! | SQLite | `synchronous` | `OFF`, `NORMAL` (in WAL mode a `NORMAL` commit is rolled back by a power cut) | an OS crash or power loss |
//! | SQLite | `journal_mode` | `OFF`, `MEMORY` (anything but `WAL`, `DELETE`, `TRUNCATE`, `PERSIST`) | a crash mid-commit |
//! | PostgreSQL | `synchronous_commit` | `off` | a server crash (up to 3 x `wal_writer_delay`) |
//! | PostgreSQL | `fsync` | `off` | an OS crash (anything not yet written back) |
//!
//! `innodb_flush_log_at_trx_commit = 1` (and MariaDB's `3`) and `sync_binlog = 1` are durable.
//! With `log_bin = OFF`, `sync_binlog` does nothing and is not reported.
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
//!
//! SQLite: leafid opens its file with `journal_mode = WAL` and `synchronous = FULL`
//! (`super::sqlite`), so the check confirms what leafid set; only a build that changed that
//! would be reported. An in-memory database (`sqlite::memory:`, journal `memory`) loses
//! everything when the process stops and is reported.
//!
//! # What the gate does
//!
//! [`DurabilityGate`] wraps the engines' stores ([`DurabilityGate::segment_store`],
//! [`DurabilityGate::worker_store`]). While the last check found a lossy setting and
//! `database.allow_lossy_commits` is off, every segment lease and every worker-id claim or
//! renewal is refused ([`StoreError::LossyDatabase`], a worker store's `Unavailable` with the
//! same message): nothing is written, so no id comes from a range the database may forget.
//! Refusing where leases are made, not in the HTTP handlers, covers every path that leases
//! (requests, preloads, the refresh) at once, and a lease is re-checked first whenever the
//! database failed since the last check (a restarted server is a reconnect). Ids already
//! leased before a DBA changed the setting were committed under a durable one: they are still
//! served (the HTTP handlers answer from memory and refuse only what would need a lease).
//! Reads (tag lists, lookups, the give-back at shutdown, the worker release) pass: they cannot
//! hand out an id.
//!
//! With the override on, leases flow and the settings are still reported: a warning per change
//! in the log, the `durability` field of `/health/ready`, and the gauge
//! `leafid_database_lossy_setting{setting, value}`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use prometheus::{IntGaugeVec, Opts};
use sqlx::Row;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Database;
use crate::segment::{Lease, NewTag, SegmentStore, StoreError, TagRow};
use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};

/// How often the background task reads the settings again (a `SET GLOBAL` at run time, or a
/// restart no failed call revealed, is seen within this).
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// The longest a check may take: it holds the lock every lease's check waits on, so a statement
/// whose answer never comes (a hung server, a dead link) must not hold the leases after it.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// The configuration key that accepts a lossy database.
pub const OVERRIDE: &str = "database.allow_lossy_commits = true";

/// One setting that can lose a committed lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossySetting {
    /// The setting's name as the database spells it (`innodb_flush_log_at_trx_commit`).
    pub name: &'static str,
    /// Its value as the database reported it.
    pub value: String,
    /// What a crash does with it.
    pub why: &'static str,
    /// What to set instead.
    pub fix: &'static str,
}

/// What one check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurabilityReport {
    /// `mysql`, `sqlite` (as [`Database::kind`]).
    pub database: &'static str,
    /// Every setting that can lose a commit; empty when commits are durable.
    pub lossy: Vec<LossySetting>,
}

impl DurabilityReport {
    /// Whether no setting can lose a commit.
    pub fn is_durable(&self) -> bool {
        self.lossy.is_empty()
    }

    /// `name = value, name = value`.
    pub fn settings(&self) -> String {
        self.lossy
            .iter()
            .map(|s| format!("{} = {}", s.name, s.value))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The refusal a lease gets: every setting with its value and fix, and the override.
    pub fn refusal(&self) -> String {
        let each: Vec<String> = self
            .lossy
            .iter()
            .map(|s| format!("{} = {} ({}; set {})", s.name, s.value, s.why, s.fix))
            .collect();
        format!(
            "the {} database can lose committed leases in a crash, and ids would then be handed \
             out twice: {}. Fix the setting, or accept the risk with {OVERRIDE}",
            self.database,
            each.join("; ")
        )
    }
}

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

/// SQLite's settings as `PRAGMA synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA) and
/// `PRAGMA journal_mode` report them.
pub(crate) fn judge_sqlite(synchronous: i64, journal_mode: &str) -> Vec<LossySetting> {
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

/// PostgreSQL's settings as `SHOW synchronous_commit` and `SHOW fsync` report them. Every
/// `synchronous_commit` but `off` flushes the local WAL before the commit returns.
pub(crate) fn judge_postgres(synchronous_commit: &str, fsync: &str) -> Vec<LossySetting> {
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

/// Reads the MySQL/MariaDB settings (text protocol: `SHOW` is not preparable everywhere).
pub async fn check_mysql(pool: &sqlx::MySqlPool) -> Result<DurabilityReport, sqlx::Error> {
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

/// Reads the SQLite settings of the store's connection.
pub async fn check_sqlite(pool: &sqlx::SqlitePool) -> Result<DurabilityReport, sqlx::Error> {
    let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(pool)
        .await?;
    let journal_mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(pool)
        .await?;
    Ok(DurabilityReport {
        database: "sqlite",
        lossy: judge_sqlite(synchronous, &journal_mode),
    })
}

/// Reads the PostgreSQL settings the sessions run with (`current_setting`, as `SHOW` reports
/// them). One simple-protocol query: nothing is prepared, so it works through PgBouncer in
/// transaction pooling mode too.
pub async fn check_postgres(pool: &sqlx::PgPool) -> Result<DurabilityReport, sqlx::Error> {
    let row =
        sqlx::raw_sql("SELECT current_setting('synchronous_commit'), current_setting('fsync')")
            .fetch_one(pool)
            .await?;
    let (synchronous_commit, fsync): (String, String) = (row.try_get(0)?, row.try_get(1)?);
    Ok(DurabilityReport {
        database: "postgres",
        lossy: judge_postgres(&synchronous_commit, &fsync),
    })
}

/// Reads the settings of `db`'s database.
pub async fn check(db: &Database) -> Result<DurabilityReport, sqlx::Error> {
    match db {
        Database::MySql(s) => check_mysql(s.pool()).await,
        Database::Sqlite(s) => check_sqlite(s.pool()).await,
        Database::Postgres(s) => check_postgres(s.pool()).await,
    }
}

/// Why a worker-store call was refused: [`DurabilityReport::refusal`]'s text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LossyRefusal(pub String);

/// The durability state of one database and the gate on its leases: cheap to clone, all clones
/// share the state.
#[derive(Clone)]
pub struct DurabilityGate {
    inner: Arc<GateInner>,
}

struct GateInner {
    /// The database checked (its pools, not the guarded stores).
    db: Database,
    /// `database.allow_lossy_commits`.
    allow_lossy: bool,
    /// The last report; `None` until the first check succeeds. A std lock: nothing awaits
    /// while it is held.
    report: RwLock<Option<Arc<DurabilityReport>>>,
    /// The next lease checks first. Set at start and by every failed database call (the pool
    /// may reconnect to a restarted server whose settings changed). Relaxed: a hint; the
    /// report it leads to is read under `report`'s lock.
    stale: AtomicBool,
    /// One check at a time; the waiters reuse its result.
    checking: tokio::sync::Mutex<()>,
    /// `leafid_database_lossy_setting{setting, value}`: 1 per lossy setting of the last report.
    gauge: IntGaugeVec,
}

impl std::fmt::Debug for DurabilityGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurabilityGate")
            .field("allow_lossy", &self.inner.allow_lossy)
            .field("report", &self.report())
            .finish_non_exhaustive()
    }
}

impl DurabilityGate {
    /// A gate over `db`, not checked yet: the first lease checks first.
    pub fn new(db: Database, allow_lossy: bool) -> Self {
        let gauge = IntGaugeVec::new(
            Opts::new(
                "leafid_database_lossy_setting",
                "1 for each database setting that can lose a committed lease in a crash",
            ),
            &["setting", "value"],
        )
        .expect("a valid metric definition");
        Self {
            inner: Arc::new(GateInner {
                db,
                allow_lossy,
                report: RwLock::new(None),
                stale: AtomicBool::new(true),
                checking: tokio::sync::Mutex::new(()),
                gauge,
            }),
        }
    }

    /// Whether `database.allow_lossy_commits` is on.
    pub fn allows_lossy(&self) -> bool {
        self.inner.allow_lossy
    }

    /// The last report, `None` before the first successful check.
    pub fn report(&self) -> Option<Arc<DurabilityReport>> {
        self.inner
            .report
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The refusal text while leases are refused (a lossy setting, no override), else `None`.
    pub fn refusal(&self) -> Option<String> {
        if self.inner.allow_lossy {
            return None;
        }
        self.report()
            .filter(|r| !r.is_durable())
            .map(|r| r.refusal())
    }

    /// The gauge family, for the server's registry.
    pub fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        Box::new(self.inner.gauge.clone())
    }

    /// Marks the report out of date: the next lease checks first.
    pub fn mark_stale(&self) {
        self.inner.stale.store(true, Ordering::Relaxed);
    }

    /// Reads the settings now and records the report (logged when it changed).
    pub async fn check_now(&self) -> Result<Arc<DurabilityReport>, sqlx::Error> {
        let _one = self.inner.checking.lock().await;
        self.check_locked().await
    }

    async fn check_locked(&self) -> Result<Arc<DurabilityReport>, sqlx::Error> {
        let checked = tokio::time::timeout(CHECK_TIMEOUT, check(&self.inner.db))
            .await
            .unwrap_or_else(|_| {
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "reading the durability settings timed out",
                )))
            });
        let report = match checked {
            Ok(r) => Arc::new(r),
            Err(e) => {
                self.mark_stale();
                return Err(e);
            }
        };
        self.inner.stale.store(false, Ordering::Relaxed);
        let previous = {
            let mut slot = self.inner.report.write().unwrap_or_else(|e| e.into_inner());
            slot.replace(report.clone())
        };
        if previous.as_deref() != Some(&*report) {
            self.announce(&report, previous.is_some());
        }
        Ok(report)
    }

    /// Logs a new report and sets the gauge to it.
    fn announce(&self, report: &DurabilityReport, changed: bool) {
        self.inner.gauge.reset();
        for s in &report.lossy {
            self.inner
                .gauge
                .with_label_values(&[s.name, s.value.as_str()])
                .set(1);
            warn!(
                database = report.database,
                setting = s.name,
                value = %s.value,
                why = s.why,
                fix = s.fix,
                allowed = self.inner.allow_lossy,
                "{}",
                if self.inner.allow_lossy {
                    "database setting can lose committed leases: leasing anyway \
                     (database.allow_lossy_commits = true)"
                } else {
                    "database setting can lose committed leases: no lease until it is fixed or \
                     database.allow_lossy_commits = true"
                }
            );
        }
        if report.is_durable() {
            info!(
                database = report.database,
                changed, "commit durability checked: no setting can lose a committed lease"
            );
        }
    }

    /// Before a lease or claim: checks first if the report is missing or stale, then refuses
    /// while a lossy setting is not overridden. `Err(Unavailable)`: the check itself failed.
    async fn admit(&self) -> Result<(), Refused> {
        if self.inner.stale.load(Ordering::Relaxed) || self.report().is_none() {
            let _one = self.inner.checking.lock().await;
            // Another caller may have checked while this one waited.
            if self.inner.stale.load(Ordering::Relaxed) || self.report().is_none() {
                self.check_locked().await.map_err(Refused::Unchecked)?;
            }
        }
        match self.refusal() {
            Some(why) => Err(Refused::Lossy(why)),
            None => Ok(()),
        }
    }

    /// Checks until the first success, then every [`CHECK_EVERY`] (and at once when a failed
    /// call marked the report stale), until `stop` is cancelled.
    pub async fn watch(self, stop: CancellationToken) {
        loop {
            let wait = match self.check_now().await {
                Ok(_) => CHECK_EVERY,
                // Unreachable: try again sooner, so a database back from a restart is checked
                // before the pool's next lease would need to.
                Err(_) => Duration::from_millis(500),
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// `inner` with every lease gated.
    pub fn segment_store(&self, inner: Arc<dyn SegmentStore>) -> Arc<dyn SegmentStore> {
        Arc::new(GuardedSegmentStore {
            inner,
            gate: self.clone(),
        })
    }

    /// `inner` with every worker-id claim and renewal gated.
    pub fn worker_store(&self, inner: Arc<dyn WorkerStore>) -> Arc<dyn WorkerStore> {
        Arc::new(GuardedWorkerStore {
            inner,
            gate: self.clone(),
        })
    }

    /// Marks the report stale when `result` failed on the database.
    fn watch_result<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if matches!(result, Err(StoreError::Unavailable(_))) {
            self.mark_stale();
        }
        result
    }

    /// [`Self::watch_result`] for the worker store.
    fn watch_worker<T>(&self, result: Result<T, WorkerStoreError>) -> Result<T, WorkerStoreError> {
        if matches!(result, Err(WorkerStoreError::Unavailable(_))) {
            self.mark_stale();
        }
        result
    }
}

/// Why [`DurabilityGate::admit`] refused.
enum Refused {
    /// A lossy setting, not overridden: the refusal text.
    Lossy(String),
    /// The settings could not be read.
    Unchecked(sqlx::Error),
}

impl From<Refused> for StoreError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Lossy(why) => StoreError::LossyDatabase(why),
            Refused::Unchecked(e) => super::unavailable(e),
        }
    }
}

impl From<Refused> for WorkerStoreError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Lossy(why) => WorkerStoreError::Unavailable(Box::new(LossyRefusal(why))),
            Refused::Unchecked(e) => WorkerStoreError::Unavailable(Box::new(e)),
        }
    }
}

/// A segment store whose leases pass [`DurabilityGate::admit`] first.
struct GuardedSegmentStore {
    inner: Arc<dyn SegmentStore>,
    gate: DurabilityGate,
}

#[async_trait]
impl SegmentStore for GuardedSegmentStore {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.gate.admit().await?;
        self.gate
            .watch_result(self.inner.lease(biz_tag, step).await)
    }

    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.gate.watch_result(self.inner.get_tag(biz_tag).await)
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.gate.watch_result(self.inner.list_tags().await)
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        self.gate.watch_result(self.inner.list_tag_names().await)
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.gate.watch_result(self.inner.create_tag(tag).await)
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.gate
            .watch_result(self.inner.update_tag(biz_tag, step, description).await)
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.gate.watch_result(self.inner.delete_tag(biz_tag).await)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.gate.watch_result(self.inner.ping().await)
    }

    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        // Lowers max_id: nothing is handed out, so it passes whatever the settings.
        self.gate
            .watch_result(self.inner.return_unused(biz_tag, from, to).await)
    }
}

/// A worker store whose claims and renewals pass [`DurabilityGate::admit`] first: a lost
/// claim or renewal lets another server take the same worker id while this one still issues.
struct GuardedWorkerStore {
    inner: Arc<dyn WorkerStore>,
    gate: DurabilityGate,
}

#[async_trait]
impl WorkerStore for GuardedWorkerStore {
    async fn assign_disposable(
        &self,
        node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate
            .watch_worker(self.inner.assign_disposable(node, max_worker_id).await)
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate.watch_worker(
            self.inner
                .acquire_lease(node, lease_ms, max_worker_id, now_ms)
                .await,
        )
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate.watch_worker(
            self.inner
                .heartbeat(worker_id, owner, lease_until_ms, last_timestamp_ms)
                .await,
        )
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        // For operators only: nothing is leased by it.
        self.gate.watch_worker(
            self.inner
                .record_clock_back(worker_id, owner, clock_back)
                .await,
        )
    }

    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError> {
        // Gives the id up: a lost release only keeps it taken until the lease expires.
        self.gate.watch_worker(
            self.inner
                .release(worker_id, owner, last_timestamp_ms)
                .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mysql(flush: &str, sync_binlog: &str, log_bin: &str) -> MySqlSettings {
        MySqlSettings {
            flush_log_at_trx_commit: Some(flush.into()),
            sync_binlog: Some(sync_binlog.into()),
            log_bin: Some(log_bin.into()),
            ..MySqlSettings::default()
        }
    }

    fn names(lossy: &[LossySetting]) -> Vec<String> {
        lossy
            .iter()
            .map(|s| format!("{}={}", s.name, s.value))
            .collect()
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
    fn sqlite_is_durable_with_full_sync_and_a_journal_on_disk() {
        assert!(judge_sqlite(2, "wal").is_empty(), "what leafid sets");
        assert!(judge_sqlite(3, "WAL").is_empty());
        assert!(judge_sqlite(2, "delete").is_empty());
        assert_eq!(names(&judge_sqlite(1, "wal")), ["synchronous=NORMAL"]);
        assert_eq!(
            names(&judge_sqlite(0, "memory")),
            ["journal_mode=memory", "synchronous=OFF"]
        );
        assert_eq!(names(&judge_sqlite(2, "off")), ["journal_mode=off"]);
    }

    #[test]
    fn postgres_loses_commits_with_synchronous_commit_or_fsync_off() {
        assert!(judge_postgres("on", "on").is_empty());
        assert!(judge_postgres("local", "on").is_empty());
        assert!(judge_postgres("remote_apply", "on").is_empty());
        assert_eq!(
            names(&judge_postgres("off", "off")),
            ["synchronous_commit=off", "fsync=off"]
        );
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

    #[tokio::test]
    async fn the_sqlite_file_leafid_opens_is_reported_durable() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("d.db").display());
        let store = super::super::sqlite::SqliteStore::connect(&url, Duration::from_secs(3))
            .await
            .unwrap();
        let report = check_sqlite(store.pool()).await.unwrap();
        assert!(report.is_durable(), "{report:?}");
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
        let report = check_sqlite(&pool).await.unwrap();
        assert_eq!(names(&report.lossy), ["synchronous=OFF"]);
        assert!(report.refusal().contains("set synchronous = FULL"));
    }
}
