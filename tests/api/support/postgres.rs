//! The test PostgreSQL and the PgBouncer in front of it: `LEAFID_TEST_POSTGRES_URL` and
//! `LEAFID_TEST_PGBOUNCER_URL` (`scripts/test.sh` starts both with `scripts/postgres.sh` and
//! `scripts/pgbouncer.sh` and sets them). A test on either fails, naming the variable and the
//! script, when it is unset: a PostgreSQL test that skips itself would pass without running.
//! A plain `cargo test` never gets here: its PostgreSQL and PgBouncer tests are marked ignored (with the reason)
//! (listed as ignored), and `scripts/test.sh` runs them with `--include-ignored`.
//! Each test gets its own database, created on the server directly (PgBouncer's `* =` entry
//! reaches any database by name).

use std::sync::OnceLock;

use std::str::FromStr;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

/// The variable holding the server's URL, and the variable holding PgBouncer's.
const SERVER_VAR: &str = "LEAFID_TEST_POSTGRES_URL";
const BOUNCER_VAR: &str = "LEAFID_TEST_PGBOUNCER_URL";

fn required(var: &str, script: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run `export {var}=$({script} start)` (scripts/test.sh does)")
    })
}

/// The server's URL, `postgres://leafid:leafid@127.0.0.1:PORT/leafid`.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| required(SERVER_VAR, "scripts/postgres.sh"))
}

/// PgBouncer's URL (transaction pooling in front of [`server_url`]'s server).
pub fn bouncer_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| required(BOUNCER_VAR, "scripts/pgbouncer.sh"))
}

/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (authority, _) = rest.split_once('/').unwrap_or((rest, ""));
    format!("{scheme}://{authority}/{name}")
}

/// `scheme://user:pw@host:port` of `url`, to compare two URLs' servers.
fn authority(url: &str) -> &str {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..].split('/').next().unwrap_or_default()
}

/// Whether `url` points at the test PgBouncer (its servers then need `database.pgbouncer`).
/// False when the PgBouncer variable is unset: then no URL can be its.
pub fn is_pgbouncer(url: &str) -> bool {
    (url.starts_with("postgres:") || url.starts_with("postgresql:"))
        && std::env::var(BOUNCER_VAR).is_ok_and(|b| authority(&b) == authority(url))
}

/// A connection to `url`, without the startup parameter PgBouncer refuses.
async fn connect(url: &str) -> PgConnection {
    let opts = PgConnectOptions::from_str(url)
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .extra_float_digits(None);
    PgConnection::connect_with(&opts)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// Runs statements (simple protocol, several allowed) in the database of `url`.
pub async fn exec_in(url: &str, sql: &str) {
    let mut conn = connect(url).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Creates an empty database on the server and returns its name.
async fn create(prefix: &str) -> String {
    let name = super::unique_name(prefix);
    exec_in(server_url(), &format!("CREATE DATABASE {name}")).await;
    name
}

/// A fresh database; its URL on the server.
pub async fn create_database() -> String {
    with_database(server_url(), &create("leafid_t").await)
}

/// A fresh database; its URL through PgBouncer.
pub async fn create_bouncer_database() -> String {
    let bouncer = bouncer_url();
    with_database(bouncer, &create("leafid_b").await)
}

/// One `(max_id, step)` row of `leaf_alloc`, read on the server (`url` must not be PgBouncer's).
pub async fn row(url: &str, tag: &str) -> Option<(i64, i32)> {
    let mut conn = connect(url).await;
    sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = $1")
        .bind(tag)
        .fetch_optional(&mut conn)
        .await
        .unwrap()
}
