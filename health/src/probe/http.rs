//! HTTP(S) probe: `GET` or `HEAD` of `path` on the pod, with the Host header and extra
//! headers of the probe; any 2xx passes. (The Deckhouse module accepts only 200; a 204 health
//! endpoint is common, while a redirect usually means a login page, not health.)
//!
//! The exchange is written directly over the connection (one HTTP/1.1 request with
//! `Connection: close`, the answer's head parsed with `httparse`) rather than through a client
//! library: a probe is one request on a fresh connection, so there is no connection state worth
//! a client's machinery, and the probe costs a handful of system calls. At most
//! [`BODY_LIMIT`] bytes of the body are read (so the connection ends with a clean close rather
//! than a reset), then the connection is closed.

use std::net::SocketAddr;
use std::time::Duration;

use fairlead_health_api::HttpProbe;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::tls::{self, Verify};
use super::{ProbeFailure, bounded};

/// How much of a response body a probe reads.
pub const BODY_LIMIT: usize = 4096;

/// How large the status line and headers of an answer may be.
pub const HEAD_LIMIT: usize = 16 * 1024;

/// How many headers an answer may carry.
const MAX_HEADERS: usize = 64;

/// Probes `addr` as `spec` says.
pub async fn probe(
    addr: SocketAddr,
    spec: &HttpProbe,
    timeout: Duration,
) -> Result<(), ProbeFailure> {
    let request = Request::new(addr, spec)?;
    let tls_config = if spec.scheme.eq_ignore_ascii_case("HTTPS") {
        let verify = if spec.insecure_skip_tls_verify {
            Verify::Nothing
        } else {
            Verify::Full
        };
        Some(tls::client_config(
            verify,
            spec.ca_cert.as_deref(),
            None,
            &[b"http/1.1"],
        )?)
    } else {
        None
    };
    let status = bounded(timeout, async move {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| ProbeFailure::Connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        match tls_config {
            Some(config) => {
                let name = spec.host.clone().unwrap_or_else(|| addr.ip().to_string());
                let stream = tokio_rustls::TlsConnector::from(config)
                    .connect(tls::server_name(&name)?, tcp)
                    .await
                    .map_err(|e| ProbeFailure::Tls(e.to_string()))?;
                exchange(stream, &request).await
            }
            None => exchange(tcp, &request).await,
        }
    })
    .await?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(ProbeFailure::Status(status))
    }
}

/// The bytes of one probe request, and whether it asks for a body.
struct Request {
    bytes: Vec<u8>,
    head: bool,
}

impl Request {
    /// Renders the request; a path or header that would break the request line or a header
    /// line is a configuration error naming the field.
    fn new(addr: SocketAddr, spec: &HttpProbe) -> Result<Self, ProbeFailure> {
        let head = spec.method.eq_ignore_ascii_case("HEAD");
        let path = spec
            .path
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        if !path.starts_with('/') || path.bytes().any(|b| b.is_ascii_whitespace() || b < 0x20) {
            return Err(ProbeFailure::Config(format!(
                "http.path {path:?}: must start with / and hold no spaces or control characters"
            )));
        }
        let mut bytes = Vec::with_capacity(256);
        bytes.extend_from_slice(if head { b"HEAD " } else { b"GET " });
        bytes.extend_from_slice(path.as_bytes());
        bytes.extend_from_slice(b" HTTP/1.1\r\n");
        let overrides = |name: &str| {
            spec.http_headers
                .iter()
                .any(|h| h.name.eq_ignore_ascii_case(name))
        };
        if !overrides("host") {
            let host = match &spec.host {
                Some(host) => host.clone(),
                None => addr.to_string(),
            };
            header_line(&mut bytes, "Host", &host, "http.host")?;
        }
        if !overrides("user-agent") {
            let agent = concat!("fairlead-health/", env!("CARGO_PKG_VERSION"));
            header_line(&mut bytes, "User-Agent", agent, "http.httpHeaders")?;
        }
        for header in &spec.http_headers {
            if header.name.eq_ignore_ascii_case("connection") {
                continue;
            }
            header_line(&mut bytes, &header.name, &header.value, "http.httpHeaders")?;
        }
        bytes.extend_from_slice(b"Connection: close\r\n\r\n");
        Ok(Self { bytes, head })
    }
}

