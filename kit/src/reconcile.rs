//! The pace of a component that reconciles its whole world in rounds (the translation loop,
//! the health agent and controller): a round after a change (once the changes arriving
//! together have settled), a round every resync period even without one (a missed event
//! cannot last), and after a failed round another one after a backoff that doubles per failed
//! round up to the resync period. Written once; each component names its constants in a
//! [`Pacing`] and keeps the other sources it selects on (timers, probe results, NACKs)
//! beside [`Rounds::next`]. Changes arrive as a [`Notify`] its watches wake, or as a watch
//! channel of published snapshots (the edge index's), through [`Changes`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where a component learns that its world changed.
pub trait Changes: Send {
    /// Completes at the next change (never, once no change can come).
    fn changed(&mut self) -> impl Future<Output = ()> + Send;
}

impl Changes for Arc<Notify> {
    async fn changed(&mut self) {
        self.notified().await;
    }
}

impl<T: Send + Sync> Changes for watch::Receiver<T> {
    async fn changed(&mut self) {
        if watch::Receiver::changed(self).await.is_err() {
            // The publisher is gone: no change comes any more.
            std::future::pending::<()>().await;
        }
    }
}

/// A component's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// How long changes arriving together are collected before one round.
    pub debounce: Duration,
    /// A round this often even without changes.
    pub resync: Duration,
    /// The first retry after a failed round.
    pub retry: Duration,
    /// The retry doubles at most this many times (and never beyond `resync`).
    pub max_doublings: u32,
}

impl Pacing {
    /// The wait before the retry after `failures` failed rounds in a row (one or more).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(self.max_doublings);
        self.retry.saturating_mul(1 << doublings).min(self.resync)
    }
}

/// Why a round runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Something changed (or a retry is due); call [`Rounds::settle`] before the round.
    Changed,
    /// The resync period passed.
    Resync,
}

/// How a round went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It did its work.
    Done,
    /// Some of its work failed: another round comes after a backoff.
    Failed,
    /// It had nothing to do: the backoff neither grows nor resets.
    Idle,
}

/// The rounds of one component.
#[derive(Debug)]
pub struct Rounds<C = Arc<Notify>> {
    pacing: Pacing,
    changes: C,
    resync: tokio::time::Interval,
    failures: u32,
    /// When the retry after a failed round is due.
    retry: Option<Instant>,
}

impl<C: Changes> Rounds<C> {
    /// Rounds woken by `changes` (which the component's watches notify, or its publisher
    /// sends on).
    pub fn new(pacing: Pacing, changes: C) -> Self {
        Self {
            pacing,
            changes,
            resync: tokio::time::interval(pacing.resync),
            failures: 0,
            retry: None,
        }
    }

    /// Waits for the next reason to run a round; `None` once `stop` is cancelled. Safe to
    /// drop while waiting (in a `select!`): no change is lost.
    pub async fn next(&mut self, stop: &CancellationToken) -> Option<Wake> {
        let retry = self.retry;
        let due = async move {
            match retry {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let wake = tokio::select! {
            () = stop.cancelled() => return None,
            () = self.changes.changed() => Wake::Changed,
            () = due => Wake::Changed,
            _ = self.resync.tick() => Wake::Resync,
        };
        self.retry = None;
        Some(wake)
    }

    /// Lets the changes arriving together settle (the debounce), after [`Wake::Changed`].
    pub async fn settle(&self) {
        tokio::time::sleep(self.pacing.debounce).await;
    }

    /// Records a round's outcome; after a failed one, schedules the retry.
    pub fn finished(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Done => self.failures = 0,
            Outcome::Idle => {}
            Outcome::Failed => {
                self.failures = self.failures.saturating_add(1);
                self.retry = Some(Instant::now() + self.pacing.backoff(self.failures));
            }
        }
    }

    /// Failed rounds in a row.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACING: Pacing = Pacing {
        debounce: Duration::from_millis(20),
        resync: Duration::from_secs(60),
        retry: Duration::from_millis(500),
        max_doublings: 6,
    };

    #[test]
    fn the_backoff_doubles_per_failed_round_up_to_the_resync() {
        let waits: Vec<u128> = (1..=9).map(|n| PACING.backoff(n).as_millis()).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 32000, 32000, 32000]
        );
        let short = Pacing {
            resync: Duration::from_secs(3),
            ..PACING
        };
        assert_eq!(short.backoff(5), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_come_on_changes_on_resync_and_after_failures() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let mut rounds = Rounds::new(PACING, changed.clone());
        // The first resync tick is immediate.
        assert_eq!(rounds.next(&stop).await, Some(Wake::Resync));
        changed.notify_one();
        assert_eq!(rounds.next(&stop).await, Some(Wake::Changed));

        // A failed round brings a retry after the backoff, then a longer one.
        let started = tokio::time::Instant::now();
        rounds.finished(Outcome::Failed);
        assert_eq!(rounds.next(&stop).await, Some(Wake::Changed));
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        rounds.finished(Outcome::Failed);
        assert_eq!(rounds.next(&stop).await, Some(Wake::Changed));
        assert_eq!(started.elapsed(), Duration::from_millis(1500));
        rounds.finished(Outcome::Idle);
        assert_eq!(rounds.failures(), 2);
        rounds.finished(Outcome::Done);
        assert_eq!(rounds.failures(), 0);

        // Nothing else: the next round is the resync.
        assert_eq!(rounds.next(&stop).await, Some(Wake::Resync));
        stop.cancel();
        assert_eq!(rounds.next(&stop).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_come_on_published_snapshots_and_outlive_their_publisher() {
        let (publisher, snapshots) = watch::channel(0);
        let stop = CancellationToken::new();
        let mut rounds = Rounds::new(PACING, snapshots);
        assert_eq!(rounds.next(&stop).await, Some(Wake::Resync));
        publisher.send_replace(1);
        assert_eq!(rounds.next(&stop).await, Some(Wake::Changed));
        // Gone: no change comes any more, the resyncs still do.
        drop(publisher);
        let started = tokio::time::Instant::now();
        assert_eq!(rounds.next(&stop).await, Some(Wake::Resync));
        assert_eq!(started.elapsed(), PACING.resync);
    }
}
