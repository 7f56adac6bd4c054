//! The test MariaDB: `LEAFID_TEST_MYSQL_URL` if set (as `scripts/test.sh` does); else a
//! container through `testcontainers` where a Docker engine answers (a developer laptop); else a
//! private instance started by `scripts/mariadb.sh` (installing MariaDB from Debian's packages
//! if missing). Each test gets its own database. Only tests marked `#[ignore = "needs MariaDB:
//! ..."]` reach this, so a plain `cargo test` starts and installs nothing; `scripts/test.sh`
//! (or `cargo test -- --include-ignored`) runs them.

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
        if docker_available() {
            return start_container();
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

/// Whether a Docker engine answers here.
fn docker_available() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Starts a MariaDB container that lives as long as the test process (testcontainers' reaper
/// removes it afterwards) and returns its root URL. Runs on its own thread: the blocking runner
/// drives its own runtime, which must not nest inside a test's.
fn start_container() -> String {
    use testcontainers_modules::mariadb::Mariadb;
    use testcontainers_modules::testcontainers::runners::SyncRunner;
    static CONTAINER: OnceLock<testcontainers_modules::testcontainers::Container<Mariadb>> =
        OnceLock::new();
    std::thread::spawn(|| {
        let container = CONTAINER.get_or_init(|| {
            Mariadb::default()
                .start()
                .expect("start a MariaDB container")
        });
        let port = container.get_host_port_ipv4(3306).expect("container port");
        format!("mysql://root@127.0.0.1:{port}")
    })
    .join()
    .expect("container thread")
}

/// A MariaDB instance of its own (data under `target/`, a free port), for tests that stop or
/// restart the database: the shared instance is in use by every other test.
pub struct PrivateMariaDb {
    /// Data directory base (`LEAFID_MARIADB_DIR`).
    dir: std::path::PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// `mysql://leafid:leafid@127.0.0.1:PORT` (no database).
    pub url: String,
}

impl PrivateMariaDb {
    /// Starts (initialising on first use) the instance named `name` on a free port below the
    /// ephemeral range.
    /// Blocking: call it from `spawn_blocking` in async tests.
    pub fn start(name: &str) -> Self {
        // Tests start their instances at once: two would pick the same free port (checked,
        // released, then bound by the script), or one the port of another's instance while it
        // is stopped for a restart. So the port choice is serialised, and a port stays taken
        // for this process until its instance is dropped.
        let mut taken = RESERVED_PORTS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("mariadb-{name}"));
        // Below the ephemeral range (32768+), where a client socket could take the port
        // between this check and the server's bind, or while the instance is stopped.
        let port = (23_700..24_000)
            .filter(|p| !taken.contains(p))
            .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
            .expect("a free port in 23700..24000");
        taken.insert(port);
        let db = Self {
            url: format!("mysql://leafid:leafid@127.0.0.1:{port}"),
            dir,
            port,
        };
        // An instance left running by an interrupted run would answer on its old port.
        db.script("stop");
        db.script("start");
        db
    }

    /// Starts (initialising on first use) the instance named `name` on `port`: for tests that
    /// need a fixed port outside the ephemeral range. Blocking, like [`Self::start`].
    pub fn start_on(name: &str, port: u16) -> Self {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("mariadb-{name}"));
        let db = Self {
            url: format!("mysql://leafid:leafid@127.0.0.1:{port}"),
            dir,
            port,
        };
        db.script("stop");
        db.script("start");
        db
    }

    /// Stops the instance (clean shutdown) and waits until it is gone.
    pub fn stop(&self) {
        self.script("stop");
    }

    /// SIGKILL of the server process: no shutdown, no log flush, like a crash of `mariadbd`.
    /// Returns once the process is gone. [`Self::start_again`] then runs crash recovery.
    pub fn kill9(&self) {
        let pid = std::fs::read_to_string(self.dir.join("mysqld.pid")).expect("mysqld.pid");
        let pid = pid.trim();
        let killed = Command::new("kill").args(["-9", pid]).status().unwrap();
        assert!(killed.success(), "kill -9 {pid}");
        // Gone, or a zombie nobody reaped yet (its third /proc field is `Z`).
        let started = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .map(str::trim_start)
                .is_some_and(|f| !f.starts_with('Z'))
        }) {
            assert!(
                started.elapsed().as_secs() < 30,
                "mariadbd {pid} still alive"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Starts it again on the same port and data.
    pub fn start_again(&self) {
        self.script("start");
    }

    fn script(&self, cmd: &str) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mariadb.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg(cmd)
            .env("LEAFID_MARIADB_DIR", &self.dir)
            .env("LEAFID_TEST_MYSQL_PORT", self.port.to_string())
            .output()
            .expect("run scripts/mariadb.sh");
        assert!(
            out.status.success(),
            "scripts/mariadb.sh {cmd} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The ports of this process's [`PrivateMariaDb`] instances (see [`PrivateMariaDb::start`]).
static RESERVED_PORTS: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.script("stop");
        RESERVED_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.port);
    }
}

/// Runs statements against the server at `url` (no database selected).
pub async fn exec_url(url: &str, sql: &str) {
    let mut conn = MySqlConnection::connect(url).await.expect("connect");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}
