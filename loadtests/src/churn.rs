//! Route churn: the labelled route of a scenario's world changed once a second while k6
//! loads it, each change timed from its request to the API server until traffic sees it;
//! and beside it, the pods behind a ServiceWithHealthchecks going not-ready and ready again
//! one at a time, each timed until traffic leaves it and until it comes back.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::Value;

use crate::{cluster, echo, world};

/// How long a route change may take to reach traffic.
const PROPAGATION_LIMIT: Duration = Duration::from_secs(10);

/// Changes `route` once a second until `stop` (see [`world::churn_step`]), each time timing
/// from the request to the API server until traffic at `target` sees the change; those
/// times, or why a change never reached traffic.
pub async fn churn(
    client: kube::Client,
    prober: echo::Prober,
    target: url::Url,
    route: Value,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::new();
    for step in 0.. {
        let started = Instant::now();
        let (next, probe) = world::churn_step(&route, step)
            .context("the churned route has no backends in its first rule")?;
        cluster::apply(&client, &next).await?;
        // A change on its way when the load ends is still waited for: one that never
        // reaches traffic is always reported.
        loop {
            let answered = prober
                .ask(&target, &probe)
                .await
                .ok()
                .and_then(|(_, backend)| backend);
            if answered.as_ref() == probe.backends.first() {
                times.push(started.elapsed());
                break;
            }
            anyhow::ensure!(
                started.elapsed() < PROPAGATION_LIMIT,
                "change {step} ({} answered by {:?}) did not reach traffic within {}s",
                probe.path,
                probe.backends,
                PROPAGATION_LIMIT.as_secs()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(times),
            () = tokio::time::sleep_until((started + Duration::from_secs(1)).into()) => {}
        }
    }
    Ok(times)
}

/// How many answers in a row from the other pods tell traffic has left a not-ready one (a
/// chance of 2^-20 when two pods share requests at random; Envoy's round robin alternates).
const LEFT_AFTER: usize = 20;

/// The readiness changes of the pods behind a ServiceWithHealthchecks: how long traffic took
/// to leave each pod made not-ready, and to come back to it once it was ready again.
#[derive(Debug, Default)]
pub struct Readiness {
    /// From not-ready until the first of [`LEFT_AFTER`] answers in a row from the others.
    pub left: Vec<Duration>,
    /// From ready again until it answered.
    pub back: Vec<Duration>,
}

/// Makes the `pods` (their names and readiness) not-ready and ready again one at a time
/// (each time 1 s and a [`phase`] after traffic came back to the last, and ready again a
/// phase after traffic left it) until `stop`, asking `probe` at
/// `target` (which the pods answer) when traffic has left each pod and come back to it; the
/// times, or why traffic did not follow. A pod left not-ready at `stop` is made ready again.
pub async fn readiness_churn(
    prober: echo::Prober,
    target: url::Url,
    probe: world::Probe,
    pods: Vec<(String, echo::Readiness)>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<Readiness> {
    let mut times = Readiness::default();
    for step in 0.. {
        let Some((pod, readiness)) = pods.get(step % pods.len().max(1)) else {
            anyhow::bail!("no pods behind {}{}", probe.host, probe.path);
        };
        let started = Instant::now();
        readiness.set(false);
        let left = until_answers(&prober, &target, &probe, started, |b| b != pod, LEFT_AFTER).await;
        if left.is_ok() {
            // Not ready again right away: traffic left just after a probe failed.
            tokio::time::sleep(phase(step)).await;
        }
        let back_since = Instant::now();
        readiness.set(true);
        let left = left.with_context(|| format!("traffic did not leave {pod} once not ready"))?;
        times.left.push(left);
        let back = until_answers(&prober, &target, &probe, back_since, |b| b == pod, 1)
            .await
            .with_context(|| format!("traffic did not come back to {pod} once ready"))?;
        times.back.push(back);
        tokio::select! {
            () = stop.cancelled() => return Ok(times),
            () = tokio::time::sleep(Duration::from_secs(1) + phase(step + 1)) => {}
        }
    }
    Ok(times)
}

/// A part of a second that differs from step to step (a golden-ratio walk over it), waited
/// before each readiness change so the changes fall at every phase of the probes' period:
/// traffic leaves or comes back just after a probe, and a fixed pause would make every
/// change wait out the same part of a period.
fn phase(step: usize) -> Duration {
    Duration::from_secs_f64((step as f64 * 0.618_034).fract())
}

/// How long after `since` `probe` began to be answered `streak` times in a row by a backend
/// `wanted` says yes to (the time of the streak's first answer).
async fn until_answers(
    prober: &echo::Prober,
    target: &url::Url,
    probe: &world::Probe,
    since: Instant,
    wanted: impl Fn(&str) -> bool,
    streak: usize,
) -> anyhow::Result<Duration> {
    let mut run: Option<(Instant, usize)> = None;
    let mut last = None;
    loop {
        let asked = Instant::now();
        let answer = prober.ask(target, probe).await;
        let backend = answer.as_ref().ok().and_then(|(_, b)| b.clone());
        if backend.as_deref().is_some_and(&wanted) {
            let (first, n) = run.get_or_insert((asked, 0));
            *n += 1;
            if *n >= streak {
                return Ok(first.saturating_duration_since(since));
            }
        } else {
            run = None;
            last = Some(match &answer {
                Ok((status, backend)) => {
                    format!("{status} from {}", backend.as_deref().unwrap_or("no echo"))
                }
                Err(e) => format!("{e:#}"),
            });
        }
        anyhow::ensure!(
            since.elapsed() < PROPAGATION_LIMIT,
            "not within {}s (last other answer: {})",
            PROPAGATION_LIMIT.as_secs(),
            last.as_deref().unwrap_or("none")
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What a churn did: the route changes, and the readiness changes when the world has pods
/// behind a ServiceWithHealthchecks.
#[derive(Debug)]
pub struct Churned {
    /// The route changes' propagation times (see [`churn`]).
    pub routes: anyhow::Result<Vec<Duration>>,
    /// The readiness changes (see [`readiness_churn`]).
    pub readiness: Option<anyhow::Result<Readiness>>,
}

impl Churned {
    /// Its figures: the route changes and their propagation's p50, p99 and max in
    /// milliseconds, and under `readiness` those of traffic leaving a not-ready pod and
    /// coming back (or why each failed).
    pub fn figures(&self) -> Value {
        let mut figures = match &self.routes {
            Err(e) => serde_json::json!({"error": format!("{e:#}")}),
            Ok(times) => with_quantiles(
                serde_json::json!({"changes": times.len()}),
                "propagation",
                times,
            ),
        };
        if let Some(readiness) = &self.readiness {
            figures["readiness"] = match readiness {
                Err(e) => serde_json::json!({"error": format!("{e:#}")}),
                Ok(r) => with_quantiles(
                    with_quantiles(
                        serde_json::json!({"changes": r.left.len()}),
                        "left",
                        &r.left,
                    ),
                    "back",
                    &r.back,
                ),
            };
        }
        figures
    }

    /// Why traffic did not follow a change, if it did not.
    pub fn failure(&self) -> Option<String> {
        let routes = self
            .routes
            .as_ref()
            .err()
            .map(|e| format!("route changes: {e:#}"));
        let readiness = match &self.readiness {
            Some(Err(e)) => Some(format!("readiness changes: {e:#}")),
            _ => None,
        };
        match (routes, readiness) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }
}

/// `figures` with `<name>_p50_ms`, `_p99_ms` and `_max_ms` of `times`.
fn with_quantiles(mut figures: Value, name: &str, times: &[Duration]) -> Value {
    let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len().max(1)) - 1;
        ms.get(i).copied()
    };
    figures[format!("{name}_p50_ms")] = at(0.5).into();
    figures[format!("{name}_p99_ms")] = at(0.99).into();
    figures[format!("{name}_max_ms")] = ms.last().copied().into();
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_walk_over_a_second() {
        let mut phases: Vec<u128> = (0..10).map(|step| phase(step).as_millis() / 100).collect();
        assert!(phase(3) < Duration::from_secs(1));
        phases.sort_unstable();
        phases.dedup();
        assert!(
            phases.len() >= 8,
            "ten pauses in at least eight tenths: {phases:?}"
        );
    }

    #[test]
    fn figures_are_the_changes_and_their_quantiles_or_the_failure() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let churned = Churned {
            routes: Ok(times),
            readiness: None,
        };
        let figures = churned.figures();
        assert_eq!(figures["changes"], 100);
        assert_eq!(figures["propagation_p50_ms"], 50.0);
        assert_eq!(figures["propagation_p99_ms"], 99.0);
        assert_eq!(figures["propagation_max_ms"], 100.0);
        assert!(figures["readiness"].is_null());
        assert_eq!(churned.failure(), None);
        let none = Churned {
            routes: Ok(Vec::new()),
            readiness: Some(Ok(Readiness {
                left: vec![Duration::from_millis(900), Duration::from_millis(1500)],
                back: vec![Duration::from_millis(700)],
            })),
        };
        let figures = none.figures();
        assert_eq!(figures["changes"], 0);
        assert!(figures["propagation_p99_ms"].is_null());
        assert_eq!(figures["readiness"]["changes"], 2);
        assert_eq!(figures["readiness"]["left_p50_ms"], 900.0);
        assert_eq!(figures["readiness"]["left_max_ms"], 1500.0);
        assert_eq!(figures["readiness"]["back_p99_ms"], 700.0);
        let failed = Churned {
            routes: Err(anyhow::anyhow!("change 3 did not reach traffic")),
            readiness: Some(Err(anyhow::anyhow!("traffic did not leave web-1"))),
        };
        assert_eq!(failed.figures()["error"], "change 3 did not reach traffic");
        assert_eq!(
            failed.figures()["readiness"]["error"],
            "traffic did not leave web-1"
        );
        assert_eq!(
            failed.failure().unwrap(),
            "route changes: change 3 did not reach traffic; readiness changes: traffic did not leave web-1"
        );
    }
}