fn header_line(
    out: &mut Vec<u8>,
    name: &str,
    value: &str,
    field: &str,
) -> Result<(), ProbeFailure> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return Err(ProbeFailure::Config(format!(
            "{field}: {name:?} is not a valid header name"
        )));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(ProbeFailure::Config(format!(
            "{field}: the value of {name:?} holds a line break"
        )));
    }
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// How the body of an answer ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// No body (HEAD, 204, 304).
    None,
    /// `Content-Length` bytes.
    Length(usize),
    /// Chunked: ends with the last chunk.
    Chunked,
    /// Until the server closes.
    UntilClose,
}

fn body_of(response: &httparse::Response<'_, '_>, status: u16, head: bool) -> Body {
    if head || status == 204 || status == 304 {
        return Body::None;
    }
    let value = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    if value("transfer-encoding").is_some_and(|v| v.ends_with("chunked")) {
        return Body::Chunked;
    }
    match value("content-length").and_then(|v| v.parse().ok()) {
        Some(length) => Body::Length(length),
        None => Body::UntilClose,
    }
}

/// Sends the request and reads the answer's status (skipping informational answers), then up
/// to [`BODY_LIMIT`] bytes of its body, and closes the connection.
async fn exchange<S>(mut io: S, request: &Request) -> Result<u16, ProbeFailure>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let broken = |e: std::io::Error| ProbeFailure::Http(e.to_string());
    io.write_all(&request.bytes).await.map_err(broken)?;
    io.flush().await.map_err(broken)?;
    let mut buf = Vec::with_capacity(1024);
    let (status, body, rest) = loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let status = response.code.unwrap_or_default();
                if (100..200).contains(&status) && status != 101 {
                    buf.drain(..len);
                    continue;
                }
                let body = body_of(&response, status, request.head);
                break (status, body, buf.len() - len);
            }
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(ProbeFailure::Http(format!("malformed answer: {e}"))),
        }
        if buf.len() >= HEAD_LIMIT {
            return Err(ProbeFailure::Http(format!(
                "the answer's head exceeds {HEAD_LIMIT} bytes"
            )));
        }
        buf.reserve(1024);
        if io.read_buf(&mut buf).await.map_err(broken)? == 0 {
            return Err(ProbeFailure::Http(
                "the connection closed before an answer".into(),
            ));
        }
    };
    drain(&mut io, body, &buf[buf.len() - rest..]).await;
    let _ = io.shutdown().await;
    Ok(status)
}

/// Reads what is left of a body, up to [`BODY_LIMIT`] bytes in all; errors end it quietly,
/// since the status is already known.
async fn drain<S: AsyncRead + Unpin>(io: &mut S, body: Body, received: &[u8]) {
    let want = match body {
        Body::None => return,
        Body::Length(length) => length.min(BODY_LIMIT),
        Body::Chunked | Body::UntilClose => BODY_LIMIT,
    };
    let mut tail = Vec::with_capacity(8);
    let mut seen = received.len();
    let note = |bytes: &[u8], tail: &mut Vec<u8>| {
        tail.extend_from_slice(&bytes[bytes.len().saturating_sub(5)..]);
        let cut = tail.len().saturating_sub(5);
        tail.drain(..cut);
        body == Body::Chunked && tail.as_slice() == b"0\r\n\r\n"
    };
    if note(received, &mut tail) {
        return;
    }
    let mut chunk = [0u8; 2048];
    while seen < want {
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                seen += n;
                if note(&chunk[..n], &mut tail) {
                    return;
                }
            }
        }
    }
}
