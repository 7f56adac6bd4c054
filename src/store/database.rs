//! [`Database`]: the store the URL names, connected and migrated. Its scheme picks the folder
//! (`mysql://` and `mariadb://`, `postgres://` and `postgresql://`, `sqlite:`), a store that
//! looks emptied is refused before anything is migrated ([`emptied`]), and a server that
//! cannot be reached at start gets a pool that waits for the migrations
//! ([`Database::connect_deferred`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::emptied::{self, Tables};
use super::mysql;
use super::options::{DbOptions, redact};
use super::postgres;
use super::sqlite;
use crate::segment::SegmentStore;
use crate::snowflake::worker::WorkerStore;

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
        db.refuse_if_emptied(existing_sqlite_file)
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

    /// Refuses a database that looks emptied ([`emptied`]), before it is migrated.
    /// `existing_sqlite_file`: the SQLite file existed (non-empty) before it was opened.
    async fn refuse_if_emptied(&self, existing_sqlite_file: bool) -> anyhow::Result<()> {
        let tables = match self {
            Self::Sqlite(s) => Tables::of_sqlite(s.pool()).await?,
            Self::MySql(s) => Tables::of_mysql(s.pool()).await?,
            Self::Postgres(s) => Tables::of_postgres(s.pool()).await?,
        };
        tables.refuse_if_emptied(existing_sqlite_file)
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

    /// The caller-token store over this database (`crate::store::tokens`).
    pub fn token_store(&self) -> Arc<dyn super::tokens::CallerTokenStore> {
        match self {
            Self::MySql(s) => Arc::new(s.clone()),
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The caller quotas' store over this database (`crate::service::quota`).
    pub fn quota_store(&self) -> Arc<dyn crate::service::quota::QuotaStore> {
        match self {
            Self::MySql(s) => Arc::new(s.clone()),
            Self::Sqlite(s) => Arc::new(s.clone()),
            Self::Postgres(s) => Arc::new(s.clone()),
        }
    }

    /// The strict tags' owner rows over this database (`crate::segment::strict`).
    pub fn owner_store(&self) -> Arc<dyn crate::segment::strict::OwnerStore> {
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
