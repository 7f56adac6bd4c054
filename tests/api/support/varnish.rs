//! Varnish (Debian's `varnish`, installed by `scripts/varnish.sh` if missing) in front of a
//! server, with its default configuration: `varnishd -b BACKEND` and the built-in VCL, which
//! caches any `GET` answer that does not forbid it for two minutes. A child process on a free
//! port below 32768, killed on drop.

use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `varnishd` binary (installed on first use).
fn binary() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/varnish.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg("install")
            .output()
            .expect("run scripts/varnish.sh");
        assert!(
            out.status.success(),
            "scripts/varnish.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// A running `varnishd -F`.
pub struct Varnish {
    child: Child,
    /// `http://127.0.0.1:PORT` of the cache.
    pub address: String,
    /// Its working directory (`-n`).
    _dir: tempfile::TempDir,
}

impl Varnish {
    /// Starts Varnish in front of `backend` (`host:port`) with the built-in VCL; returns once
    /// it answers.
    pub fn start(backend: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = super::process::free_low_port();
        let child = Command::new(binary())
            .args(["-F", "-a", &format!("127.0.0.1:{port}"), "-b", backend])
            .arg("-n")
            .arg(dir.path().join("varnish"))
            .args(["-s", "malloc,32m"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn varnishd");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "varnishd did not listen on {port} within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            address: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }
}

impl Drop for Varnish {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
