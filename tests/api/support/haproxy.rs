//! HAProxy (Debian's `haproxy`, installed by `scripts/haproxy.sh` if missing) in front of server
//! processes: the configuration a deploy would use, written to a temporary directory, and
//! `haproxy -f CFG -db` as a child process, killed on drop. Its stats socket tells which servers
//! it holds UP and how often it retried and redispatched requests.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `haproxy` binary (installed on first use).
fn binary() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/haproxy.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg("install")
            .output()
            .expect("run scripts/haproxy.sh");
        assert!(
            out.status.success(),
            "scripts/haproxy.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// The configuration: one HTTP frontend on `port`, round robin over `servers` (`host:port`)
/// with fast health checks on `/health/ready`, and the stats socket at `socket`. Without
/// `retries`, a failed request is not retried at all (a balancer that cannot retry: then only
/// the servers' own drain period, `server.drain_secs`, keeps a SIGTERM clean).
pub fn config(bind: &str, servers: &[String], socket: &Path, retries: bool) -> String {
    let retry = if retries {
        "retries 3\n    option redispatch 1\n    retry-on conn-failure empty-response response-timeout"
    } else {
        "retries 0"
    };
    let lines: String = servers
        .iter()
        .enumerate()
        .map(|(i, s)| format!("    server s{i} {s} check\n"))
        .collect();
    format!(
        r#"global
    # The test drives HAProxy through this socket: `show stat` for assertions.
    stats socket {socket} mode 600 level admin
    # One thread: the tests share two cores with the servers and the clients.
    nbthread 1
    maxconn 2000

defaults
    mode http
    timeout connect 1s
    timeout client 10s
    # A request a server holds longer than this is retried elsewhere (response-timeout below).
    timeout server 5s
    timeout http-request 5s
    timeout http-keep-alive 2s
    # Generous: a killed or stopping server refuses the check at once, so this only matters
    # for one that hangs, and a busy test machine must not fail healthy servers.
    timeout check 1s
    # Retry a failed request up to 3 times, each retry on another server (redispatch 1):
    #  - conn-failure: the connection was refused or reset before the request was sent (a
    #    server killed or draining: its listener is closed). Nothing reached a server, so this
    #    is safe for any request.
    #  - empty-response, response-timeout: the request was sent and no response came back (a
    #    server killed with the request in flight, or a keep-alive connection closed by a
    #    stopping server just as HAProxy reused it). Safe for the id routes because they are
    #    GETs that take nothing back: if the first attempt was processed, its ids are lost with
    #    the response, never handed out, and the retry gets fresh ids. Ids are wasted (gaps),
    #    never duplicated. The admin routes (POST/PATCH/DELETE under /api/v1/tags) are not
    #    idempotent, so those layer-7 retries are turned off for them below.
    {retry}

frontend ids
    bind {bind}
    default_backend leafid

backend leafid
    balance roundrobin
    http-request disable-l7-retry if !METH_GET
    # A server leaves the rotation after two failed checks 200 ms apart (it is killed, its
    # database is unreachable with buffers low, its snowflake lease lapsed) and comes back after
    # two good ones.
    option httpchk GET /health/ready
    http-check expect status 200
    default-server inter 200ms fall 2 rise 2
{lines}"#,
        socket = socket.display(),
    )
}

/// A running HAProxy.
pub struct HaProxy {
    child: Child,
    /// `http://127.0.0.1:PORT`, the frontend.
    pub address: String,
    /// The stats socket.
    socket: PathBuf,
    /// Holds the configuration, the socket and HAProxy's stderr (`haproxy.log`).
    dir: tempfile::TempDir,
}

/// One server's line of `show stat`.
#[derive(Debug, Clone)]
pub struct ServerStat {
    /// `s0`, `s1`, ...
    pub name: String,
    /// `UP`, `DOWN`, `UP 1/2` (going down), `DOWN 1/2` (coming up), `MAINT`, ...
    pub status: String,
    /// The last health check's result: `L7OK` once `/health/ready` answered 200.
    pub check: String,
    /// Requests sent to it (sessions in HAProxy's terms).
    pub sessions: u64,
    /// Requests retried after failing on it.
    pub retries: u64,
    /// Requests redispatched to another server after failing on it.
    pub redispatches: u64,
    /// Connection errors.
    pub conn_errors: u64,
    /// Response errors.
    pub resp_errors: u64,
}

impl HaProxy {
    /// Starts HAProxy in front of `servers` (`http://host:port` addresses) on a free port below
    /// the ephemeral range; returns once every server passed its health check. Blocking.
    pub fn start(servers: &[&str]) -> Self {
        Self::start_with(servers, true)
    }

    /// [`Self::start`], choosing whether failed requests are retried on another server.
    pub fn start_with(servers: &[&str], retries: bool) -> Self {
        Self::start_bound("127.0.0.1", servers, retries)
    }

    /// [`Self::start_with`], its frontend bound to `host` (an address of this machine, e.g. a
    /// test's own veth address) instead of loopback.
    pub fn start_bound(host: &str, servers: &[&str], retries: bool) -> Self {
        let servers: Vec<String> = servers
            .iter()
            .map(|s| s.trim_start_matches("http://").to_owned())
            .collect();
        let mut last_error = String::new();
        // A port found free may be taken before HAProxy binds it: try another.
        for _ in 0..5 {
            let port = free_port_below_ephemeral();
            match Self::try_start(host, port, &servers, retries) {
                Ok(lb) => return lb,
                Err(e) => last_error = e,
            }
        }
        panic!("HAProxy did not start: {last_error}");
    }

    fn try_start(host: &str, port: u16, servers: &[String], retries: bool) -> Result<Self, String> {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("admin.sock");
        let cfg = dir.path().join("haproxy.cfg");
        let bind = format!("{host}:{port}");
        std::fs::write(&cfg, config(&bind, servers, &socket, retries)).unwrap();
        let log = std::fs::File::create(dir.path().join("haproxy.log")).unwrap();
        let child = Command::new(binary())
            .arg("-f")
            .arg(&cfg)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn haproxy");
        let mut lb = Self {
            child,
            address: format!("http://{bind}"),
            socket,
            dir,
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = lb.child.try_wait() {
                return Err(format!("exited with {status}: {}", lb.log()));
            }
            // Servers start UP and their first check runs at once: wait until each passed one.
            if let Ok(stats) = lb.try_stats()
                && stats.len() == servers.len()
                && stats.iter().all(|s| s.status == "UP" && s.check == "L7OK")
            {
                return Ok(lb);
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("not ready within 10 s: {}", lb.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What HAProxy wrote to stderr (warnings, alerts).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// Each server's statistics (panics if the socket does not answer).
    pub fn stats(&self) -> Vec<ServerStat> {
        self.try_stats()
            .unwrap_or_else(|e| panic!("HAProxy stats socket: {e}; {}", self.log()))
    }

    fn try_stats(&self) -> std::io::Result<Vec<ServerStat>> {
        let mut conn = UnixStream::connect(&self.socket)?;
        conn.set_read_timeout(Some(Duration::from_secs(2)))?;
        conn.write_all(b"show stat\n")?;
        let mut csv = String::new();
        conn.read_to_string(&mut csv)?;
        Ok(parse_stats(&csv))
    }

    /// Polls the stats until `name`'s status starts with `status`; how long that took.
    /// Blocking.
    pub fn wait_for_status(&self, name: &str, status: &str, timeout: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let stats = self.stats();
            if stats
                .iter()
                .any(|s| s.name == name && s.status.starts_with(status))
            {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < timeout,
                "{name} not {status} within {timeout:?}: {stats:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server lines of a `show stat` CSV (header `# pxname,svname,...`).
fn parse_stats(csv: &str) -> Vec<ServerStat> {
    let mut lines = csv.lines();
    let Some(header) = lines.next().and_then(|h| h.strip_prefix("# ")) else {
        return Vec::new();
    };
    let columns: HashMap<&str, usize> =
        header.split(',').enumerate().map(|(i, c)| (c, i)).collect();
    lines
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[0] == "leafid" && f[1] != "BACKEND")
        .map(|f| {
            let text = |c: &str| f[columns[c]].to_owned();
            let num = |c: &str| f[columns[c]].parse().unwrap_or(0);
            ServerStat {
                name: text("svname"),
                status: text("status"),
                check: text("check_status"),
                sessions: num("stot"),
                retries: num("wretr"),
                redispatches: num("wredis"),
                conn_errors: num("econ"),
                resp_errors: num("eresp"),
            }
        })
        .collect()
}

/// A port on 127.0.0.1 free right now, in 20000..32000: HAProxy needs a fixed port in its
/// configuration, and ports below the ephemeral range (32768 and up) are not handed to outgoing
/// connections, so none is taken by the time HAProxy binds it unless another listener races.
fn free_port_below_ephemeral() -> u16 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id().wrapping_mul(2_654_435_761);
    for i in 0..200u32 {
        let port = 20_000 + (seed.wrapping_add(i.wrapping_mul(7_919)) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000..32000");
}
