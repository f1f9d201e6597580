//! The health module's traces, received by an OTLP/gRPC receiver: a span per probe under its
//! probe round, failures as span events, and a span per controller reconcile.

mod common;

use std::time::Duration;

use common::{cluster, pod, start_agent};
use fairlead_health::controller::{self, LEASE};
use fairlead_health::metrics::HealthMetrics;
use fairlead_health_api::ServiceWithHealthchecks;
use fairlead_kit::lease::LeaseConfig;
use fairlead_kit::telemetry::{Telemetry, TelemetryConfig};
use fairlead_kit::testing::otlp::OtlpReceiver;
use fairlead_kit::{LogFormat, Metrics};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_reconciles_are_traced() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let telemetry = Telemetry::init(&TelemetryConfig {
        service_name: "fairlead-health-test".into(),
        log_format: LogFormat::Text,
        log_filter: Some("warn".into()),
        otlp_endpoint: Some(receiver.endpoint()),
    })
    .unwrap();
    let (_server, client) = cluster().await;
    pod(&client, "traced", "traced", "n1", "127.0.0.13").await;
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let body = common::swh(
        "traced",
        "traced",
        1,
        serde_json::json!([{"mode": "TCP", "tcp": {"targetPort": 1}}]),
    );
    swhs.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap();
    let stop_agent = start_agent(&client, "n1");
    let stop_controller = CancellationToken::new();
    let lease = LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_interval: Duration::from_millis(200),
        ..LeaseConfig::new(LEASE, "default", "c")
    };
    let metrics = HealthMetrics::new(&Metrics::new("traces").unwrap()).unwrap();
    tokio::spawn(controller::run(
        client.clone(),
        lease,
        metrics,
        stop_controller.clone(),
        || {},
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_agent.cancel();
    stop_controller.cancel();
    telemetry.shutdown().await;

    let spans = receiver.spans();
    let probe = spans
        .iter()
        .find(|s| s.name == "probe")
        .unwrap_or_else(|| panic!("no probe span in {spans:#?}"));
    assert_eq!(probe.attributes["swh"], "default/traced");
    assert_eq!(probe.attributes["mode"], "tcp");
    assert!(
        probe.events.iter().any(|e| e == "probe failed"),
        "{:?}",
        probe.events
    );
    let round = spans
        .iter()
        .find(|s| s.span_id == probe.parent_span_id)
        .expect("the probe's parent span");
    assert_eq!(round.name, "probe.round");
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .expect("a controller reconcile span");
    assert_eq!(reconcile.attributes["swh"], "default/traced");
    assert!(
        spans
            .iter()
            .all(|s| s.resource["service.name"] == "fairlead-health-test")
    );
}
