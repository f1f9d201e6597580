//! One HTTP/1.1 request over a connection of its own — TCP, or TLS by the caller's rustls
//! configuration for `https` — for clients that ask rarely or must shape each request
//! exactly (the GeoIP downloader, the proxy's `auth-url` subrequests): no pool, no
//! redirects followed, no body sent. The host is resolved by the system's resolver.

use std::sync::Arc;

use http_body_util::Empty;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// Not an absolute `http` or `https` URI.
    #[error("not an http(s) URL")]
    Url,
    /// Building the request, connecting, TLS or the exchange failed.
    #[error("{0}")]
    Transport(String),
}

/// Sends `method` to `uri` with `headers` (and `Host` from `uri`); the response's head and
/// its body to read.
pub async fn exchange(
    tls: &Arc<rustls::ClientConfig>,
    method: http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
) -> Result<http::Response<hyper::body::Incoming>, ExchangeError> {
    exchange_at(tls, method, uri, headers, None).await
}

/// [`exchange`], connecting to `at` when given instead of `uri`'s host and port (which
/// still name the server: `Host`, TLS server name) — as a client resolving the name
/// itself does.
pub async fn exchange_at(
    tls: &Arc<rustls::ClientConfig>,
    method: http::Method,
    uri: &http::Uri,
    headers: &http::HeaderMap,
    at: Option<std::net::SocketAddr>,
) -> Result<http::Response<hyper::body::Incoming>, ExchangeError> {
    let transport = |e: &dyn std::fmt::Display| ExchangeError::Transport(e.to_string());
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(ExchangeError::Url),
    };
    let host = uri.host().ok_or(ExchangeError::Url)?;
    let bare = host.trim_matches(['[', ']']);
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let mut request = http::Request::builder()
        .method(method)
        .uri(uri.path_and_query().map_or("/", |p| p.as_str()))
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| transport(&e))?;
    *request.headers_mut() = headers.clone();
    let authority = match uri.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    };
    request.headers_mut().insert(
        http::header::HOST,
        http::HeaderValue::from_str(&authority).map_err(|e| transport(&e))?,
    );
    let tcp = match at {
        Some(address) => tokio::net::TcpStream::connect(address).await,
        None => tokio::net::TcpStream::connect((bare, port)).await,
    }
    .map_err(|e| transport(&e))?;
    let _ = tcp.set_nodelay(true);
    if https {
        let name =
            rustls_pki_types::ServerName::try_from(bare.to_owned()).map_err(|e| transport(&e))?;
        let tls = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| transport(&e))?;
        send(hyper_util::rt::TokioIo::new(tls), request).await
    } else {
        send(hyper_util::rt::TokioIo::new(tcp), request).await
    }
    .map_err(|e| transport(&e))
}

async fn send<T>(
    io: T,
    request: http::Request<Empty<bytes::Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}
