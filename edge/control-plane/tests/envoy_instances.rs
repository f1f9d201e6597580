//! What an ALB instance asks of its Gateway's listeners, through a real Envoy fed by the
//! control plane: `acceptRequestsFrom` refuses connections from other peers, the PROXY
//! protocol names the client (and a connection without its header is refused), and
//! `originalIPDetection` believes `X-Forwarded-For` or `X-Real-IP` only from `setRealIPFrom`,
//! `enableHTTP3` serves the HTTPS port's routes over QUIC to a real HTTP/3 client (aioquic)
//! and advertises it (`alt-svc`), and `openTelemetry.tracing` sends spans over OTLP/HTTP and
//! TLS (the collector's own CA) to the path its URL names. The client's address Envoy settled on is read from
//! its access log.

mod cluster;
mod proxies;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::Cache;
use proxies::{serve_xds, start_envoy};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A backend answering `ok` to every request.
async fn backend() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    port
}

/// Sends `prefix` then a request with `headers` from the address `from`; the status, or
/// `None` when the connection was closed without an answer.
async fn request(from: &str, port: u16, prefix: &str, headers: &str) -> Option<u16> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let target: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut stream = socket.connect(target).await.ok()?;
    let text = format!(
        "{prefix}GET / HTTP/1.1\r\nHost: app.example.com\r\n{headers}connection: close\r\n\r\n"
    );
    stream.write_all(text.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.split_whitespace().nth(1)?.parse().ok()
}

