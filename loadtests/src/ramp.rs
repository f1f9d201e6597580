//! A ramping scenario's steps, read from its k6 summary without I/O: each step is a rate
//! (its requests tagged `stage:<rate>`) with its requests, p99 and failures and whether its
//! thresholds held; the knee is the highest rate whose step, and every step before it, held.
//! A step that breaks is what a ramp looks for, so its thresholds failing does not fail the
//! run; only a ramp without a knee (its first step broke) or another threshold does.

use serde_json::Value;

use crate::k6::Threshold;

/// The tag naming a step's rate.
const TAG: &str = "stage";

/// One step of a ramp.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// Its iterations per second.
    pub rate: u32,
    /// Its requests.
    pub requests: u64,
    /// Its p99 in milliseconds.
    pub p99_ms: Option<f64>,
    /// The share of its requests that failed.
    pub failed: f64,
    /// Whether it had requests and every threshold on them held.
    pub held: bool,
}

/// A ramp's steps, by rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Ramp {
    /// The steps, lowest rate first.
    pub steps: Vec<Step>,
}

/// The step rate of a metric named `name{stage:<rate>}`.
pub fn step_of(metric: &str) -> Option<u32> {
    let tags = metric.split_once('{')?.1.strip_suffix('}')?;
    tags.split(',')
        .find_map(|tag| tag.strip_prefix(TAG)?.strip_prefix(':')?.parse().ok())
}

impl Ramp {
    /// The steps of `summary`, if its metrics are tagged by step.
    pub fn read(summary: &Value) -> Option<Self> {
        let metrics = summary["metrics"].as_object()?;
        let mut rates: Vec<u32> = metrics.keys().filter_map(|m| step_of(m)).collect();
        rates.sort_unstable();
        rates.dedup();
        if rates.is_empty() {
            return None;
        }
        let steps = rates
            .into_iter()
            .map(|rate| {
                let metric = |name: &str| &metrics[&format!("{name}{{{TAG}:{rate}}}")];
                let failed = &metric("http_req_failed")["values"];
                let requests =
                    failed["passes"].as_u64().unwrap_or(0) + failed["fails"].as_u64().unwrap_or(0);
                let thresholds_held = metrics
                    .iter()
                    .filter(|(name, _)| step_of(name) == Some(rate))
                    .flat_map(|(_, m)| m["thresholds"].as_object().into_iter().flatten())
                    .all(|(_, result)| result["ok"].as_bool() == Some(true));
                Step {
                    rate,
                    requests,
                    p99_ms: metric("http_req_duration")["values"]["p(99)"].as_f64(),
                    failed: failed["rate"].as_f64().unwrap_or(0.0),
                    held: requests > 0 && thresholds_held,
                }
            })
            .collect();
        Some(Self { steps })
    }

    /// The knee: the highest rate whose step and every step before it held.
    pub fn knee(&self) -> Option<&Step> {
        self.steps.iter().take_while(|s| s.held).last()
    }

    /// The first step that broke (none: every step held, up to the top rate).
    pub fn broke(&self) -> Option<&Step> {
        self.steps.iter().find(|s| !s.held)
    }

    /// The run's exit code, from k6's `code` and the summary's `thresholds`: a step breaking
    /// is where a ramp ends, not a failure, when there is a knee and nothing else failed.
    pub fn verdict(&self, code: i32, thresholds: &[Threshold]) -> i32 {
        let only_steps_failed = thresholds
            .iter()
            .filter(|t| !t.ok)
            .all(|t| step_of(&t.metric).is_some());
        match (code, self.knee()) {
            (_, None) if code == 0 => 99,
            (99, Some(_)) if only_steps_failed => 0,
            _ => code,
        }
    }

    /// The figures the summary gains (`ramp`): the steps, the knee and where it broke.
    pub fn figures(&self) -> Value {
        serde_json::json!({
            "steps": self.steps.iter().map(|s| serde_json::json!({
                "rate": s.rate,
                "requests": s.requests,
                "p99_ms": s.p99_ms,
                "failed": s.failed,
                "held": s.held,
                "reached": s.requests > 0,
            })).collect::<Vec<_>>(),
            "knee": self.knee().map(|s| s.rate),
            "broke_at": self.broke().map(|s| s.rate),
        })
    }

