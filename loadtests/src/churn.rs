//! Route churn: the labelled route of a scenario's world changed once a second while k6
//! loads it, each change timed from its request to the API server until traffic sees it.

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

/// The figures of a churn: how many changes and their propagation's p50, p99 and max in
/// milliseconds (or why it failed).
pub fn churn_figures(churned: &anyhow::Result<Vec<Duration>>) -> Value {
    match churned {
        Err(e) => serde_json::json!({"error": format!("{e:#}")}),
        Ok(times) => {
            let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1000.0).collect();
            ms.sort_by(f64::total_cmp);
            let at = |q: f64| {
                let i = ((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len().max(1)) - 1;
                ms.get(i).copied()
            };
            serde_json::json!({
                "changes": ms.len(),
                "propagation_p50_ms": at(0.5),
                "propagation_p99_ms": at(0.99),
                "propagation_max_ms": ms.last(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_the_changes_and_their_quantiles_or_the_failure() {
        let times: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let figures = churn_figures(&Ok(times));
        assert_eq!(figures["changes"], 100);
        assert_eq!(figures["propagation_p50_ms"], 50.0);
        assert_eq!(figures["propagation_p99_ms"], 99.0);
        assert_eq!(figures["propagation_max_ms"], 100.0);
        let none = churn_figures(&Ok(Vec::new()));
        assert_eq!(none["changes"], 0);
        assert!(none["propagation_p99_ms"].is_null());
        let failed = churn_figures(&Err(anyhow::anyhow!("change 3 did not reach traffic")));
        assert_eq!(failed["error"], "change 3 did not reach traffic");
    }
}
