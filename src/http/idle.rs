//! Idle keep-alive connections, closed by one sweep per worker a second instead of a timer per
//! request.
//!
//! actix-http arms a keep-alive timer after every answer and disarms it when the next request
//! arrives: a `Sleep` boxed, entered into tokio's timer wheel, removed and freed per request,
//! about 920 instructions of the 19,150 a hello-world request costs (callgrind,
//! `docs/benchmarks.md`, "The keep-alive sweep"). leafid runs actix with no keep-alive timer
//! (`KeepAlive::Os`) and keeps the rule itself, per connection instead of per request:
//!
//! - each accepted connection is registered with its worker's [`Sweep`] ([`on_connect`]: a
//!   duplicate of its socket, so the sweep never acts on a descriptor number that was closed
//!   and reused), and deregistered when actix drops the connection;
//! - the middleware marks a request in flight ([`Conn::begin`]) until its answer is made, and
//!   stamps the connection with the sweep's tick when it ends;
//! - once a second the sweep looks at each connection whose last request ended at least
//!   `server.keep_alive_secs` ago and that has none in flight, and reads the kernel's view of
//!   its socket (`TCP_INFO`, `SIOCOUTQ`): a connection that received no byte and sent no byte
//!   for that long and has nothing left to send is idle, and is shut down (both directions),
//!   which ends actix's dispatcher as a closed connection does.
//!
//! **What is kept.** An idle connection is closed between `keep_alive_secs` and one second
//! more after its last traffic (actix: at `keep_alive_secs` after its last answer). A request
//! being served is never cut, however long it waits (as with actix, whose keep-alive timer runs
//! only between requests): the in-flight mark. A request head arriving, or an answer still
//! being written (bytes sent, or queued in the kernel), keeps the connection: the socket's own
//! timestamps. A request head that trickles in stays bounded by actix's own head timer
//! (`client_request_timeout`, 5 s), which is untouched, and a body by
//! [`super::body_deadline`]. One difference remains: an answer whose body waits server-side
//! for more than `keep_alive_secs` with nothing sent (no leafid route streams that way) would
//! be closed, where actix waits.
//!
//! **Why a wrong close cannot hand out an id twice.** Closing a connection loses at most the
//! answer being written (its ids become a gap, as when a client disconnects); an id is taken
//! once from the engine whatever happens to the connection that asked.
//!
//! Everything here runs on the worker's own thread (actix workers are single-threaded), so the
//! state is `Cell`s and `Rc`s: no atomics, no lock.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Extensions;
use slab::Slab;

use crate::metrics::Metrics;

/// How often a worker's sweep runs.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// One worker's connections and its tick (seconds since the sweep started).
pub struct Sweep {
    conns: RefCell<Slab<Rc<Conn>>>,
    tick: Rc<Cell<u32>>,
    /// Ticks (seconds) of silence after which a connection is looked at; the kernel's
    /// timestamps are compared with the same in milliseconds.
    idle_ticks: u32,
    metrics: Arc<Metrics>,
}

thread_local! {
    /// This worker thread's sweep, made with its first connection.
    static SWEEP: RefCell<Option<Rc<Sweep>>> = const { RefCell::new(None) };
}

/// One accepted connection.
pub struct Conn {
    /// A duplicate of the connection's socket, owned: closed when the connection is dropped.
    socket: OwnedFd,
    /// Requests of this connection whose answer is not made yet.
    in_flight: Cell<u32>,
    /// The sweep's tick when the connection was accepted or a request on it ended.
    last: Cell<u32>,
    tick: Rc<Cell<u32>>,
}

/// A request in flight on a connection (see [`Conn::begin`]): dropped when its answer is made
/// or the request is abandoned.
pub struct InFlight(Rc<Conn>);

impl Conn {
    /// Marks a request in flight until the returned guard drops.
    #[inline]
    pub fn begin(self: &Rc<Self>) -> InFlight {
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(Rc::clone(self))
    }
}

impl Drop for InFlight {
    #[inline]
    fn drop(&mut self) {
        let c = &self.0;
        c.in_flight.set(c.in_flight.get().saturating_sub(1));
        c.last.set(c.tick.get());
    }
}

/// What actix keeps in the connection's data: the connection's entry, removed from the sweep
/// when actix drops the connection.
pub struct Registered {
    conn: Rc<Conn>,
    key: usize,
    sweep: Rc<Sweep>,
}

impl Registered {
    /// The connection, for [`Conn::begin`].
    #[inline]
    pub fn conn(&self) -> &Rc<Conn> {
        &self.conn
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut conns = self.sweep.conns.borrow_mut();
        if conns.contains(self.key) {
            conns.remove(self.key);
        }
    }
}