    /// One line saying where the knee is.
    pub fn describe(&self) -> String {
        let top = self.steps.last().map_or(0, |s| s.rate);
        match (self.knee(), self.broke()) {
            (None, _) => "the first step broke: no knee".to_owned(),
            (Some(knee), None) => format!(
                "every step held up to {} iterations/s (p99 {}): the knee is above the top rate",
                knee.rate,
                ms(knee.p99_ms)
            ),
            (Some(knee), Some(broke)) => format!(
                "the knee is {} iterations/s (p99 {}, {:.2}% failed); {} broke (p99 {}, {:.2}% failed) of a ramp to {top}",
                knee.rate,
                ms(knee.p99_ms),
                knee.failed * 100.0,
                broke.rate,
                ms(broke.p99_ms),
                broke.failed * 100.0,
            ),
        }
    }
}

fn ms(p99: Option<f64>) -> String {
    p99.map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A summary of steps `(rate, requests, failed, p99, held)`.
    fn summary(steps: &[(u32, u64, f64, f64, bool)]) -> Value {
        let mut metrics = serde_json::Map::new();
        metrics.insert("http_reqs".into(), json!({"values": {"count": 1}}));
        for &(rate, requests, failed, p99, held) in steps {
            let fails = (requests as f64 * failed).round() as u64;
            metrics.insert(
                format!("http_req_failed{{stage:{rate}}}"),
                json!({"values": {"rate": failed, "passes": fails, "fails": requests - fails},
                       "thresholds": {"rate<0.001": {"ok": failed < 0.001}}}),
            );
            metrics.insert(
                format!("http_req_duration{{stage:{rate}}}"),
                json!({"values": {"p(99)": p99}, "thresholds": {"p(99)<250": {"ok": held}}}),
            );
        }
        json!({"metrics": metrics})
    }

    fn threshold(metric: &str, ok: bool) -> Threshold {
        Threshold {
            metric: metric.into(),
            expression: "rate<0.001".into(),
            ok,
        }
    }

    #[test]
    fn the_knee_is_the_last_step_of_the_held_prefix() {
        let ramp = Ramp::read(&summary(&[
            (8, 80, 0.0, 5.0, true),
            (16, 160, 0.0, 6.0, true),
            (24, 240, 0.2, 7.0, true),
            (32, 100, 0.0, 900.0, false),
            (40, 0, 0.0, 0.0, true),
        ]))
        .unwrap();
        assert_eq!(
            ramp.steps.iter().map(|s| s.rate).collect::<Vec<_>>(),
            [8, 16, 24, 32, 40]
        );
        assert_eq!(ramp.knee().map(|s| s.rate), Some(16));
        assert_eq!(
            ramp.broke().map(|s| s.rate),
            Some(24),
            "its failures broke it"
        );
        assert!(!ramp.steps[4].held, "a step never reached did not hold");
        let figures = ramp.figures();
        assert_eq!(figures["knee"], 16);
        assert_eq!(figures["broke_at"], 24);
        assert_eq!(figures["steps"][2]["requests"], 240);
        assert!(ramp.describe().starts_with("the knee is 16 iterations/s"));
    }

    #[test]
    fn a_broken_step_passes_the_run_only_with_a_knee_and_nothing_else_failed() {
        let broke_late = Ramp::read(&summary(&[
            (8, 80, 0.0, 5.0, true),
            (16, 160, 0.5, 6.0, true),
        ]))
        .unwrap();
        let step = threshold("http_req_failed{stage:16}", false);
        assert_eq!(broke_late.verdict(99, std::slice::from_ref(&step)), 0);
        let other = threshold("checks", false);
        assert_eq!(broke_late.verdict(99, &[step.clone(), other]), 99);
        assert_eq!(
            broke_late.verdict(107, std::slice::from_ref(&step)),
            107,
            "k6's own errors stand"
        );
        let broke_first = Ramp::read(&summary(&[(8, 80, 0.5, 5.0, true)])).unwrap();
        assert_eq!(broke_first.knee(), None);
        assert_eq!(
            broke_first.verdict(99, &[threshold("http_req_failed{stage:8}", false)]),
            99
        );
        assert_eq!(broke_first.verdict(0, &[]), 99, "no knee is no pass");
        let held = Ramp::read(&summary(&[
            (8, 80, 0.0, 5.0, true),
            (16, 160, 0.0, 6.0, true),
        ]))
        .unwrap();
        assert_eq!(held.verdict(0, &[]), 0);
        assert!(
            held.describe().contains("above the top rate"),
            "{}",
            held.describe()
        );
    }

    #[test]
    fn summaries_without_steps_are_no_ramp() {
        assert_eq!(
            Ramp::read(&json!({"metrics": {"http_reqs{route:web}": {}}})),
            None
        );
        assert_eq!(step_of("checks{route:a,stage:12}"), Some(12));
        assert_eq!(step_of("checks{stage:x}"), None);
        assert_eq!(step_of("checks"), None);
    }
}
