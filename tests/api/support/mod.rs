//! Test support: servers on port 0 against a fresh SQLite file or a fresh MariaDB or
//! PostgreSQL database (directly or through PgBouncer), typed request helpers, and server
//! processes for crash tests.

// Shared by every test area; not each uses every helper.
#![allow(dead_code)]

pub mod galera;
pub mod haproxy;
pub mod history;
pub mod mysql;
pub mod netns;
pub mod patroni;
pub mod postgres;
pub mod process;
pub mod proxy;
pub mod replica;
pub mod varnish;

use std::sync::atomic::{AtomicU32, Ordering};

use leafid::config::Settings;
use leafid::startup::Application;
use serde_json::Value;

/// Which database a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    /// A temporary SQLite file.
    Sqlite,
    /// A fresh database on the test MariaDB.
    MySql,
    /// A fresh database on the test PostgreSQL.
    Postgres,
    /// A fresh database on the test PostgreSQL, reached through PgBouncer (transaction pooling);
    /// servers on it run with `database.pgbouncer = true`.
    PgBouncer,
}

/// A running in-process server.
pub struct TestApp {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// HTTP client.
    pub client: reqwest::Client,
    /// The database URL the server uses.
    pub db_url: String,
    /// Stops the server.
    pub handle: actix_web::dev::ServerHandle,
    _dir: Option<tempfile::TempDir>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A unique name for a test database.
pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos % 100_000
    )
}

/// Writes a measured figure to `target/tmp/figure-{name}.txt`, which `scripts/test.sh` prints
/// after the run (cargo hides a passing test's output), and to stderr.
pub fn record_figure(name: &str, line: &str) {
    let dir = env!("CARGO_TARGET_TMPDIR");
    let _ = std::fs::write(format!("{dir}/figure-{name}.txt"), format!("{line}\n"));
    eprintln!("{line}");
}

/// A new, empty database and (for SQLite) the directory that holds it.
pub async fn fresh_db(db: Db) -> (String, Option<tempfile::TempDir>) {
    match db {
        Db::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
            (url, Some(dir))
        }
        Db::MySql => (mysql::create_database().await, None),
        Db::Postgres => (postgres::create_database().await, None),
        Db::PgBouncer => (postgres::create_bouncer_database().await, None),
    }
}

/// Runs statements in the database `url` of `db` (a fresh one from [`fresh_db`]); SQLite has no
/// server to run them on, so it is refused.
pub async fn exec_sql(db: Db, url: &str, sql: &str) {
    match db {
        Db::MySql => mysql::exec_in(url, sql).await,
        // The simple query protocol: no prepared statement, so PgBouncer's URL works as is.
        Db::Postgres | Db::PgBouncer => postgres::exec_in(url, sql).await,
        Db::Sqlite => panic!("exec_sql runs on a database server, not on SQLite"),
    }
}

/// Settings for tests: port 0, the given database, short timeouts.
pub fn test_settings(db_url: &str) -> Settings {
    let mut s = Settings::load(None).unwrap();
    s.server.port = 0;
    s.server.workers = 2;
    s.server.shutdown_timeout_secs = 1;
    s.database.url = db_url.to_owned();
    s.database.pgbouncer = postgres::is_pgbouncer(db_url);
    s.segment.wait_timeout_ms = 1000;
    // The tests create tags from loopback; `admin` checks the shipped default (no trust).
    s.admin.trust_loopback = true;
    s
}

