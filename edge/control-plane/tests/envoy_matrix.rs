//! The rest of the Gateway API through a real Envoy fed by the control plane (plaintext xDS
//! here; mutual TLS is `tests/envoy.rs`'s): HTTP/2 from the client, TLS termination with a
//! certificate Secret, TLS passthrough by SNI, a request mirror whose backend sees the copy,
//! a route timeout answering 504 from a slow backend, GRPCRoute with a real gRPC client,
//! BackendTLSPolicy (the backend's certificate checked against a CA bundle, a wrong name
//! refused), TCPRoute and UDPRoute to echo backends, a ListenerSet's listener, and a
//! cross-namespace backend allowed only by a ReferenceGrant.

mod cluster;
mod proxies;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::Cache;
use proxies::{serve_xds, start_envoy};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn free_port() -> u16 {
    fairlead_kit::testing::free_port()
}

/// Answers every HTTP/1.1 request on `listener` with `name` after `delay`, recording the
/// request's head.
fn http_backend(
    listener: tokio::net::TcpListener,
    name: &'static str,
    delay: Duration,
    seen: Arc<Mutex<Vec<String>>>,
) {
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(serve_http(stream, name, delay, seen));
        }
    });
}

async fn serve_http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    name: &'static str,
    delay: Duration,
    seen: Arc<Mutex<Vec<String>>>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        seen.lock().unwrap().push(text);
        head.clear();
        tokio::time::sleep(delay).await;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}",
            name.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn backend(name: &'static str, delay: Duration) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    http_backend(listener, name, delay, seen.clone());
    (port, seen)
}

/// An HTTPS backend with `cert`, answering `name`.
async fn tls_backend(cert: &fairlead_kit::pki::CertifiedKey, name: &'static str) -> u16 {
    let config = fairlead_kit::pki::server_config(cert, &[b"http/1.1"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    serve_http(tls, name, Duration::ZERO, Arc::default()).await;
                }
            });
        }
    });
    port
}

/// A TCP backend echoing what it reads.
async fn tcp_echo() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A UDP backend echoing each datagram, prefixed `echo:`.
async fn udp_echo() -> u16 {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let mut answer = b"echo:".to_vec();
            answer.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&answer, from).await;
        }
    });
    port
}

/// An HTTP/1.1 request to `port` with `host`; status and body.
async fn get(port: u16, host: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_owned()))
}

/// `head` (an HTTP/1.1 request head without its final blank line) sent to `port`; status,
/// body and the response's head.
async fn raw(port: u16, head: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("{head}Connection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (response_head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, body.to_owned(), response_head.to_owned())
}

/// A TLS connection to `port` with SNI `name`, trusting `ca_pem`.
async fn tls_connect(
    port: u16,
    name: &str,
    ca_pem: &str,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    connector
        .connect(
            rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap(),
            stream,
        )
        .await
        .unwrap_or_else(|e| panic!("TLS to {name} on {port}: {e}"))
}

/// An HTTP/1.1 request over an open stream; status and body.
async fn get_over<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
    host: &str,
) -> (u16, String) {
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    )
}

fn service(namespace: &str, name: &str, port: u16, app_protocol: Option<&str>) -> Value {
    let mut port_spec = json!({"name": "p", "port": 80, "targetPort": port});
    if let Some(protocol) = app_protocol {
        port_spec["appProtocol"] = json!(protocol);
    }
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [port_spec]}})
}

