//! Requests over TLS as the suite's round tripper sends them: to a Gateway's address, with a
//! server name (SNI) of the test's choosing, trusting the certificate the test names (a
//! server's own or its CA's) and checking the server's names as Go's `crypto/tls` does (a `*`
//! label matches exactly one label, so `*.org` covers `example.org`, which webpki's stricter
//! rule refuses), presenting a client certificate when the test has one.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::expect::Got;

/// How a request's TLS connection is made.
#[derive(Clone, Copy, Debug)]
pub struct Tls<'a> {
    /// The server name the client asks for (SNI), and checks the certificate against.
    pub server_name: &'a str,
    /// The certificate (PEM) the client trusts.
    pub trust: &'a str,
    /// The client certificate and its key (PEM), presented when the server asks.
    pub client: Option<(&'a str, &'a str)>,
    /// Speaks HTTP/2 (offered alone in ALPN), else HTTP/1.1.
    pub http2: bool,
}

/// Checks a server's certificate chain against the trusted roots, and its DNS names against
/// the server name as Go does.
#[derive(Debug)]
struct GoVerifier {
    roots: Arc<rustls::RootCertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

/// Whether the certificate name `pattern` covers `host`, as Go's `matchHostnames`: the same
/// number of labels, a leading `*` label matching any one label, case ignored.
fn go_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.');
    let (pattern_labels, host_labels): (Vec<&str>, Vec<&str>) =
        (pattern.split('.').collect(), host.split('.').collect());
    pattern_labels.len() == host_labels.len()
        && pattern_labels
            .iter()
            .zip(&host_labels)
            .enumerate()
            .all(|(i, (p, h))| (i == 0 && *p == "*") || p.eq_ignore_ascii_case(h))
}

impl ServerCertVerifier for GoVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        let name = server_name.to_str();
        if fairlead_kit::pki::dns_sans(end_entity)
            .iter()
            .any(|pattern| go_matches(pattern, &name))
        {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The client configuration for `tls`, offering `alpn`.
pub fn client_config(tls: &Tls<'_>, alpn: &[&[u8]]) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(tls.trust.as_bytes()) {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(GoVerifier {
            roots: Arc::new(roots),
            provider,
        }));
    let mut config = match tls.client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())?
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A TLS connection to `address` (`ip:port`) made as `tls` says, offering `alpn`; what the
/// handshake failed with, if it did (within 10 s).
pub async fn connect(
    address: &str,
    tls: &Tls<'_>,
    alpn: &[&[u8]],
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let config = client_config(tls, alpn)?;
    let name = ServerName::try_from(tls.server_name.to_owned()).map_err(|e| e.to_string())?;
    let handshake = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| e.to_string())?;
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .map_err(|_| "the TLS handshake timed out".to_owned())?
}

/// One request over a new TLS connection to `address` (HTTP/2 when `tls` says so, else
/// HTTP/1.1): `method` of `target` for `host` (`Host`, or HTTP/2's `:authority`) with
/// `headers`; what failed (the handshake, the exchange), if anything did.
pub async fn request(
    address: &str,
    tls: &Tls<'_>,
    method: &str,
    host: &str,
    headers: &[(&str, &str)],
    target: &str,
) -> Result<Got, String> {
    let alpn: &[&[u8]] = if tls.http2 { &[b"h2"] } else { &[b"http/1.1"] };
    let io = TokioIo::new(connect(address, tls, alpn).await?);
    let ask = super::expect::Exchange {
        http2: tls.http2,
        scheme: "https",
        method,
        host,
        headers,
        target,
    };
    ask.over(io).await
}

#[cfg(test)]
mod tests {
    use super::go_matches;

    /// Names match as Go's `crypto/tls` matches them.
    #[test]
    fn names_match_as_go_matches_them() {
        assert!(go_matches("*.org", "example.org"));
        assert!(go_matches("*.wildcard.org", "a.WILDCARD.org"));
        assert!(go_matches("example.org", "example.org."));
        assert!(!go_matches("*.org", "a.example.org"));
        assert!(!go_matches("*", "example.org"));
        assert!(go_matches("*", "localhost"));
        assert!(!go_matches("a.*.org", "a.b.org"));
    }
}
