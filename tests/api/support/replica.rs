//! The test primary/replica pair (`scripts/replica.sh`): its URLs from
//! `LEAFID_TEST_REPLICA_URLS` (as `scripts/test.sh` sets it), else from running
//! `scripts/replica.sh start` (installing MariaDB if missing), so
//! `cargo test -- --include-ignored` alone runs these tests too. A plain `cargo test` lists them
//! as ignored, never as passed. And [`SwitchProxy`], the one address the servers know, which a
//! failover points at the promoted replica without restarting them.
//!
//! Every test fails the pair over, so they hold [`serial`] throughout and each starts with
//! [`start`], which rebuilds a pair that has failed over.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

/// The two URLs (`mysql://leafid:leafid@127.0.0.1:PORT`, no database), primary first. Blocking
/// the first time when it has to build the pair.
pub fn pair_urls() -> &'static [String] {
    static URLS: OnceLock<Vec<String>> = OnceLock::new();
    URLS.get_or_init(|| {
        let urls = match std::env::var("LEAFID_TEST_REPLICA_URLS") {
            Ok(urls) => urls,
            Err(_) => script(&["start", "async"]),
        };
        let urls: Vec<String> = urls
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect();
        assert_eq!(
            urls.len(),
            2,
            "a primary and a replica URL expected: {urls:?}"
        );
        urls
    })
}

/// Held by each failover test for its whole run: they share the pair and fail it over.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// `scripts/replica.sh start MODE` (`async` or `semisync`): a pair in that mode that has not
/// failed over; the URLs, primary first.
pub async fn start(mode: &'static str) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        let configured = pair_urls().to_vec();
        let printed: Vec<String> = script(&["start", mode])
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            printed, configured,
            "scripts/replica.sh serves other URLs than LEAFID_TEST_REPLICA_URLS"
        );
        configured
    })
    .await
    .unwrap()
}

/// Runs `scripts/replica.sh ARGS` off the runtime; its stdout.
pub async fn run(args: &'static [&'static str]) -> String {
    tokio::task::spawn_blocking(move || script(args))
        .await
        .unwrap()
}

/// Runs `scripts/replica.sh ARGS` and returns its stdout (panics with its stderr on failure).
/// Blocking.
pub fn script(args: &[&str]) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/replica.sh");
    let out = Command::new("bash")
        .arg(path)
        .args(args)
        .output()
        .expect("run scripts/replica.sh");
    assert!(
        out.status.success(),
        "scripts/replica.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A TCP proxy on 127.0.0.1 whose upstream can be switched: what a failover's virtual IP, DNS
/// name or HAProxy backend does for the servers behind it.
pub struct SwitchProxy {
    addr: SocketAddr,
    /// Where new connections go; `None`: closed at once (no primary).
    upstream: Arc<Mutex<Option<SocketAddr>>>,
    /// Forwarding tasks of live connections, aborted by a switch.
    live: Arc<Mutex<Vec<AbortHandle>>>,
    accept: JoinHandle<()>,
}

impl SwitchProxy {
    /// Listens on `127.0.0.1:0`, forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(Some(upstream)));
        let live = Arc::new(Mutex::new(Vec::<AbortHandle>::new()));
        let accept = tokio::spawn({
            let target = target.clone();
            let live = live.clone();
            async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        continue;
                    };
                    let Some(to) = *target.lock().unwrap() else {
                        drop(client);
                        continue;
                    };
                    let task = tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(to).await else {
                            return;
                        };
                        let mut client = client;
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    });
                    let mut live = live.lock().unwrap();
                    live.retain(|t| !t.is_finished());
                    live.push(task.abort_handle());
                }
            }
        });
        Self {
            addr,
            upstream: target,
            live,
            accept,
        }
    }

    /// The address the servers connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// New connections go to `upstream` (`None`: refused); every live one is cut.
    pub fn switch(&self, upstream: Option<SocketAddr>) {
        *self.upstream.lock().unwrap() = upstream;
        for task in self.live.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for SwitchProxy {
    fn drop(&mut self) {
        self.accept.abort();
        for task in self.live.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}