/// actix's `on_connect` hook: registers a TCP connection with this worker's sweep, starting
/// the sweep with the worker's first connection. Anything but a TCP stream, or a socket that
/// cannot be duplicated (out of descriptors), is left unregistered: never swept, as under
/// `KeepAlive::Os` (logged once per interval; counted in `leafid_http_idle_connections_total{outcome="unswept"}`).
pub fn on_connect(
    io: &dyn std::any::Any,
    data: &mut Extensions,
    keep_alive: Duration,
    metrics: &Arc<Metrics>,
) {
    let Some(stream) = io.downcast_ref::<actix_web::rt::net::TcpStream>() else {
        return;
    };
    let socket = match stream.as_fd().try_clone_to_owned() {
        Ok(s) => s,
        Err(e) => {
            metrics.count_idle("unswept");
            if let Some(held) = crate::telemetry::LogLimiter::global().allow("idle_unswept") {
                tracing::warn!(error = %e, held_back = held,
                    "a connection could not be registered for the keep-alive sweep (logged once per 10 s)");
            }
            return;
        }
    };
    let sweep = SWEEP.with(|s| {
        Rc::clone(s.borrow_mut().get_or_insert_with(|| {
            let sweep = Rc::new(Sweep::new(keep_alive, Arc::clone(metrics)));
            actix_web::rt::spawn(Rc::clone(&sweep).run());
            sweep
        }))
    });
    let conn = Rc::new(Conn {
        socket,
        in_flight: Cell::new(0),
        last: Cell::new(sweep.tick.get()),
        tick: Rc::clone(&sweep.tick),
    });
    let key = sweep.conns.borrow_mut().insert(Rc::clone(&conn));
    data.insert(Registered { conn, key, sweep });
}

/// The kernel's view of a socket the sweep needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    /// Milliseconds since the last byte received.
    pub since_recv_ms: u32,
    /// Milliseconds since the last byte sent.
    pub since_sent_ms: u32,
    /// Bytes written but not yet acknowledged by the peer.
    pub queued: u32,
}

impl Sweep {
    fn new(keep_alive: Duration, metrics: Arc<Metrics>) -> Self {
        let secs = keep_alive.as_secs().clamp(1, u64::from(u32::MAX / 1000)) as u32;
        Self {
            conns: RefCell::new(Slab::new()),
            tick: Rc::new(Cell::new(0)),
            idle_ticks: secs,
            metrics,
        }
    }

    /// Every [`SWEEP_EVERY`] while the worker lives (the task ends with the worker's runtime).
    async fn run(self: Rc<Self>) {
        let mut every = tokio::time::interval(SWEEP_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            self.sweep();
        }
    }

    /// One round: advances the tick and shuts down the idle connections.
    fn sweep(&self) {
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        let conns = self.conns.borrow();
        for (_, conn) in conns.iter() {
            let quiet = tick.wrapping_sub(conn.last.get());
            if conn.in_flight.get() > 0 || quiet < self.idle_ticks {
                continue;
            }
            let Some(socket) = socket_state(&conn.socket) else {
                continue;
            };
            if is_idle(socket, self.idle_ticks * 1000) {
                // Ends actix's dispatcher (its next read sees the end); the entry goes when
                // actix drops the connection.
                // SAFETY: `shutdown` on a descriptor this `OwnedFd` owns; no memory involved.
                unsafe { libc::shutdown(conn.socket.as_raw_fd(), libc::SHUT_RDWR) };
                self.metrics.count_idle("closed");
            }
        }
    }
}

/// Whether a connection with no request in flight is idle: nothing received, nothing sent for
/// `idle_ms`, and nothing waiting for the peer's acknowledgement.
pub fn is_idle(s: Socket, idle_ms: u32) -> bool {
    s.since_recv_ms >= idle_ms && s.since_sent_ms >= idle_ms && s.queued == 0
}

/// `TCP_INFO` and `SIOCOUTQ` of `socket`; `None` if the kernel refuses either.
fn socket_state(socket: &OwnedFd) -> Option<Socket> {
    let fd = socket.as_raw_fd();
    // SAFETY: `tcp_info` is plain old data; `getsockopt` writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid pointer and length for the call's output.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let mut queued: libc::c_int = 0;
    // SAFETY: `SIOCOUTQ` writes one `int`.
    if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } != 0 {
        return None;
    }
    Some(Socket {
        since_recv_ms: info.tcpi_last_data_recv,
        since_sent_ms: info.tcpi_last_data_sent,
        queued: u32::try_from(queued).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_silent_both_ways_with_nothing_queued_is_idle() {
        let quiet = Socket {
            since_recv_ms: 5_000,
            since_sent_ms: 5_000,
            queued: 0,
        };
        assert!(is_idle(quiet, 5_000));
        assert!(!is_idle(
            Socket {
                since_recv_ms: 4_999,
                ..quiet
            },
            5_000
        ));
        assert!(!is_idle(
            Socket {
                since_sent_ms: 10,
                ..quiet
            },
            5_000
        ));
        assert!(!is_idle(Socket { queued: 1, ..quiet }, 5_000));
    }

    #[test]
    fn the_kernel_reports_a_fresh_connection_as_busy_and_an_old_one_as_quiet() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        (&server).read_exact(&mut buf).unwrap();
        let owned = server.as_fd().try_clone_to_owned().unwrap();
        let s = socket_state(&owned).expect("a TCP socket");
        assert!(s.since_recv_ms < 1_000, "{s:?}");
        assert!(!is_idle(s, 1_000));
        std::thread::sleep(Duration::from_millis(1_200));
        let s = socket_state(&owned).expect("a TCP socket");
        assert!(s.since_recv_ms >= 1_000, "{s:?}");
        assert_eq!(s.queued, 0);
        assert!(is_idle(s, 1_000), "{s:?}");
    }
}
