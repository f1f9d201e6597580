//! The runtime a component starts with: telemetry, metrics, readiness and shutdown, together.

use std::time::Duration;

use crate::admin::{AdminError, AdminServer};
use crate::cli::GlobalArgs;
use crate::metrics::{Metrics, MetricsError};
use crate::readiness::Readiness;
use crate::shutdown::{Drained, Shutdown};
use crate::telemetry::{Telemetry, TelemetryConfig, TelemetryError};

/// Errors from starting the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Logs or traces could not be set up.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// The metric registry could not be set up.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The signal handlers could not be installed.
    #[error("installing signal handlers: {0}")]
    Signals(#[from] std::io::Error),
}

/// What every component runs on. Fields are cheap to clone handles.
#[derive(Debug)]
pub struct Runtime {
    /// The process's metric registry.
    pub metrics: Metrics,
    /// Component readiness, served on `/readyz`.
    pub readiness: Readiness,
    /// The shutdown coordinator.
    pub shutdown: Shutdown,
    telemetry: Telemetry,
}

impl Runtime {
    /// Sets up logs, traces, metrics and signal handling for `component` (the default OTel
    /// `service.name`, e.g. `fairlead-health-agent`). Call once per process, inside Tokio.
    pub fn start(
        args: &GlobalArgs,
        component: &str,
        drain_deadline: Duration,
    ) -> Result<Self, RuntimeError> {
        let telemetry = Telemetry::init(&TelemetryConfig::from_args(args, component))?;
        let metrics = Metrics::new(component)?;
        let shutdown = Shutdown::new(drain_deadline);
        shutdown.listen_for_signals()?;
        Ok(Self {
            metrics,
            readiness: Readiness::new(),
            shutdown,
            telemetry,
        })
    }

    /// Serves the admin server (`/metrics`, `/healthz`, `/readyz`, and `extra` routes) on
    /// `admin` and, when given, the health-only server on `health` (for a kubelet's probes
    /// while `admin` stays on loopback behind kube-rbac-proxy), until shutdown.
    pub async fn serve_admin(
        &self,
        admin: std::net::SocketAddr,
        health: Option<std::net::SocketAddr>,
        extra: Option<axum::Router>,
    ) -> Result<(), AdminError> {
        AdminServer::bind(admin, self.metrics.clone(), self.readiness.clone(), extra)
            .await?
            .spawn(&self.shutdown);
        if let Some(addr) = health {
            AdminServer::bind_health(addr, self.readiness.clone())
                .await?
                .spawn(&self.shutdown);
        }
        Ok(())
    }

    /// Waits for shutdown and the drain, then flushes traces.
    pub async fn finish(self) -> Drained {
        let drained = self.shutdown.drained().await;
        self.telemetry.shutdown().await;
        drained
    }
}
