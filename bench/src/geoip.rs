//! `fairlead bench edge --only geoip`: what Envoy's GeoIP filter costs a proxy — requests/s
//! and latency of one real Envoy carrying an instance's Gateway with GeoIP headers, beside
//! the same Envoy build given the same Gateway's listeners without the filter, in the same
//! run, interleaved (A B A B …). Both configurations are fairlead's own, served by
//! `fairlead edge xds` from one translation: a proxy that says in its node metadata that it
//! holds the City database gets the filter, one that does not gets the listeners without it
//! (only the client-sent headers' removal). Every request carries `X-Real-IP` of an address
//! the database holds (believed from loopback), so each is a lookup that finds a city.
//!
//! The database is written here (`mmdb-writer`): 65,536 /24 networks with City records of a
//! thousand cities, about the depth of MaxMind's; Envoy runs with one worker on one core,
//! `wrk` on the other (`taskset`). Two shapes of request: a redirect the proxy answers
//! itself (the least work a request can be, so the filter's largest share), and a request
//! proxied to a backend (an Envoy answering directly, on wrk's core).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::envoy::{EnvoyBenchError, failed, free_port};

/// What the measured requests ask of the proxy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A redirect the proxy answers itself: the proxy's least work per request.
    Redirect,
    /// Proxied to a backend (another Envoy answering directly, on the load generator's core).
    Proxied,
}

impl Shape {
    pub(crate) fn host(self) -> &'static str {
        match self {
            Shape::Redirect => "redirect.example.com",
            Shape::Proxied => "proxied.example.com",
        }
    }
}

/// How one side did over its rounds.
#[derive(Clone, Debug)]
pub struct Side {
    /// Requests/s of each round.
    pub rates: Vec<f64>,
    /// p50 and p99 latency of each round (wrk's).
    pub latency: Vec<(Duration, Duration)>,
}

/// Both sides of one shape.
#[derive(Clone, Debug)]
pub struct Figures {
    /// What the requests asked.
    pub shape: Shape,
    /// With the GeoIP filter.
    pub with: Side,
    /// Without.
    pub without: Side,
}

/// The address every request comes from (its `X-Real-IP`): in the written database.
const CLIENT: &str = "81.2.69.142";

/// A City database of 65,536 /24 networks (1.0.0.0/8 and 81.2.69.0/24), built now.
fn database() -> Result<Vec<u8>, EnvoyBenchError> {
    let mut writer = mmdb_writer::Writer::new("GeoIP2-City");
    const COUNTRIES: [&str; 5] = ["GB", "FR", "DE", "NL", "US"];
    let city = |i: u32| {
        let country = COUNTRIES[(i % 5) as usize];
        serde_json::json!({
            "city": {"names": {"en": format!("City {}", i % 1_000)}},
            "country": {"iso_code": country},
            "subdivisions": [{"iso_code": format!("S{}", i % 50)}],
        })
    };
    for i in 0..65_536u32 {
        let network: ipnet::IpNet = format!("1.{}.{}.0/24", i >> 8, i & 0xff)
            .parse()
            .map_err(|e| failed("a network")(format!("{e}")))?;
        writer
            .insert(network, &city(i))
            .map_err(|e| failed("the database")(e.to_string()))?;
    }
    let network: ipnet::IpNet = "81.2.69.0/24".parse().expect("a network");
    writer
        .insert(network, &city(7))
        .map_err(|e| failed("the database")(e.to_string()))?;
    writer
        .to_bytes()
        .map_err(|e| failed("the database")(e.to_string()))
}

/// The world: a ClusterALBInstance with GeoIP headers, its Gateway on `port`, a route
/// answering with a redirect and one to a backend on `backend`.
pub(crate) fn world(port: u16, backend: u16) -> String {
    world_of(
        "geo",
        "
  gatewayName: gw
  originalIPDetection: {realIPHeader: X-Real-IP, setRealIPFrom: [127.0.0.0/8]}
  geoIP:
    maxmindMirror: {url: 'http://mirror.invalid'}
    maxmindEditionIDs: [GeoIP2-City]
    headers: {country: x-geo-country, city: x-geo-city, region: x-geo-region}",
        "{}",
        (port, backend),
    )
}

