//! One HTTP(S) GET at a time, as a downloader needs (GeoIP databases, the peer tools
//! fetched from a package index): TLS by rustls (ring) against the system's trust store (or
//! given roots), redirects followed (MaxMind redirects downloads to presigned storage URLs;
//! credentials are not sent to another origin, and HTTPS is never left for HTTP), bodies
//! bounded in size and every step in time; URLs are shown without their credentials and
//! query.
//! Downloads are rare, so there is no connection pool.

use std::sync::Arc;

use http_body_util::{BodyExt as _, Limited};

/// The most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// The longest wait for a connection, its TLS handshake and the response's headers.
pub const HEADERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The longest a body may take to arrive (MaxMind's City is about 130 MB).
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

/// A response.
#[derive(Debug)]
pub struct Response {
    /// Its status.
    pub status: http::StatusCode,
    /// Its headers.
    pub headers: http::HeaderMap,
    /// Its body.
    pub body: Vec<u8>,
}

/// Why a GET failed (the URL shown without its query, which may hold a licence key).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Not a URL this client takes.
    #[error("{0}: not an http(s) URL")]
    Url(String),
    /// Connecting, TLS, or the exchange failed.
    #[error("GET {url}: {message}")]
    Transport {
        /// The URL, without its query.
        url: String,
        /// What failed.
        message: String,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    #[error("GET {0}: too many redirects")]
    Redirects(String),
    /// A redirect from HTTPS to plain HTTP (credentials and integrity would be lost).
    #[error("GET {0}: refused a redirect from https to http")]
    Downgrade(String),
    /// The body is larger than allowed.
    #[error("GET {0}: the body is larger than allowed")]
    TooLarge(String),
}

/// The URL without its credentials and query (what errors and logs show).
pub fn shown(uri: &http::Uri) -> String {
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{}{port}{}",
        uri.scheme_str().unwrap_or("http"),
        uri.host().unwrap_or(""),
        uri.path()
    )
}

/// A URL as text, shown without its credentials and query (it may not parse).
pub fn shown_url(url: &str) -> String {
    url.parse::<http::Uri>()
        .map_or_else(|_| "<an invalid URL>".to_owned(), |u| shown(&u))
}

/// A client.
#[derive(Clone)]
pub struct Http {
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

impl Http {
    /// A client trusting the system's roots, and the PEM certificates of `extra_roots`.
    pub fn new(extra_roots: Option<&[u8]>) -> Result<Self, rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if let Some(pem) = extra_roots {
            use rustls::pki_types::pem::PemObject as _;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| rustls::Error::General(e.to_string()))?;
                roots.add(cert)?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self { tls: Arc::new(tls) })
    }

    /// GETs `url` with `headers` (an `Authorization` among them is sent to `url`'s host only),
    /// following redirects, reading at most `limit` bytes of body.
    pub async fn get(
        &self,
        url: &str,
        headers: &http::HeaderMap,
        limit: usize,
    ) -> Result<Response, HttpError> {
        let mut uri: http::Uri = url.parse().map_err(|_| HttpError::Url(shown_url(url)))?;
        let origin = (uri.scheme().cloned(), uri.authority().cloned());
        for _ in 0..=MAX_REDIRECTS {
            let mut sent = headers.clone();
            if (uri.scheme().cloned(), uri.authority().cloned()) != origin {
                sent.remove(http::header::AUTHORIZATION);
            }
            let response = self.once(&uri, &sent, limit).await?;
            if !response.status.is_redirection() {
                return Ok(response);
            }
            let Some(location) = response
                .headers
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
            else {
                return Ok(response);
            };
            let next =
                resolve(&uri, location).ok_or_else(|| HttpError::Url(shown_url(location)))?;
            if uri.scheme_str() == Some("https") && next.scheme_str() != Some("https") {
                return Err(HttpError::Downgrade(shown(&uri)));
            }
            uri = next;
        }
        Err(HttpError::Redirects(shown(&uri)))
    }

    async fn once(
        &self,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        limit: usize,
    ) -> Result<Response, HttpError> {
        let transport = |e: &dyn std::fmt::Display| HttpError::Transport {
            url: shown(uri),
            message: e.to_string(),
        };
        let timed_out = |what: &str| HttpError::Transport {
            url: shown(uri),
            message: format!("{what} timed out"),
        };
        let mut sent = headers.clone();
        sent.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static(concat!("fairlead/", env!("CARGO_PKG_VERSION"))),
        );
        let exchange = async {
            crate::exchange::exchange(&self.tls, http::Method::GET, uri, &sent)
                .await
                .map_err(|e| match e {
                    crate::exchange::ExchangeError::Url => HttpError::Url(shown(uri)),
                    crate::exchange::ExchangeError::Transport(message) => transport(&message),
                })
        };
        let response = tokio::time::timeout(HEADERS_TIMEOUT, exchange)
            .await
            .map_err(|_| timed_out("connecting and waiting for the response"))??;
        let (parts, body) = response.into_parts();
        let body = tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, limit).collect())
            .await
            .map_err(|_| timed_out("reading the body"))?
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    HttpError::TooLarge(shown(uri))
                } else {
                    transport(&e)
                }
            })?
            .to_bytes();
        // No copy: the collected body's only owner gives its buffer up.
        let body = Vec::from(body);
        Ok(Response {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

/// `location` (absolute, or a path) against `base`.
fn resolve(base: &http::Uri, location: &str) -> Option<http::Uri> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.parse().ok();
    }
    let path = if location.starts_with('/') {
        location.to_owned()
    } else {
        let dir = base.path().rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{location}")
    };
    http::Uri::builder()
        .scheme(base.scheme()?.clone())
        .authority(base.authority()?.clone())
        .path_and_query(path)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve_against_the_request() {
        let base: http::Uri = "https://download.example/geoip/databases/E/download?x=1"
            .parse()
            .unwrap();
        assert_eq!(
            resolve(&base, "/other?sig=abc").unwrap().to_string(),
            "https://download.example/other?sig=abc"
        );
        assert_eq!(
            resolve(&base, "https://r2.example/obj?sig=1")
                .unwrap()
                .to_string(),
            "https://r2.example/obj?sig=1"
        );
        assert_eq!(
            resolve(&base, "next").unwrap().to_string(),
            "https://download.example/geoip/databases/E/next"
        );
        assert_eq!(
            shown(&base),
            "https://download.example/geoip/databases/E/download"
        );
        let with_user: http::Uri = "http://user:pw@mirror.example:8080/d?k=1".parse().unwrap();
        assert_eq!(shown(&with_user), "http://mirror.example:8080/d");
        assert_eq!(
            shown_url("http://bad url?license_key=x"),
            "<an invalid URL>"
        );
    }
}
