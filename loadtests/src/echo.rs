//! Echo backends: an HTTP server per Service a scenario names, answering every request with
//! who it is (`x-backend` and the body's `backend`) and what it was sent (method, path,
//! headers), so a script can check that a response came from the backend its route names
//! and which headers reached it; for a gRPC Service, an HTTP/2 server answering every call
//! with its own request message (`loadtests/echo.proto`) and `x-backend`; for a TCP or UDP
//! Service, a line or datagram answered with `<backend> <what was sent>`. And the
//! [`Prober`] that asks a world's routes through Envoy which backend answers them.

use std::net::SocketAddr;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The header naming the backend that answered.
pub const HEADER: &str = "x-backend";

/// The path an HTTP echo answers 503 on while it is not ready (see [`Readiness::set`]): a
/// health check's, as a pod's readiness endpoint; every other path is served regardless.
pub const HEALTH_PATH: &str = "/healthz";

/// An echo server, serving until it is dropped.
pub struct Echo {
    /// Where it listens.
    pub addr: SocketAddr,
    ready: Arc<AtomicBool>,
    _stop: DropGuard,
}

impl Echo {
    fn new(addr: SocketAddr, ready: Arc<AtomicBool>, stop: DropGuard) -> Self {
        Self {
            addr,
            ready,
            _stop: stop,
        }
    }

    /// What sets its readiness, apart from the server.
    pub fn readiness(&self) -> Readiness {
        Readiness(self.ready.clone())
    }
}

/// What makes an echo ready or not, held apart from it.
#[derive(Clone, Debug)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Makes an HTTP echo answer [`HEALTH_PATH`] with 200 (`true`) or 503 (`false`), as a
    /// backend whose readiness fails while it drains: it still serves everything else.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }
}

/// Runs `serve`, given the token that stops it, until the guard returned is dropped.
pub fn serve_until_dropped<F>(serve: impl FnOnce(CancellationToken) -> F) -> DropGuard
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let stop = CancellationToken::new();
    tokio::spawn(serve(stop.clone()));
    stop.drop_guard()
}

/// Serves `app` on `listener` until the guard returned is dropped (`what` names it when it
/// stops on an error).
pub fn serve_axum(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    what: &'static str,
) -> DropGuard {
    serve_until_dropped(|stop| async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "{what} stopped serving");
        }
    })
}

/// Starts an echo server named `name` on `addr` (port 0: one the system picks); with
/// `capacity`, it answers 503 to the requests beyond that many in each second.
pub async fn start(name: &str, addr: SocketAddr, capacity: Option<u32>) -> std::io::Result<Echo> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let name = name.to_owned();
    let window = Arc::new(Mutex::new(Window::default()));
    let ready = Arc::new(AtomicBool::new(true));
    let readiness = ready.clone();
    let app = axum::Router::new().fallback(move |request: Request| {
        let name = name.clone();
        let window = window.clone();
        let ready = readiness.load(Ordering::Relaxed);
        async move {
            if !ready && request.uri().path() == HEALTH_PATH {
                return busy(&name);
            }
            let admitted = capacity.is_none_or(|c| {
                window
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .admit(Instant::now(), c)
            });
            if admitted {
                answer(&name, &request)
            } else {
                busy(&name)
            }
        }
    });
    let stop = serve_axum(listener, app, "an echo backend");
    Ok(Echo::new(addr, ready, stop))
}

/// A 503 from the echo `name`.
fn busy(name: &str) -> Response {
    let mut busy = StatusCode::SERVICE_UNAVAILABLE.into_response();
    if let Ok(value) = HeaderValue::from_str(name) {
        busy.headers_mut().insert(HEADER, value);
    }
    busy
}

/// Starts the echo server `protocol` asks for (see [`start`], [`start_grpc`], [`start_tcp`],
/// [`start_udp`]); `capacity` only for HTTP.
pub async fn start_any(
    name: &str,
    protocol: crate::world::Protocol,
    addr: SocketAddr,
    capacity: Option<u32>,
) -> std::io::Result<Echo> {
    use crate::world::Protocol;
    match protocol {
        Protocol::Http => start(name, addr, capacity).await,
        Protocol::Grpc => start_grpc(name, addr).await,
        Protocol::Tcp => start_tcp(name, addr).await,
        Protocol::Udp => start_udp(name, addr).await,
    }
}

