//! Traces reach a real OTLP/gRPC receiver: names, attributes, parent/child links, the
//! resource's `service.name`, and a W3C `traceparent` continued by the admin server.

use std::time::Duration;

use fairlead_kit::telemetry::{Telemetry, TelemetryConfig};
use fairlead_kit::testing::otlp::OtlpReceiver;
use fairlead_kit::{AdminServer, LogFormat, Metrics, Readiness, Shutdown};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tracing::instrument(name = "reconcile", fields(swh = "default/web"))]
async fn reconcile() {
    let round = tracing::info_span!("probe.round", port = 8080_i64, mode = "TCP");
    let _entered = round.enter();
    tracing::warn!(reason = "connection refused", "probe failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_arrive_with_links_attributes_and_service_name() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let telemetry = Telemetry::init(&TelemetryConfig {
        service_name: "fairlead-test".into(),
        log_format: LogFormat::Text,
        log_filter: Some("info".into()),
        otlp_endpoint: Some(receiver.endpoint()),
    })
    .unwrap();
    assert!(telemetry.exports_traces());

    reconcile().await;

    let shutdown = Shutdown::new(Duration::from_secs(5));
    let admin = AdminServer::bind(
        "127.0.0.1:0".parse().unwrap(),
        Metrics::new("fairlead-test").unwrap(),
        Readiness::new(),
        None,
    )
    .await
    .unwrap();
    let addr = admin.local_addr();
    admin.spawn(&shutdown);
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    shutdown.trigger();
    shutdown.drained().await;
    telemetry.shutdown().await;

    let spans = receiver.spans();
    let find = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name:?} in {spans:#?}"))
    };

    let parent = find("reconcile");
    let child = find("probe.round");
    assert_eq!(parent.parent_span_id, "", "reconcile is a root span");
    assert_eq!(child.parent_span_id, parent.span_id);
    assert_eq!(child.trace_id, parent.trace_id);
    assert_eq!(parent.attributes["swh"], "default/web");
    assert_eq!(child.attributes["port"], "8080");
    assert_eq!(child.attributes["mode"], "TCP");
    assert_eq!(child.events, vec!["probe failed"]);
    assert_eq!(parent.resource["service.name"], "fairlead-test");
    assert_eq!(
        parent.resource["service.version"],
        env!("CARGO_PKG_VERSION")
    );

    let request = find("GET /metrics");
    assert_eq!(
        request.trace_id, CALLER_TRACE,
        "continues the caller's trace"
    );
    assert_eq!(request.parent_span_id, CALLER_SPAN);
    assert_eq!(request.kind, "SPAN_KIND_SERVER");
    assert_eq!(request.attributes["http.route"], "/metrics");
    assert_eq!(request.attributes["http.request.method"], "GET");
    assert_eq!(request.attributes["http.response.status_code"], "200");
    let encode = find("metrics.encode");
    assert_eq!(encode.parent_span_id, request.span_id);
    assert!(
        spans
            .iter()
            .all(|s| s.resource["service.name"] == "fairlead-test"),
        "every span names the service"
    );
}
