//! Graceful shutdown shared by every component.
//!
//! A SIGTERM or SIGINT (or [`Shutdown::trigger`]) cancels one token that every component
//! watches; components stop taking new work, finish what is in flight, and return. The process
//! then waits for the tasks spawned through [`Shutdown::spawn`] for at most the drain deadline,
//! so a stuck component delays exit by a bounded time and never forever.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Kubernetes' default `terminationGracePeriodSeconds` is 30 s; draining must end before the
/// kubelet's SIGKILL, so the default leaves room for the exit itself.
pub const DEFAULT_DRAIN_DEADLINE: Duration = Duration::from_secs(25);

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Every tracked task returned within the deadline.
    Clean,
    /// The deadline passed with this many tasks still running.
    DeadlineExceeded(usize),
}

/// The process's shutdown coordinator. Cheap to clone; clones share state.
#[derive(Clone, Debug)]
pub struct Shutdown {
    token: CancellationToken,
    tracker: TaskTracker,
    deadline: Duration,
}

impl Shutdown {
    /// Creates a coordinator that waits at most `deadline` for tasks after the signal.
    pub fn new(deadline: Duration) -> Self {
        Self {
            token: CancellationToken::new(),
            tracker: TaskTracker::new(),
            deadline,
        }
    }

    /// Triggers shutdown on the first SIGTERM or SIGINT. Must be called inside a Tokio runtime.
    pub fn listen_for_signals(&self) -> std::io::Result<()> {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let token = self.token.clone();
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
                () = token.cancelled() => return,
            };
            tracing::info!(signal = name, "shutdown requested; draining");
            token.cancel();
        });
        Ok(())
    }

    /// Starts shutdown without a signal (a fatal component error, or a test).
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once shutdown has started.
    pub async fn triggered(&self) {
        self.token.cancelled().await;
    }

    /// A token that is cancelled when shutdown starts, for components that select on it.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// The drain deadline.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Spawns a task whose completion the drain waits for.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(future)
    }

    /// Waits for shutdown to start, then for every tracked task, for at most the deadline.
    pub async fn drained(&self) -> Drained {
        self.token.cancelled().await;
        self.tracker.close();
        match tokio::time::timeout(self.deadline, self.tracker.wait()).await {
            Ok(()) => Drained::Clean,
            Err(_) => {
                let left = self.tracker.len();
                tracing::warn!(
                    tasks = left,
                    deadline_seconds = self.deadline.as_secs_f64(),
                    "drain deadline passed with tasks still running; exiting anyway"
                );
                Drained::DeadlineExceeded(left)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_waits_for_tasks_that_finish_in_time() {
        let shutdown = Shutdown::new(Duration::from_secs(5));
        let token = shutdown.token();
        let finished = shutdown.spawn(async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            "done"
        });
        shutdown.trigger();
        assert_eq!(shutdown.drained().await, Drained::Clean);
        assert_eq!(finished.await.unwrap(), "done");
    }

    #[tokio::test(start_paused = true)]
    async fn drain_gives_up_at_the_deadline() {
        let shutdown = Shutdown::new(Duration::from_secs(2));
        shutdown.spawn(std::future::pending::<()>());
        shutdown.trigger();
        assert_eq!(shutdown.drained().await, Drained::DeadlineExceeded(1));
    }
}
