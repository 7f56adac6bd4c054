//! Database implementations of the engines' store traits, with runtime (unchecked) sqlx queries
//! so one crate serves two databases; the tests against both are the check.
//!
//! - [`mysql`]: MySQL, MariaDB, TiDB (production).
//! - [`sqlite`]: the embedded default.
//! - [`postgres`]: PostgreSQL, directly or through PgBouncer (transaction pooling).
//! - `sql`: what both share, generic over the driver: the `leaf_alloc` reads, the rows sqlx
//!   decodes them into, and the `Dialect` trait naming what the two spell differently.
//! - `worker_sql`: the worker-id store of both, on the same generic functions.
//! - `generic`: `SegmentStore` and `WorkerStore` once for every database, over the
//!   `DialectStore` trait each implements with what it does its own way.
//! - [`durability`]: whether a committed lease survives a crash (the settings that decide
//!   it, read per database) and the gate that refuses leases while one can lose a commit.
//! - [`emptied`]: a store that looks emptied (a zero-byte SQLite file, a dropped `leaf_alloc`)
//!   is refused before it is migrated, never re-seeded.

pub mod durability;
pub mod emptied;
pub(crate) mod generic;
pub(crate) mod migration_lock;
pub mod mysql;
pub mod postgres;
pub(crate) mod sql;
pub mod sqlite;
pub(crate) mod worker_sql;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::segment::{SegmentStore, StoreError};
use crate::snowflake::worker::WorkerStore;

/// Connection settings shared by both databases. Its `Debug` shows the URL with the password
/// redacted.
#[derive(Clone)]
pub struct DbOptions {
    /// `mysql://...` or `sqlite://...`.
    pub url: String,
    /// Pool size (SQLite always uses one connection: one writer avoids busy waits).
    pub max_connections: u32,
    /// How long to wait for a pooled connection.
    pub acquire_timeout: Duration,
    /// MySQL: lease adapted steps with one `LAST_INSERT_ID` statement.
    pub mysql_single_statement_lease: bool,
    /// PostgreSQL reached through PgBouncer in transaction pooling mode: no statement cache,
    /// each statement in a transaction of its own (see [`postgres`]).
    pub pgbouncer: bool,
}

impl std::fmt::Debug for DbOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbOptions")
            .field("url", &redact(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field(
                "mysql_single_statement_lease",
                &self.mysql_single_statement_lease,
            )
            .field("pgbouncer", &self.pgbouncer)
            .finish()
    }
}

/// A connected, migrated database.
#[derive(Clone)]
pub enum Database {
    /// MySQL-compatible server.
    MySql(mysql::MySqlStore),
    /// Embedded SQLite file.
    Sqlite(sqlite::SqliteStore),
    /// PostgreSQL server (or PgBouncer in front of one).
    Postgres(postgres::PgStore),
}

/// Whether `url` names a PostgreSQL server (`postgres://` or `postgresql://`).
fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres:") || url.starts_with("postgresql:")
}

/// The migrations a [`Database::connect_deferred`] pool waits for.
pub struct DeferredMigration {
    opts: DbOptions,
    open: Arc<std::sync::atomic::AtomicBool>,
}

