//! The test MariaDB: `LEAFID_TEST_MYSQL_URL` (set by `scripts/test.sh`), or a private instance
//! started by `scripts/mariadb.sh` on first use (installing MariaDB if missing). Each test gets
//! its own database.

use std::process::Command;
use std::sync::OnceLock;

use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

/// The server URL without a database name.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("LEAFID_TEST_MYSQL_URL") {
            return url.trim_end_matches('/').to_owned();
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mariadb.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg("start")
            .output()
            .expect("run scripts/mariadb.sh");
        assert!(
            out.status.success(),
            "scripts/mariadb.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// Runs statements on the server (no database selected).
pub async fn exec(sql: &str) {
    let mut conn = MySqlConnection::connect(server_url())
        .await
        .expect("connect to the test MariaDB");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Creates an empty database and returns its URL.
pub async fn create_database() -> String {
    let name = super::unique_name("leafid_t");
    exec(&format!("CREATE DATABASE {name}")).await;
    format!("{}/{name}", server_url())
}

/// Runs statements in the database of `url`.
pub async fn exec_in(url: &str, sql: &str) {
    let mut conn = MySqlConnection::connect(url).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// One `(max_id, step)` row of `leaf_alloc`.
pub async fn row(url: &str, tag: &str) -> Option<(i64, i32)> {
    let mut conn = MySqlConnection::connect(url).await.expect("connect");
    sqlx::query_as("SELECT max_id, step FROM leaf_alloc WHERE biz_tag = ?")
        .bind(tag)
        .fetch_optional(&mut conn)
        .await
        .unwrap()
}
