//! [`DurabilityGate`]: the last durability report of one database, the checks that renew it,
//! and the refusal every lease and worker-id claim passes first (see the module docs of
//! [`durability`](super)).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus::{IntGaugeVec, Opts};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::segment::StoreError;
use crate::snowflake::worker::WorkerStoreError;
use crate::store::database::Database;
use crate::store::durability_report::DurabilityReport;
use crate::store::errors::unavailable;
use crate::store::{mysql, postgres, sqlite};

/// How often the background task reads the settings again (a `SET GLOBAL` at run time, or a
/// restart no failed call revealed, is seen within this).
pub const CHECK_EVERY: Duration = Duration::from_secs(2);

/// The longest a check may take: it holds the lock every lease's check waits on, so a statement
/// whose answer never comes (a hung server, a dead link) must not hold the leases after it.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Reads the settings of `db`'s database.
pub async fn check(db: &Database) -> Result<DurabilityReport, sqlx::Error> {
    match db {
        Database::MySql(s) => mysql::durability::check(s.pool()).await,
        Database::Sqlite(s) => sqlite::durability::check(s.pool()).await,
        Database::Postgres(s) => postgres::durability::check(s.pool()).await,
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
    pub(super) async fn admit(&self) -> Result<(), Refused> {
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

    /// Marks the report stale when `result` failed on the database.
    pub(super) fn watch_result<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        if matches!(result, Err(StoreError::Unavailable(_))) {
            self.mark_stale();
        }
        result
    }

    /// [`Self::watch_result`] for the worker store.
    pub(super) fn watch_worker<T>(
        &self,
        result: Result<T, WorkerStoreError>,
    ) -> Result<T, WorkerStoreError> {
        if matches!(result, Err(WorkerStoreError::Unavailable(_))) {
            self.mark_stale();
        }
        result
    }
}

/// Why [`DurabilityGate::admit`] refused.
pub(super) enum Refused {
    /// A lossy setting, not overridden: the refusal text.
    Lossy(String),
    /// The settings could not be read.
    Unchecked(sqlx::Error),
}

impl From<Refused> for StoreError {
    fn from(r: Refused) -> Self {
        match r {
            Refused::Lossy(why) => StoreError::LossyDatabase(why),
            Refused::Unchecked(e) => unavailable(e),
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
