//! `FaultProxy`: a TCP proxy between a server under test and its database, with switches.
//!
//! It listens on `127.0.0.1:0` and forwards every accepted connection to one upstream address.
//! At run time it can:
//!
//! - [`FaultProxy::refuse`]: close every new connection at once (the database looks down);
//! - [`FaultProxy::cut`]: drop every live connection (a network partition, a restarted server);
//! - [`FaultProxy::set_latency`]: hold every chunk the upstream sends for that long, so each
//!   request/response round trip takes that much longer (a slow or distant database);
//! - [`FaultProxy::stall`]: let every client byte through to the upstream but hold every byte it
//!   sends back, on live and new connections alike: a query reaches the database and runs, its
//!   answer never arrives (a partition that silently drops the replies, a hung peer);
//! - [`FaultProxy::stall_after`]: the same stall, started by the first client chunk that matches
//!   a predicate, just before that chunk is forwarded: its answer is the first one held, so a
//!   chosen request hangs mid-flight after the upstream received it (a renewal that ran on the
//!   database, whose acknowledgement is lost);
//! - [`FaultProxy::heal`]: accept again with no added latency, and end a stall by delivering the
//!   held bytes, in order, on the connections still open.
//!
//! Latency is applied by time stamp, not by sleeping per chunk: a reader stamps each chunk as it
//! arrives and a writer forwards it once `stamp + latency` has passed, so a response split over
//! several reads is delayed once, not once per read. Only upstream-to-client traffic is held:
//! that is enough to add the latency to every round trip, and keeps client writes unordered by
//! nothing but TCP itself.
//!
//! A stall holds chunks at the same writer: the reader keeps draining the upstream into the
//! connection's queue (so the upstream sees its writes succeed, as it would on a partition
//! before TCP gives up), and the writer waits for [`FaultProxy::heal`] before each chunk. Held
//! answers are delivered when the stall ends, as TCP retransmission would once a partition
//! heals: a client that gave up on a request meanwhile sees its late answer. A stalled
//! connection is never closed by the proxy itself; [`FaultProxy::cut`] still drops it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

/// Size of one forwarded read.
const CHUNK: usize = 16 * 1024;

/// The switches and counters shared by the accept loop and the connections.
#[derive(Debug, Default)]
struct Switches {
    /// When set, new connections are closed as soon as they are accepted.
    refusing: AtomicBool,
    /// Added to every upstream-to-client chunk, in ms (read when the chunk arrives).
    latency_ms: AtomicU64,
    /// While `true`, no upstream-to-client chunk is written; writers wait for it to turn
    /// `false`. A watch, not a flag: the waiting writers must wake when the stall ends.
    stalled: watch::Sender<bool>,
    /// Armed by `stall_after`: the first client chunk it matches starts a stall.
    stall_trigger: StallTrigger,
    /// Connections accepted and forwarded so far.
    forwarded: AtomicU64,
    /// Connections closed at once because `refusing` was set.
    refused: AtomicU64,
    /// Client-to-upstream reads, all connections.
    client_chunks: AtomicU64,
    /// The tasks of live connections, aborted by `cut`. A std Mutex: never held across an await.
    live: Mutex<Vec<AbortHandle>>,
}

/// Tells whether a client-to-upstream chunk should start a stall.
type ChunkMatcher = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// The predicate of [`FaultProxy::stall_after`], if armed. A std Mutex: held only to test one
/// chunk, never across an await.
#[derive(Default)]
struct StallTrigger(Mutex<Option<ChunkMatcher>>);

impl std::fmt::Debug for StallTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.lock().is_some() {
            "StallTrigger(armed)"
        } else {
            "StallTrigger(none)"
        })
    }
}

