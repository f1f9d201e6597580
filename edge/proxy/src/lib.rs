//! What runs in an ALB proxy container, in the manner of Envoy Gateway's shutdown manager or
//! Istio's pilot-agent, as one binary: [`run`] takes the bootstrap the gateway controller
//! rendered into the proxy's ConfigMap, or renders one (the pure `fairlead-edge-bootstrap`
//! function, with the SDS document of the proxy's client certificate, which Envoy watches,
//! so a renewed certificate needs no restart), starts Envoy as its child (through a launcher
//! that ties Envoy's life to the supervisor's) and supervises it:
//!
//! - **readiness follows configuration**: ready only once Envoy is live *and* has accepted
//!   listeners from the control plane ([`admin::Admin::configured`]), not merely started;
//! - **graceful drain** on shutdown: health checks fail first, listeners drain gracefully,
//!   and Envoy stops once active connections fall to the threshold or the drain deadline
//!   passes ([`drain`]);
//! - **Envoy's logs** pass through to stderr line by line; the last of them are kept, and an
//!   Envoy that dies takes the supervisor down with them in the error ([`logs`]);
//! - Envoy's admin stays on 127.0.0.1; its Prometheus stats are served by the supervisor's
//!   metrics port ([`stats_router`]);
//! - **basic auth** for the routes that ask for it: the authentication service Envoy's
//!   `ext_authz` filter asks over a Unix socket in the work directory ([`auth`]).
//!
//! `fairlead edge proxy` runs one, in the proxy container of every ALB instance's pods (and
//! on `fairlead up`'s local runner).

pub mod admin;
pub mod auth;
pub mod drain;
pub mod logs;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::admin::Admin;
use crate::logs::LastLines;

/// How a proxy runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The Envoy binary.
    pub envoy: PathBuf,
    /// The bootstrap (its admin address is where the supervisor reaches Envoy).
    pub bootstrap: Bootstrap,
    /// Where Envoy's admin listens instead of the bootstrap's address (given to Envoy as a
    /// `--config-yaml` override).
    pub admin_address: Option<std::net::SocketAddr>,
    /// Where the bootstrap (and the SDS document, unless the spec names another place) are
    /// written.
    pub work_dir: PathBuf,
    /// Envoy's log level (`trace` … `critical`, `off`).
    pub log_level: String,
    /// The drain: how long, and how few connections are few enough to stop early.
    pub drain: drain::Drain,
    /// The command Envoy is started through (`fairlead exec-child --parent <pid> --`), so
    /// Envoy dies with the supervisor even when the supervisor is killed outright; Envoy is
    /// started directly when `None`.
    pub launcher: Option<Vec<std::ffi::OsString>>,
    /// Where Envoy's stdout (its access log, a JSON line per request) goes: appended to this
    /// file, or the supervisor's own stdout when `None` (a container's log).
    pub access_log: Option<PathBuf>,
    /// The directory of GeoIP databases beside Envoy (the downloader's): the editions held
    /// there when Envoy starts go into its node metadata ([`held_editions`]), so the control
    /// plane serves it the GeoIP filter only when it can open every database.
    pub geoip_dir: Option<PathBuf>,
    /// An address of the proxy's own (its pod's) to listen on besides its Gateway's, told
    /// to the xDS server in the node metadata (`pod_address`): where the proxies of a
    /// Gateway share its address, a Service reaches each of them there.
    pub pod_address: Option<std::net::IpAddr>,
}

/// The GeoIP editions whose database (`<Edition>.mmdb`) is in `dir`. The downloader puts a
/// database there only once it is checked, and replaces one only by a rename, so a file
/// that is there stays there.
pub fn held_editions(dir: &std::path::Path) -> Vec<fairlead_edge_api::geoip::Edition> {
    fairlead_edge_api::geoip::Edition::ALL
        .into_iter()
        .filter(|e| dir.join(e.mmdb()).is_file())
        .collect()
}

/// Where Envoy's bootstrap comes from.
#[derive(Clone, Debug)]
pub enum Bootstrap {
    /// Rendered here from a spec (with the SDS document of its client certificate).
    Render(Box<fairlead_edge_bootstrap::Spec>),
    /// A file rendered by the gateway controller (the proxy's ConfigMap, beside its SDS
    /// document).
    File(PathBuf),
}

impl Bootstrap {
    /// Where Envoy's admin interface listens, as the bootstrap says.
    pub fn admin(&self) -> Result<std::net::SocketAddr, ProxyError> {
        match self {
            Self::Render(spec) => Ok(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                spec.admin_port,
            ))),
            Self::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(io(format!("reading {}", path.display())))?;
                admin_address(&text).ok_or_else(|| ProxyError::Admin(path.display().to_string()))
            }
        }
    }

    /// What the proxy serves, for its logs: the Gateway, or the bootstrap file naming it.
    fn describe(&self) -> String {
        match self {
            Self::Render(spec) => spec.gateway.to_string(),
            Self::File(path) => path.display().to_string(),
        }
    }
}

