//! The Gateway API conformance suite's backend, `echo-basic`, standing in for its pods: an
//! HTTP server on loopback (HTTP/1.1 and cleartext HTTP/2 on one port, as the suite's
//! `kubernetes.io/h2c` ports need) answering every request with what it saw, as JSON —
//! path, host, method, protocol, headers, and the pod it plays (namespace, name) — and the
//! suite's flaky backend under `/retry/`: per `uuid`, the first `succeedAfter` requests fail
//! (with `responseCode`, or by dropping the connection without an answer), each after
//! `delayRetry`; `delay` delays any answer; `/ws` is a WebSocket echo. Its UDP server ([`serve_udp`]) answers each
//! datagram with what it got and the pod it plays. Over TLS ([`serve_tls`], echo-basic's
//! `TLS_SERVER_CERT`) it also says what it saw of the connection: the server name the client
//! asked for, and the client's certificates (checked against `TLS_CLIENT_CACERTS` when a
//! client presents one). Its TCP server ([`serve_tcp`], `TCP_ECHO_SERVER`) speaks the
//! suite's line protocol, in plain TCP or over TLS; its gRPC server is [`grpc`]. Field names
//! and behaviour follow echo-basic (gateway-api v1.6.1, `conformance/echo-basic/echo-basic.go`,
//! `udpechoserver/`, `grpc/`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};

pub mod grpc;

/// The pod an echo server plays.
#[derive(Clone, Debug)]
pub struct Pod {
    /// Its namespace.
    pub namespace: String,
    /// Its name (`<deployment>-<suffix>`, as the suite matches a backend by prefix).
    pub name: String,
}

/// What an echo server answered: the request as it arrived.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Echoed {
    /// The request target (path and query).
    pub path: String,
    /// The `Host` (or `:authority`).
    pub host: String,
    /// The method.
    pub method: String,
    /// `HTTP/1.1`, `HTTP/2.0`.
    pub proto: String,
    /// The headers, by canonical name.
    pub headers: BTreeMap<String, Vec<String>>,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// What a TLS echo saw of the connection.
    #[serde(default)]
    pub tls: Option<TlsSeen>,
}

/// What a TLS echo saw of its connection (echo-basic's `tls`).
#[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsSeen {
    /// `TLSv1.3`, `TLSv1.2`.
    pub version: String,
    /// The server name (SNI) the client asked for.
    pub server_name: String,
    /// The protocol ALPN settled on.
    pub negotiated_protocol: String,
    /// The client's certificates, PEM.
    pub peer_certificates: Vec<String>,
}

/// What a TLS echo serves with: its certificate and key, PEM, and the CAs a client's
/// certificate is checked against when the client presents one (none: not asked for).
#[derive(Clone, Debug)]
pub struct Serving {
    /// The certificate chain.
    pub cert_pem: String,
    /// Its key.
    pub key_pem: String,
    /// The CAs of clients' certificates.
    pub client_cas: Option<String>,
}

/// The request targets each pod (`namespace/name`) echoed, in order: what a pod's log shows
/// of the requests it got (the suite reads a mirror's requests from its pods' logs).
static ECHOED: std::sync::LazyLock<Mutex<HashMap<String, Vec<String>>>> =
    std::sync::LazyLock::new(Mutex::default);

/// The request targets (path and query) the pods whose name starts with `prefix` in
/// `namespace` echoed so far.
pub fn echoed_by(namespace: &str, prefix: &str) -> Vec<String> {
    ECHOED
        .lock()
        .expect("the echoed requests")
        .iter()
        .filter(|(pod, _)| pod.starts_with(&format!("{namespace}/{prefix}")))
        .flat_map(|(_, targets)| targets.iter().cloned())
        .collect()
}

/// Why a request failed on purpose: the connection is dropped without an answer.
#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped on purpose")
    }
}

impl std::error::Error for Dropped {}

/// Starts an echo server playing `pod` on `127.0.0.1`; its port.
pub async fn serve(pod: Pod) -> u16 {
    serve_with(pod, None).await
}

/// Starts an echo server playing `pod` over TLS as `serving` says, on `127.0.0.1`; its port.
pub async fn serve_tls(pod: Pod, serving: &Serving) -> u16 {
    serve_with(pod, Some(acceptor(serving, &[b"h2", b"http/1.1"]))).await
}