impl StallTrigger {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<ChunkMatcher>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Switches {
    /// Starts the stall if `chunk`, about to be forwarded upstream, matches the armed trigger
    /// (which it then disarms). Called before the chunk is written, so the upstream cannot
    /// answer it before the stall is on.
    fn check_stall_trigger(&self, chunk: &[u8]) {
        let mut trigger = self.stall_trigger.lock();
        if trigger.as_ref().is_some_and(|matches| matches(chunk)) {
            *trigger = None;
            self.stalled.send_replace(true);
        }
    }
}

/// A fault-injecting TCP proxy on 127.0.0.1. Dropping it stops it and its connections.
#[derive(Debug)]
pub struct FaultProxy {
    /// Where clients connect.
    addr: SocketAddr,
    /// Where connections are forwarded.
    upstream: SocketAddr,
    /// Shared with the accept loop.
    switches: Arc<Switches>,
    /// The accept loop, aborted on drop.
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:0` forwarding to `upstream`. Needs a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let switches = Arc::new(Switches::default());
        let accept = tokio::spawn(accept_loop(listener, upstream, switches.clone()));
        Ok(Self {
            addr,
            upstream,
            switches,
            accept,
        })
    }

    /// The address clients should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients should connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Where connections go.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Closes every new connection as soon as it is accepted (live ones are left alone).
    pub fn refuse(&self) {
        self.switches.refusing.store(true, Ordering::SeqCst);
    }

    /// Drops every live connection; both ends see the socket close.
    pub fn cut(&self) {
        let live = std::mem::take(&mut *self.lock_live());
        for task in live {
            task.abort();
        }
    }

    /// Refuses new connections and cuts the live ones: the database is unreachable.
    pub fn go_down(&self) {
        self.refuse();
        self.cut();
    }

    /// Holds every upstream-to-client chunk for `ms` milliseconds (0: none).
    pub fn set_latency(&self, ms: u64) {
        self.switches.latency_ms.store(ms, Ordering::SeqCst);
    }

    /// Holds every upstream-to-client byte, on live and new connections, until [`Self::heal`];
    /// client-to-upstream bytes still flow, so requests reach the upstream and are executed.
    pub fn stall(&self) {
        self.switches.stalled.send_replace(true);
    }

    /// Arms a [`Self::stall`] that starts with the first client-to-upstream chunk (one read, as
    /// it arrives from the client) for which `matches` is true, on any connection. That chunk
    /// still reaches the upstream; its answer is held.
    pub fn stall_after(&self, matches: impl Fn(&[u8]) -> bool + Send + Sync + 'static) {
        *self.switches.stall_trigger.lock() = Some(Box::new(matches));
    }

    /// Whether a stall is on (by [`Self::stall`], or a [`Self::stall_after`] that fired).
    pub fn is_stalled(&self) -> bool {
        *self.switches.stalled.borrow()
    }

    /// Accepts connections again, removes the added latency, disarms [`Self::stall_after`] and
    /// ends a stall (the held bytes are delivered, in order, on the connections still open).
    pub fn heal(&self) {
        self.switches.refusing.store(false, Ordering::SeqCst);
        self.switches.latency_ms.store(0, Ordering::SeqCst);
        *self.switches.stall_trigger.lock() = None;
        self.switches.stalled.send_replace(false);
    }

    /// Connections forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.switches.forwarded.load(Ordering::Relaxed)
    }

    /// Connections refused so far.
    pub fn refused(&self) -> u64 {
        self.switches.refused.load(Ordering::Relaxed)
    }

    /// Client-to-upstream reads so far, on all connections: a client that sends each request
    /// in one write and waits for its answer makes one per round trip (a large write may
    /// arrive in more than one read).
    pub fn client_chunks(&self) -> u64 {
        self.switches.client_chunks.load(Ordering::Relaxed)
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Vec<AbortHandle>> {
        self.switches
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, switches: Arc<Switches>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if switches.refusing.load(Ordering::SeqCst) {
            switches.refused.fetch_add(1, Ordering::Relaxed);
            drop(client);
            continue;
        }
        switches.forwarded.fetch_add(1, Ordering::Relaxed);
        let task = tokio::spawn(forward(client, upstream, switches.clone()));
        let mut live = switches
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        live.retain(|t| !t.is_finished());
        live.push(task.abort_handle());
    }
}

/// Forwards one connection until either side closes (or the task is aborted by `cut`).
async fn forward(client: TcpStream, upstream: SocketAddr, switches: Arc<Switches>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_rd, mut client_wr) = client.into_split();
    let (mut server_rd, mut server_wr) = server.into_split();
    let upstream_to_client = async {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
        let read = async {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match server_rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let delay = switches.latency_ms.load(Ordering::SeqCst);
                        let due = Instant::now() + Duration::from_millis(delay);
                        if tx.send((due, buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
            drop(tx);
        };
        let write = async {
            let mut stalled = switches.stalled.subscribe();
            while let Some((due, chunk)) = rx.recv().await {
                tokio::time::sleep_until(due).await;
                // Checked per chunk, after the latency: a stall also holds chunks already read.
                if stalled.wait_for(|s| !s).await.is_err() {
                    break;
                }
                if client_wr.write_all(&chunk).await.is_err() {
                    break;
                }
            }
            let _ = client_wr.shutdown().await;
        };
        tokio::join!(read, write);
    };
    let client_to_upstream = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match client_rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    switches.client_chunks.fetch_add(1, Ordering::Relaxed);
                    switches.check_stall_trigger(&buf[..n]);
                    if server_wr.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = server_wr.shutdown().await;
    };
    // Either direction ending closes the connection, as a TCP proxy in front of a database would.
    tokio::select! {
        _ = upstream_to_client => {}
        _ = client_to_upstream => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that answers each read with the same bytes, and reports every read on the
    /// returned channel (so a test sees what reached it).
    async fn echo_server() -> (SocketAddr, mpsc::UnboundedReceiver<Vec<u8>>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf).await {
                        let _ = seen_tx.send(buf[..n].to_vec());
                        if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (addr, seen)
    }

    /// The most a round trip through a proxy without latency may take. Loopback takes well
    /// under a millisecond; the rest is room for a loaded machine to deschedule this thread.
    /// It stays below [`LATENCY`], so a latency left on after `heal` still fails.
    const FAST: Duration = Duration::from_millis(500);

    /// The latency the tests switch on, well above [`FAST`].
    const LATENCY: Duration = Duration::from_millis(1000);

    async fn round_trip(s: &mut TcpStream) -> std::io::Result<Duration> {
        let started = std::time::Instant::now();
        s.write_all(b"ping").await?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).await?;
        assert_eq!(&buf, b"ping");
        Ok(started.elapsed())
    }

    #[tokio::test]
    async fn forwards_then_refuses_cuts_slows_and_heals() {
        let proxy = FaultProxy::start(echo_server().await.0).await.unwrap();
        let mut a = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut a).await.unwrap() < FAST);

        proxy.set_latency(LATENCY.as_millis() as u64);
        let slow = round_trip(&mut a).await.unwrap();
        assert!(slow >= LATENCY, "{slow:?}");

        proxy.go_down();
        assert!(round_trip(&mut a).await.is_err(), "live connection cut");
        let mut b = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut b).await.is_err(), "new connection refused");
        assert_eq!(proxy.refused(), 1);

        proxy.heal();
        let mut c = TcpStream::connect(proxy.addr()).await.unwrap();
        assert!(round_trip(&mut c).await.unwrap() < FAST);
        assert_eq!(proxy.forwarded(), 2);
    }

    #[tokio::test]
    async fn a_stall_lets_requests_through_but_holds_answers_until_healed() {
        let (upstream, mut seen) = echo_server().await;
        let proxy = FaultProxy::start(upstream).await.unwrap();
        let mut live = TcpStream::connect(proxy.addr()).await.unwrap();
        round_trip(&mut live).await.unwrap();
        assert_eq!(seen.recv().await.unwrap(), b"ping");

        proxy.stall();
        let mut fresh = TcpStream::connect(proxy.addr()).await.unwrap();
        let held = Duration::from_millis(300);
        for (conn, msg) in [(&mut live, b"live"), (&mut fresh, b"new!")] {
            conn.write_all(msg).await.unwrap();
            let reached = tokio::time::timeout(Duration::from_secs(5), seen.recv()).await;
            assert_eq!(
                reached.unwrap().unwrap(),
                msg,
                "the write reaches the upstream"
            );
            let mut buf = [0u8; 4];
            let answer = tokio::time::timeout(held, conn.read_exact(&mut buf)).await;
            assert!(answer.is_err(), "an answer got through a stall: {answer:?}");
        }

        // Healing delivers the held answers in order, then traffic flows as before.
        proxy.heal();
        for (conn, msg) in [(&mut live, b"live"), (&mut fresh, b"new!")] {
            let mut buf = [0u8; 4];
            tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut buf))
                .await
                .expect("held answer delivered after heal")
                .unwrap();
            assert_eq!(&buf, msg);
            assert!(round_trip(conn).await.unwrap() < FAST);
        }
        assert_eq!(proxy.forwarded(), 2);
    }

    #[tokio::test]
    async fn a_stall_after_a_matching_request_holds_its_answer_and_no_earlier_one() {
        let (upstream, mut seen) = echo_server().await;
        let proxy = FaultProxy::start(upstream).await.unwrap();
        let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.stall_after(|chunk| chunk.starts_with(b"LAST"));
        round_trip(&mut conn).await.unwrap();
        assert!(!proxy.is_stalled(), "a chunk that does not match passes");

        conn.write_all(b"LAST").await.unwrap();
        assert_eq!(seen.recv().await.unwrap(), b"ping");
        assert_eq!(
            seen.recv().await.unwrap(),
            b"LAST",
            "the matching write is forwarded"
        );
        assert!(proxy.is_stalled());
        let mut buf = [0u8; 4];
        let answer = tokio::time::timeout(Duration::from_millis(300), conn.read_exact(&mut buf));
        assert!(answer.await.is_err(), "its answer is held");

        proxy.heal();
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"LAST");
        assert!(round_trip(&mut conn).await.unwrap() < FAST);
        assert!(!proxy.is_stalled());
    }
}
