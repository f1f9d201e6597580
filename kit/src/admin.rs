//! The admin HTTP server every component runs: `/metrics`, `/healthz`, `/readyz`.
//!
//! - `/metrics`: the process registry in the Prometheus text format;
//! - `/healthz`: liveness; 200 while the process serves HTTP at all;
//! - `/readyz`: 200 once every registered component is ready, 503 before, with a body that
//!   names the components that are not.
//!
//! The server drains with the process: on shutdown it stops accepting and lets requests in
//! flight finish, within the drain deadline of [`crate::Shutdown`].

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::Metrics;
use crate::propagation::http_server_span;
use crate::readiness::Readiness;
use crate::shutdown::Shutdown;

/// The content type of the Prometheus text exposition format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Errors from starting the admin server.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound.
    #[error("binding the admin server to {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    readiness: Readiness,
}

/// A bound admin server, ready to serve.
#[derive(Debug)]
pub struct AdminServer {
    listener: tokio::net::TcpListener,
    router: Router,
}

impl AdminServer {
    /// Binds the admin server; `extra` routes (a component's own endpoints) are merged in.
    pub async fn bind(
        addr: SocketAddr,
        metrics: Metrics,
        readiness: Readiness,
        extra: Option<Router>,
    ) -> Result<Self, AdminError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| AdminError::Bind { addr, source })?;
        let router = Router::new()
            .route("/metrics", get(serve_metrics))
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(serve_readyz))
            .with_state(AdminState { metrics, readiness })
            .merge(extra.unwrap_or_default())
            .layer(axum::middleware::from_fn(http_server_span));
        Ok(Self { listener, router })
    }

    /// Binds a health-only server (`/healthz`, `/readyz`): what a kubelet probes on the pod's
    /// address while `/metrics` stays on loopback behind kube-rbac-proxy.
    pub async fn bind_health(addr: SocketAddr, readiness: Readiness) -> Result<Self, AdminError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| AdminError::Bind { addr, source })?;
        let router = Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/readyz", get(move || async move { readyz(&readiness) }));
        Ok(Self { listener, router })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound TCP listener has a local address")
    }

    /// Serves until shutdown, as a task the drain waits for.
    pub fn spawn(self, shutdown: &Shutdown) -> tokio::task::JoinHandle<()> {
        let token = shutdown.token();
        let addr = self.local_addr();
        shutdown.spawn(async move {
            tracing::info!(%addr, "admin server listening (/metrics /healthz /readyz)");
            let served = axum::serve(self.listener, self.router)
                .with_graceful_shutdown(token.cancelled_owned())
                .await;
            if let Err(err) = served {
                tracing::error!(error = %err, "admin server stopped");
            }
        })
    }
}

async fn serve_metrics(State(state): State<AdminState>) -> Response {
    let encoded = tracing::info_span!("metrics.encode").in_scope(|| state.metrics.encode());
    match encoded {
        Ok(text) => ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text).into_response(),
        Err(err) => {
            tracing::error!(error = %err, "encoding metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response()
        }
    }
}

async fn serve_readyz(State(state): State<AdminState>) -> Response {
    readyz(&state.readiness)
}

fn readyz(readiness: &Readiness) -> Response {
    let waiting = readiness.not_ready();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", waiting.join(", ")),
        )
            .into_response()
    }
}
