//! Black-box tests over real HTTP, against SQLite (temp file), a real MariaDB and a real
//! PostgreSQL (directly and through PgBouncer in transaction pooling mode).
//!
//! Two tiers. A test that runs on SQLite and in memory runs in a plain `cargo test`. A test
//! that needs anything more (a database server, PgBouncer, Galera, a replica pair, Patroni,
//! HAProxy, Varnish, root for `ip netns` or a tmpfs mount, libfaketime) is marked
//! `#[ignore = "needs WHAT: scripts/test.sh runs it"]`: `cargo test` lists it as ignored, and
//! `scripts/test.sh`, which starts all of that, runs it with `--include-ignored`.

mod support;

mod admin;
mod bad_input;
mod bounds;
mod cluster;
mod dashboard;
mod docs_config;
mod drain;
mod durability;
pub mod faults;
mod formatted;
mod formatted_lifecycle;
mod galera;
mod give_back;
mod grpc;
mod hostile;
mod js_safe;
mod keys;
mod lanes;
mod layouts;
mod leaf_compat;
mod lease_faults;
mod load_balancer;
mod log_sink;
mod metrics;
mod migrations;
mod outage_logs;
mod patroni_failover;
mod period_rollover;
mod permuted;
mod pg_store;
mod proxy_admin;
mod quota;
mod ranges;
mod replica_failover;
mod restarts;
pub(crate) mod routes;
mod scale;
mod segment;
mod snowflake;
mod spread;
mod store_contract;
mod store_faults;
mod strict;
mod tokens;
mod volume;
pub(crate) mod wall_clock;
mod worker_cache;

/// Defines one test per database from an `async fn(Db)`: `sqlite`, `mysql`, `postgres` and
/// `pgbouncer` (PostgreSQL through PgBouncer). All but `sqlite` are ignored by a plain
/// `cargo test` (they need a database server) and run by `scripts/test.sh`. With
/// `sqlite_ignored = "needs WHAT: ..."`, the `sqlite` test is ignored too, for a test that needs
/// something besides its database (Node.js).
#[macro_export]
macro_rules! on_both_databases {
    ($name:ident) => {
        $crate::on_both_databases!(@tests $name, []);
    };
    ($name:ident, sqlite_ignored = $why:literal) => {
        $crate::on_both_databases!(@tests $name, [#[ignore = $why]]);
    };
    (@tests $name:ident, [$(#[$sqlite:meta])*]) => {
        mod $name {
            #[tokio::test]
            $(#[$sqlite])*
            async fn sqlite() {
                super::$name($crate::support::Db::Sqlite).await
            }
            #[tokio::test]
            #[ignore = "needs MariaDB: scripts/test.sh runs it"]
            async fn mysql() {
                super::$name($crate::support::Db::MySql).await
            }
            #[tokio::test]
            #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
            async fn postgres() {
                super::$name($crate::support::Db::Postgres).await
            }
            #[tokio::test]
            #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
            async fn pgbouncer() {
                super::$name($crate::support::Db::PgBouncer).await
            }
        }
    };
}

/// Defines one test per database server a fault proxy can stand in front of, from an
/// `async fn(Db)`: `mysql` (MariaDB) and `postgres`, each on a multi-threaded runtime. Both are
/// ignored by a plain `cargo test` and run by `scripts/test.sh`.
#[macro_export]
macro_rules! on_proxied_databases {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs MariaDB: scripts/test.sh runs it"]
            async fn mysql() {
                super::$name($crate::support::Db::MySql).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
            async fn postgres() {
                super::$name($crate::support::Db::Postgres).await
            }
        }
    };
}
