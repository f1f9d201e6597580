//! The ALB's control plane: the translation loop (`run`) reads the snapshots the index
//! publishes, translates every Gateway, and fills the xDS server's cache; on the Lease holder
//! it writes the statuses that changed (`status`), and proxies' rejections become Events on
//! their Gateway; its RBAC rules come from the same kinds table (`rbac`). [`start`] wires it with the xDS server, as `fairlead edge xds` and
//! `fairlead up` run it; its serving certificate comes from a Secret or files ([`fairlead_kit::tls`]).

pub mod rbac;
pub mod run;
pub mod status;

use std::net::SocketAddr;
use std::sync::Arc;

use fairlead_edge_index::Index;
use fairlead_edge_xds::cache::Cache;
use fairlead_edge_xds::metrics::XdsMetrics;
use fairlead_edge_xds::serve::{ServeError, serve};
use fairlead_edge_xds::server::{NackForwarder, Observers};
use fairlead_kit::Runtime;
use fairlead_kit::tls::ServingTls;

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its metrics could not be registered.
    #[error("registering the control plane's metrics: {0}")]
    Metrics(#[from] fairlead_kit::metrics::MetricsError),
    /// The xDS server could not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Starts the control plane in `runtime`: the xDS server on `listener` (over TLS with what
/// `tls` holds, unless it is `None`) and the translation loop over `index` (readiness `xds`
/// after the first translation). Returns the xDS address.
pub fn start(
    runtime: &Runtime,
    client: kube::Client,
    index: Arc<Index>,
    listener: tokio::net::TcpListener,
    tls: Option<tokio::sync::watch::Receiver<Option<ServingTls>>>,
    settings: run::Settings,
) -> Result<SocketAddr, StartError> {
    let metrics = runtime.metrics.shared(XdsMetrics::new)?;
    // The server makes what proxyless gRPC clients ask for from each Gateway's resources.
    // Streams wait for the first translation (see `Cache::awaiting_first`).
    let cache = Arc::new(
        Cache::with_derive(Arc::new(fairlead_edge_render::proxyless::Proxyless)).awaiting_first(),
    );
    let (nacks_tx, nacks) = tokio::sync::mpsc::unbounded_channel();
    let observer = Observers(vec![
        Arc::new(metrics.clone()),
        Arc::new(NackForwarder(nacks_tx)),
    ]);
    let bound = serve(runtime, listener, tls, cache.clone(), Arc::new(observer))?;
    let ready = runtime.readiness.register("xds");
    runtime.shutdown.spawn(run::run(
        client,
        index,
        cache,
        settings,
        metrics,
        nacks,
        runtime.shutdown.token(),
        move || ready.ready(),
    ));
    Ok(bound)
}
