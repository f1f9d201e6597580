//! What runs in an ALB proxy container, in the manner of Envoy Gateway's shutdown manager or
//! Istio's pilot-agent, as one binary: [`run`] renders the bootstrap (the pure
//! `fairlead-edge-bootstrap` function, with the SDS document of the proxy's client
//! certificate, which Envoy watches, so a renewed certificate needs no restart), starts Envoy
//! as its child and supervises it:
//!
//! - **readiness follows configuration**: ready only once Envoy is live *and* has accepted
//!   listeners from the control plane ([`admin::Admin::configured`]), not merely started;
//! - **graceful drain** on shutdown: health checks fail first, listeners drain gracefully,
//!   and Envoy stops once active connections fall to the threshold or the drain deadline
//!   passes ([`drain`]);
//! - **Envoy's logs** pass through to stderr line by line; the last of them are kept, and an
//!   Envoy that dies takes the supervisor down with them in the error ([`logs`]);
//! - Envoy's admin stays on 127.0.0.1; its Prometheus stats are served by the supervisor's
//!   metrics port ([`stats_router`]).
//!
//! `fairlead edge proxy` runs one; `fairlead up` runs one per Gateway, each on a loopback
//! address of its own ([`local`]).

pub mod admin;
pub mod drain;
pub mod local;
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
    /// The bootstrap (its admin port is where the supervisor reaches Envoy).
    pub bootstrap: fairlead_edge_bootstrap::Spec,
    /// Where the bootstrap (and the SDS document, unless the spec names another place) are
    /// written.
    pub work_dir: PathBuf,
    /// Envoy's log level (`trace` … `critical`, `off`).
    pub log_level: String,
    /// The drain: how long, and how few connections are few enough to stop early.
    pub drain: drain::Drain,
    /// Where Envoy's stdout (its access log, a JSON line per request) goes: appended to this
    /// file, or the supervisor's own stdout when `None` (a container's log).
    pub access_log: Option<PathBuf>,
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

/// Writes the bootstrap (and the client certificate's SDS document) into `settings.work_dir`;
/// returns the bootstrap's path.
pub fn write_bootstrap(settings: &Settings) -> Result<PathBuf, ProxyError> {
    std::fs::create_dir_all(&settings.work_dir)
        .map_err(io(format!("creating {}", settings.work_dir.display())))?;
    let spec = &settings.bootstrap;
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
    let mut child = tokio::process::Command::new(&settings.envoy)
        .arg("--config-path")
        .arg(&bootstrap)
        .args(["--log-level", &settings.log_level])
        // Several proxies share a host (`fairlead up`): each gets its own shared-memory id.
        .arg("--use-dynamic-base-id")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(io(format!("starting {}", settings.envoy.display())))?;
    let gateway = settings.bootstrap.gateway.clone();
    tracing::info!(%gateway, pid = child.id(), envoy = %settings.envoy.display(), "Envoy started");
    let last = LastLines::new(logs::KEPT);
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(last.clone().forward(stderr));
    }
    let admin = Admin::new(settings.bootstrap.admin_port);
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

/// Routes serving Envoy's Prometheus stats (`/stats/prometheus`) from its admin interface, for
/// the supervisor's metrics port.
pub fn stats_router(admin_port: u16) -> axum::Router {
    let admin = Admin::new(admin_port);
    axum::Router::new().route(
        "/stats/prometheus",
        axum::routing::get(move || {
            let admin = admin.clone();
            async move {
                match admin.get("/stats/prometheus").await {
                    Ok(text) => (
                        axum::http::StatusCode::OK,
                        [("content-type", "text/plain; version=0.0.4")],
                        text,
                    ),
                    Err(e) => (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        [("content-type", "text/plain")],
                        format!("Envoy's admin interface does not answer: {e}\n"),
                    ),
                }
            }
        }),
    )
}
