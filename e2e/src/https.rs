//! HTTPS requests to an instance's inlet as a client resolving a hostname to it would send
//! them: the TLS server name and `Host` are the hostname, the connection goes to the inlet's
//! loopback port, and the certificate (a test CA's) is not checked.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt as _;

/// A response: status, headers, body.
pub type Answer = (u16, http::HeaderMap, String);

/// GETs `path` of `host` at `127.0.0.1:port` over HTTPS with `headers`; `None` when no
/// answer came within 15 s.
pub async fn get(port: u16, host: &str, path: &str, headers: http::HeaderMap) -> Option<Answer> {
    static TLS: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    let tls = TLS.get_or_init(|| {
        Arc::new(fairlead_kit::pki::insecure_client_config(&[b"http/1.1"]).expect("a TLS client"))
    });
    let uri: http::Uri = format!("https://{host}:{port}{path}").parse().ok()?;
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let response =
        fairlead_kit::exchange::exchange_at(tls, http::Method::GET, &uri, &headers, Some(at));
    let response = tokio::time::timeout(Duration::from_secs(15), response)
        .await
        .ok()?
        .ok()?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.ok()?.to_bytes();
    Some((
        parts.status.as_u16(),
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    ))
}