/// A bench's world: the ClusterALBInstance `instance` with `spec` (a YAML block or flow
/// mapping; its Gateway `d8-alb/gw`), the Gateway's HTTP listener on `port`, a route
/// answering with a redirect ([`Shape::Redirect`]) and one with `annotations` (a flow
/// mapping) to the backend on `backend` ([`Shape::Proxied`]).
pub(crate) fn world_of(
    instance: &str,
    spec: &str,
    annotations: &str,
    (port, backend): (u16, u16),
) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: d8-alb}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: {instance}}}
spec: {spec}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: d8-alb, labels: {{alb.deckhouse.io/instance: ClusterALBInstance.{instance}}}}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: {port}, protocol: HTTP, allowedRoutes: {{namespaces: {{from: All}}}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: redirect, namespace: d8-alb}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{redirect}]
  rules: [{{filters: [{{type: RequestRedirect, requestRedirect: {{hostname: example.org}}}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: proxied, namespace: d8-alb, annotations: {annotations}}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [{proxied}]
  rules: [{{backendRefs: [{{name: backend, port: 80}}]}}]
{}",
        backend_objects(backend),
        redirect = Shape::Redirect.host(),
        proxied = Shape::Proxied.host(),
    )
}

/// The Service `d8-alb/backend` and its EndpointSlice: the backend on `backend` (loopback),
/// as YAML documents, each led by `---`.
pub(crate) fn backend_objects(backend: u16) -> String {
    format!(
        "---
apiVersion: v1
kind: Service
metadata: {{name: backend, namespace: d8-alb}}
spec: {{ports: [{{name: http, port: 80, targetPort: {backend}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: backend, namespace: d8-alb, labels: {{kubernetes.io/service-name: backend}}}}
addressType: IPv4
ports: [{{name: http, port: {backend}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
"
    )
}

/// The backend: an Envoy answering every request itself (a small body), on core 0 beside
/// the load generator, so both sides share it alike.
fn start_backend(
    envoy: &Path,
    dir: &Path,
    port: u16,
) -> Result<tokio::process::Child, EnvoyBenchError> {
    let config = serde_json::json!({
        "static_resources": {"listeners": [{
            "name": "backend",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "backend",
                    "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"],
                        "routes": [{"match": {"prefix": "/"},
                            "direct_response": {"status": 200, "body": {"inline_string": "ok"}}}]}]},
                    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
                }}]}]
        }]}
    });
    let path = dir.join("backend.json");
    std::fs::write(&path, config.to_string()).map_err(|e| failed("the backend")(e.to_string()))?;
    tokio::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(envoy)
        .arg("--config-path")
        .arg(&path)
        .args([
            "--concurrency",
            "1",
            "--log-level",
            "error",
            "--use-dynamic-base-id",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("starting the backend")(e.to_string()))
}

/// Runs `wrk` for `seconds` against `url` (Host `host`) on core 0; requests/s, p50 and
/// p99.
pub(crate) async fn wrk(
    url: &str,
    host: &str,
    seconds: u64,
) -> Result<(f64, Duration, Duration), EnvoyBenchError> {
    wrk_with(url, host, seconds, None).await
}

/// [`wrk`], its requests shaped by the Lua `script` (a method and body) when given.
pub(crate) async fn wrk_with(
    url: &str,
    host: &str,
    seconds: u64,
    script: Option<&Path>,
) -> Result<(f64, Duration, Duration), EnvoyBenchError> {
    let mut command = tokio::process::Command::new("taskset");
    command.args(["-c", "0", "wrk", "-t1", "-c32", "--latency"]);
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    let out = command
        .arg(format!("-d{seconds}s"))
        .args(["-H", &format!("X-Real-IP: {CLIENT}")])
        .args(["-H", &format!("Host: {host}")])
        .arg(url)
        .output()
        .await
        .map_err(|e| failed("wrk (Debian wrk) under taskset")(e.to_string()))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || text.contains("Non-2xx or 3xx") && !text.contains("Requests/sec") {
        return Err(EnvoyBenchError::Failed(format!("wrk: {text}")));
    }
    let rate = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .ok_or_else(|| EnvoyBenchError::Failed(format!("wrk said no rate: {text}")))?;
    let percentile = |p: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(p))
            .and_then(|v| duration(v.trim()))
            .ok_or_else(|| EnvoyBenchError::Failed(format!("wrk said no {p}: {text}")))
    };
    Ok((rate, percentile("50%")?, percentile("99%")?))
}

