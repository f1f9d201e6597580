//! The control plane's traces, received by an OTLP/gRPC receiver: a span per translation
//! (with the number of Gateways) and a span per response pushed to a proxy (its node group
//! and type).

use std::sync::Arc;
use std::time::Duration;

use fairlead_edge_xds::cache::{Cache, ROUTE};
use fairlead_edge_xds::metrics::XdsMetrics;
use fairlead_kit::telemetry::{Telemetry, TelemetryConfig};
use fairlead_kit::testing::otlp::OtlpReceiver;
use fairlead_kit::{LogFormat, Metrics};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use tokio_util::sync::CancellationToken;

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
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    fairlead_edge_xds::crds::install(&client, fairlead_edge_translate::CONTROLLER_NAME)
        .await
        .unwrap();
    let gateways: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource {
            group: "gateway.networking.k8s.io".into(),
            version: "v1".into(),
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: "Gateway".into(),
            plural: "gateways".into(),
        },
    );
    let gateway = serde_json::from_value(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}))
    .unwrap();
    gateways
        .create(&PostParams::default(), &gateway)
        .await
        .unwrap();

    let cache = Arc::new(Cache::new());
    let metrics = XdsMetrics::new(&Metrics::new("traces").unwrap()).unwrap();
    let stop = CancellationToken::new();
    let (_nacks_tx, nacks) = tokio::sync::mpsc::unbounded_channel();
    let settings = fairlead_edge_xds::run::Settings {
        controller_name: fairlead_edge_translate::CONTROLLER_NAME.into(),
        lease: fairlead_kit::lease::LeaseConfig::new("alb-xds", "default", "test"),
    };
    tokio::spawn(fairlead_edge_xds::run::run(
        client.clone(),
        cache.clone(),
        settings,
        metrics,
        nacks,
        stop.clone(),
        || {},
    ));
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
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let hosts = tokio::time::timeout(
        Duration::from_secs(20),
        fairlead_edge_xds::bench::fetch_routes(addr, "default/gw", "http-80"),
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
