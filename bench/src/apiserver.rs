//! `fairlead bench apiserver`: throughput and latency of the embedded API server, measured
//! through `kube::Client` over HTTPS as the components use it, and the memory it holds per
//! object. Prints a table; the figures go to BENCHMARKS.md with the machine and command.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use fairlead_apiserver::{ApiServer, Config, ServerError};

use crate::{Row, percentile};

/// What to measure.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Objects created (and held for the memory figure).
    pub objects: usize,
    /// Concurrent clients creating them.
    pub concurrency: usize,
    /// Watchers for the fan-out latency.
    pub watchers: usize,
    /// Fan-out rounds (one write each).
    pub rounds: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            objects: 10_000,
            concurrency: 16,
            watchers: 100,
            rounds: 20,
        }
    }
}

/// Benchmark failures.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The server did not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// A request failed.
    #[error("request: {0}")]
    Kube(#[from] kube::Error),
}

fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn config_map(name: String) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"bench": "yes"}},
        "data": {"key": "a value of a typical small size, about one line of configuration"}}),
    )
    .expect("a valid ConfigMap")
}

/// Runs the benchmark on a fresh in-memory server.
pub async fn run(options: Options) -> Result<Vec<Row>, BenchError> {
    let server = ApiServer::start(Config {
        event_window: options.objects.max(1000) * 2,
        ..Config::default()
    })
    .await?;
    let client = server.client().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut rows = Vec::new();
    let before = rss_bytes();

    let started = Instant::now();
    futures::stream::iter(0..options.objects)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(format!("cm-{i}")))
                    .await
            }
        })
        .buffer_unordered(options.concurrency.max(1))
        .try_for_each(|_| async { Ok(()) })
        .await?;
    let elapsed = started.elapsed();
    rows.push(Row {
        metric: format!("create ({} clients)", options.concurrency),
        value: format!(
            "{:.0} objects/s",
            options.objects as f64 / elapsed.as_secs_f64()
        ),
    });
    if let (Some(before), Some(after)) = (before, rss_bytes()) {
        let per_object = after.saturating_sub(before) as f64 / options.objects.max(1) as f64;
        rows.push(Row {
            metric: format!("memory held for {} objects", options.objects),
            value: format!(
                "{:.1} MiB ({:.0} bytes/object, process RSS delta, journal off)",
                after.saturating_sub(before) as f64 / 1048576.0,
                per_object
            ),
        });
    }

    let lists = 10;
    let started = Instant::now();
    for _ in 0..lists {
        let listed = api.list(&ListParams::default()).await?;
        debug_assert_eq!(listed.items.len(), options.objects);
    }
    let elapsed = started.elapsed();
    rows.push(Row {
        metric: format!("list of {} objects", options.objects),
        value: format!(
            "{:.1} ms per list ({:.0} objects/s)",
            elapsed.as_secs_f64() * 1000.0 / lists as f64,
            (options.objects * lists) as f64 / elapsed.as_secs_f64()
        ),
    });
    let started = Instant::now();
    let paged = 100;
    for _ in 0..paged {
        api.list(&ListParams::default().limit(100)).await?;
    }
    rows.push(Row {
        metric: "list, one page of 100".into(),
        value: format!(
            "{:.2} ms per request",
            started.elapsed().as_secs_f64() * 1000.0 / paged as f64
        ),
    });

    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    for w in 0..options.watchers {
        let api = api.clone();
        let tx = tx.clone();
        let rv = rv.clone();
        let mut stream = api
            .watch(
                &WatchParams::default().labels("fanout=yes").timeout(290),
                &rv,
            )
            .await?
            .boxed();
        tokio::spawn(async move {
            while let Ok(Some(event)) = stream.try_next().await {
                if let WatchEvent::Added(cm) | WatchEvent::Modified(cm) = event {
                    let round: usize = cm
                        .metadata
                        .name
                        .and_then(|n| n.strip_prefix("fan-").and_then(|r| r.parse().ok()))
                        .unwrap_or(0);
                    let _ = tx.send((round, Instant::now()));
                }
                let _ = w;
            }
        });
    }
    drop(tx);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut latencies = Vec::new();
    for round in 0..options.rounds {
        let mut cm = config_map(format!("fan-{round}"));
        cm.metadata.labels = Some([("fanout".to_string(), "yes".to_string())].into());
        let sent = Instant::now();
        api.create(&PostParams::default(), &cm).await?;
        let mut received = 0;
        while received < options.watchers {
            let Some((r, at)) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                .await
                .ok()
                .flatten()
            else {
                break;
            };
            if r == round {
                latencies.push(at - sent);
                received += 1;
            }
        }
    }
    latencies.sort();
    rows.push(Row {
        metric: format!("watch fan-out, 1 write -> {} watchers", options.watchers),
        value: format!(
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} deliveries)",
            percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
            percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
            latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
            latencies.len()
        ),
    });
    server.shutdown();
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_small_run_reports_every_figure() {
        let rows = run(Options {
            objects: 50,
            concurrency: 4,
            watchers: 3,
            rounds: 2,
        })
        .await
        .unwrap();
        let metrics: Vec<&str> = rows.iter().map(|r| r.metric.as_str()).collect();
        assert!(metrics.iter().any(|m| m.starts_with("create")));
        assert!(metrics.iter().any(|m| m.starts_with("list of 50")));
        let fanout = rows
            .iter()
            .find(|r| r.metric.starts_with("watch fan-out"))
            .unwrap();
        assert!(fanout.value.contains("(6 deliveries)"), "{}", fanout.value);
    }
}
