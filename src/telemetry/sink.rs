//! The log sink: formatted lines go to a bounded queue and one thread writes them to stderr.
//!
//! A log line must never cost an id. Writing stderr straight from the request threads does:
//! a full disk (`ENOSPC`), a closed descriptor or `/dev/full` made tracing-subscriber report the
//! failure with `eprintln!`, which panics, and a pipe whose reader stopped reading blocks the
//! writing worker thread, and every request queued behind it, indefinitely. So the subscriber's
//! writer only copies the line into a bounded queue with `try_send` (never blocks, never fails),
//! and the `leafid-log` thread writes the queue out, ignoring write errors. A line that finds
//! the queue full, or that the sink refuses, is dropped and counted in
//! [`dropped_lines`] (`leafid_log_lines_dropped_total`). Nothing in this file can panic on a
//! write error.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::MakeWriter;

/// Lines the queue holds before new ones are dropped: a burst of a few thousand lines (an
/// outage's first second, before the repeat limiter holds the rest back) is written late, not
/// lost; a sink that stays blocked costs at most this many lines of memory.
const QUEUE_LINES: usize = 8192;

/// Event counts shared by the writer handles and the thread. They publish no other memory, so
/// `Relaxed` is enough except where [`Queue::flush`] must see the thread's progress (see there).
#[derive(Debug, Default)]
struct Counters {
    /// Lines accepted into the queue.
    queued: AtomicU64,
    /// Lines the thread finished with (written or refused by the sink).
    done: AtomicU64,
    /// Lines lost: queue full, thread gone, or the sink's write failed.
    dropped: AtomicU64,
}

/// A bounded line queue and the thread that drains it into a sink.
#[derive(Debug, Clone)]
struct Queue {
    tx: SyncSender<Vec<u8>>,
    counters: Arc<Counters>,
}

impl Queue {
    /// Starts the `leafid-log` thread writing to `sink`. If the thread cannot be started, its
    /// receiver is gone and every line counts as dropped: the server still serves.
    fn start(sink: impl Write + Send + 'static, capacity: usize) -> Self {
        let (tx, rx) = sync_channel(capacity);
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let spawned = std::thread::Builder::new()
            .name("leafid-log".into())
            .spawn(move || write_out(&rx, sink, &thread_counters));
        if spawned.is_err() {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Self { tx, counters }
    }

    /// Queues one line; never blocks, never fails.
    fn push(&self, line: &[u8]) {
        let counter = match self.tx.try_send(line.to_vec()) {
            Ok(()) => &self.counters.queued,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => &self.counters.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// See [`flush`].
    fn flush(&self, timeout: Duration) -> bool {
        let target = self.counters.queued.load(Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        // Acquire pairs with the thread's Release on `done`: once it counts a line, that
        // line's write has returned.
        while self.counters.done.load(Ordering::Acquire) < target {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

/// The thread: writes each line whole, and counts a line the sink refused as dropped. A write
/// that blocks (a full pipe) only stalls this thread; the queue then fills and later lines are
/// dropped at the sender.
fn write_out(rx: &Receiver<Vec<u8>>, mut sink: impl Write, counters: &Counters) {
    while let Ok(line) = rx.recv() {
        if sink.write_all(&line).and_then(|()| sink.flush()).is_err() {
            counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
        counters.done.fetch_add(1, Ordering::Release);
    }
}

/// The process's queue, started by the first [`writer`] call.
static QUEUE: OnceLock<Queue> = OnceLock::new();

/// The subscriber's writer: hands each line to the process's queue, whose thread writes to
/// `sink`. The first call starts the queue; later calls share it (their `sink` is unused).
pub fn writer(sink: impl Write + Send + 'static) -> QueueWriter {
    QUEUE.get_or_init(|| Queue::start(sink, QUEUE_LINES));
    QueueWriter
}

/// Log lines dropped since the process started (`leafid_log_lines_dropped_total`): a full queue
/// (the sink is slower than the logging, or blocked) or a failed write (a full disk, a closed
/// descriptor). Any increase means log lines are missing.
pub fn dropped_lines() -> u64 {
    QUEUE
        .get()
        .map_or(0, |q| q.counters.dropped.load(Ordering::Relaxed))
}

/// Waits until every line queued so far has been written (or refused), up to `timeout`: called
/// before the process exits so its last lines are not lost, and bounded so that a blocked sink
/// can never hold the exit up. Returns whether the queue drained in time.
pub fn flush(timeout: Duration) -> bool {
    QUEUE.get().is_none_or(|q| q.flush(timeout))
}

/// The [`MakeWriter`] for the subscriber; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueWriter;

impl<'a> MakeWriter<'a> for QueueWriter {
    type Writer = QueueWriter;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl Write for QueueWriter {
    /// Queues `buf` as one line (the formatter writes each event with one `write_all`). Never
    /// fails and never blocks: a line that does not fit is counted as dropped.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(q) = QUEUE.get() {
            q.push(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink whose every write fails, as `/dev/full` does.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A sink that blocks until told to go on, as a pipe nobody reads does.
    struct Stuck(std::sync::mpsc::Receiver<()>);

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let _ = self.0.recv();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_sink_that_refuses_every_write_drops_and_counts_lines() {
        let q = Queue::start(Full, 16);
        for _ in 0..10 {
            q.push(b"line\n");
        }
        assert!(
            q.flush(Duration::from_secs(5)),
            "the thread finishes the queued lines"
        );
        assert_eq!(q.counters.dropped.load(Ordering::Relaxed), 10);
    }

    #[test]
    fn a_blocked_sink_never_blocks_the_caller_and_the_overflow_is_counted() {
        let (go, wait) = std::sync::mpsc::channel();
        let q = Queue::start(Stuck(wait), 4);
        let started = Instant::now();
        for _ in 0..100 {
            q.push(b"line\n");
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "pushes never wait for the sink"
        );
        assert!(
            !q.flush(Duration::from_millis(50)),
            "flush gives up on a blocked sink"
        );
        // The thread holds one line in its blocked write, the queue four; the rest are dropped.
        let dropped = q.counters.dropped.load(Ordering::Relaxed);
        assert!((95..=96).contains(&dropped), "dropped {dropped}");
        for _ in 0..100 {
            let _ = go.send(());
        }
        assert!(
            q.flush(Duration::from_secs(5)),
            "the queue drains once the sink moves"
        );
        assert_eq!(q.counters.dropped.load(Ordering::Relaxed), dropped);
    }
}
