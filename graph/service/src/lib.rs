//! The graph's service: watches what the graph reads besides the index (`sources`),
//! rebuilds and publishes the graph on every change (`publish`), asks Prometheus for the
//! traffic overlay (`traffic`), decides per user what is shown (`authz`) and serves the API
//! and the viewer (`api`, `viewer`). It listens on loopback: in a cluster kube-rbac-proxy in
//! the same pod is its only client, and the only sender of the user headers it trusts.

pub mod api;
pub mod authz;
pub mod cli;
pub mod metrics;
pub mod publish;
pub mod rbac;
pub mod sources;
pub mod traffic;
pub mod viewer;

use std::net::SocketAddr;
use std::sync::Arc;

use fairlead_edge_index::Index;
use tokio_util::sync::CancellationToken;

/// How the service runs.
pub struct Settings {
    /// Where it listens (loopback in a cluster).
    pub addr: SocketAddr,
    /// Prometheus for the traffic overlay.
    pub prometheus_url: Option<String>,
    /// Who a request without user headers is served as (`None`: refused with 401).
    pub anonymous: Option<authz::User>,
    /// Review access with SubjectAccessReviews (else everyone sees everything).
    pub reviews: bool,
}

/// A service that cannot start.
#[derive(Debug, thiserror::Error)]
#[error("binding the graph service to {addr}: {source}")]
pub struct BindError {
    addr: SocketAddr,
    source: std::io::Error,
}

/// Starts the sources, the publisher, the traffic overlay and the server (until `stop`);
/// the address it listens on, and the feed.
pub async fn start(
    client: kube::Client,
    index: Arc<Index>,
    settings: Settings,
    metrics: metrics::GraphMetrics,
    stop: CancellationToken,
) -> Result<(SocketAddr, Arc<publish::Feed>), BindError> {
    let addr = settings.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| BindError { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| BindError { addr, source })?;
    let sources = sources::Sources::start(&client, &stop);
    let traffic = settings
        .prometheus_url
        .map(|url| traffic::Traffic::start(url, metrics.clone(), stop.clone()));
    let feed = Arc::new(publish::Feed::default());
    tokio::spawn(publish::run(
        index,
        sources,
        traffic,
        feed.clone(),
        metrics.clone(),
        stop.clone(),
    ));
    let access = if settings.reviews {
        authz::Access::reviews(client)
    } else {
        authz::Access::Everything
    };
    let app = api::router(Arc::new(api::Shared {
        feed: feed.clone(),
        access,
        anonymous: settings.anonymous,
        metrics,
        stop: stop.clone(),
    }));
    tracing::info!(addr = %bound, "graph API listening");
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the graph service stopped");
        }
    });
    Ok((bound, feed))
}
