//! What the tests that run a real Envoy against the control plane's cache share: a plaintext
//! xDS server over the cache, and Envoy as a child process killed with the test.

use std::sync::Arc;

use fairlead_edge_xds::cache::Cache;

/// The xDS services (plaintext) over `cache` on a free port, reporting their streams to
/// `observer` ([`fairlead_edge_xds::server::Quiet`] when nothing listens): Envoy's control
/// plane here, and a real gRPC service to route to.
pub async fn serve_xds(
    cache: &Arc<Cache>,
    observer: Arc<dyn fairlead_edge_xds::server::Observer>,
) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(fairlead_edge_xds::services::routes(
                fairlead_edge_xds::server::Ads::new(cache.clone(), observer),
            ))
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    port
}

/// Envoy as a child process, killed with the test.
pub struct Envoy(pub tokio::process::Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}
