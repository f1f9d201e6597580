//! When each (pod, probe) runs: a fixed cadence of `periodSeconds` from its first run, the
//! first at `initialDelaySeconds` after the pod's creation plus a fixed per-target phase (the
//! jitter), so probes of many pods spread over the period without stretching any interval.
//! One timer heap for every target: tens of thousands of targets cost a heap entry each, not a
//! task or a thread each.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// Milliseconds on a monotonic clock of the caller's choosing.
pub type Millis = u64;

/// The fixed phase of a target within its period, derived from its key.
pub fn phase(key: &str, period: Duration) -> Duration {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(hash % period_ms)
}

/// The first run of a target: after the initial delay from the pod's creation, plus its phase,
/// and never before `now`.
pub fn first_due(created: Millis, initial_delay: Duration, phase: Duration, now: Millis) -> Millis {
    let delay = u64::try_from((initial_delay + phase).as_millis()).unwrap_or(u64::MAX);
    created.saturating_add(delay).max(now)
}

/// The next run after one due at `due`: one period later, skipping slots already past (a probe
/// slower than its period does not pile up runs).
pub fn next_due(due: Millis, period: Duration, now: Millis) -> Millis {
    let period = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
    let mut next = due.saturating_add(period);
    if next <= now {
        let behind = (now - next) / period + 1;
        next = next.saturating_add(behind * period);
    }
    next
}

/// A min-heap of (due time, generation, target). A target's entry is superseded by bumping its
/// generation, so removal and rescheduling are O(log n) without searching the heap.
#[derive(Debug)]
pub struct Timers<K: Ord> {
    heap: BinaryHeap<Reverse<(Millis, u64, K)>>,
}

impl<K: Ord> Default for Timers<K> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Schedules `key` (of `generation`) at `due`.
    pub fn push(&mut self, due: Millis, generation: u64, key: K) {
        self.heap.push(Reverse((due, generation, key)));
    }

    /// The earliest due time, if any.
    pub fn next_due(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse((due, _, _))| *due)
    }

    /// Pops every entry due at or before `now`.
    pub fn pop_due(&mut self, now: Millis) -> Vec<(Millis, u64, K)> {
        let mut due = Vec::new();
        while self.heap.peek().is_some_and(|Reverse((d, _, _))| *d <= now) {
            if let Some(Reverse(entry)) = self.heap.pop() {
                due.push(entry);
            }
        }
        due
    }

    /// Entries held (superseded ones included until they surface).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_spread_within_the_period_and_are_stable() {
        let period = Duration::from_secs(10);
        let phases: Vec<Duration> = (0..100)
            .map(|i| phase(&format!("pod-{i}/0"), period))
            .collect();
        assert!(phases.iter().all(|p| *p < period));
        assert_eq!(phase("pod-1/0", period), phases[1]);
        let distinct: std::collections::BTreeSet<_> = phases.iter().map(|p| p.as_secs()).collect();
        assert!(distinct.len() >= 8, "spread over the period: {distinct:?}");
    }

    #[test]
    fn cadence_is_fixed_and_skips_missed_slots() {
        let period = Duration::from_secs(10);
        assert_eq!(
            first_due(1_000, Duration::from_secs(5), Duration::from_millis(300), 0),
            6_300
        );
        assert_eq!(
            first_due(1_000, Duration::from_secs(5), Duration::ZERO, 9_000),
            9_000,
            "never in the past"
        );
        assert_eq!(
            next_due(6_300, period, 6_400),
            16_300,
            "a fixed cadence, not completion + period"
        );
        assert_eq!(
            next_due(6_300, period, 31_000),
            36_300,
            "missed slots are skipped"
        );
    }

    #[test]
    fn timers_pop_in_order() {
        let mut timers = Timers::default();
        timers.push(30, 0, "c");
        timers.push(10, 0, "a");
        timers.push(20, 1, "b");
        assert_eq!(timers.next_due(), Some(10));
        let due: Vec<&str> = timers.pop_due(20).into_iter().map(|(_, _, k)| k).collect();
        assert_eq!(due, vec!["a", "b"]);
        assert_eq!(timers.len(), 1);
    }
}
