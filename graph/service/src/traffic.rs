//! The traffic overlay's source: Prometheus, asked every [`INTERVAL`] for Envoy's per-route
//! and per-backend request rates, 5xx rates and p99 over the last [`WINDOW`]. A failed query
//! is logged and counted, and the samples are dropped (the graph then carries no traffic
//! rather than stale numbers) until Prometheus answers again.

use std::collections::BTreeMap;
use std::time::Duration;

use fairlead_graph::model::Traffic as Measured;
use fairlead_graph::traffic::{Samples, round, route_of_rule};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::metrics::GraphMetrics;

/// How often Prometheus is asked.
pub const INTERVAL: Duration = Duration::from_secs(15);

/// The range of the rates.
pub const WINDOW: &str = "2m";

/// The samples, as they change.
#[derive(Clone)]
pub struct Traffic {
    samples: watch::Receiver<Samples>,
}

/// A query that failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Not reachable, or not 200.
    #[error("asking Prometheus: {0}")]
    Http(String),
    /// Not Prometheus's answer.
    #[error("Prometheus answered {0}")]
    Answer(String),
}

impl Traffic {
    /// Starts asking `url` (until `stop`).
    pub fn start(url: String, metrics: GraphMetrics, stop: CancellationToken) -> Self {
        let (tx, samples) = watch::channel(Samples::default());
        tokio::spawn(async move {
            let client = reqwest_client();
            loop {
                match sample(&client, &url).await {
                    Ok(samples) => {
                        tx.send_if_modified(|old| {
                            let changed = *old != samples;
                            *old = samples;
                            changed
                        });
                    }
                    Err(e) => {
                        metrics.traffic_errors.inc();
                        tracing::warn!(error = %e, prometheus = %url, "traffic overlay unavailable; retrying");
                        tx.send_if_modified(|old| {
                            let had = *old != Samples::default();
                            *old = Samples::default();
                            had
                        });
                    }
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(INTERVAL) => {}
                }
            }
        });
        Self { samples }
    }

    /// The samples now, and each change.
    pub fn subscribe(&self) -> watch::Receiver<Samples> {
        self.samples.clone()
    }
}

fn reqwest_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default()
}

/// One instant query: label value → number.
async fn query(
    client: &reqwest::Client,
    url: &str,
    promql: &str,
    label: &str,
) -> Result<BTreeMap<String, f64>, QueryError> {
    let answer: serde_json::Value = client
        .get(format!("{}/api/v1/query", url.trim_end_matches('/')))
        .query(&[("query", promql)])
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| QueryError::Http(e.to_string()))?
        .json()
        .await
        .map_err(|e| QueryError::Http(e.to_string()))?;
    if answer["status"] != "success" {
        return Err(QueryError::Answer(answer.to_string()));
    }
    let mut out = BTreeMap::new();
    for series in answer["data"]["result"].as_array().into_iter().flatten() {
        let Some(key) = series["metric"][label].as_str() else {
            continue;
        };
        let value = series["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite());
        if let Some(value) = value {
            out.insert(key.to_owned(), value);
        }
    }
    Ok(out)
}

/// Rates, 5xx shares and p99s into one traffic figure per key.
fn combine(
    rates: &BTreeMap<String, f64>,
    errors: &BTreeMap<String, f64>,
    p99s: &BTreeMap<String, f64>,
) -> BTreeMap<String, Measured> {
    rates
        .iter()
        .map(|(key, rate)| {
            let busy = *rate > 0.0;
            (
                key.clone(),
                Measured {
                    requests_per_second: round(*rate),
                    error_ratio: busy
                        .then(|| round(errors.get(key).copied().unwrap_or(0.0) / rate)),
                    p99_ms: p99s.get(key).filter(|_| busy).map(|ms| round(*ms)),
                },
            )
        })
        .collect()
}

/// Per-rule figures summed per route (p99: the slowest rule's).
fn per_route(rules: BTreeMap<String, f64>, slowest: bool) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for (rule, value) in rules {
        let Some(route) = route_of_rule(&rule) else {
            continue;
        };
        let entry = out.entry(route.to_owned()).or_default();
        *entry = if slowest {
            entry.max(value)
        } else {
            *entry + value
        };
    }
    out
}

async fn sample(client: &reqwest::Client, url: &str) -> Result<Samples, QueryError> {
    let w = WINDOW;
    let backend = r#"envoy_cluster_name=~"backend/.*""#;
    let rates = query(
        client,
        url,
        &format!(
            "sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_total{{{backend}}}[{w}]))"
        ),
        "envoy_cluster_name",
    )
    .await?;
    let errors = query(client, url, &format!("sum by (envoy_cluster_name) (rate(envoy_cluster_upstream_rq_xx{{{backend},envoy_response_code_class=\"5\"}}[{w}]))"), "envoy_cluster_name").await?;
    // Envoy's upstream time is in milliseconds; so are the quantiles.
    let p99s = query(client, url, &format!("histogram_quantile(0.99, sum by (envoy_cluster_name, le) (rate(envoy_cluster_upstream_rq_time_bucket{{{backend}}}[{w}])))"), "envoy_cluster_name").await?;
    let backends = combine(&rates, &errors, &p99s);
    let route_rates = per_route(
        query(
            client,
            url,
            &format!("sum by (envoy_route) (rate(envoy_vhost_route_upstream_rq_completed[{w}]))"),
            "envoy_route",
        )
        .await?,
        false,
    );
    let route_errors = per_route(query(client, url, &format!("sum by (envoy_route) (rate(envoy_vhost_route_upstream_rq{{envoy_response_code=~\"5..\"}}[{w}]))"), "envoy_route").await?, false);
    let route_p99s = per_route(query(client, url, &format!("histogram_quantile(0.99, sum by (envoy_route, le) (rate(envoy_vhost_route_upstream_rq_time_bucket[{w}])))"), "envoy_route").await?, true);
    let routes = combine(&route_rates, &route_errors, &route_p99s);
    Ok(Samples { routes, backends })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_sum_into_routes_and_shares_are_of_the_rate() {
        let rules = BTreeMap::from([
            ("httproute/a/web/rule/0".to_owned(), 3.0),
            ("httproute/a/web/rule/1".to_owned(), 1.0),
            ("nonsense".to_owned(), 9.0),
        ]);
        let routes = per_route(rules, false);
        assert_eq!(
            routes,
            BTreeMap::from([("httproute/a/web".to_owned(), 4.0)])
        );
        let errors = BTreeMap::from([("httproute/a/web".to_owned(), 1.0)]);
        let p99 = BTreeMap::from([("httproute/a/web".to_owned(), 250.0)]);
        let t = &combine(&routes, &errors, &p99)["httproute/a/web"];
        assert_eq!(t.requests_per_second, 4.0);
        assert_eq!(t.error_ratio, Some(0.25));
        assert_eq!(t.p99_ms, Some(250.0));
        let idle = combine(
            &BTreeMap::from([("x".to_owned(), 0.0)]),
            &BTreeMap::new(),
            &p99,
        );
        assert_eq!(idle["x"].error_ratio, None, "no share of nothing");
    }
}
