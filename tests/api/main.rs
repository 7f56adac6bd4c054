//! Black-box tests over real HTTP, against SQLite (temp file), a real MariaDB and a real
//! PostgreSQL (directly and through PgBouncer in transaction pooling mode).

mod support;

mod admin;
mod bad_input;
mod cluster;
mod dashboard;
mod docs_config;
mod drain;
mod durability;
pub mod faults;
mod galera;
mod give_back;
mod hostile;
mod js_safe;
mod layouts;
mod leaf_compat;
mod lease_faults;
mod load_balancer;
mod log_sink;
mod metrics;
mod migrations;
mod outage_logs;
mod patroni_failover;
mod pg_store;
mod proxy_admin;
mod replica_failover;
mod restarts;
pub(crate) mod routes;
mod scale;
mod segment;
mod snowflake;
mod store_contract;
mod store_faults;
mod wall_clock;
mod worker_cache;

/// Defines one test per database from an `async fn(Db)`: `sqlite`, `mysql`, `postgres` and
/// `pgbouncer` (PostgreSQL through PgBouncer).
#[macro_export]
macro_rules! on_both_databases {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                super::$name($crate::support::Db::Sqlite).await
            }
            #[tokio::test]
            async fn mysql() {
                super::$name($crate::support::Db::MySql).await
            }
            #[tokio::test]
            async fn postgres() {
                super::$name($crate::support::Db::Postgres).await
            }
            #[tokio::test]
            async fn pgbouncer() {
                super::$name($crate::support::Db::PgBouncer).await
            }
        }
    };
}

/// Defines one test per database server a fault proxy can stand in front of, from an
/// `async fn(Db)`: `mysql` (MariaDB) and `postgres`, each on a multi-threaded runtime.
#[macro_export]
macro_rules! on_proxied_databases {
    ($name:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                super::$name($crate::support::Db::MySql).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name($crate::support::Db::Postgres).await
            }
        }
    };
}
