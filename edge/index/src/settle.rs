//! When the index publishes after a change — an adaptive debounce: a change alone goes out as
//! soon as nothing has followed it for [`QUIET`]; changes arriving together (a first list, an
//! apply of many objects, a rollout's endpoint churn) are collected until they pause for
//! [`QUIET`] or [`SETTLE`] has passed since the first of them, so a single change waits a
//! couple of milliseconds rather than the whole window, and a burst of thousands still makes
//! one snapshot per window.

use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long nothing must follow a change for it to be published.
pub const QUIET: Duration = Duration::from_millis(2);

/// The longest a change waits for those following it.
pub const SETTLE: Duration = Duration::from_millis(10);

/// Waits for the next change `changed` is notified of, then until it has settled (quiet for
/// [`QUIET`], or [`SETTLE`] after it); `false` once `stop` is cancelled. A change notified
/// while the caller publishes is kept by `changed` and starts the next wait at once.
pub async fn settled(changed: &Notify, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = stop.cancelled() => return false,
        () = changed.notified() => {}
    }
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
    async fn a_change_alone_is_published_once_quiet_not_after_the_whole_window() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        changes(&changed, 1, Duration::ZERO);
        let started = Instant::now();
        assert!(settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), QUIET);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_burst_is_published_once_when_it_pauses() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        changes(&changed, 3, Duration::from_millis(1));
        let started = Instant::now();
        assert!(settled(&changed, &stop).await);
        // The last change at 2 ms, quiet 2 ms after it.
        assert_eq!(started.elapsed(), Duration::from_millis(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_burst_is_published_once_per_window() {
        let changed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        changes(&changed, 50, Duration::from_millis(1));
        let started = Instant::now();
        assert!(settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), SETTLE);
        // The burst goes on: the next snapshot a window later.
        assert!(settled(&changed, &stop).await);
        assert_eq!(started.elapsed(), 2 * SETTLE);
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_ends_the_wait() {
        let changed = Notify::new();
        let stop = CancellationToken::new();
        stop.cancel();
        assert!(!settled(&changed, &stop).await);
    }
}
