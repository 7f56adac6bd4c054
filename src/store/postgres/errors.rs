//! What PostgreSQL's errors mean: a serialization failure (40001) or a deadlock (40P01) rolled
//! the statement (its transaction) back, so it may run again; [`retrying`] does, with a backoff
//! and a jitter so that servers which failed together do not retry together.

use std::future::Future;
use std::time::Duration;

use tracing::debug;

/// Attempts after a serialization failure or deadlock. Under `serializable`, every server
/// leasing one hot tag conflicts with every other: the attempts back off (10 ms doubling up to
/// [`MAX_BACKOFF`], with jitter so they do not meet again) for about 3 s in all, inside the
/// engine's `segment.load_timeout_ms`, which bounds a lease anyway.
const RETRIES: u32 = 24;
/// Longest wait between two attempts (before jitter).
const MAX_BACKOFF: Duration = Duration::from_millis(100);
/// Serialization failures and deadlocks: the statement (its transaction) rolled back and may
/// be run again.
pub(crate) fn is_retryable(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .is_some_and(|d| matches!(d.code().as_deref(), Some("40001" | "40P01")))
}

/// Runs `attempt` again after a retryable error, backing off 10 ms, 20 ms, ... up to
/// [`MAX_BACKOFF`], each wait plus up to as much again at random.
pub(crate) async fn retrying<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Err(e) if is_retryable(&e) && tries < RETRIES => {
                tries += 1;
                let base = Duration::from_millis(5u64 << tries.min(5)).min(MAX_BACKOFF);
                debug!(what, tries, error = %e, "serialization failure, retrying");
                tokio::time::sleep(base + jitter(base)).await;
            }
            done => return done,
        }
    }
}

/// A wait in `0..=max` drawn from the clock's nanoseconds: servers and tasks that failed
/// together must not retry together; nothing here needs better randomness.
fn jitter(max: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX).max(1);
    Duration::from_micros(u64::from(nanos.wrapping_mul(2_654_435_761)) % (max_us + 1))
}
