//! `fairlead up`'s own telemetry: its spans exported over OTLP under the configured service
//! name, and a collector that is not there logged once, blocking nothing.

use std::time::{Duration, Instant};

use fairlead_e2e::Up;
use fairlead_kit::testing::free_port;
use fairlead_kit::testing::otlp::OtlpReceiver;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_exports_traces_under_the_configured_service_name() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let endpoint = receiver.endpoint();
    let up = Up::with(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "edge-demo"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    up.wait_ready().await;
    let span = receiver
        .wait_for_span("GET /readyz", Duration::from_secs(10))
        .await
        .expect("the request span is exported while running");
    assert_eq!(span.resource["service.name"], "edge-demo");
    assert_eq!(span.resource["deployment.environment"], "ci");
    let out = up.stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_is_logged_once_and_blocks_nothing() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let up = Up::with(
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", dead.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "50"),
        ],
    );
    up.wait_healthy().await;
    for _ in 0..10 {
        let started = Instant::now();
        let response = reqwest::get(format!("{}/metrics", up.admin)).await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "export never blocks serving"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let out = up.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let reports = stderr
        .lines()
        .filter(|l| l.contains("OTLP trace export failing"))
        .count();
    assert_eq!(reports, 1, "logged exactly once:\n{stderr}");
    assert!(
        stderr
            .lines()
            .filter(|l| l.contains("\"level\":\"ERROR\""))
            .count()
            == 0,
        "no error lines per failed batch:\n{stderr}"
    );
}