/// What echo-basic's TCP server says first on every connection.
pub const TCP_WELCOME: &str = "Gateway API Test TCP Server\n";

/// Starts echo-basic's TCP server playing `pod` on `127.0.0.1` (over TLS when `serving`
/// says so, offering no ALPN): it says [`TCP_WELCOME`], then answers each line — `PING` with
/// `PONG`, `IS_TLS` with `true` or `false`, `TEST` with the JSON of the pod and (over TLS)
/// the connection's server name and version; its port.
pub async fn serve_tcp(pod: Pod, serving: Option<&Serving>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let tls = serving.map(|s| acceptor(s, &[]));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (pod, tls) = (pod.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    None => tcp_session(socket, &pod, port, None).await,
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(socket).await {
                            let seen = seen(stream.get_ref().1);
                            tcp_session(stream, &pod, port, Some(seen)).await;
                        }
                    }
                }
            });
        }
    });
    port
}

/// One connection of the TCP echo.
async fn tcp_session<S>(stream: S, pod: &Pod, port: u16, tls: Option<TlsSeen>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let (read, mut write) = tokio::io::split(stream);
    let payload = serde_json::json!({
        "namespace": pod.namespace,
        "ingress": "",
        "service": "",
        "pod": pod.name,
        "tcpport": port.to_string(),
        "isTLS": tls.is_some(),
        "tls": tls,
    });
    if write.write_all(TCP_WELCOME.as_bytes()).await.is_err() {
        return;
    }
    let mut lines = tokio::io::BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match line.as_str() {
            "TEST" => format!("{payload}\n"),
            "IS_TLS" => format!("{}\n", tls.is_some()),
            "PING" => "PONG\n".to_owned(),
            _ => continue,
        };
        if write.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The TLS side of a TLS echo, offering `alpn`; a client's certificate, when it presents
/// one, checked against the client CAs (echo-basic's `VerifyClientCertIfGiven`).
fn acceptor(serving: &Serving, alpn: &[&[u8]]) -> tokio_rustls::TlsAcceptor {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("the echo's certificate");
    let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("its key");
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let builder = match &serving.client_cas {
        None => builder.with_no_client_auth(),
        Some(cas) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(cas.as_bytes()) {
                roots.add(cert.expect("a CA")).expect("a trust anchor");
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .allow_unauthenticated()
                    .build()
                    .expect("a client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .expect("the echo's TLS configuration");
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// What `connection` shows of its TLS session.
fn seen(connection: &rustls::ServerConnection) -> TlsSeen {
    TlsSeen {
        version: match connection.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "",
        }
        .to_owned(),
        server_name: connection.server_name().unwrap_or_default().to_owned(),
        negotiated_protocol: connection
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default(),
        peer_certificates: connection
            .peer_certificates()
            .into_iter()
            .flatten()
            .map(|der| {
                use base64::Engine as _;
                let text = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
                let lines: Vec<&str> = text
                    .as_bytes()
                    .chunks(64)
                    .map(|c| std::str::from_utf8(c).unwrap_or_default())
                    .collect();
                format!(
                    "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                    lines.join("\n")
                )
            })
            .collect(),
    }
}

/// Serves echo connections accepted on a loopback port, over TLS with `tls`; the port.
async fn serve_with(pod: Pod, tls: Option<tokio_rustls::TlsAcceptor>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let state = Arc::new(State {
        pod,
        attempts: Mutex::new(HashMap::new()),
    });
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let state = state.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                let service = |seen: Option<Arc<TlsSeen>>| {
                    hyper::service::service_fn(move |request| {
                        let (state, seen) = (state.clone(), seen.clone());
                        async move { state.answer(request, seen.as_deref()).await }
                    })
                };
                match tls {
                    None => {
                        let io = hyper_util::rt::TokioIo::new(socket);
                        let _ = builder
                            .serve_connection_with_upgrades(io, service(None))
                            .await;
                    }
                    Some(acceptor) => {
                        let Ok(stream) = acceptor.accept(socket).await else {
                            return;
                        };
                        let tls_seen = Arc::new(seen(stream.get_ref().1));
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ = builder
                            .serve_connection_with_upgrades(io, service(Some(tls_seen)))
                            .await;
                    }
                }
            });
        }
    });
    port
}

