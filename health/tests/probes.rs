//! The TCP and HTTP(S) probes against real servers on loopback.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use fairlead_health::probe::{ProbeFailure, http, tcp};
use fairlead_health_api::{HttpHeader, HttpProbe};
use fairlead_kit::pki::{self, Ca};

const TIMEOUT: Duration = Duration::from_millis(500);

fn app() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/empty", get(|| async { StatusCode::NO_CONTENT }))
        .route(
            "/login",
            get(|| async { (StatusCode::FOUND, [("location", "/sso")]) }),
        )
        .route("/fail", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route("/big", get(|| async { "x".repeat(8 * 1024 * 1024) }))
        .route(
            "/guarded",
            get(|headers: HeaderMap| async move {
                let host_ok = headers.get("host").is_some_and(|h| h == "app.example");
                let token_ok = headers.get("x-probe").is_some_and(|h| h == "yes");
                if host_ok && token_ok {
                    StatusCode::OK
                } else {
                    StatusCode::FORBIDDEN
                }
            }),
        )
}

async fn serve_http() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app()).await.unwrap() });
    addr
}

/// An HTTPS server with a certificate for 127.0.0.1 from a fresh CA; returns the CA PEM.
async fn serve_https() -> (SocketAddr, String) {
    let ca = Ca::generate("probe-test-ca").unwrap();
    let cert = ca
        .issue_server(&["app.example"], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let acceptor =
        tokio_rustls::TlsAcceptor::from(pki::server_config(&cert, &[b"http/1.1"]).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app());
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                .await;
            });
        }
    });
    (addr, ca.cert_pem().to_owned())
}

fn spec(path: &str) -> HttpProbe {
    HttpProbe {
        target_port: 0,
        path: Some(path.into()),
        scheme: "HTTP".into(),
        method: "GET".into(),
        ..HttpProbe::default()
    }
}

#[tokio::test]
async fn tcp_probes_connect_or_say_why_not() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1];
        tokio::io::AsyncReadExt::read(&mut stream, &mut buf)
            .await
            .unwrap()
    });
    tcp::probe(addr, TIMEOUT).await.unwrap();
    assert_eq!(
        accepted.await.unwrap(),
        0,
        "closed cleanly: the server reads EOF"
    );

    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    assert!(matches!(
        tcp::probe(closed, TIMEOUT).await,
        Err(ProbeFailure::Connect(_))
    ));
}

#[tokio::test]
async fn http_probes_pass_on_2xx_only() {
    let addr = serve_http().await;
    http::probe(addr, &spec("/healthz"), TIMEOUT).await.unwrap();
    http::probe(addr, &spec("/empty"), TIMEOUT)
        .await
        .expect("204 is healthy");
    assert_eq!(
        http::probe(addr, &spec("/login"), TIMEOUT).await,
        Err(ProbeFailure::Status(302))
    );
    assert_eq!(
        http::probe(addr, &spec("/fail"), TIMEOUT).await,
        Err(ProbeFailure::Status(503))
    );
    let head = HttpProbe {
        method: "HEAD".into(),
        ..spec("/healthz")
    };
    http::probe(addr, &head, TIMEOUT).await.unwrap();

    assert_eq!(
        http::probe(addr, &spec("/guarded"), TIMEOUT).await,
        Err(ProbeFailure::Status(403))
    );
    let guarded = HttpProbe {
        host: Some("app.example".into()),
        http_headers: vec![HttpHeader {
            name: "X-Probe".into(),
            value: "yes".into(),
        }],
        ..spec("/guarded")
    };
    http::probe(addr, &guarded, TIMEOUT)
        .await
        .expect("host header and custom headers are sent");
}

