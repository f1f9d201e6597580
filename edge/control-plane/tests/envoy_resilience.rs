//! The ALB's defaults when a backend pod dies before its probe withdraws it, through a real
//! Envoy: a Service with two ready endpoints, one of which refuses connections. No request is
//! lost — the default retry sends what no backend saw to the other endpoint, as Envoy's
//! statistics show it did — and the passive health check leaves the dead endpoint out after
//! three connection failures, so later requests are not retried at all.

mod cluster;
mod proxies;

use std::sync::Arc;
use std::time::Duration;

use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::Cache;
use proxies::{serve_xds, start_envoy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A backend on 127.0.0.1 answering every request `200 OK`.
async fn backend() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    port
}

/// The status Envoy answers `GET path` on `r.example.com` with.
async fn status(client: &reqwest::Client, port: u16, path: &str) -> u16 {
    client
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("host", "r.example.com")
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_costs_no_request_by_default() {
    let (_server, client) = cluster().await;
    let port = fairlead_kit::testing::free_port();
    let alive = backend().await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [
            {"name": "http", "port": port, "protocol": "HTTP"}]}}),
    )
    .await;
    // A Service of two endpoints: 127.0.0.1 answers; 127.0.0.2, the same port, refuses
    // (nothing listens there), as a pod that died does until its readiness changes.
    {
        let service = "pair";
        create(
            &client,
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": "default"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": alive}]}}),
        )
        .await;
        create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": service, "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": alive}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}},
                          {"addresses": ["127.0.0.2"], "conditions": {"ready": true}}]}))
        .await;
    }
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["r.example.com"], "rules": [
            {"backendRefs": [{"name": "pair", "port": 80}]}]}}),
    )
    .await;
    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let xds_port = serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await;
    let dir = tempfile::tempdir().unwrap();
    let admin_port = fairlead_kit::testing::free_port();
    let _envoy = start_envoy(
        &ObjectKey::new("default", "gw"),
        (xds_port, admin_port),
        None,
        dir.path(),
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while status(&http, port, "/nothing-yet").await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy never listened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The route is served once Envoy has the endpoints (a 503 before: no healthy upstream).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while status(&http, port, "/nothing-yet").await != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the route is never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let counters = |admin: u16| {
        let http = http.clone();
        async move {
            let text = http
                .get(format!("http://127.0.0.1:{admin}/stats?filter=pair"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let sum = |suffix: &str| -> u64 {
                text.lines()
                    .filter_map(|l| l.split_once(": "))
                    .filter(|(name, _)| name.ends_with(suffix))
                    .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
                    .sum()
            };
            (
                sum(".upstream_rq_retry"),
                sum(".outlier_detection.ejections_enforced_total"),
            )
        }
    };

    let mut answers = Vec::new();
    for _ in 0..40 {
        answers.push(status(&http, port, "/").await);
    }
    assert!(
        answers.iter().all(|s| *s == 200),
        "requests were lost to the dead endpoint: {answers:?}"
    );
    let (retried, ejected) = counters(admin_port).await;
    assert!(
        retried >= 1,
        "the dead endpoint was never tried, so nothing was shown"
    );
    assert!(ejected >= 1, "the dead endpoint was never left out");
    // Left out, it costs no retry any more.
    for _ in 0..20 {
        assert_eq!(status(&http, port, "/").await, 200);
    }
    assert_eq!(counters(admin_port).await.0, retried, "retried again");
    stop.cancel();
}