/// Starts echo-basic's UDP server playing `pod` on `127.0.0.1`: each datagram answered with
/// `{"request": <what came>, "namespace", "pod", …}`; its port.
pub async fn serve_udp(pod: Pod) -> u16 {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = socket.local_addr().expect("its address").port();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            let answer = serde_json::json!({
                "request": String::from_utf8_lossy(&buf[..n]),
                "namespace": pod.namespace,
                "ingress": "",
                "service": "",
                "pod": pod.name,
            });
            let _ = socket.send_to(answer.to_string().as_bytes(), from).await;
        }
    });
    port
}

/// Starts a stand-in of the suite's CoreDNS on `127.0.0.1` (UDP): every query answered as
/// its `whoami` answers `foo.bar.com` — an A record of the client's address — with the
/// query's id and question; its port.
pub async fn serve_dns() -> u16 {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = socket.local_addr().expect("its address").port();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            if let Some(answer) = dns_answer(&buf[..n], from.ip()) {
                let _ = socket.send_to(&answer, from).await;
            }
        }
    });
    port
}

/// The answer to the DNS query `query` (one question): its header with QR and RA set, one
/// answer, the question as asked, and an A record of `client` (IPv4) pointing at it.
fn dns_answer(query: &[u8], client: std::net::IpAddr) -> Option<Vec<u8>> {
    let std::net::IpAddr::V4(client) = client else {
        return None;
    };
    if query.len() < 12 || u16::from_be_bytes([query[4], query[5]]) != 1 {
        return None;
    }
    // The question: labels up to the root, then type and class.
    let mut end = 12;
    while *query.get(end)? != 0 {
        end += usize::from(query[end]) + 1;
    }
    let question = query.get(12..end + 5)?;
    let mut answer = Vec::with_capacity(12 + question.len() + 16);
    answer.extend_from_slice(&query[..2]);
    answer.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
    answer.extend_from_slice(question);
    answer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4]);
    answer.extend_from_slice(&client.octets());
    Some(answer)
}

struct State {
    pod: Pod,
    /// Requests seen per `uuid` of the retry simulation.
    attempts: Mutex<HashMap<String, u32>>,
}

type Answer = Result<Response<Full<Bytes>>, Dropped>;

impl State {
    async fn answer(&self, request: Request<Incoming>, tls: Option<&TlsSeen>) -> Answer {
        if request.uri().path() == "/ws" && request.headers().contains_key("sec-websocket-key") {
            return Ok(websocket(request));
        }
        let query: HashMap<String, String> = request
            .uri()
            .query()
            .map(|q| {
                url_pairs(q)
                    .into_iter()
                    .collect::<HashMap<String, String>>()
            })
            .unwrap_or_default();
        let delay = |key: &str| query.get(key).and_then(|d| parse_go_duration(d));
        if request.uri().path().starts_with("/retry/") {
            let (Some(uuid), Some(succeed_after)) = (
                query.get("uuid"),
                query
                    .get("succeedAfter")
                    .and_then(|n| n.parse::<u32>().ok()),
            ) else {
                return Ok(plain(
                    StatusCode::BAD_REQUEST,
                    "uuid and succeedAfter are required",
                ));
            };
            let failing = {
                let mut attempts = self.attempts.lock().expect("the attempts");
                let seen = attempts.entry(uuid.clone()).or_default();
                let failing = *seen < succeed_after;
                if failing {
                    *seen += 1;
                }
                failing
            };
            if failing {
                if let Some(d) = delay("delayRetry") {
                    tokio::time::sleep(d).await;
                }
                return match query
                    .get("responseCode")
                    .and_then(|c| c.parse::<u16>().ok())
                    .and_then(|c| StatusCode::from_u16(c).ok())
                {
                    Some(code) => Ok(plain(code, "")),
                    None => Err(Dropped),
                };
            }
        }
        if let Some(d) = delay("delay") {
            tokio::time::sleep(d).await;
        }
        Ok(self.echo(request, tls).await)
    }