impl DeferredMigration {
    /// Connects (on a pool of its own) and migrates, retrying every `every` until it succeeds
    /// or `stop` is cancelled; then lets the deferred pool connect.
    pub async fn run_until_done(self, every: Duration, stop: tokio_util::sync::CancellationToken) {
        loop {
            let attempt = tokio::select! {
                () = stop.cancelled() => return,
                r = Database::connect(&self.opts) => r,
            };
            match attempt {
                Ok(db) => {
                    db.close().await;
                    self.open.store(true, std::sync::atomic::Ordering::Release);
                    tracing::info!(url = %redact(&self.opts.url), "database reachable and migrated");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), "database still unreachable");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}

impl Database {
    /// Connects to the URL's database and applies the embedded migrations.
    pub async fn connect(opts: &DbOptions) -> anyhow::Result<Self> {
        let mut existing_sqlite_file = false;
        let db = if opts.url.starts_with("mysql:") || opts.url.starts_with("mariadb:") {
            let url = opts.url.replacen("mariadb:", "mysql:", 1);
            Self::MySql(
                mysql::MySqlStore::connect(&url, opts.max_connections, opts.acquire_timeout)
                    .await
                    .context("connecting to MySQL (database.url)")?
                    .with_single_statement_lease(opts.mysql_single_statement_lease),
            )
        } else if is_postgres(&opts.url) {
            Self::Postgres(
                postgres::PgStore::connect(
                    &opts.url,
                    opts.max_connections,
                    opts.acquire_timeout,
                    opts.pgbouncer,
                )
                .await
                .context("connecting to PostgreSQL (database.url)")?,
            )
        } else if opts.url.starts_with("sqlite:") {
            let file = sqlite::file_of(&opts.url).context("reading database.url")?;
            if let Some(file) = &file {
                emptied::check_sqlite_file(file)?;
                existing_sqlite_file = file.exists();
            }
            Self::Sqlite(
                sqlite::SqliteStore::connect(&opts.url, opts.acquire_timeout)
                    .await
                    .context("opening SQLite (database.url)")?,
            )
        } else {
            anyhow::bail!(
                "database.url must start with mysql://, postgres:// or sqlite:// (got {:?})",
                redact(&opts.url)
            );
        };
        emptied::refuse_if_emptied(&db, existing_sqlite_file)
            .await
            .context("checking the store before migrating")?;
        db.migrate().await.context("applying migrations")?;
        Ok(db)
    }

    /// For a MySQL or PostgreSQL database that cannot be reached at start: a pool that connects
    /// on first use and refuses every connection until [`DeferredMigration::run_until_done`] has
    /// connected a pool of its own and applied the migrations. Until then every query fails as
    /// if the database were down. `None` for SQLite (a local file that cannot be opened is a
    /// configuration error).
    pub fn connect_deferred(opts: &DbOptions) -> Option<(Self, DeferredMigration)> {
        if is_postgres(&opts.url) {
            let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let store = postgres::PgStore::connect_lazy(
                &opts.url,
                opts.max_connections,
                opts.acquire_timeout,
                opts.pgbouncer,
                open.clone(),
            )
            .ok()?;
            return Some((
                Self::Postgres(store),
                DeferredMigration {
                    opts: opts.clone(),
                    open,
                },
            ));
        }
        if !(opts.url.starts_with("mysql:") || opts.url.starts_with("mariadb:")) {
            return None;
        }
        let url = opts.url.replacen("mariadb:", "mysql:", 1);
        let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let store = mysql::MySqlStore::connect_lazy(
            &url,
            opts.max_connections,
            opts.acquire_timeout,
            open.clone(),
        )
        .ok()?
        .with_single_statement_lease(opts.mysql_single_statement_lease);
        Some((
            Self::MySql(store),
            DeferredMigration {
                opts: opts.clone(),
                open,
            },
        ))
    }

    async fn migrate(&self) -> anyhow::Result<()> {
        match self {
            Self::MySql(s) => s.migrate().await,
            Self::Sqlite(s) => s.migrate().await,
            Self::Postgres(s) => s.migrate().await,
        }
    }

    /// The segment store over this database.
    pub fn segment_store(&self) -> Arc<dyn SegmentStore> {
        match self {
            Self::MySql(s) => Arc::new(s.clone()),
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The worker-id store over this database.
    pub fn worker_store(&self) -> Arc<dyn WorkerStore> {
        match self {
            Self::MySql(s) => Arc::new(s.clone()),
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// `mysql`, `sqlite` or `postgres`, for logs and pages.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MySql(_) => "mysql",
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            Self::MySql(s) => s.pool().close().await,
            Self::Sqlite(s) => s.pool().close().await,
            Self::Postgres(s) => s.pool().close().await,
        }
    }
}

/// The URL with any password replaced by `***`, for logs and errors; a URL without one is
/// returned as given. Text that does not parse as a URL but has credentials (`scheme://...@`)
/// loses them all rather than risk printing a password.
pub fn redact(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Only fails for URLs that cannot have credentials, which have no password either.
            let _ = parsed.set_password(Some("***"));
            parsed.into()
        }
        Ok(_) => text.to_owned(),
        Err(_) => match (text.find("://"), text.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &text[..scheme + 3], &text[at..])
            }
            _ => text.to_owned(),
        },
    }
}