/// wrk's `123.45us`, `1.20ms`, `2.00s`.
fn duration(text: &str) -> Option<Duration> {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic())?);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// An Envoy on core 1 with one worker, in `cwd`, its node saying it holds `editions`.
pub(crate) fn start_envoy(
    envoy: &Path,
    bootstrap: &Path,
    cwd: &Path,
    editions: &[&str],
) -> Result<tokio::process::Child, EnvoyBenchError> {
    let node = serde_json::json!({"node": {"metadata": {"geoip_editions": editions}}});
    start_envoy_with(envoy, bootstrap, cwd, &node)
}

/// [`start_envoy`] with `overrides` merged over the bootstrap (`--config-yaml`).
pub(crate) fn start_envoy_with(
    envoy: &Path,
    bootstrap: &Path,
    cwd: &Path,
    overrides: &serde_json::Value,
) -> Result<tokio::process::Child, EnvoyBenchError> {
    let node = overrides;
    tokio::process::Command::new("taskset")
        .args(["-c", "1"])
        .arg(envoy)
        .arg("--config-path")
        .arg(bootstrap)
        .args(["--config-yaml", &node.to_string()])
        .args([
            "--concurrency",
            "1",
            "--log-level",
            "error",
            "--use-dynamic-base-id",
        ])
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("starting Envoy")(e.to_string()))
}