/// Starts a TCP echo server named `name` on `addr`: each line a connection sends is
/// answered with `<name> <line>`, until the connection closes.
pub async fn start_tcp(name: &str, addr: SocketAddr) -> std::io::Result<Echo> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let name = name.to_owned();
    let stop = serve_until_dropped(|stopped| async move {
        loop {
            let accepted = tokio::select! {
                () = stopped.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((stream, _)) = accepted else { continue };
            let (name, stopped) = (name.clone(), stopped.clone());
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = tokio::io::BufReader::new(read).lines();
                loop {
                    let line = tokio::select! {
                        () = stopped.cancelled() => return,
                        line = lines.next_line() => line,
                    };
                    let Ok(Some(line)) = line else { return };
                    if write
                        .write_all(format!("{name} {line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    Ok(Echo::new(addr, Arc::new(AtomicBool::new(true)), stop))
}

/// Starts a UDP echo server named `name` on `addr`: each datagram is answered with
/// `<name> <datagram>`.
pub async fn start_udp(name: &str, addr: SocketAddr) -> std::io::Result<Echo> {
    let socket = tokio::net::UdpSocket::bind(addr).await?;
    let addr = socket.local_addr()?;
    let prefix = format!("{name} ").into_bytes();
    let stop = serve_until_dropped(|stopped| async move {
        let mut buffer = vec![0u8; 65_536];
        loop {
            let received = tokio::select! {
                () = stopped.cancelled() => return,
                received = socket.recv_from(&mut buffer) => received,
            };
            let Ok((n, from)) = received else { continue };
            let reply = [prefix.as_slice(), &buffer[..n]].concat();
            if let Err(e) = socket.send_to(&reply, from).await {
                tracing::warn!(error = %e, "a UDP echo backend could not answer");
            }
        }
    });
    Ok(Echo::new(addr, Arc::new(AtomicBool::new(true)), stop))
}

/// Starts a gRPC echo server named `name` on `addr` (HTTP/2 without TLS, as Envoy speaks to
/// a GRPCRoute's backends): every call is answered with its request's messages, status 0.
pub async fn start_grpc(name: &str, addr: SocketAddr) -> std::io::Result<Echo> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let name: Arc<str> = name.into();
    let stop = serve_until_dropped(|stopped| async move {
        loop {
            let accepted = tokio::select! {
                () = stopped.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::error!(error = %e, "a gRPC echo backend could not accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let name = name.clone();
            let service =
                hyper::service::service_fn(move |request| grpc_answer(name.clone(), request));
            let served =
                hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let stopped = stopped.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = stopped.cancelled() => {}
                    served = served => if let Err(e) = served {
                        tracing::debug!(error = %e, "a gRPC echo connection ended");
                    },
                }
            });
        }
    });
    Ok(Echo::new(addr, Arc::new(AtomicBool::new(true)), stop))
}

/// A gRPC call's answer: its request's bytes (length-prefixed messages) back, `x-backend`,
/// and the trailer `grpc-status: 0`.
async fn grpc_answer(
    name: Arc<str>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<GrpcBody>, hyper::Error> {
    use http_body_util::BodyExt as _;
    let sent = request.into_body().collect().await?.to_bytes();
    let mut trailers = axum::http::HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let body = http_body_util::Full::new(sent)
        .map_err(|never| match never {})
        .with_trailers(std::future::ready(Some(Ok(trailers))))
        .boxed();
    let mut response = hyper::Response::new(body);
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    if let Ok(value) = HeaderValue::from_str(&name) {
        headers.insert(HEADER, value);
    }
    Ok(response)
}

/// The body of a gRPC echo's answer.
type GrpcBody = http_body_util::combinators::BoxBody<hyper::body::Bytes, hyper::Error>;

/// Asks a world's routes through Envoy what answers them: over HTTP, or over HTTPS with the
/// probe's host as SNI and a certificate the world's CA issued.
#[derive(Clone)]
pub struct Prober {
    http: reqwest::Client,
    tls: Option<tokio_rustls::TlsConnector>,
}

/// How long a probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

impl Prober {
    /// A prober trusting `ca_pem` for HTTPS targets (none: HTTP only).
    pub fn new(ca_pem: Option<&str>) -> anyhow::Result<Self> {
        use rustls_pki_types::pem::PemObject as _;
        let tls = match ca_pem {
            None => None,
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(cert?)?;
                }
                let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
                Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
            }
        };
        Ok(Self {
            http: reqwest::Client::builder().timeout(PROBE_TIMEOUT).build()?,
            tls,
        })
    }

    /// Sends `probe`'s request to `target`: the answer's status and the backend that gave it
    /// (none when an echo backend did not).
    pub async fn ask(
        &self,
        target: &url::Url,
        probe: &crate::world::Probe,
    ) -> anyhow::Result<(StatusCode, Option<String>)> {
        if probe.grpc {
            return tokio::time::timeout(PROBE_TIMEOUT, ask_grpc(target, probe))
                .await
                .context("no answer in time")?;
        }
        if target.scheme() == "https" {
            let tls = self
                .tls
                .as_ref()
                .context("an HTTPS target, and no CA to trust")?;
            return tokio::time::timeout(PROBE_TIMEOUT, ask_tls(tls, target, probe))
                .await
                .context("no answer in time")?;
        }
        let mut request = self
            .http
            .get(target.join(&probe.path)?)
            .header("host", &probe.host);
        for (name, value) in &probe.headers {
            request = request.header(name, value);
        }
        let answer = request.send().await?;
        Ok((answer.status(), backend_of(answer.headers())))
    }
}

/// `probe` over a new TLS connection to `target` with the probe's host as SNI.
async fn ask_tls(
    tls: &tokio_rustls::TlsConnector,
    target: &url::Url,
    probe: &crate::world::Probe,
) -> anyhow::Result<(StatusCode, Option<String>)> {
    let host = target.host_str().context("a target without a host")?;
    let port = target.port_or_known_default().unwrap_or(443);
    let tcp = tokio::net::TcpStream::connect((host, port)).await?;
    let name = rustls_pki_types::ServerName::try_from(probe.host.clone())?;
    let stream = tls.connect(name, tcp).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let mut request = hyper::Request::get(probe.path.as_str()).header("host", &probe.host);
    for (name, value) in &probe.headers {
        request = request.header(name, value);
    }
    let answer = sender
        .send_request(request.body(http_body_util::Empty::<hyper::body::Bytes>::new())?)
        .await?;
    Ok((answer.status(), backend_of(answer.headers())))
}

/// `probe` as a gRPC call (an empty message) over HTTP/2 without TLS to `target`.
async fn ask_grpc(
    target: &url::Url,
    probe: &crate::world::Probe,
) -> anyhow::Result<(StatusCode, Option<String>)> {
    let host = target.host_str().context("a target without a host")?;
    let port = target.port_or_known_default().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((host, port)).await?;
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await?;
    tokio::spawn(connection);
    let uri = format!("http://{}{}", probe.host, probe.path);
    let mut request = hyper::Request::post(uri)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in &probe.headers {
        request = request.header(name, value);
    }
    // One message of no fields: not compressed, length 0.
    let empty = hyper::body::Bytes::from_static(&[0, 0, 0, 0, 0]);
    let answer = sender
        .send_request(request.body(http_body_util::Full::new(empty))?)
        .await?;
    Ok((answer.status(), backend_of(answer.headers())))
}

fn backend_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A one-second window of requests, for a backend's capacity.
#[derive(Debug, Default)]
struct Window {
    /// When the window began.
    started: Option<Instant>,
    /// The requests admitted in it.
    admitted: u32,
}

impl Window {
    /// Whether a request at `now` is within `capacity` requests of its second.
    fn admit(&mut self, now: Instant, capacity: u32) -> bool {
        if self
            .started
            .is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1))
        {
            self.started = Some(now);
            self.admitted = 0;
        }
        self.admitted += 1;
        self.admitted <= capacity
    }
}

fn answer(name: &str, request: &Request) -> Response {
    let headers: serde_json::Map<String, serde_json::Value> = request
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
        .collect();
    let body = serde_json::json!({
        "backend": name,
        "method": request.method().as_str(),
        "path": request.uri().path(),
        "headers": headers,
    });
    let mut response = axum::Json(body).into_response();
    if let Ok(value) = HeaderValue::from_str(name) {
        response.headers_mut().insert(HEADER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_not_ready_echo_fails_its_health_path_and_still_serves() {
        let echo = start("web-0", "127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let get = async |path: &str| {
            let answer = reqwest::get(format!("http://{}{path}", echo.addr))
                .await
                .unwrap();
            (answer.status().as_u16(), backend_of(answer.headers()))
        };
        assert_eq!(get(HEALTH_PATH).await, (200, Some("web-0".into())));
        echo.readiness().set(false);
        assert_eq!(get(HEALTH_PATH).await, (503, Some("web-0".into())));
        assert_eq!(get("/shop").await, (200, Some("web-0".into())));
        echo.readiness().set(true);
        assert_eq!(get(HEALTH_PATH).await.0, 200);
    }

    #[test]
    fn a_window_admits_its_capacity_each_second() {
        let mut window = Window::default();
        let start = Instant::now();
        let admitted = (0..5)
            .filter(|i| window.admit(start + Duration::from_millis(i * 100), 3))
            .count();
        assert_eq!(admitted, 3);
        assert!(
            window.admit(start + Duration::from_millis(1000), 3),
            "a new second"
        );
    }
}
