//! TLS client configurations of the probes: verify against a CA (or the system roots), verify
//! the chain only (PostgreSQL `VerifyCA`), or accept any certificate (`insecureSkipTLSVerify`,
//! PostgreSQL `SkipVerification`: encrypted, not authenticated).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::ProbeFailure;

/// How the server's certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Chain and name.
    Full,
    /// Chain only; any name.
    ChainOnly,
    /// Nothing (the connection is still encrypted).
    Nothing,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(ca_pem: Option<&str>) -> Result<RootCertStore, ProbeFailure> {
    let mut roots = RootCertStore::empty();
    match ca_pem.filter(|p| !p.trim().is_empty()) {
        Some(pem) => {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| ProbeFailure::Config(format!("caCert: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| ProbeFailure::Config(format!("caCert: {e}")))?;
            }
            if roots.is_empty() {
                return Err(ProbeFailure::Config("caCert holds no certificate".into()));
            }
        }
        None => return Ok(system_roots().clone()),
    }
    Ok(roots)
}

/// The system's trust store, read once per process (not per probe: an HTTPS probe without a
/// `caCert` would otherwise read every certificate file of the system each time).
fn system_roots() -> &'static RootCertStore {
    static ROOTS: std::sync::OnceLock<RootCertStore> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        roots
    })
}

/// A client certificate and key (PEM).
pub struct ClientIdentity<'a> {
    /// Certificate chain, PEM.
    pub cert_pem: &'a str,
    /// Private key, PEM.
    pub key_pem: &'a str,
}

/// A client configuration for `verify`, trusting `ca_pem` (or the system roots), optionally
/// presenting a client certificate.
pub fn client_config(
    verify: Verify,
    ca_pem: Option<&str>,
    identity: Option<ClientIdentity<'_>>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, ProbeFailure> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ProbeFailure::Config(e.to_string()))?;
    let builder = match verify {
        Verify::Full => builder.with_root_certificates(roots(ca_pem)?),
        Verify::ChainOnly => {
            let inner =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots(ca_pem)?), provider)
                    .build()
                    .map_err(|e| ProbeFailure::Config(e.to_string()))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
        }
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(fairlead_kit::pki::AcceptAny::new(
                provider,
            ))),
    };
    let mut config = match identity {
        Some(id) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| ProbeFailure::Config(format!("clientCert: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                .map_err(|e| ProbeFailure::Config(format!("clientKey: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ProbeFailure::Config(format!("client certificate: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The server name to verify: a DNS name, or the IP address itself.
pub fn server_name(host: &str) -> Result<ServerName<'static>, ProbeFailure> {
    ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
        .map_err(|e| ProbeFailure::Config(format!("invalid TLS server name {host:?}: {e}")))
}

#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
