//! The control plane's traces, received by an OTLP/gRPC receiver: a span per translation
//! (with the number of Gateways) and a span per response pushed to a proxy (its node group
//! and type).

mod cluster;

use std::sync::Arc;
use std::time::Duration;

use cluster::{cluster, control_plane, create};

use fairlead_edge_xds::cache::{Cache, ROUTE};
use fairlead_kit::LogFormat;
use fairlead_kit::telemetry::{Telemetry, TelemetryConfig};
use fairlead_kit::testing::otlp::OtlpReceiver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translations_and_pushes_are_traced() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let telemetry = Telemetry::init(&TelemetryConfig {
        service_name: "fairlead-edge-test".into(),
        log_format: LogFormat::Text,
        log_filter: Some("warn".into()),
        otlp_endpoint: Some(receiver.endpoint()),
    })
    .unwrap();
    let (_server, client) = cluster().await;
    create(&client, serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}))
    .await;
    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                fairlead_edge_xds::server::Ads::new(
                    cache.clone(),
                    Arc::new(fairlead_edge_xds::server::Quiet),
                )
                .into_service(),
            )
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    let hosts = tokio::time::timeout(
        Duration::from_secs(20),
        fairlead_edge_xds::client::fetch_routes(addr, "default/gw", "http-80"),
    )
    .await
    .expect("the route configuration in time")
    .unwrap();
    assert_eq!(hosts, 0, "a Gateway without routes has no virtual host");
    stop.cancel();
    telemetry.shutdown().await;

    let spans = receiver.spans();
    assert!(
        spans
            .iter()
            .any(|s| s.name == "xds.translate" && s.attributes["gateways"] == "1"),
        "no translation span of the Gateway in {spans:#?}"
    );
    assert!(
        spans.iter().any(|s| s.name == "xds.push"
            && s.attributes["type_url"] == ROUTE
            && s.attributes["group"] == "default/gw"
            && s.attributes["resources"] == "1"),
        "no push span of the route configuration in {spans:#?}"
    );
}
