//! The edge's known attack classes on request paths and hosts, through a real Envoy: from the
//! CVE history of gateway controllers (Istio's and Envoy's path normalization advisories),
//! requests that try to reach `/admin` — a route only 10.0.0.0/8 may use — through the route
//! anyone may use (`/public`), or through the host a proxy would match differently than a
//! backend reads it. Each is a named case with the answer it must get; and whatever the
//! answer, the backend must never receive a path that a server would read as `/admin`
//! unless the request came through the protected route (which refuses this client). Beside
//! them: Envoy's admin interface answers on the pod's loopback only, and what a client sends
//! (its User-Agent, path, Host, X-Forwarded-For) cannot add a field to, or break, a line of
//! the JSON access log.

mod cluster;
mod proxies;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::Cache;
use proxies::{serve_xds, start_envoy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A backend answering `200` with the request's path, and recording every path it got.
async fn backend(seen: Arc<Mutex<Vec<String>>>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 2048];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let path = text.split(' ').nth(1).unwrap_or_default().to_owned();
                seen.lock().unwrap().push(path.clone());
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{path}",
                    path.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// Sends `request` as written (no client normalizes it) and returns the status.
async fn send(port: u16, request: &str) -> u16 {
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return 0;
    };
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn get(host: &str, target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// How a server reading `path` might resolve it: percent-decoded (`%2F`, `%2e`, `%5C` too),
/// backslashes as slashes, dot segments removed, slashes merged, lowercased.
fn as_a_backend_reads(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut decoded = String::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = path
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            decoded.push(char::from(byte));
            i += 3;
        } else {
            decoded.push(char::from(bytes[i]));
            i += 1;
        }
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/")).to_lowercase()
}

#[test]
fn a_backend_reading_resolves_what_servers_resolve() {
    for (path, read) in [
        ("/public/x", "/public/x"),
        ("//admin", "/admin"),
        ("/public/..%2Fadmin", "/admin"),
        ("/%2e%2e/admin", "/admin"),
        ("/public\\..\\admin", "/admin"),
        ("/PUBLIC/../Admin", "/admin"),
    ] {
        assert_eq!(as_a_backend_reads(path), read, "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_and_host_tricks_never_reach_the_protected_route_through_the_open_one() {
    let (_server, client) = cluster().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let port = backend(seen.clone()).await;
    let listener = fairlead_kit::testing::free_port();
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [
            {"name": "http", "port": listener, "protocol": "HTTP"}]}}),
    )
    .await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]}}),
    )
    .await;
    create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "app", "namespace": "default", "labels": {"kubernetes.io/service-name": "app"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": port}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]}))
    .await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "public", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["app.example.com"], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/public"}}],
             "backendRefs": [{"name": "app", "port": 80}]}]}}),
    )
    .await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "admin", "namespace": "default",
            "annotations": {"alb.network.deckhouse.io/whitelist-source-range": "10.0.0.0/8"}},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["app.example.com"], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/admin"}}],
             "backendRefs": [{"name": "app", "port": 80}]}]}}),
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while send(listener, &get("app.example.com", "/public/ready")).await != 200
        || send(listener, &get("app.example.com", "/admin")).await != 403
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the routes are never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // (name, Host, request target, the answers it may get)
    let cases: &[(&str, &str, &str, &[u16])] = &[
        ("the open route", "app.example.com", "/public/x", &[200]),
        ("the protected route", "app.example.com", "/admin", &[403]),
        ("a doubled slash", "app.example.com", "//admin", &[403]),
        (
            "dot segments",
            "app.example.com",
            "/public/../admin",
            &[403],
        ),
        (
            "an encoded slash after dot segments",
            "app.example.com",
            "/public/..%2Fadmin",
            // Redirected to the unescaped path, which is the protected route's.
            &[301, 302, 307, 308, 400, 403, 404],
        ),
        (
            "an encoded lowercase slash",
            "app.example.com",
            "/public/..%2fadmin",
            &[301, 302, 307, 308, 400, 403, 404],
        ),
        ("encoded dots", "app.example.com", "/%2e%2e/admin", &[403]),
        (
            "encoded dots under the open prefix",
            "app.example.com",
            "/public/%2e%2e/admin",
            &[403],
        ),
        (
            "backslashes",
            "app.example.com",
            "/public\\..\\admin",
            &[400, 403, 404],
        ),
        (
            "an encoded backslash",
            "app.example.com",
            "/public/..%5Cadmin",
            &[301, 302, 307, 308, 400, 403, 404],
        ),
        (
            "a fragment",
            "app.example.com",
            "/public#/../admin",
            &[200, 400],
        ),
        ("a mixed-case host", "APP.Example.COM", "/admin", &[403]),
        (
            "a mixed-case host on the open route",
            "APP.Example.COM",
            "/public/x",
            &[200],
        ),
        ("a trailing dot", "app.example.com.", "/admin", &[403]),
        (
            "a trailing dot on the open route",
            "app.example.com.",
            "/public/x",
            &[200],
        ),
        ("a port in the host", "app.example.com:80", "/admin", &[403]),
        (
            "an absolute target naming another host",
            "app.example.com",
            "http://app.example.com/admin",
            &[403],
        ),
    ];
    let mut wrong = Vec::new();
    for (name, host, target, allowed) in cases {
        let status = send(listener, &get(host, target)).await;
        if !allowed.contains(&status) {
            wrong.push(format!(
                "{name} ({host} {target}): {status}, not one of {allowed:?}"
            ));
        }
    }
    let reached: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|p| as_a_backend_reads(p).starts_with("/admin"))
        .cloned()
        .collect();
    assert!(
        reached.is_empty(),
        "the backend got paths it reads as /admin: {reached:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The admin interface: on 127.0.0.1, not on another of this machine's addresses.
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", admin_port))
            .await
            .is_ok()
    );
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.2", admin_port))
            .await
            .is_err(),
        "Envoy's admin interface answers beyond the pod's loopback"
    );

    // Log injection: quotes, backslashes, braces and JSON of its own in what a client sends.
    let injected = r#"evil", "response_code": "999", "forged": {"x": "\"}"#;
    let request = format!(
        "GET /public/log%22%7D%7B%22forged%22:1 HTTP/1.1\r\nHost: app.example.com\r\nUser-Agent: {injected}\r\nX-Forwarded-For: 1.2.3.4\", \"forged\": \"x\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(send(listener, &request).await, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let lines = loop {
        let text = std::fs::read_to_string(dir.path().join("gw.access.log")).unwrap_or_default();
        if text.contains("evil") {
            break text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the request is never logged"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let expected: std::collections::BTreeSet<&str> =
        fairlead_edge_render::telemetry::ACCESS_LOG_FIELDS
            .iter()
            .map(|(name, _)| *name)
            .chain(["listener"])
            .collect();
    for line in lines.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("an access log line is not JSON ({e}): {line}"));
        let fields: std::collections::BTreeSet<&str> = entry
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(fields, expected, "a line with other fields: {line}");
        if entry["user_agent"]
            .as_str()
            .is_some_and(|u| u.contains("evil"))
        {
            assert_eq!(entry["user_agent"], injected, "{line}");
            assert_eq!(entry["response_code"], 200, "{line}");
        }
    }
    stop.cancel();
}
