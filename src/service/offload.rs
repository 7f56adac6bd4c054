//! CPU-bound work kept off the request threads: a permuted tag's batch (FF1 costs about
//! 5.5 µs a code in a release build, so 10,000 codes hold a thread for some 55 ms).
//!
//! One small pool of threads of its own, started on first use, each at a lower scheduling
//! priority (`nice` 10): while it computes, the HTTP workers keep their share of the CPU, so a
//! plain id asked meanwhile is not queued behind the batch. Jobs are admitted by a semaphore of
//! [`QUEUE`] permits, taken before a job is sent, so at most that many jobs (and their batches)
//! wait in the pool's channel; a request that gets no permit within [`ADMIT_WITHIN`] is answered
//! `not_ready` (503, Retry-After: 1), never queued without bound.

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::{Semaphore, oneshot};
use tracing::warn;

use crate::error::Error;

/// Jobs admitted at once (running or waiting in the pool's channel).
pub const QUEUE: usize = 8;
/// How long a job may wait to be admitted before its request is answered 503.
pub const ADMIT_WITHIN: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pool: a channel into its threads and the admission semaphore.
struct Pool {
    jobs: std::sync::Mutex<mpsc::Sender<Job>>,
    admit: Semaphore,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        // Half the cores, at least one: the other half stays with the request threads.
        let threads = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("leafid-offload-{i}"))
                .spawn(move || {
                    lower_priority();
                    loop {
                        // The lock is held only to take one job, never while it runs.
                        let Ok(job) = rx.lock().unwrap_or_else(|e| e.into_inner()).recv() else {
                            return;
                        };
                        // A panicking job loses only its own answer (its caller gets
                        // `internal`); the thread goes on with the next.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            if let Err(e) = spawned {
                warn!(error = %e, "offload thread not started");
            }
        }
        Pool {
            jobs: std::sync::Mutex::new(tx),
            admit: Semaphore::new(QUEUE),
        }
    })
}

/// Lowers the calling thread's priority (Linux: `setpriority` on the thread itself). Best
/// effort: a refusal leaves it at the normal priority, which is only slower for the others.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `setpriority` reads no memory of ours; who = 0 is the calling thread on Linux.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Runs `work` on the pool and returns its result: `not_ready` (503, Retry-After)
/// when the pool is full for [`ADMIT_WITHIN`], `internal` if the job died (a panic in it).
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    let pool = pool();
    let _permit = tokio::time::timeout(ADMIT_WITHIN, pool.admit.acquire())
        .await
        .map_err(|_| {
            Error::NotReady(format!(
                "{QUEUE} permuted batches are being computed and more wait: none admitted \
                 within {ADMIT_WITHIN:?}, retry"
            ))
        })?
        .map_err(|_| Error::Internal)?;
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(work());
    });
    pool.jobs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(job)
        .map_err(|_| Error::Internal)?;
    rx.await.map_err(|_| Error::Internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_from_many_tasks_all_run_once_and_answer_their_caller() {
        let ran = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..64u64 {
            let ran = ran.clone();
            tasks.push(tokio::spawn(async move {
                run(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                    i * 2
                })
                .await
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap().unwrap(), i as u64 * 2);
        }
        assert_eq!(ran.load(Ordering::Relaxed), 64);
        // A job that panics answers `internal`, and the pool goes on.
        let e = run(|| -> u8 { panic!("boom") }).await;
        assert!(matches!(e, Err(Error::Internal)), "{e:?}");
        assert_eq!(run(|| 7).await.unwrap(), 7);
    }
}