#[tokio::test]
async fn http_probes_read_little_of_a_big_body() {
    let addr = serve_http().await;
    let started = Instant::now();
    http::probe(addr, &spec("/big"), Duration::from_secs(2))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_hanging_server_times_out() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            held.push(stream);
        }
    });
    let started = Instant::now();
    let result = http::probe(addr, &spec("/healthz"), Duration::from_millis(300)).await;
    assert_eq!(
        result,
        Err(ProbeFailure::Timeout(Duration::from_millis(300)))
    );
    assert!(started.elapsed() < Duration::from_millis(600));
}

#[tokio::test]
async fn https_probes_verify_with_the_ca_or_skip_when_told() {
    let (addr, ca_pem) = serve_https().await;
    let https = HttpProbe {
        scheme: "HTTPS".into(),
        ..spec("/healthz")
    };
    let with_ca = HttpProbe {
        ca_cert: Some(ca_pem),
        ..https.clone()
    };
    http::probe(addr, &with_ca, TIMEOUT)
        .await
        .expect("the pod IP is in the certificate");
    let unknown = http::probe(addr, &https, TIMEOUT).await;
    assert!(
        matches!(unknown, Err(ProbeFailure::Tls(ref m)) if m.contains("UnknownIssuer")),
        "{unknown:?}"
    );
    let skip = HttpProbe {
        insecure_skip_tls_verify: true,
        ..https
    };
    http::probe(addr, &skip, TIMEOUT)
        .await
        .expect("skip-verify accepts any certificate");
}

/// A server that answers every connection with `answer` after reading the request head, then
/// keeps the connection open (as a server ignoring `Connection: close` does).
async fn serve_raw(answer: &'static [u8]) -> (SocketAddr, tokio::sync::mpsc::Receiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (requests, received) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if stream.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let _ = requests.try_send(String::from_utf8_lossy(&head).into_owned());
            stream.write_all(answer).await.unwrap();
            held.push(stream);
        }
    });
    (addr, received)
}

#[tokio::test]
async fn http_probes_end_with_the_body_not_with_the_timeout() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    ] {
        let (addr, _requests) = serve_raw(answer).await;
        let started = Instant::now();
        http::probe(addr, &spec("/healthz"), Duration::from_secs(2))
            .await
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?} waited for the close",
            String::from_utf8_lossy(answer)
        );
    }
    let (addr, _requests) = serve_raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n").await;
    let result = http::probe(addr, &spec("/healthz"), TIMEOUT).await;
    assert!(
        matches!(result, Err(ProbeFailure::Http(ref m)) if m.contains("malformed")),
        "{result:?}"
    );
}

#[tokio::test]
async fn http_probes_send_one_host_and_refuse_header_injection() {
    let (addr, mut requests) = serve_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
    let custom_host = HttpProbe {
        host: Some("ignored.example".into()),
        http_headers: vec![HttpHeader {
            name: "Host".into(),
            value: "app.example".into(),
        }],
        ..spec("/healthz")
    };
    http::probe(addr, &custom_host, TIMEOUT).await.unwrap();
    let request = requests.recv().await.unwrap();
    assert!(
        request.starts_with("GET /healthz HTTP/1.1\r\n"),
        "{request}"
    );
    assert_eq!(
        request.to_ascii_lowercase().matches("host:").count(),
        1,
        "{request}"
    );
    assert!(request.contains("Host: app.example\r\n"), "{request}");
    assert!(request.contains("Connection: close\r\n"), "{request}");

    let injected = HttpProbe {
        http_headers: vec![HttpHeader {
            name: "X-A".into(),
            value: "1\r\nX-B: 2".into(),
        }],
        ..spec("/healthz")
    };
    let result = http::probe(addr, &injected, TIMEOUT).await;
    assert!(
        matches!(result, Err(ProbeFailure::Config(ref m)) if m.contains("http.httpHeaders")),
        "{result:?}"
    );
    let result = http::probe(addr, &spec("/a b"), TIMEOUT).await;
    assert!(
        matches!(result, Err(ProbeFailure::Config(ref m)) if m.contains("http.path")),
        "{result:?}"
    );
}
