//! What the tests that run a real Envoy against the control plane's cache share: a plaintext
//! xDS server over the cache, and Envoy, bootstrapped as the proxies are, as a child process
//! killed with the test.

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

/// Starts Envoy for `gateway`, bootstrapped as the control plane's proxies are (plaintext xDS
/// at 127.0.0.1:`xds_port`, its admin interface on `admin_port`, its spans to `otlp`), its
/// files in `dir`: `<name>.yaml` the bootstrap, `<name>.log` Envoy's log and
/// `<name>.access.log` its access log.
pub fn start_envoy(
    gateway: &fairlead_edge_model::ObjectKey,
    (xds_port, admin_port): (u16, u16),
    otlp: Option<fairlead_edge_bootstrap::Otlp>,
    dir: &std::path::Path,
) -> Envoy {
    let spec = fairlead_edge_bootstrap::Spec {
        gateway: gateway.clone(),
        node_id: None,
        xds_host: "127.0.0.1".into(),
        xds_port,
        admin_port,
        tls: None,
        otlp,
    };
    let name = gateway.name();
    let bootstrap = dir.join(format!("{name}.yaml"));
    std::fs::write(&bootstrap, fairlead_edge_bootstrap::yaml(&spec).unwrap()).unwrap();
    Envoy(
        tokio::process::Command::new(fairlead_kit::testing::envoy())
            .arg("--config-path")
            .arg(&bootstrap)
            .args(["--log-level", "warn", "--use-dynamic-base-id"])
            .stdout(std::fs::File::create(dir.join(format!("{name}.access.log"))).unwrap())
            .stderr(std::fs::File::create(dir.join(format!("{name}.log"))).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("starting Envoy"),
    )
}
