//! HTTP(S) probe: `GET` or `HEAD` of `path` on the pod, with the Host header and extra
//! headers of the probe; any 2xx passes. (The Deckhouse module accepts only 200; a 204 health
//! endpoint is common, while a redirect usually means a login page, not health.) At most
//! [`BODY_LIMIT`] bytes of the body are read, then the connection is dropped.

use std::net::SocketAddr;
use std::time::Duration;

use fairlead_health_api::HttpProbe;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

use super::tls::{self, Verify};
use super::{ProbeFailure, bounded};

/// How much of a response body a probe reads.
pub const BODY_LIMIT: usize = 4096;

/// Probes `addr` as `spec` says.
pub async fn probe(
    addr: SocketAddr,
    spec: &HttpProbe,
    timeout: Duration,
) -> Result<(), ProbeFailure> {
    let https = spec.scheme.eq_ignore_ascii_case("HTTPS");
    let tls_config = if https {
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
    bounded(timeout, async move {
        let tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| ProbeFailure::Connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let host_header = match &spec.host {
            Some(host) => host.clone(),
            None => addr.to_string(),
        };
        match tls_config {
            Some(config) => {
                let name = spec.host.clone().unwrap_or_else(|| addr.ip().to_string());
                let stream = tokio_rustls::TlsConnector::from(config)
                    .connect(tls::server_name(&name)?, tcp)
                    .await
                    .map_err(|e| ProbeFailure::Tls(e.to_string()))?;
                exchange(TokioIo::new(stream), spec, &host_header).await
            }
            None => exchange(TokioIo::new(tcp), spec, &host_header).await,
        }
    })
    .await
}

async fn exchange<T>(io: T, spec: &HttpProbe, host: &str) -> Result<(), ProbeFailure>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| ProbeFailure::Http(e.to_string()))?;
    let method = if spec.method.eq_ignore_ascii_case("HEAD") {
        http::Method::HEAD
    } else {
        http::Method::GET
    };
    let path = spec
        .path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("/");
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, host)
        .header(
            http::header::USER_AGENT,
            concat!("fairlead-health/", env!("CARGO_PKG_VERSION")),
        )
        .header(http::header::CONNECTION, "close");
    for header in &spec.http_headers {
        request = request.header(header.name.as_str(), header.value.as_str());
    }
    let request = request
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| ProbeFailure::Config(format!("request: {e}")))?;
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| ProbeFailure::Http(e.to_string()))?;
        let status = response.status();
        let mut body = response.into_body();
        let mut read = 0;
        while read < BODY_LIMIT {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len()),
                _ => break,
            }
        }
        Ok::<_, ProbeFailure>(status)
    };
    // The connection is driven in place (no task per probe): when it ends first (the server
    // closed after answering), the exchange completes from what was already received.
    let status = match futures::future::select(std::pin::pin!(exchange), connection).await {
        futures::future::Either::Left((status, _connection)) => status?,
        futures::future::Either::Right((_, exchange)) => exchange.await?,
    };
    if status.is_success() {
        Ok(())
    } else {
        Err(ProbeFailure::Status(status.as_u16()))
    }
}
