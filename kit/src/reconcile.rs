//! The pace of a component that reconciles its whole world in rounds (the translation loop,
//! the health agent and controller): a round after a change (once the changes arriving
//! together have settled), a round every resync period even without one (a missed event
//! cannot last), and after a failed round another one after a backoff that doubles per failed
//! round up to the resync period. Written once; each component names its constants in a
//! [`Pacing`] and keeps the other sources it selects on (timers, probe results, NACKs)
//! beside [`Rounds::next`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

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
pub struct Rounds {
    pacing: Pacing,
    changed: Arc<Notify>,
    resync: tokio::time::Interval,
    failures: u32,
}

impl Rounds {
    /// Rounds woken by `changed` (which the component's watches notify).
    pub fn new(pacing: Pacing, changed: Arc<Notify>) -> Self {
        Self {
            pacing,
            changed,
            resync: tokio::time::interval(pacing.resync),
            failures: 0,
        }
    }

    /// Waits for the next reason to run a round; `None` once `stop` is cancelled. Safe to
    /// drop while waiting (in a `select!`): no change is lost.
    pub async fn next(&mut self, stop: &CancellationToken) -> Option<Wake> {
        tokio::select! {
            () = stop.cancelled() => None,
            () = self.changed.notified() => Some(Wake::Changed),
            _ = self.resync.tick() => Some(Wake::Resync),
        }
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
                let wait = self.pacing.backoff(self.failures);
                let changed = self.changed.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    changed.notify_one();
                });
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
}