/// The client addresses of `gateway`'s access log, in order.
fn clients(dir: &std::path::Path, gateway: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(format!("{gateway}.access.log")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["client_address"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until the next access log line of `gateway` appears; its client address.
async fn next_client(dir: &std::path::Path, gateway: &str, seen: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(client) = clients(dir, gateway).get(seen) {
            return client.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no access log line for {gateway}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_settings_reach_envoy() {
    let (_server, client) = cluster().await;
    let cache = Arc::new(Cache::new());
    let (_stop, _) = control_plane(&client, &cache);
    let xds = serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await;
    let web = backend().await;
    let (guarded_port, proxied_port, quic_port, traced_port) = (
        fairlead_kit::testing::free_port(),
        fairlead_kit::testing::free_port(),
        fairlead_kit::testing::free_port(),
        fairlead_kit::testing::free_port(),
    );
    // A collector over TLS (its own CA), taking OTLP/HTTP.
    let otel_ca = fairlead_kit::pki::Ca::generate("collector CA").unwrap();
    let otel_cert = otel_ca.issue_server(&["localhost"], &[]).unwrap();
    let receiver =
        fairlead_kit::testing::otlp::OtlpReceiver::start_tls(fairlead_kit::tls::ServingTls {
            cert_pem: otel_cert.cert_pem.clone(),
            key_pem: otel_cert.key_pem.clone(),
            client_ca_pem: None,
        })
        .await
        .unwrap();
    let tracing_spec = json!({"url": format!("https://localhost:{}/custom/traces", receiver.addr().port()),
        "protocol": "HTTP", "tls": {"caSecretName": "otel-ca"}});
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d8-alb"}}),
    )
    .await;
    for (instance, spec) in [
        // Only 127.0.0.9 may connect; its X-Forwarded-For is believed.
        (
            "guarded",
            json!({"gatewayName": "guarded", "acceptRequestsFrom": ["127.0.0.9/32"],
            "originalIPDetection": {"realIPHeader": "X-Forwarded-For", "setRealIPFrom": ["127.0.0.9/32"]}}),
        ),
        // Behind a load balancer speaking the PROXY protocol; X-Real-IP believed from 127.0.0.7.
        (
            "proxied",
            json!({"gatewayName": "proxied", "useProxyProtocol": true,
            "originalIPDetection": {"realIPHeader": "X-Real-IP", "setRealIPFrom": ["127.0.0.7/32"]}}),
        ),
        // HTTP/3 beside HTTPS.
        ("quic", json!({"gatewayName": "quic", "enableHTTP3": true})),
        // Spans over OTLP/HTTP and TLS to the collector.
        (
            "traced",
            json!({"gatewayName": "traced", "openTelemetry": {"tracing": tracing_spec}}),
        ),
    ] {
        create(
            &client,
            json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
            "metadata": {"name": instance}, "spec": spec}),
        )
        .await;
    }
    for (gateway, port) in [
        ("guarded", guarded_port),
        ("proxied", proxied_port),
        ("traced", traced_port),
    ] {
        create(
            &client,
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": gateway, "namespace": "d8-alb",
                "labels": {"alb.deckhouse.io/instance": format!("ClusterALBInstance.{gateway}")}},
            "spec": {"gatewayClassName": "d8-alb",
                "listeners": [{"name": "http", "port": port, "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
        )
        .await;
        create(
            &client,
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": gateway, "namespace": "default"},
            "spec": {"parentRefs": [{"name": gateway, "namespace": "d8-alb"}],
                "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}),
        )
        .await;
    }
    let ca = fairlead_kit::pki::Ca::generate("quic CA").unwrap();
    let cert = ca.issue_server(&["app.example.com"], &[]).unwrap();
    let b64 = |t: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(t)
    };
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "app", "namespace": "d8-alb"},
        "data": {"tls.crt": b64(&cert.cert_pem), "tls.key": b64(&cert.key_pem)}}),
    )
    .await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "quic", "namespace": "d8-alb",
            "labels": {"alb.deckhouse.io/instance": "ClusterALBInstance.quic"}},
        "spec": {"gatewayClassName": "d8-alb",
            "listeners": [{"name": "https", "port": quic_port, "protocol": "HTTPS", "hostname": "app.example.com",
                "tls": {"certificateRefs": [{"name": "app"}]},
                "allowedRoutes": {"namespaces": {"from": "All"}}}]}})).await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "quic", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "quic", "namespace": "d8-alb"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}),
    )
    .await;
    create(&client, json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": web}]}})).await;
    create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": web}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]})).await;

    let dir = tempfile::tempdir().unwrap();
    let _guarded = start_envoy(
        &ObjectKey::new("d8-alb", "guarded"),
        (xds, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    let _proxied = start_envoy(
        &ObjectKey::new("d8-alb", "proxied"),
        (xds, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    let _quic = start_envoy(
        &ObjectKey::new("d8-alb", "quic"),
        (xds, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    // The traced proxy's collector as the gateway controller renders it, the CA Secret's
    // `cacert` as a file.
    let traced_spec: fairlead_edge_api::InstanceSpec = serde_json::from_value(
        json!({"gatewayName": "traced", "openTelemetry": {"tracing": tracing_spec}}),
    )
    .unwrap();
    let collector = fairlead_edge_model::instance::collector(&traced_spec, "d8-alb")
        .unwrap()
        .unwrap();
    assert_eq!(
        collector.tls.as_ref().unwrap().ca_secret.as_deref(),
        Some("otel-ca")
    );
    let ca_file = dir.path().join("otel-ca.crt");
    std::fs::write(&ca_file, otel_ca.cert_pem()).unwrap();
    let _traced = start_envoy(
        &ObjectKey::new("d8-alb", "traced"),
        (xds, fairlead_kit::testing::free_port()),
        Some(fairlead_edge_bootstrap::Otlp {
            collector,
            ca_file: Some(ca_file.display().to_string()),
        }),
        dir.path(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while request("127.0.0.9", guarded_port, "", "").await != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the guarded Gateway never served 127.0.0.9: {}",
            std::fs::read_to_string(dir.path().join("guarded.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // openTelemetry.tracing: a sampled request's span reaches the collector over OTLP/HTTP
    // and TLS, posted to the URL's path.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("traceparent: 00-{trace}-00f067aa0ba902b7-01\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let served = request("127.0.0.1", traced_port, "", &traceparent).await == Some(200);
        if served && receiver.spans().iter().any(|s| s.trace_id == trace) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no span of the trace reached the collector (served: {served}): {:?}\n{}",
            receiver.spans(),
            std::fs::read_to_string(dir.path().join("traced.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        receiver.http_paths().iter().all(|p| p == "/custom/traces")
            && !receiver.http_paths().is_empty(),
        "{:?}",
        receiver.http_paths()
    );

    // acceptRequestsFrom: another peer's connection is closed unanswered; a header naming an
    // allowed address does not help it.
    assert_eq!(request("127.0.0.1", guarded_port, "", "").await, None);
    assert_eq!(
        request(
            "127.0.0.1",
            guarded_port,
            "",
            "x-forwarded-for: 127.0.0.9\r\n"
        )
        .await,
        None
    );
    // From the allowed peer, its X-Forwarded-For names the client.
    let seen = clients(dir.path(), "guarded").len();
    assert_eq!(
        request(
            "127.0.0.9",
            guarded_port,
            "",
            "x-forwarded-for: 203.0.113.7\r\n"
        )
        .await,
        Some(200)
    );
    assert_eq!(
        next_client(dir.path(), "guarded", seen).await,
        "203.0.113.7"
    );

    // The PROXY protocol: the load balancer's header names the client; without one, the
    // connection is refused.
    let deadline = Instant::now() + Duration::from_secs(30);
    let header = |source: &str| format!("PROXY TCP4 {source} 127.0.0.1 40000 {proxied_port}\r\n");
    while request("127.0.0.1", proxied_port, &header("198.51.100.4"), "").await != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the proxied Gateway never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(request("127.0.0.1", proxied_port, "", "").await, None);
    let seen = clients(dir.path(), "proxied").len();
    assert_eq!(
        request("127.0.0.1", proxied_port, &header("198.51.100.4"), "").await,
        Some(200)
    );
    assert_eq!(
        next_client(dir.path(), "proxied", seen).await,
        "198.51.100.4"
    );
    // X-Real-IP is believed from 127.0.0.7 (the real peer), not from another.
    let seen = clients(dir.path(), "proxied").len();
    assert_eq!(
        request(
            "127.0.0.7",
            proxied_port,
            &header("198.51.100.4"),
            "x-real-ip: 192.0.2.55\r\n"
        )
        .await,
        Some(200)
    );
    assert_eq!(next_client(dir.path(), "proxied", seen).await, "192.0.2.55");
    let seen = clients(dir.path(), "proxied").len();
    assert_eq!(
        request(
            "127.0.0.1",
            proxied_port,
            &header("198.51.100.4"),
            "x-real-ip: 192.0.2.55\r\n"
        )
        .await,
        Some(200)
    );
    assert_eq!(
        next_client(dir.path(), "proxied", seen).await,
        "198.51.100.4",
        "an untrusted peer's X-Real-IP is ignored"
    );

    // HTTP/3: HTTPS answers advertise it; a real HTTP/3 client gets the route's answer over
    // QUIC on the same port.
    let https = |port: u16| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "-D", "-", "--max-time", "5", "--resolve"])
            .arg(format!("app.example.com:{port}:127.0.0.1"))
            .arg(format!("https://app.example.com:{port}/"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let answer = https(quic_port);
        if answer.starts_with("http/") && answer.contains(" 200") {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the quic Gateway never served HTTPS: {answer} {}",
            std::fs::read_to_string(dir.path().join("quic.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        answer.contains(&format!("alt-svc: h3=\":{quic_port}\"; ma=86400")),
        "{answer}"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h3/get.py");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = tokio::process::Command::new("python3")
            .args([
                script,
                "127.0.0.1",
                &quic_port.to_string(),
                "app.example.com",
                "/",
            ])
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.lines().next() == Some("200") {
            assert_eq!(text.lines().nth(1), Some("ok"), "{text}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no HTTP/3 answer: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
