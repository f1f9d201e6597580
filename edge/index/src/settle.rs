//! When the index publishes after a change — an adaptive debounce: a change that finds the
//! index idle (nothing published for [`QUIET`]) goes out at once; changes that follow a
//! publication closely (the rest of a first list, an apply of many objects, a rollout's
//! endpoint churn) are collected until they pause for [`QUIET`] or [`SETTLE`] has passed
//! since the first of them. So a single change waits for nothing, and a burst of thousands
//! still makes one snapshot per window after its first.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long nothing must follow a change for it to be published, when it came soon after
/// the last publication; and how long after a publication the index counts as idle again.
pub const QUIET: Duration = Duration::from_millis(2);

/// The longest a change waits for those following it.
pub const SETTLE: Duration = Duration::from_millis(10);

/// The publisher's pace: when it last published.
#[derive(Debug, Default)]
pub struct Pace {
    last: Option<Instant>,
}

impl Pace {
    /// Waits for the next change `changed` is notified of, then — unless the index was idle
    /// — until it has settled (quiet for [`QUIET`], or [`SETTLE`] after it); `false` once
    /// `stop` is cancelled. A change notified while the caller publishes is kept by
    /// `changed` and starts the next wait at once.
    pub async fn settled(&mut self, changed: &Notify, stop: &CancellationToken) -> bool {
        tokio::select! {
            () = stop.cancelled() => return false,
            () = changed.notified() => {}
        }
        let idle = self.last.is_none_or(|last| last.elapsed() >= QUIET);
        if !idle && !collect(changed, stop).await {
            return false;
        }
        self.last = Some(Instant::now());
        true
    }
}

/// Waits until the changes following one have paused for [`QUIET`], at most [`SETTLE`];
/// `false` once `stop` is cancelled.
async fn collect(changed: &Notify, stop: &CancellationToken) -> bool {
    let deadline = Instant::now() + SETTLE;
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return false,
            () = tokio::time::sleep_until(deadline) => return true,
            () = changed.notified() => {}
            () = tokio::time::sleep(QUIET) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Notifies `changed` `n` times, `every` apart, from now.
    fn changes(changed: &Arc<Notify>, n: usize, every: Duration) {
        let changed = changed.clone();
        tokio::spawn(async move {
            for _ in 0..n {
                changed.notify_one();
                tokio::time::sleep(every).await;
            }
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_alone_is_published_at_once() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let mut pace = Pace::default();
        changes(&changed, 1, Duration::ZERO);
        let started = Instant::now();
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
        // Another alone, once the index is idle again: at once too.
        tokio::time::sleep(QUIET).await;
        changes(&changed, 1, Duration::ZERO);
        let again = Instant::now();
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(again.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_burst_is_published_at_its_first_change_and_once_when_it_pauses() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let mut pace = Pace::default();
        changes(&changed, 3, Duration::from_millis(1));
        let started = Instant::now();
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert!(pace.settled(&changed, &stop).await);
        // The last change at 2 ms, quiet 2 ms after it.
        assert_eq!(started.elapsed(), Duration::from_millis(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_burst_is_published_once_per_window_after_its_first_change() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let mut pace = Pace::default();
        changes(&changed, 50, Duration::from_millis(1));
        let started = Instant::now();
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), Duration::ZERO);
        // The second change (at 1 ms) opens a window; the burst goes on through it.
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), Duration::from_millis(1) + SETTLE);
        assert!(pace.settled(&changed, &stop).await);
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(1) + SETTLE + SETTLE
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_ends_the_wait() {
        let changed = Notify::new();
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!Pace::default().settled(&changed, &stop).await);
    }
}
