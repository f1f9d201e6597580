//! The pods of the alb chart that run more than one component, composed once: the CLI
//! (`fairlead edge controller`, `fairlead edge xds`) and `fairlead up` both start them here.
//! Each pod reads the world through one index, its own unless it is handed one.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use fairlead_edge_control_plane::run;
use fairlead_edge_index::Index;
use fairlead_kit::Runtime;
use fairlead_kit::tls::ServingTls;

/// The gateway controller's pod: the controller (CRDs, webhooks, the reconcile loop of the
/// Lease holder) and the relationship graph beside it, which reads the world with the pod's
/// identity and is served on every replica.
pub struct GatewayControllerPod {
    /// The controller.
    pub controller: fairlead_edge_controller::start::Settings,
    /// The graph's API.
    pub graph: fairlead_graph_service::Settings,
    /// The index the graph reads; one of the pod's own when `None`.
    pub index: Option<Arc<Index>>,
}

/// The graph's settings in a cluster's gateway controller pod: on `addr` (loopback, behind the
/// pod's kube-rbac-proxy, which alone passes the user headers it trusts), each user's access
/// reviewed, requests without a user refused; `prometheus_url` for the traffic overlay.
pub fn cluster_graph(
    addr: SocketAddr,
    prometheus_url: Option<String>,
) -> fairlead_graph_service::Settings {
    fairlead_graph_service::Settings {
        addr,
        prometheus_url,
        anonymous: None,
        reviews: true,
    }
}

/// What a started gateway controller pod gives its composition.
pub struct GatewayControllerHandle {
    /// Where the graph's API listens.
    pub graph: SocketAddr,
    /// The index the graph reads (started after the CRDs are installed, so every kind is
    /// watched from the first discovery).
    pub index: Arc<Index>,
}

/// Starts the gateway controller's pod in `runtime` with `client`.
pub async fn gateway_controller(
    runtime: &Runtime,
    client: kube::Client,
    pod: GatewayControllerPod,
) -> anyhow::Result<GatewayControllerHandle> {
    fairlead_edge_controller::start(runtime, client.clone(), pod.controller).await?;
    let index = pod
        .index
        .unwrap_or_else(|| Index::start(client.clone(), runtime.shutdown.token()));
    let metrics = runtime
        .metrics
        .shared(fairlead_graph_service::metrics::GraphMetrics::new)?;
    let (graph, _feed) = fairlead_graph_service::start(
        client,
        index.clone(),
        pod.graph,
        metrics,
        runtime.shutdown.token(),
    )
    .await?;
    Ok(GatewayControllerHandle { graph, index })
}

/// The xDS control plane's pod: the index, the translation loop and the xDS server.
pub struct XdsPod {
    /// Where the xDS server listens (the composition binds it).
    pub listener: tokio::net::TcpListener,
    /// Its serving certificate (`None`: plaintext).
    pub tls: Option<tokio::sync::watch::Receiver<Option<ServingTls>>>,
    /// The translation loop's settings.
    pub settings: run::Settings,
    /// The index the control plane reads; one of the pod's own when `None`.
    pub index: Option<Arc<Index>>,
}

/// Starts the xDS control plane's pod in `runtime` with `client`; the xDS server's address.
pub fn xds(runtime: &Runtime, client: kube::Client, pod: XdsPod) -> anyhow::Result<SocketAddr> {
    let index = pod
        .index
        .unwrap_or_else(|| Index::start(client.clone(), runtime.shutdown.token()));
    fairlead_edge_control_plane::start(runtime, client, index, pod.listener, pod.tls, pod.settings)
        .context("starting the xDS control plane")
}

/// Binds `addr` for a component of a pod, saying which.
pub async fn bind(what: &str, addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} to {addr}"))
}
