//! The real `leafid` binary as a child process, for tests that kill it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

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
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leafid"));
        cmd.env("LEAFID__SERVER__PORT", "0")
            .env("LEAFID__SERVER__WORKERS", "1")
            .env("LEAFID__DATABASE__URL", db_url)
            .env("LEAFID__LOG__FORMAT", "json")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
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
    pub fn pause(&self) -> Paused {
        assert!(signal(self.pid(), "STOP"), "kill -STOP {}", self.pid());
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
fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}