    async fn echo(
        &self,
        request: Request<Incoming>,
        tls: Option<&TlsSeen>,
    ) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let _ = body.collect().await;
        let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in &parts.headers {
            headers
                .entry(canonical(name.as_str()))
                .or_default()
                .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
        let host = parts
            .headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| parts.uri.authority().map(|a| a.to_string()))
            .unwrap_or_default();
        let target = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_default();
        ECHOED
            .lock()
            .expect("the echoed requests")
            .entry(format!("{}/{}", self.pod.namespace, self.pod.name))
            .or_default()
            .push(target.clone());
        let proto = match parts.version {
            hyper::Version::HTTP_2 => "HTTP/2.0",
            hyper::Version::HTTP_10 => "HTTP/1.0",
            _ => "HTTP/1.1",
        };
        let body = serde_json::json!({
            "path": target,
            "host": host,
            "method": parts.method.as_str(),
            "proto": proto,
            "headers": headers,
            "namespace": self.pod.namespace,
            "ingress": "",
            "service": "",
            "pod": self.pod.name,
            "tls": tls,
        });
        let mut response = Response::builder()
            .header("content-type", "application/json")
            .header("x-content-type-options", "nosniff");
        // `X-Echo-Set-Header: name:value, name:value` asks for response headers.
        for asked in parts.headers.get_all("x-echo-set-header") {
            for pair in String::from_utf8_lossy(asked.as_bytes()).split(',') {
                if let Some((name, value)) = pair.trim().split_once(':') {
                    response = response.header(name.trim(), value.trim());
                }
            }
        }
        response
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("a response")
    }
}

/// echo-basic's `/ws`: the upgrade to a WebSocket accepted, and every text or binary message
/// sent back as it came.
fn websocket(request: Request<Incoming>) -> Response<Full<Bytes>> {
    use futures::{SinkExt as _, StreamExt as _};
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(
        request.headers()["sec-websocket-key"].as_bytes(),
    );
    tokio::spawn(async move {
        let Ok(upgraded) = hyper::upgrade::on(request).await else {
            return;
        };
        let mut socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            None,
        )
        .await;
        while let Some(Ok(message)) = socket.next().await {
            if (message.is_text() || message.is_binary()) && socket.send(message).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-accept", accept)
        .body(Full::default())
        .expect("a response")
}

fn plain(code: StatusCode, text: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .body(Full::new(Bytes::from(text.to_owned())))
        .expect("a response")
}

/// `x-request-id` → `X-Request-Id`, as Go's `http.Header` keys them.
fn canonical(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |first| {
                first
                    .to_uppercase()
                    .chain(chars.flat_map(char::to_lowercase))
                    .collect()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// The pairs of a query string, percent-decoded.
fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match u8::from_str_radix(&text[i + 1..i + 3], 16) {
                Ok(b) => {
                    out.push(b);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A Go duration as the suite writes them (`300ms`, `1s`, `1.5s`).
fn parse_go_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ns" => number / 1e9,
        "us" | "µs" => number / 1e6,
        "ms" => number / 1e3,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query's answer keeps its id and question and names the client's address.
    #[test]
    fn dns_queries_are_answered_with_the_client_address() {
        // id 0xabcd, RD, one question: foo.bar.com A IN.
        let mut query = vec![0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in ["foo", "bar", "com"] {
            query.push(u8::try_from(label.len()).unwrap());
            query.extend_from_slice(label.as_bytes());
        }
        query.extend_from_slice(&[0, 0, 1, 0, 1]);
        let answer = dns_answer(&query, "127.0.0.9".parse().unwrap()).unwrap();
        assert_eq!(&answer[..2], &[0xab, 0xcd]);
        assert_eq!(answer[2] & 0x80, 0x80, "a response");
        assert_eq!(&answer[6..8], &[0, 1], "one answer");
        assert_eq!(&answer[12..query.len()], &query[12..]);
        assert_eq!(&answer[answer.len() - 4..], &[127, 0, 0, 9]);
        assert_eq!(dns_answer(&query[..5], "127.0.0.9".parse().unwrap()), None);
    }

    #[test]
    fn names_queries_and_durations_read_as_go_reads_them() {
        assert_eq!(canonical("x-request-id"), "X-Request-Id");
        assert_eq!(
            url_pairs("uuid=a%2Db&succeedAfter=2&x=1+2"),
            vec![
                ("uuid".into(), "a-b".into()),
                ("succeedAfter".into(), "2".into()),
                ("x".into(), "1 2".into())
            ]
        );
        assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("soon"), None);
    }
}
