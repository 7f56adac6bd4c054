//! Real `leafid` servers for the client's tests, on a fresh MariaDB database each.
//!
//! The server binary is the root package's `target/debug/leafid`: another package's tests
//! cannot ask cargo to build it, so it must be built first (`scripts/test.sh` runs the root
//! package's tests, which build it, before these; by hand: `cargo build --bin leafid`).
//! `LEAFID_BIN` overrides the path. The database: `LEAFID_TEST_MYSQL_URL` (as `scripts/test.sh`
//! sets), else the private MariaDB of `scripts/mariadb.sh`; databases are made with the
//! `mariadb` command-line client (Debian's, installed with that server). So every test here is
//! `#[ignore = "needs MariaDB: ..."]`: `cargo test --workspace` lists them as ignored, and
//! `scripts/test.sh` runs them with `--include-ignored`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The `leafid` binary, or a panic saying how to build it.
pub fn server_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("LEAFID_BIN") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")));
    let bin = target.join("debug/leafid");
    assert!(
        bin.is_file(),
        "the server binary {} is missing: run `cargo build --bin leafid` at the repository root \
         first (scripts/test.sh does), or set LEAFID_BIN",
        bin.display()
    );
    bin
}

/// `mysql://user:pass@host:port` of the test MariaDB (no database).
fn mysql_url() -> String {
    if let Ok(url) = std::env::var("LEAFID_TEST_MYSQL_URL") {
        return url.trim_end_matches('/').to_owned();
    }
    let out = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../scripts/mariadb.sh"
        ))
        .arg("start")
        .output()
        .expect("run scripts/mariadb.sh");
    assert!(out.status.success(), "scripts/mariadb.sh start failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Creates an empty database; its URL.
pub fn create_database() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let url = mysql_url();
    let rest = url.strip_prefix("mysql://").expect("a mysql:// URL");
    let (auth, hostport) = rest.split_once('@').expect("user:password@host:port");
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "3306"));
    let name = format!(
        "leafid_client_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let status = Command::new("mariadb")
        .args(["-h", host, "-P", port, "-u", user])
        .arg(format!("-p{password}"))
        // The name is this process's id and a counter: a database left by an earlier run
        // whose process had the same id (a MariaDB kept between runs) is dropped first; no
        // live process shares the id.
        .args([
            "-e",
            &format!("DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"),
        ])
        .status()
        .expect("run the mariadb client");
    assert!(status.success(), "CREATE DATABASE {name} failed");
    format!("{url}/{name}")
}

/// A running `leafid serve` process on port 0; killed when dropped.
pub struct Server {
    child: Child,
    /// Its working directory, removed when dropped.
    workdir: PathBuf,
    /// `http://127.0.0.1:PORT`.
    pub address: String,
}

impl Server {
    /// Starts the binary with `db_url`; returns once `/health/ready` answers 200.
    pub fn start(db_url: &str) -> Self {
        Self::start_with(db_url, &[])
    }

    /// [`Server::start`] with extra environment variables (`LEAFID__...` settings).
    pub fn start_with(db_url: &str, env: &[(&str, &str)]) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        // Its own working directory: what the server writes relative to it (the snowflake
        // worker cache file, data/ by default) is neither shared nor left in the checkout.
        let workdir = std::env::temp_dir().join(format!(
            "leafid-client-tests-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&workdir).expect("create the server's working directory");
        let binary = std::path::absolute(server_binary()).expect("an absolute binary path");
        let mut child = Command::new(binary)
            .current_dir(&workdir)
            .envs(env.iter().copied())
            .env("LEAFID__SERVER__PORT", "0")
            .env("LEAFID__SERVER__WORKERS", "1")
            .env("LEAFID__DATABASE__URL", db_url)
            .env("LEAFID__LOG__FORMAT", "json")
            .env("LEAFID__ADMIN__TOKEN", ADMIN_TOKEN)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn leafid");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                    && v["message"] == "listening"
                {
                    let _ = tx.send(v["port"].as_u64().unwrap());
                }
                if std::env::var_os("TEST_LOG").is_some() {
                    eprintln!("[leafid] {line}");
                }
            }
        });
        let Ok(port) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("leafid did not log its port within 30 s");
        };
        let mut server = Self {
            child,
            workdir,
            address: format!("http://127.0.0.1:{port}"),
        };
        server.wait_ready(port, Duration::from_secs(30));
        server
    }

    /// Waits until `/health/ready` answers 200. A server listens before it is ready (it claims
    /// its snowflake worker id and runs its migrations in the background): until then its
    /// snowflake ids answer 503 `snowflake_not_ready`, which on a loaded machine a test's first
    /// requests would meet.
    fn wait_ready(&mut self, port: u64, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let last = match ready_status(port) {
                Ok(200) => return,
                Ok(status) => format!("status {status}"),
                Err(e) => e.to_string(),
            };
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("leafid exited ({status}) before it was ready: {last}");
            }
            assert!(
                Instant::now() < deadline,
                "leafid was not ready within {within:?}: {last}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `SIG<name>` (STOP, CONT) with kill(1).
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{name} {}", self.pid());
    }

    /// SIGKILL, and reap.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// The status code of one `GET /health/ready` on 127.0.0.1:`port` (HTTP/1.0, no keep-alive).
fn ready_status(port: u64) -> std::io::Result<u16> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port as u16));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(b"GET /health/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {answer:.80}")))
}

impl Drop for Server {
    fn drop(&mut self) {
        // A stopped process must be continued to die cleanly on some systems; harmless otherwise.
        let _ = Command::new("kill")
            .args(["-CONT", &self.pid().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}

/// The admin token every test server is started with (`admin.token`): admin writes need it.
pub const ADMIN_TOKEN: &str = "leafid-client-tests";

/// Creates a tag through `server`'s admin route, with [`ADMIN_TOKEN`].
pub async fn create_tag(server: &str, tag: &str, step: i64) {
    let r = reqwest::Client::new()
        .post(format!("{server}/api/v1/tags"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(format!(r#"{{"biz_tag":"{tag}","step":{step}}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// Creates a formatted tag (`format`: the JSON object of `docs/shapes.md`) through `server`'s
/// admin route.
pub async fn create_formatted_tag(server: &str, tag: &str, step: i64, format: &str) {
    create_formatted_tag_at(server, tag, step, 1, format).await;
}

/// [`create_formatted_tag`] whose every period's sequence starts at `max_id`.
pub async fn create_formatted_tag_at(
    server: &str,
    tag: &str,
    step: i64,
    max_id: i64,
    format: &str,
) {
    let r = reqwest::Client::new()
        .post(format!("{server}/api/v1/tags"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"biz_tag":"{tag}","step":{step},"max_id":{max_id},"format":{format}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}
