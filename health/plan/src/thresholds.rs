//! Consecutive-result thresholds of one probe of one pod.

use crate::Verdict;

/// The running count of one (pod, probe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    successes: u32,
    failures: u32,
    verdict: Verdict,
}

impl Default for Counter {
    fn default() -> Self {
        Self {
            successes: 0,
            failures: 0,
            verdict: Verdict::Pending,
        }
    }
}

impl Counter {
    /// The current verdict.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Records one result; returns whether the verdict changed. A success resets the failure
    /// count and vice versa; the verdict flips when a count reaches its threshold.
    pub fn record(
        &mut self,
        success: bool,
        success_threshold: u32,
        failure_threshold: u32,
    ) -> bool {
        let before = self.verdict;
        if success {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
            if self.successes >= success_threshold.max(1) {
                self.verdict = Verdict::Passing;
            }
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
            if self.failures >= failure_threshold.max(1) {
                self.verdict = Verdict::Failing;
            }
        }
        self.verdict != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_count_consecutive_results() {
        let mut c = Counter::default();
        assert!(!c.record(true, 2, 3) && c.verdict() == Verdict::Pending);
        assert!(c.record(true, 2, 3) && c.verdict() == Verdict::Passing);
        assert!(!c.record(false, 2, 3));
        assert!(!c.record(false, 2, 3));
        assert!(!c.record(true, 2, 3), "a success resets the failures");
        assert!(!c.record(false, 2, 3) && !c.record(false, 2, 3));
        assert!(c.record(false, 2, 3) && c.verdict() == Verdict::Failing);
        assert!(!c.record(true, 2, 3));
        assert!(
            c.record(true, 2, 3) && c.verdict() == Verdict::Passing,
            "recovery after successThreshold"
        );
    }

    #[test]
    fn a_new_target_that_fails_goes_straight_to_failing() {
        let mut c = Counter::default();
        assert!(c.record(false, 1, 1));
        assert_eq!(c.verdict(), Verdict::Failing);
    }
}