/// The value of one series of a server's `/metrics` (`series` is the name with its labels, as
/// printed, e.g. `leafid_segment_regressions_total{biz_tag="t"}`), or `None` if it is absent.
pub async fn metric_value(address: &str, series: &str) -> Option<f64> {
    let text = reqwest::get(format!("{address}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().parse::<f64>().unwrap())
}

/// The sum of every series of `family` (all label sets) in a `/metrics` text.
pub fn metric_family_sum(metrics: &str, family: &str) -> f64 {
    let prefix = format!("{family}{{");
    metrics
        .lines()
        .filter(|l| l.starts_with(prefix.as_str()))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A server on a fresh database.
pub async fn spawn_app(db: Db) -> TestApp {
    spawn_app_with(db, |_| {}).await
}

/// A server on a fresh database, with settings adjusted by `tweak`.
pub async fn spawn_app_with(db: Db, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let (url, dir) = fresh_db(db).await;
    let mut app = spawn_on(&url, tweak).await;
    app._dir = dir;
    app
}

/// A server on an existing database.
pub async fn spawn_on(db_url: &str, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    if std::env::var_os("TEST_LOG").is_some() {
        leafid::telemetry::init(leafid::config::LogFormat::Text);
    }
    let mut settings = test_settings(db_url);
    tweak(&mut settings);
    let app = Application::build(settings).await.expect("server starts");
    let address = format!("http://127.0.0.1:{}", app.port());
    let handle = app.handle();
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        client: reqwest::Client::new(),
        db_url: db_url.to_owned(),
        handle,
        _dir: None,
    }
}

/// A response reduced to what tests look at.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Content-Type header.
    pub content_type: String,
    /// Retry-After header.
    pub retry_after: Option<String>,
    /// Body text.
    pub text: String,
}

impl Reply {
    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// The `code` of an error body.
    pub fn code(&self) -> String {
        self.json()["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no code in {}", self.text))
            .to_owned()
    }
}

impl TestApp {
    async fn reply(resp: reqwest::Response) -> Reply {
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let retry_after = header("retry-after");
        let status = resp.status().as_u16();
        Reply {
            status,
            content_type,
            retry_after,
            text: resp.text().await.unwrap(),
        }
    }

    /// GET `path`.
    pub async fn get(&self, path: &str) -> Reply {
        Self::reply(
            self.client
                .get(format!("{}{path}", self.address))
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    /// A request with a JSON body (`None`: no body) and optional bearer token.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> Reply {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.address));
        if let Some(body) = body {
            req = req
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        Self::reply(req.send().await.unwrap()).await
    }

    /// POST a JSON body.
    pub async fn post(&self, path: &str, body: &str) -> Reply {
        self.send(reqwest::Method::POST, path, Some(body), None)
            .await
    }

    /// PATCH a JSON body.
    pub async fn patch(&self, path: &str, body: &str) -> Reply {
        self.send(reqwest::Method::PATCH, path, Some(body), None)
            .await
    }

    /// Creates a tag (asserting 201).
    pub async fn create_tag(&self, tag: &str, step: i64, max_id: i64) {
        let r = self
            .post(
                "/api/v1/tags",
                &format!(r#"{{"biz_tag":"{tag}","step":{step},"max_id":{max_id}}}"#),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }

    /// One id from the Leaf route (asserting 200).
    pub async fn leaf_id(&self, tag: &str) -> i64 {
        let r = self.get(&format!("/api/segment/get/{tag}")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.text
            .parse()
            .unwrap_or_else(|_| panic!("not an id: {}", r.text))
    }

    /// `count` ids from the batch route (asserting 200).
    pub async fn batch(&self, tag: &str, count: usize) -> Vec<i64> {
        let r = self
            .get(&format!("/api/v1/segment/{tag}/ids?count={count}"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        serde_json::from_value(r.json()["ids"].clone()).unwrap()
    }

    /// Stops the server gracefully.
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }
}

/// Asserts no id repeats and every id is positive.
pub fn assert_unique_positive(ids: &[i64]) {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "{} duplicate ids", n - sorted.len());
    assert!(
        sorted.first().is_none_or(|&f| f > 0),
        "non-positive id {:?}",
        sorted.first()
    );
}

/// Asserts `ids` strictly increase.
pub fn assert_increasing(ids: &[i64]) {
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!("ids do not increase: {} then {}", w[0], w[1]);
    }
}