/// A cluster of one gRPC service on the Unix socket `socket`.
fn socket_cluster(name: &str, socket: &std::path::Path) -> serde_json::Value {
    serde_json::json!({
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"pipe": {
                "path": socket.display().to_string()
            }}}}]}]
        }
    })
}

/// The clusters of the services beside Envoy in the work directory `work_dir`, as
/// `static_resources`: the authentication service ([`auth::SOCKET`]) and the WAF of the pod's
/// WAF container ([`fairlead_edge_model::names::WAF_SOCKET`]).
pub fn services(work_dir: &std::path::Path) -> serde_json::Value {
    use fairlead_edge_model::names::{WAF_CLUSTER, WAF_SOCKET};
    serde_json::json!({"clusters": [
        socket_cluster(auth::CLUSTER, &work_dir.join(auth::SOCKET)),
        socket_cluster(WAF_CLUSTER, &work_dir.join(WAF_SOCKET)),
    ]})
}

/// Envoy's arguments merged over the bootstrap (`--config-yaml`, which Envoy takes once):
/// the clusters of the services beside it in `work_dir` ([`services`]), its admin interface
/// moved to `admin`, and in the node's metadata (what the xDS server reads) the GeoIP
/// editions `geoip` held (`geoip_editions`) and the proxy's own address `pod`
/// (`pod_address`).
fn overrides(
    admin: Option<std::net::SocketAddr>,
    geoip: Option<&[fairlead_edge_api::geoip::Edition]>,
    pod: Option<std::net::IpAddr>,
    work_dir: &std::path::Path,
) -> Vec<String> {
    let mut config = serde_json::Map::new();
    config.insert("static_resources".into(), services(work_dir));
    if let Some(address) = admin {
        config.insert(
            "admin".into(),
            serde_json::json!({"address": {"socket_address": {
                "address": address.ip().to_string(), "port_value": address.port()}}}),
        );
    }
    let mut metadata = serde_json::Map::new();
    if let Some(editions) = geoip {
        let ids: Vec<&str> = editions.iter().map(|e| e.id()).collect();
        metadata.insert("geoip_editions".into(), serde_json::json!(ids));
    }
    if let Some(pod) = pod {
        metadata.insert("pod_address".into(), serde_json::json!(pod.to_string()));
    }
    if !metadata.is_empty() {
        config.insert("node".into(), serde_json::json!({"metadata": metadata}));
    }
    vec![
        "--config-yaml".into(),
        serde_json::Value::Object(config).to_string(),
    ]
}

/// The admin address of a bootstrap in YAML (or JSON): `admin.address.socket_address`, in
/// either of the spellings Envoy reads.
fn admin_address(text: &str) -> Option<std::net::SocketAddr> {
    let value: serde_json::Value = serde_yaml_ng::from_str(text).ok()?;
    let socket = &value["admin"]["address"];
    let socket = socket
        .get("socketAddress")
        .or_else(|| socket.get("socket_address"))?;
    let ip: std::net::IpAddr = socket["address"].as_str()?.parse().ok()?;
    let port = socket
        .get("portValue")
        .or_else(|| socket.get("port_value"))?
        .as_u64()?;
    Some(std::net::SocketAddr::new(ip, u16::try_from(port).ok()?))
}

