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
//! Each database's folder reads its own settings and says why its values are judged so
//! (`mysql/durability.rs`, with the Galera cluster where `innodb_flush_log_at_trx_commit = 2` is
//! accepted; `postgres/durability.rs`; `sqlite/durability.rs`, which confirms what leafid
//! set); `durability_report.rs` is what they report.
//!
//! # What the gate does
//!
//! [`DurabilityGate`] wraps the engines' stores ([`DurabilityGate::segment_store`],
//! [`DurabilityGate::worker_store`]). While the last check found a lossy setting and
//! `database.allow_lossy_commits` is off, every segment lease and every worker-id claim or
//! renewal is refused
//! ([`StoreError::LossyDatabase`](crate::segment::StoreError::LossyDatabase), a worker
//! store's `Unavailable` with the same message): nothing is written, so no id comes from a
//! range the database may forget.
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
//!
//! Its parts: `gate` holds [`DurabilityGate`] (the last report, the checks, the refusal) and
//! [`check`], which reads the settings of the database a [`Database`](crate::store::Database)
//! is; `guarded` holds the two wrappers that put the gate in front of the stores.

mod gate;
mod guarded;

pub use super::durability_report::{DurabilityReport, LossySetting, OVERRIDE};
pub use gate::{CHECK_EVERY, CHECK_TIMEOUT, DurabilityGate, LossyRefusal, check};
