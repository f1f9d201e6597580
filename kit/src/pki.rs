//! A small certificate authority: generated at start, issuing serving certificates for the
//! embedded API server, webhooks and the xDS server, client certificates for the proxies that
//! reach the xDS server over mutual TLS, and rustls configurations to serve them.

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Certificate errors.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Key generation or signing failed.
    #[error("certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// The rustls configuration was refused.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A certificate and its private key, in PEM and DER.
#[derive(Clone, Debug)]
pub struct CertifiedKey {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl CertifiedKey {
    /// The certificate, DER.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert_der.clone()
    }

    /// The private key, DER.
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }
}

/// A certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    cert: CertifiedKey,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// Generates a new CA with the given common name.
    pub fn generate(common_name: &str) -> Result<Self, PkiError> {
        let key = KeyPair::generate()?;
        let key_pem = key.serialize_pem();
        let key_der = key.serialize_der();
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, key)?;
        let cert = CertifiedKey {
            cert_pem: issuer.pem(),
            key_pem,
            cert_der: issuer.der().clone(),
            key_der,
        };
        Ok(Self { issuer, cert })
    }

    /// The CA certificate (PEM), for clients to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert.cert_pem
    }

    /// Issues a serving certificate for DNS names and IP addresses.
    pub fn issue_server(
        &self,
        dns_names: &[&str],
        ips: &[IpAddr],
    ) -> Result<CertifiedKey, PkiError> {
        self.issue(dns_names, ips, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// Issues a client certificate (for mutual TLS) naming `common_name`.
    pub fn issue_client(&self, common_name: &str) -> Result<CertifiedKey, PkiError> {
        self.issue(&[common_name], &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(
        &self,
        dns_names: &[&str],
        ips: &[IpAddr],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<CertifiedKey, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(
            DnType::CommonName,
            dns_names.first().copied().unwrap_or("fairlead"),
        );
        for name in dns_names {
            params
                .subject_alt_names
                .push(SanType::DnsName((*name).try_into()?));
        }
        for ip in ips {
            params.subject_alt_names.push(SanType::IpAddress(*ip));
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }
}

/// A rustls server configuration for a certificate, offering the given ALPN protocols.
pub fn server_config(
    cert: &CertifiedKey,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, PkiError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert_der()], cert.key_der())?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_server_certificates_under_the_ca() {
        let ca = Ca::generate("test-ca").unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let server = ca
            .issue_server(&["localhost"], &["127.0.0.1".parse().unwrap()])
            .unwrap();
        assert!(server.key_pem.contains("PRIVATE KEY"));
        assert!(server_config(&server, &[b"h2", b"http/1.1"]).is_ok());
    }
}