/// Wraps a driver error as [`StoreError::Unavailable`].
pub(crate) fn unavailable(e: sqlx::Error) -> StoreError {
    StoreError::Unavailable(Box::new(e))
}

/// Maps a failed insert to [`StoreError::AlreadyExists`] when it is a duplicate key.
pub(crate) fn insert_error(e: sqlx::Error) -> StoreError {
    if e.as_database_error()
        .is_some_and(|d| d.is_unique_violation())
    {
        StoreError::AlreadyExists
    } else {
        unavailable(e)
    }
}

/// What the lease statements found when the guarded `UPDATE` matched no row.
pub(crate) fn lease_without_update(row: Option<(i64, i64)>) -> Result<LeaseRemainder, StoreError> {
    match row {
        None => Err(StoreError::NotFound),
        Some((_, step)) if step <= 0 => Err(StoreError::BadRow(format!(
            "step is {step}; it must be >= 1"
        ))),
        Some((max_id, _)) if max_id == i64::MAX => Err(StoreError::Exhausted),
        Some((max_id, step)) => Ok(LeaseRemainder {
            old_max_id: max_id,
            db_step: step,
        }),
    }
}

/// The tail of the i64 range still leasable when a full step no longer fits.
pub(crate) struct LeaseRemainder {
    pub old_max_id: i64,
    pub db_step: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_database_password() {
        let opts = DbOptions {
            url: "mysql://root:hunter2@127.0.0.1:3306/leaf".into(),
            max_connections: 1,
            acquire_timeout: std::time::Duration::from_secs(1),
            mysql_single_statement_lease: true,
            pgbouncer: false,
        };
        let shown = format!("{opts:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("root:***@127.0.0.1"), "{shown}");
        let settings = crate::config::DatabaseSettings {
            url: opts.url.clone(),
            max_connections: 1,
            acquire_timeout_ms: 1000,
            mysql_single_statement_lease: true,
            allow_lossy_commits: false,
            pgbouncer: false,
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("root:***@127.0.0.1"), "{shown}");
    }

    #[test]
    fn redact_hides_only_the_password() {
        assert_eq!(
            redact("mysql://root:pw@127.0.0.1:3306/leaf"),
            "mysql://root:***@127.0.0.1:3306/leaf"
        );
        assert_eq!(redact("sqlite://data/leafid.db"), "sqlite://data/leafid.db");
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(redact("sqlite:///tmp/a b.db"), "sqlite:///tmp/a b.db");
        assert_eq!(
            redact("mariadb://root@db:3306/leaf"),
            "mariadb://root@db:3306/leaf"
        );
        assert_eq!(
            redact("mysql://:pw@db/leaf?ssl-mode=REQUIRED"),
            "mysql://:***@db/leaf?ssl-mode=REQUIRED"
        );
        // An '@' inside the password: the last one ends the credentials.
        assert_eq!(
            redact("mysql://leaf:p@ss@db/leaf"),
            "mysql://leaf:***@db/leaf"
        );
        // Not a URL (a bad port) but with credentials: all of them go.
        assert_eq!(
            redact("mysql://leaf:pw@db:port/leaf"),
            "mysql://***@db:port/leaf"
        );
    }
}
