//! The real `leafid` binary as a child process, for tests that kill it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A running `leafid serve` process.
pub struct ServerProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub address: String,
    /// Every line the process wrote to stderr so far (JSON log lines).
    logs: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts the binary on port 0 with `db_url` and extra `LEAFID__*` variables; returns once
    /// it logged its port.
    pub fn start(db_url: &str, env: &[(&str, &str)]) -> Self {
        let mut cmd = Self::command(db_url, env);
        cmd.env("LEAFID__SERVER__PORT", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn leafid");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let kept = logs.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line.clone());
                let parsed = (!sent)
                    .then(|| serde_json::from_str::<serde_json::Value>(&line).ok())
                    .flatten();
                if let Some(v) = parsed {
                    if v["message"] == "listening" {
                        let _ = tx.send(Ok(v["port"].as_u64().unwrap()));
                        sent = true;
                        continue;
                    }
                    if v["level"] == "ERROR" {
                        let _ = tx.send(Err(line.clone()));
                    }
                }
                if std::env::var_os("TEST_LOG").is_some() {
                    eprintln!("[leafid] {line}");
                }
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(port)) => port,
            Ok(Err(line)) => panic!("leafid failed to start: {line}"),
            Err(_) => {
                let _ = child.kill();
                panic!("leafid did not log its port within 30 s")
            }
        };
        Self {
            child,
            address: format!("http://127.0.0.1:{port}"),
            logs,
        }
    }

    /// Starts the binary with its stdout and stderr on `stdout`/`stderr` (a full device, a
    /// file on a full disk, a pipe nobody reads), so its log cannot tell the port: it listens
    /// on a free port below 32768 picked here, and this returns once `/health/live` answers.
    pub fn start_with_output(
        db_url: &str,
        env: &[(&str, &str)],
        stdout: Stdio,
        stderr: Stdio,
    ) -> Self {
        let port = free_low_port();
        let mut child = Self::command(db_url, env)
            .env("LEAFID__SERVER__PORT", port.to_string())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn leafid");
        let started = Instant::now();
        while !answers_200(port, "/health/live") {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("leafid exited before serving: {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "leafid did not answer /health/live on port {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            address: format!("http://127.0.0.1:{port}"),
            logs: Arc::default(),
        }
    }

    /// The command for `leafid serve` with the test defaults and `env`.
    fn command(db_url: &str, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leafid"));
        cmd.env("LEAFID__SERVER__WORKERS", "1")
            .env("LEAFID__DATABASE__URL", db_url)
            .env("LEAFID__LOG__FORMAT", "json")
            // The tests create tags from loopback; `proxy_admin` checks the shipped default.
            .env("LEAFID__ADMIN__TRUST_LOOPBACK", "true")
            // The test PgBouncer's URL needs its setting (as in `support::test_settings`).
            .env(
                "LEAFID__DATABASE__PGBOUNCER",
                super::postgres::is_pgbouncer(db_url).to_string(),
            )
            .env("RUST_LOG", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Every stderr line so far.
    pub fn all_logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The stderr lines so far whose JSON `message` starts with `prefix`.
    pub fn log_lines(&self, prefix: &str) -> Vec<String> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .is_ok_and(|v| v["message"].as_str().is_some_and(|m| m.starts_with(prefix)))
            })
            .cloned()
            .collect()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGSTOP: every thread of the process freezes (its sockets stay open, the kernel still
    /// queues connections) until the returned guard sends SIGCONT, by [`Paused::resume`] or
    /// when dropped, so a failing test never leaves a stopped process behind.
    /// Returns once every thread is stopped: `kill` returns before the stop takes hold, and on a
    /// busy machine a server answered requests after it.
    pub fn pause(&self) -> Paused {
        assert!(signal(self.pid(), "STOP"), "kill -STOP {}", self.pid());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !all_threads_stopped(self.pid()) {
            assert!(
                Instant::now() < deadline,
                "process {} not stopped 10 s after SIGSTOP",
                self.pid()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        Paused {
            pid: Some(self.pid()),
        }
    }

    /// SIGTERM without waiting: the process drains (`server.drain_secs`) and stops by itself.
    pub fn send_term(&self) {
        assert!(signal(self.pid(), "TERM"), "kill -TERM {}", self.pid());
    }

    /// Waits up to `within` for the process to exit; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if started.elapsed() >= within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no shutdown, no flush, nothing.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process stopped by [`ServerProcess::pause`]; continued (SIGCONT) on [`Self::resume`] or drop.
#[must_use = "dropping the guard continues the process at once"]
pub struct Paused {
    /// The stopped process; `None` once continued.
    pid: Option<u32>,
}

impl Paused {
    /// SIGCONT: the process runs again.
    pub fn resume(mut self) {
        if let Some(pid) = self.pid.take() {
            assert!(signal(pid, "CONT"), "kill -CONT {pid}");
        }
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        // No assert: this may run while a test panics, and the process may be gone already.
        if let Some(pid) = self.pid.take() {
            signal(pid, "CONT");
        }
    }
}

/// Sends `SIG<name>` to `pid` with `kill(1)` (the crate does not depend on libc); whether it
/// was delivered.
/// Whether every thread of `pid` is in state `T` (stopped) in `/proc` (one that exits meanwhile
/// counts as stopped).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    })
}

fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// A loopback port below 32768 (the kernel's ephemeral range starts there, so no client
/// connection takes it meanwhile) that nothing listens on now.
pub fn free_low_port() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(std::process::id()) << 32 | u64::from(nanos);
    (0..2_000u64)
        .map(|i| {
            20_000 + ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 7_919)) % 12_000) as u16
        })
        .find(|&port| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free loopback port in 20000..32000")
}

/// Whether `GET path` on the local `port` answers 200 (a plain HTTP/1.0 exchange, so the
/// probe needs no runtime).
fn answers_200(port: u16, path: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}