fn slice(namespace: &str, name: &str, port: u16, protocol: &str) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4", "ports": [{"name": "p", "port": port, "protocol": protocol}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]})
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_serves_the_rest_of_the_gateway_api() {
    let (_server, client) = cluster().await;
    let ca = fairlead_kit::pki::Ca::generate("matrix CA").unwrap();
    let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let (http, https, tls, tcp, udp, grpc) =
        (ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]);
    let set_port = free_port();
    let (web, _) = backend("web", Duration::ZERO).await;
    let (slow, _) = backend("slow", Duration::from_secs(3)).await;
    let (mirror, mirrored) = backend("mirror", Duration::ZERO).await;
    let (remote, _) = backend("remote", Duration::ZERO).await;
    let (picked, picked_seen) = backend("picked", Duration::ZERO).await;
    let passthrough_cert = ca.issue_server(&["passthrough.example.com"], &[]).unwrap();
    let passthrough = tls_backend(&passthrough_cert, "passthrough").await;
    let backend_cert = ca.issue_server(&["backend.example.com"], &[]).unwrap();
    let secure_backend = tls_backend(&backend_cert, "tls-backend").await;
    let (tcp_backend, udp_backend) = (tcp_echo().await, udp_echo().await);
    let listener_cert = ca.issue_server(&["secure.example.com"], &[]).unwrap();

    // The gRPC backend: an xDS server (a real gRPC service) over the control plane's cache.
    let cache = Arc::new(Cache::new());
    let grpc_backend = serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await;

    for namespace in ["apps", "backends", "team"] {
        create(
            &client,
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"team": namespace}}}),
        )
        .await;
    }
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "secure", "namespace": "default"},
        "data": {"tls.crt": b64(&listener_cert.cert_pem), "tls.key": b64(&listener_cert.key_pem)}}),
    )
    .await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "backend-ca", "namespace": "default"},
        "data": {"ca.crt": ca.cert_pem()}}),
    )
    .await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb",
            "allowedListeners": {"namespaces": {"from": "All"}},
            "listeners": [
                {"name": "http", "port": http, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}},
                {"name": "https", "port": https, "protocol": "HTTPS", "hostname": "secure.example.com",
                 "tls": {"mode": "Terminate", "certificateRefs": [{"name": "secure"}]}},
                {"name": "tls", "port": tls, "protocol": "TLS", "hostname": "passthrough.example.com",
                 "tls": {"mode": "Passthrough"}},
                {"name": "tcp", "port": tcp, "protocol": "TCP"},
                {"name": "udp", "port": udp, "protocol": "UDP"},
                {"name": "grpc", "port": grpc, "protocol": "HTTP"}]}})).await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
        "metadata": {"name": "team", "namespace": "team"},
        "spec": {"parentRef": {"name": "gw", "namespace": "default"},
            "listeners": [{"name": "extra", "port": set_port, "protocol": "HTTP"}]}}),
    )
    .await;
    for (namespace, name, port, protocol, app) in [
        ("default", "web", web, "TCP", None),
        ("default", "slow", slow, "TCP", None),
        ("default", "mirror", mirror, "TCP", None),
        ("default", "picked", picked, "TCP", None),
        ("default", "passthrough", passthrough, "TCP", None),
        ("default", "secure-backend", secure_backend, "TCP", None),
        ("default", "wrong-name", secure_backend, "TCP", None),
        ("default", "tcp-echo", tcp_backend, "TCP", None),
        ("default", "udp-echo", udp_backend, "UDP", None),
        (
            "default",
            "xds",
            grpc_backend,
            "TCP",
            Some("kubernetes.io/h2c"),
        ),
        ("backends", "remote", remote, "TCP", None),
        ("team", "web", web, "TCP", None),
    ] {
        let mut svc = service(namespace, name, port, app);
        if protocol == "UDP" {
            svc["spec"]["ports"][0]["protocol"] = json!("UDP");
        }
        create(&client, svc).await;
        create(&client, slice(namespace, name, port, protocol)).await;
    }
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ReferenceGrant",
        "metadata": {"name": "apps-to-remote", "namespace": "backends"},
        "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "apps"}],
                 "to": [{"group": "", "kind": "Service", "name": "remote"}]}})).await;
    let route = |namespace: &str, name: &str, spec: Value| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    };
    for object in [
        route(
            "default",
            "web",
            json!({"parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": ["web.example.com"],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "/slow"}}],
                 "timeouts": {"request": "500ms"}, "backendRefs": [{"name": "slow", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/mirrored"}}],
                 "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "mirror", "port": 80}}}],
                 "backendRefs": [{"name": "web", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/rewrite"}}],
                 "filters": [
                    {"type": "URLRewrite", "urlRewrite": {"hostname": "rewritten.example.com",
                        "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}},
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-added", "value": "yes"}], "remove": ["x-secret"]}},
                    {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-answered", "value": "by-envoy"}]}}],
                 "backendRefs": [{"name": "picked", "port": 80}]},
                {"matches": [{"path": {"type": "Exact", "value": "/pick"}, "headers": [{"name": "x-pick", "value": "me"}]},
                             {"path": {"type": "Exact", "value": "/pick"}, "queryParams": [{"name": "pick", "value": "1"}]},
                             {"path": {"type": "Exact", "value": "/pick"}, "method": "POST"},
                             {"path": {"type": "RegularExpression", "value": "/pick/[0-9]+"}}],
                 "backendRefs": [{"name": "picked", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/secure-backend"}}],
                 "backendRefs": [{"name": "secure-backend", "port": 80}]},
                {"matches": [{"path": {"type": "PathPrefix", "value": "/wrong-name"}}],
                 "backendRefs": [{"name": "wrong-name", "port": 80}]},
                {"backendRefs": [{"name": "web", "port": 80}]}]}),
        ),
        route(
            "default",
            "secure",
            json!({"parentRefs": [{"name": "gw", "sectionName": "https"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
        ),
        route(
            "apps",
            "granted",
            json!({"parentRefs": [{"name": "gw", "namespace": "default", "sectionName": "http"}],
            "hostnames": ["granted.example.com"],
            "rules": [{"backendRefs": [{"name": "remote", "namespace": "backends", "port": 80}]}]}),
        ),
        route(
            "default",
            "ungranted",
            json!({"parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": ["ungranted.example.com"],
            "rules": [{"backendRefs": [{"name": "remote", "namespace": "backends", "port": 80}]}]}),
        ),
        route(
            "team",
            "extra",
            json!({"parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "name": "team", "sectionName": "extra"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}),
        ),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TLSRoute",
            "metadata": {"name": "passthrough", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "tls"}], "hostnames": ["passthrough.example.com"],
                     "rules": [{"backendRefs": [{"name": "passthrough", "port": 80}]}]}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
            "metadata": {"name": "tcp", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "tcp"}],
                     "rules": [{"backendRefs": [{"name": "tcp-echo", "port": 80}]}]}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
            "metadata": {"name": "udp", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "udp"}],
                     "rules": [{"backendRefs": [{"name": "udp-echo", "port": 80}]}]}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "xds", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "grpc"}],
                     "rules": [{"matches": [{"method": {"service": "envoy.service.cluster.v3.ClusterDiscoveryService"}}],
                                "backendRefs": [{"name": "xds", "port": 80}]}]}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": "secure-backend", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "secure-backend"}],
                     "validation": {"hostname": "backend.example.com",
                                    "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "backend-ca"}]}}}),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": "wrong-name", "namespace": "default"},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "wrong-name"}],
                     "validation": {"hostname": "other.example.com",
                                    "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "backend-ca"}]}}}),
    ] {
        create(&client, object).await;
    }

    let (stop, _nacks) = control_plane(&client, &cache);
    let xds_port = serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await;
    let dir = tempfile::tempdir().unwrap();
    let _envoy = start_envoy(
        &ObjectKey::new("default", "gw"),
        (xds_port, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    let log = dir.path().join("gw.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    while get(http, "web.example.com", "/").await.map(|a| a.0) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "Envoy never served: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // HTTP/2 from the client (prior knowledge, h2c).
    {
        use http_body_util::{BodyExt as _, Empty};
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", http))
            .await
            .unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::get("http://web.example.com/")
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), hyper::Version::HTTP_2);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"web");
    }

    // Matches of each kind: a header, a query parameter, a method, a regular expression
    // reach `picked`; the same path without them falls to the catch-all.
    for (request, wanted) in [
        (
            "GET /pick HTTP/1.1\r\nHost: web.example.com\r\nx-pick: me\r\n",
            "picked",
        ),
        (
            "GET /pick?pick=1 HTTP/1.1\r\nHost: web.example.com\r\n",
            "picked",
        ),
        (
            "POST /pick HTTP/1.1\r\nHost: web.example.com\r\ncontent-length: 0\r\n",
            "picked",
        ),
        (
            "GET /pick/42 HTTP/1.1\r\nHost: web.example.com\r\n",
            "picked",
        ),
        ("GET /pick HTTP/1.1\r\nHost: web.example.com\r\n", "web"),
        ("GET /pick/abc HTTP/1.1\r\nHost: web.example.com\r\n", "web"),
    ] {
        let (_, body, _) = raw(http, request).await;
        assert_eq!(body, wanted, "{request:?}");
    }
    // A URL rewrite (prefix and hostname) and header modifiers, as the backend and the
    // client see them.
    picked_seen.lock().unwrap().clear();
    let (status, body, head) = raw(
        http,
        "GET /rewrite/x HTTP/1.1\r\nHost: web.example.com\r\nx-secret: hush\r\n",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "picked"));
    assert!(
        head.to_ascii_lowercase().contains("x-answered: by-envoy"),
        "{head}"
    );
    let seen = picked_seen.lock().unwrap().join("\n").to_ascii_lowercase();
    assert!(seen.starts_with("get /new/x http/1.1"), "{seen}");
    assert!(seen.contains("host: rewritten.example.com"), "{seen}");
    assert!(
        seen.contains("x-added: yes") && !seen.contains("x-secret"),
        "{seen}"
    );

    // TLS termination with the listener's certificate.
    let (status, body) = get_over(
        tls_connect(https, "secure.example.com", ca.cert_pem(), &[b"http/1.1"]).await,
        "secure.example.com",
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "web"), "TLS termination");

    // TLS passthrough: the client talks TLS with the backend itself (its certificate).
    let (status, body) = get_over(
        tls_connect(
            tls,
            "passthrough.example.com",
            ca.cert_pem(),
            &[b"http/1.1"],
        )
        .await,
        "passthrough.example.com",
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (200, "passthrough"),
        "TLS passthrough"
    );

    // A mirror's backend sees the copy; the client gets the primary's answer.
    assert_eq!(
        get(http, "web.example.com", "/mirrored/x").await,
        Some((200, "web".to_owned()))
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !mirrored
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.starts_with("GET /mirrored/x"))
    {
        assert!(Instant::now() < deadline, "the mirror saw nothing");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A slow backend gets 504 after the route's timeout, not after its answer.
    let started = Instant::now();
    let (status, _) = get(http, "web.example.com", "/slow").await.unwrap();
    assert_eq!(status, 504);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // BackendTLSPolicy: the backend's certificate is checked; a wrong name is refused.
    assert_eq!(
        get(http, "web.example.com", "/secure-backend").await,
        Some((200, "tls-backend".to_owned()))
    );
    let (status, _) = get(http, "web.example.com", "/wrong-name").await.unwrap();
    assert_eq!(
        status, 503,
        "a backend whose certificate names another host is refused"
    );

    // A cross-namespace backend: served with a ReferenceGrant, 500 without.
    assert_eq!(
        get(http, "granted.example.com", "/").await,
        Some((200, "remote".to_owned()))
    );
    assert_eq!(
        get(http, "ungranted.example.com", "/").await.map(|a| a.0),
        Some(500)
    );

    // A ListenerSet's listener serves the routes attached to it.
    assert_eq!(
        get(set_port, "any.example.com", "/").await,
        Some((200, "web".to_owned()))
    );

    // TCPRoute and UDPRoute.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", tcp))
        .await
        .unwrap();
    stream.write_all(b"over tcp").await.unwrap();
    let mut buf = [0u8; 8];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"over tcp");
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.connect(("127.0.0.1", udp)).await.unwrap();
    socket.send(b"datagram").await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
        .await
        .expect("the UDP echo answers through Envoy")
        .unwrap();
    assert_eq!(&buf[..n], b"echo:datagram");

    // GRPCRoute: a real gRPC call (unary FetchClusters) through Envoy to a gRPC backend.
    {
        use envoy_types::pb::envoy::config::core::v3::Node;
        use envoy_types::pb::envoy::service::cluster::v3::cluster_discovery_service_client::ClusterDiscoveryServiceClient;
        use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
        let mut client = ClusterDiscoveryServiceClient::connect(format!("http://127.0.0.1:{grpc}"))
            .await
            .unwrap();
        let response = client
            .fetch_clusters(DiscoveryRequest {
                node: Some(Node {
                    id: "grpc-through-envoy".into(),
                    cluster: "default/gw".into(),
                    ..Default::default()
                }),
                type_url: fairlead_edge_xds::cache::CLUSTER.into(),
                ..Default::default()
            })
            .await
            .expect("the RPC is routed to the gRPC backend")
            .into_inner();
        assert!(!response.resources.is_empty(), "{response:?}");
    }

    stop.cancel();
}
