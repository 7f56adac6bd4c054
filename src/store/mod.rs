//! Database implementations of the engines' store traits, with runtime (unchecked) sqlx queries
//! so one crate serves three databases (and the servers that speak their wire protocol: MariaDB,
//! Galera and TiDB over the MySQL driver, PgBouncer in front of PostgreSQL); the tests against
//! each are the check.
//!
//! One folder per database, each with its store, the settings check that says whether its
//! commits survive a crash, and what its errors mean:
//!
//! - [`mysql`]: MySQL, MariaDB, Galera, TiDB (production); `mysql/migration_lock.rs` is the
//!   cluster-wide lock its migrations run under.
//! - [`postgres`]: PostgreSQL, directly or through PgBouncer (transaction pooling).
//! - [`sqlite`]: the embedded default.
//!
//! What they share:
//!
//! - `sql`: the SQL every database runs, written once and generic over a `Dialect` (the few
//!   things a database spells its own way, on the sqlx driver it speaks through): the
//!   `leaf_alloc` reads, the worker-id store, and `SegmentStore`/`WorkerStore` for any store
//!   that implements `DialectStore` (the writes it does its own way).
//! - [`Database`]: the store a URL names, connected and migrated; [`DbOptions`] and
//!   [`redact`] say how to reach it and how its URL may be shown.
//! - [`durability`]: the gate that refuses leases while a database setting can lose a commit,
//!   and the wrappers that put it in front of the stores (each folder reads its own settings;
//!   `durability_report.rs` is what they report).
//! - [`emptied`]: a store that looks emptied (a zero-byte SQLite file, a dropped `leaf_alloc`)
//!   is refused before it is migrated, never re-seeded.
//! - `errors`: what a driver error or a lease that matched no row means to the engines.

mod database;
pub mod durability;
pub(crate) mod durability_report;
pub mod emptied;
pub(crate) mod errors;
pub mod mysql;
mod options;
pub mod postgres;
pub(crate) mod sql;
pub mod sqlite;
pub mod tokens;

pub use database::{Database, DeferredMigration};
pub use options::{DbOptions, redact};