/// Waits until Envoy at `admin` serves `url` for both shapes, with the GeoIP filter running
/// (`geoip`) or not: its lookups counted in its stats, or none.
async fn serving(url: &str, admin: u16, geoip: bool) -> Result<(), EnvoyBenchError> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(1))
        .build()
        .map_err(|e| failed("an HTTP client")(e.to_string()))?;
    // What each shape was last answered, for the error when Envoy never serves.
    let last = std::sync::Mutex::new([String::new(), String::new()]);
    let answers = async |host: &str, redirect: bool| {
        let answer = http
            .get(url)
            .header("x-real-ip", CLIENT)
            .header("host", host)
            .send()
            .await;
        let said = match &answer {
            Ok(r) => r.status().to_string(),
            Err(e) => e.to_string(),
        };
        last.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[usize::from(redirect)] =
            format!("{host}: {said}");
        answer.is_ok_and(|r| {
            if redirect {
                r.status().is_redirection()
            } else {
                r.status().is_success()
            }
        })
    };
    for _ in 0..300 {
        let answered = answers(Shape::Redirect.host(), true).await
            && answers(Shape::Proxied.host(), false).await;
        if answered {
            let stats = http
                .get(format!("http://127.0.0.1:{admin}/stats?filter=geoip.total"))
                .send()
                .await
                .ok();
            let text = match stats {
                Some(r) => r.text().await.unwrap_or_default(),
                None => String::new(),
            };
            let counted = text
                .lines()
                .any(|l| l.rsplit_once(' ').is_some_and(|(_, v)| v != "0"));
            if counted == geoip {
                return Ok(());
            }
            return Err(EnvoyBenchError::Failed(format!(
                "Envoy {} the GeoIP filter: {text}",
                if geoip { "lacks" } else { "runs" }
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = last
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Err(EnvoyBenchError::Failed(format!(
        "Envoy never served {url} (last answers: {})",
        last.iter()
            .filter(|a| !a.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    )))
}

/// `rounds` interleaved rounds of `seconds` each side, for each shape; `fairlead` runs
/// `edge xds`.
pub async fn filter_cost(
    fairlead: &Path,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<Figures>, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-geoip-{}", std::process::id()));
    let (with_dir, without_dir) = (dir.join("with"), dir.join("without"));
    let geoip_dir = with_dir.join(fairlead_edge_api::geoip::PROXY_DIR);
    for d in [&geoip_dir, &without_dir] {
        std::fs::create_dir_all(d).map_err(|e| failed("a work directory")(e.to_string()))?;
    }
    let city = fairlead_edge_api::geoip::Edition::City;
    std::fs::write(geoip_dir.join(city.mmdb()), database()?)
        .map_err(|e| failed("the database")(e.to_string()))?;
    let result = run(
        fairlead,
        &envoy,
        &dir,
        &with_dir,
        &without_dir,
        rounds,
        seconds,
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// fairlead's side of a run: the embedded API server holding a world (this figure's:
/// [`world`]), the backend, and `fairlead edge xds` serving it, with a bootstrap for the
/// Envoys under test.
pub(crate) struct Harness {
    server: fairlead_apiserver::ApiServer,
    /// `fairlead edge xds` and the bootstrap of an Envoy of the Gateway.
    pub plane: crate::envoy::ControlPlane,
    _backend: tokio::process::Child,
    /// The Gateway's listener, as Envoy serves it.
    pub url: String,
    /// The backend's port.
    pub backend_port: u16,
}

impl Harness {
    /// Starts it in `dir` with the objects `world` gives for the Gateway `d8-alb/gw`'s
    /// listener port and the backend's port; `fairlead` runs `edge xds`, `envoy` the backend.
    pub(crate) async fn start(
        fairlead: &Path,
        envoy: &Path,
        dir: &Path,
        world: impl FnOnce(u16, u16) -> String,
    ) -> Result<Self, EnvoyBenchError> {
        // The backend is a local process: its EndpointSlice carries a loopback address.
        let (server, client) = crate::edge_cluster(fairlead_apiserver::Config {
            allow_loopback_endpoints: true,
            ..fairlead_apiserver::Config::default()
        })
        .await
        .map_err(|e| failed("the API server with the CRDs")(format!("{e:#}")))?;
        let (port, backend_port) = (free_port()?, free_port()?);
        let backend = start_backend(envoy, dir, backend_port)?;
        let plane = crate::envoy::ControlPlane::start(
            fairlead,
            (&server, &client),
            dir,
            &world(port, backend_port),
            fairlead_edge_model::ObjectKey::new("d8-alb", "gw"),
        )
        .await?;
        Ok(Self {
            server,
            plane,
            _backend: backend,
            url: format!("http://127.0.0.1:{port}/"),
            backend_port,
        })
    }

    /// Starts an Envoy of the Gateway with `overrides` over its bootstrap and waits until it
    /// serves both shapes (without the GeoIP filter).
    pub(crate) async fn envoy_with(
        &self,
        envoy: &Path,
        cwd: &Path,
        overrides: &serde_json::Value,
    ) -> Result<tokio::process::Child, EnvoyBenchError> {
        let child = start_envoy_with(envoy, &self.plane.bootstrap, cwd, overrides)?;
        serving(&self.url, self.plane.envoy_admin, false).await?;
        Ok(child)
    }

    /// Starts an Envoy of the Gateway (see [`start_envoy`]) and waits until it serves, with
    /// the GeoIP filter or without it.
    pub(crate) async fn envoy(
        &self,
        envoy: &Path,
        cwd: &Path,
        editions: &[&str],
    ) -> Result<tokio::process::Child, EnvoyBenchError> {
        let child = start_envoy(envoy, &self.plane.bootstrap, cwd, editions)?;
        serving(&self.url, self.plane.envoy_admin, !editions.is_empty()).await?;
        Ok(child)
    }

    /// Stops `fairlead edge xds` and the API server.
    pub(crate) async fn stop(mut self) {
        let _ = self.plane.xds.kill().await;
        self.server.shutdown();
    }
}

async fn run(
    fairlead: &Path,
    envoy: &Path,
    dir: &Path,
    with_dir: &Path,
    without_dir: &Path,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<Figures>, EnvoyBenchError> {
    let harness = Harness::start(fairlead, envoy, dir, world).await?;
    let empty = || Side {
        rates: Vec::new(),
        latency: Vec::new(),
    };
    let mut all = Vec::new();
    for shape in [Shape::Redirect, Shape::Proxied] {
        let mut figures = Figures {
            shape,
            with: empty(),
            without: empty(),
        };
        // A warm-up round each, not counted, then A B A B ….
        for round in 0..=rounds {
            for geoip in [true, false] {
                let (cwd, editions): (&Path, &[&str]) = if geoip {
                    (with_dir, &["GeoIP2-City"])
                } else {
                    (without_dir, &[])
                };
                let mut child = harness.envoy(envoy, cwd, editions).await?;
                let measured = wrk(
                    &harness.url,
                    shape.host(),
                    if round == 0 { 2 } else { seconds },
                )
                .await;
                let _ = child.kill().await;
                let _ = child.wait().await;
                let (rate, p50, p99) = measured?;
                if round > 0 {
                    let side = if geoip {
                        &mut figures.with
                    } else {
                        &mut figures.without
                    };
                    side.rates.push(rate);
                    side.latency.push((p50, p99));
                }
            }
        }
        all.push(figures);
    }
    harness.stop().await;
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_durations_read() {
        assert_eq!(duration("123.45us"), Some(Duration::from_nanos(123_450)));
        assert_eq!(duration("1.50ms"), Some(Duration::from_micros(1_500)));
        assert_eq!(duration("2.00s"), Some(Duration::from_secs(2)));
        assert_eq!(duration("7"), None);
    }
}
