//! `Background`: the server's long-running tasks (tag refresh, lease heartbeat) with one owner.
//!
//! Each task gets the shared [`CancellationToken`] and must return soon after it is cancelled;
//! [`Background::shutdown`] cancels them and waits for every one, so nothing a task does (a
//! lease renewal, say) can happen after the shutdown steps that follow it (the lease release).

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

/// The owner of the background tasks: cheap to clone, all clones share the tasks.
#[derive(Clone, Debug, Default)]
pub struct Background {
    /// Cancelled once, by [`Self::shutdown`].
    token: CancellationToken,
    /// Every task spawned through [`Self::spawn`].
    tracker: TaskTracker,
}

impl Background {
    /// A new owner with no tasks.
    pub fn new() -> Self {
        Self::default()
    }

    /// The token tasks watch to stop.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Spawns `task` on the current tokio runtime, tracked until it returns.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Spawns `task` on `runtime`, tracked until it returns.
    pub fn spawn_on<F>(
        &self,
        task: F,
        runtime: &tokio::runtime::Handle,
    ) -> tokio::task::JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn_on(task, runtime)
    }

    /// Cancels every task and waits up to `within` for all to return; `false` if some did not.
    pub async fn shutdown(&self, within: Duration) -> bool {
        self.token.cancel();
        self.tracker.close();
        let done = tokio::time::timeout(within, self.tracker.wait())
            .await
            .is_ok();
        if !done {
            warn!(
                left = self.tracker.len(),
                "background tasks still running after shutdown"
            );
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_cancels_and_awaits_every_task() {
        let bg = Background::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let token = bg.token();
            let tx = tx.clone();
            bg.spawn(async move {
                token.cancelled().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tx.send(i);
            });
        }
        drop(tx);
        assert!(bg.shutdown(Duration::from_secs(5)).await);
        let mut seen = vec![];
        while let Ok(i) = rx.try_recv() {
            seen.push(i);
        }
        seen.sort_unstable();
        assert_eq!(
            seen,
            [0, 1, 2],
            "every task finished before shutdown returned"
        );
    }

    #[tokio::test]
    async fn a_task_that_ignores_the_token_is_reported() {
        let bg = Background::new();
        bg.spawn(tokio::time::sleep(Duration::from_secs(30)));
        assert!(!bg.shutdown(Duration::from_millis(50)).await);
    }
}