/// Why a proxy stopped other than by being asked to.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The bootstrap could not be rendered.
    #[error(transparent)]
    Bootstrap(#[from] fairlead_edge_bootstrap::BootstrapError),
    /// A file could not be written, or Envoy not started.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The bootstrap file names no admin address.
    #[error("the bootstrap {0} names no admin address (admin.address.socket_address)")]
    Admin(String),
    /// Envoy exited while it should have been serving.
    #[error("Envoy exited ({status}); its last lines:\n{last_lines}")]
    EnvoyExited {
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The last lines it logged.
        last_lines: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ProxyError {
    let what = what.into();
    move |source| ProxyError::Io { what, source }
}

/// Writes the bootstrap (and the client certificate's SDS document) into `settings.work_dir`
/// when it is rendered here; returns the bootstrap's path.
pub fn write_bootstrap(settings: &Settings) -> Result<PathBuf, ProxyError> {
    std::fs::create_dir_all(&settings.work_dir)
        .map_err(io(format!("creating {}", settings.work_dir.display())))?;
    let spec = match &settings.bootstrap {
        Bootstrap::Render(spec) => spec,
        Bootstrap::File(path) => return Ok(path.clone()),
    };
    if let Some(client) = spec.tls.as_ref().and_then(|tls| tls.client.as_ref()) {
        let document = fairlead_edge_bootstrap::sds_document(client)?;
        fairlead_kit::files::write_atomically(
            std::path::Path::new(&client.sds),
            document.as_bytes(),
            0o644,
        )
        .map_err(io(format!("writing {}", client.sds)))?;
    }
    let path = settings.work_dir.join("envoy.yaml");
    fairlead_kit::files::write_atomically(
        &path,
        fairlead_edge_bootstrap::yaml(spec)?.as_bytes(),
        0o644,
    )
    .map_err(io(format!("writing {}", path.display())))?;
    Ok(path)
}

/// Runs Envoy under supervision until `stop` (then drains it and returns `Ok`), or until
/// Envoy exits on its own (an error carrying its last log lines). `ready` is told whenever
/// Envoy's readiness changes.
pub async fn run(
    settings: Settings,
    stop: CancellationToken,
    ready: impl Fn(bool) + Send + 'static,
) -> Result<(), ProxyError> {
    let bootstrap = write_bootstrap(&settings)?;
    // The authentication service routes with basic auth or auth-url ask (through Envoy's
    // ext_authz), for as long as Envoy runs.
    let work_dir =
        std::path::absolute(&settings.work_dir).map_err(io("the work directory's path"))?;
    let auth_socket = work_dir.join(auth::SOCKET);
    let auth_stop = CancellationToken::new();
    {
        let (socket, stop) = (auth_socket.clone(), auth_stop.clone());
        tokio::spawn(async move {
            if let Err(e) = auth::serve(socket.clone(), stop).await {
                tracing::error!(socket = %socket.display(), error = %e, "the authentication service stopped; routes with basic auth or auth-url answer 503");
            }
        });
    }
    let admin_address = match settings.admin_address {
        Some(address) => address,
        None => settings.bootstrap.admin()?,
    };
    let admin = Admin::new(admin_address);
    let geoip = settings.geoip_dir.as_deref().map(|dir| {
        let held = held_editions(dir);
        tracing::info!(dir = %dir.display(), editions = ?held.iter().map(|e| e.id()).collect::<Vec<_>>(), "GeoIP databases beside Envoy");
        held
    });
    let stdout = match &settings.access_log {
        Some(path) => Stdio::from(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(io(format!("opening {}", path.display())))?,
        ),
        None => Stdio::inherit(),
    };
    let mut command = match settings.launcher.as_deref() {
        Some([launcher, prefix @ ..]) => {
            let mut command = tokio::process::Command::new(launcher);
            command.args(prefix).arg(&settings.envoy);
            command
        }
        _ => tokio::process::Command::new(&settings.envoy),
    };
    let mut child = command
        // What tied the supervisor to its parent is not Envoy's.
        .env_remove("FAIRLEAD_PARENT_PID")
        .arg("--config-path")
        .arg(&bootstrap)
        .args(["--log-level", &settings.log_level])
        .args(overrides(
            settings.admin_address,
            geoip.as_deref(),
            settings.pod_address,
            &work_dir,
        ))
        // Several proxies share a host (`fairlead up`): each gets its own shared-memory id.
        .arg("--use-dynamic-base-id")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(io(format!("starting {}", settings.envoy.display())))?;
    let gateway = settings.bootstrap.describe();
    tracing::info!(%gateway, pid = child.id(), envoy = %settings.envoy.display(), "Envoy started");
    let last = LastLines::new(logs::KEPT);
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(last.clone().forward(stderr));
    }
    let watching = CancellationToken::new();
    tokio::spawn(watch_readiness(admin.clone(), watching.clone(), ready));
    let outcome = tokio::select! {
        status = child.wait() => {
            let status = status.map_err(io("waiting for Envoy"))?;
            // The log forwarder may still hold the last lines Envoy wrote before it exited.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Err(ProxyError::EnvoyExited { status, last_lines: last.text() })
        }
        () = stop.cancelled() => {
            tracing::info!(%gateway, "draining Envoy");
            let report = drain::drain(&admin, &settings.drain).await;
            tracing::info!(%gateway, connections_left = report.connections_left, waited_ms = report.waited.as_millis() as u64, "drained; stopping Envoy");
            drain::stop(&admin, &mut child).await;
            Ok(())
        }
    };
    watching.cancel();
    auth_stop.cancel();
    outcome
}

/// Polls Envoy's readiness until `stop`, reporting each change.
async fn watch_readiness(
    admin: Admin,
    stop: CancellationToken,
    ready: impl Fn(bool) + Send + 'static,
) {
    let mut was = None;
    loop {
        let now = admin.configured().await;
        if was != Some(now) {
            ready(now);
            was = Some(now);
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

/// Routes serving Envoy's Prometheus stats (`/stats/prometheus`) from its admin interface at
/// `admin`, and the WAF's (`/waf/metrics`, its `fairlead_waf_*` families) from its admin
/// server at `waf` when the pod runs one, for the supervisor's metrics port: what the pod's
/// kube-rbac-proxy lets a scraper read.
pub fn stats_router(
    admin: std::net::SocketAddr,
    waf: Option<std::net::SocketAddr>,
) -> axum::Router {
    let envoy = Admin::new(admin);
    let router = axum::Router::new().route(
        "/stats/prometheus",
        axum::routing::get(move || {
            let envoy = envoy.clone();
            async move {
                exposition(
                    envoy.get("/stats/prometheus").await,
                    "Envoy's admin interface",
                    |_| true,
                )
            }
        }),
    );
    let Some(waf) = waf else {
        return router;
    };
    let waf = Admin::new(waf);
    router.route(
        "/waf/metrics",
        axum::routing::get(move || {
            let waf = waf.clone();
            async move {
                // Its own families only: the process metrics are the supervisor's to give.
                exposition(waf.get("/metrics").await, "the WAF", |line| {
                    line.contains("fairlead_waf_")
                })
            }
        }),
    )
}

/// An exposition `text` fetched from `what`, its lines kept by `keep`; 503 when it could not
/// be fetched.
fn exposition(
    text: Result<String, reqwest::Error>,
    what: &str,
    keep: impl Fn(&str) -> bool,
) -> (
    axum::http::StatusCode,
    [(&'static str, &'static str); 1],
    String,
) {
    match text {
        Ok(text) => (
            axum::http::StatusCode::OK,
            [("content-type", "text/plain; version=0.0.4")],
            text.lines()
                .filter(|l| keep(l))
                .flat_map(|l| [l, "\n"])
                .collect(),
        ),
        Err(e) => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "text/plain")],
            format!("{what} does not answer: {e}\n"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_address_is_read_from_a_rendered_bootstrap_in_either_spelling() {
        let spec = fairlead_edge_bootstrap::Spec {
            gateway: fairlead_key::ObjectKey::new("d8-alb", "main"),
            node_id: None,
            xds_host: "alb-xds.d8-alb.svc".into(),
            xds_port: 18000,
            admin_port: 19000,
            tls: None,
            otlp: None,
        };
        let rendered = fairlead_edge_bootstrap::yaml(&spec).unwrap();
        assert_eq!(
            admin_address(&rendered),
            Some("127.0.0.1:19000".parse().unwrap())
        );
        let snake =
            "admin:\n  address:\n    socket_address: {address: 127.0.1.7, port_value: 15000}\n";
        assert_eq!(
            admin_address(snake),
            Some("127.0.1.7:15000".parse().unwrap())
        );
        assert_eq!(admin_address("node: {id: x}\n"), None, "no admin");
    }

    #[test]
    fn the_editions_beside_envoy_go_into_its_node_metadata() {
        use fairlead_edge_api::geoip::Edition;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("GeoLite2-City.mmdb"), b"db").unwrap();
        std::fs::write(dir.path().join("GeoIP2-ISP.mmdb.tmp"), b"half").unwrap();
        std::fs::create_dir(dir.path().join("GeoIP2-ASN.mmdb")).unwrap();
        let held = held_editions(dir.path());
        assert_eq!(held, [Edition::LiteCity]);
        let socket = std::path::Path::new("/var/run/fairlead");
        let args = overrides(
            Some("127.0.0.1:15000".parse().unwrap()),
            Some(&held),
            Some([127, 0, 3, 7].into()),
            socket,
        );
        assert_eq!(args[0], "--config-yaml");
        let merged: serde_json::Value = serde_json::from_str(&args[1]).unwrap();
        assert_eq!(
            merged["node"]["metadata"]["geoip_editions"],
            serde_json::json!(["GeoLite2-City"])
        );
        assert_eq!(merged["node"]["metadata"]["pod_address"], "127.0.3.7");
        assert_eq!(
            merged["admin"]["address"]["socket_address"]["port_value"],
            15000
        );
        let cluster = &merged["static_resources"]["clusters"][0];
        assert_eq!(cluster["name"], "fairlead-auth");
        assert_eq!(
            cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["pipe"]
                ["path"],
            "/var/run/fairlead/auth.sock"
        );
        let waf = &merged["static_resources"]["clusters"][1];
        assert_eq!(waf["name"], "fairlead-waf");
        assert_eq!(
            waf["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["pipe"]
                ["path"],
            "/var/run/fairlead/waf.sock"
        );
        let none: Vec<String> = overrides(None, None, None, socket);
        assert!(
            !none[1].contains("node"),
            "nothing to say, no node metadata"
        );
        let empty = overrides(None, Some(&[]), None, socket);
        assert!(empty[1].contains("\"geoip_editions\":[]"));
    }
}
