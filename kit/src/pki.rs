//! A small certificate authority: generated at start (or restored from its certificate and
//! key, so what trusts it keeps trusting it across restarts), issuing serving certificates
//! for the embedded API server, webhooks and the xDS server, client certificates for the
//! proxies that reach the xDS server over mutual TLS, and rustls configurations to serve
//! them. The CA is valid for [`CA_VALIDITY`], what it issues for [`LEAF_VALIDITY`] unless
//! told another lifetime; [`renewal_at`] says when a certificate should be issued again (two
//! thirds into its lifetime), [`issued_by`], [`uri_sans`] and [`dns_sans`] what it is.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// How long a CA certificate is valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// How long an issued (serving or client) certificate is valid.
pub const LEAF_VALIDITY: Duration = Duration::from_secs(90 * 24 * 3600);

/// Certificate errors.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Key generation or signing failed.
    #[error("certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// The rustls configuration was refused.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// A stored certificate does not read as PEM.
    #[error("stored certificate: {0}")]
    Pem(String),
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
    issuer: Issuer<'static, KeyPair>,
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
        let params = Self::params(common_name)?;
        let self_signed = params.self_signed(&key)?;
        let cert = CertifiedKey {
            cert_pem: self_signed.pem(),
            key_pem: key.serialize_pem(),
            cert_der: self_signed.der().clone(),
            key_der: key.serialize_der(),
        };
        Ok(Self {
            issuer: Issuer::new(params, key),
            cert,
        })
    }

    /// The CA of `common_name` whose certificate and key were written before (see
    /// [`Ca::cert_pem`], [`Ca::key_pem`]): what it issues chains to that same certificate.
    pub fn restore(common_name: &str, cert_pem: &str, key_pem: &str) -> Result<Self, PkiError> {
        use rustls_pki_types::pem::PemObject as _;
        let key = KeyPair::from_pem(key_pem)?;
        let cert_der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| PkiError::Pem(e.to_string()))?;
        let cert = CertifiedKey {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            cert_der,
            key_der: key.serialize_der(),
        };
        Ok(Self {
            issuer: Issuer::new(Self::params(common_name)?, key),
            cert,
        })
    }

    /// What a CA certificate of `common_name` says; issued certificates name it as issuer.
    fn params(common_name: &str) -> Result<CertificateParams, PkiError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        validity(&mut params, CA_VALIDITY);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ok(params)
    }

    /// The CA's private key (PEM), for [`Ca::restore`]; keep it private.
    pub fn key_pem(&self) -> &str {
        &self.cert.key_pem
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
        self.issue_server_for(dns_names, ips, LEAF_VALIDITY)
    }

    /// Issues a serving certificate valid for `lifetime`.
    pub fn issue_server_for(
        &self,
        dns_names: &[&str],
        ips: &[IpAddr],
        lifetime: Duration,
    ) -> Result<CertifiedKey, PkiError> {
        let mut sans = Vec::new();
        for name in dns_names {
            sans.push(SanType::DnsName((*name).try_into()?));
        }
        sans.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        let common_name = dns_names.first().copied().unwrap_or("fairlead");
        self.issue(
            common_name,
            sans,
            ExtendedKeyUsagePurpose::ServerAuth,
            lifetime,
        )
    }

    /// Issues a serving certificate for `names`: DNS names, and URIs (a name with `://`, a
    /// SPIFFE ID) as URI SANs.
    pub fn issue_server_names(&self, names: &[&str]) -> Result<CertifiedKey, PkiError> {
        let common_name = names.first().copied().unwrap_or("fairlead");
        self.issue(
            common_name,
            sans_of(names)?,
            ExtendedKeyUsagePurpose::ServerAuth,
            LEAF_VALIDITY,
        )
    }

    /// Issues a client certificate (for mutual TLS) naming `common_name`.
    pub fn issue_client(&self, common_name: &str) -> Result<CertifiedKey, PkiError> {
        let san = SanType::DnsName(common_name.try_into()?);
        self.issue(
            common_name,
            vec![san],
            ExtendedKeyUsagePurpose::ClientAuth,
            LEAF_VALIDITY,
        )
    }

    /// Issues a client certificate whose identity is the URI SAN `uri` (a SPIFFE ID), valid
    /// for `lifetime`.
    pub fn issue_client_uri(
        &self,
        uri: &str,
        lifetime: Duration,
    ) -> Result<CertifiedKey, PkiError> {
        let san = SanType::URI(uri.try_into()?);
        self.issue(
            uri,
            vec![san],
            ExtendedKeyUsagePurpose::ClientAuth,
            lifetime,
        )
    }

    fn issue(
        &self,
        common_name: &str,
        sans: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
        lifetime: Duration,
    ) -> Result<CertifiedKey, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.subject_alt_names = sans;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        validity(&mut params, lifetime);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertifiedKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }
}

/// The SANs of `names`: a name with `://` is a URI, any other a DNS name.
fn sans_of(names: &[&str]) -> Result<Vec<SanType>, PkiError> {
    names
        .iter()
        .map(|name| {
            Ok(if name.contains("://") {
                SanType::URI((*name).try_into()?)
            } else {
                SanType::DnsName((*name).try_into()?)
            })
        })
        .collect()
}

/// A self-signed serving certificate for `names` ([`Ca::issue_server_names`]' SANs), valid
/// for [`LEAF_VALIDITY`]: its own trust anchor, as test clients use one.
pub fn self_signed_server(names: &[&str]) -> Result<CertifiedKey, PkiError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("fairlead"),
    );
    params.subject_alt_names = sans_of(names)?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, LEAF_VALIDITY);
    let cert = params.self_signed(&key)?;
    Ok(CertifiedKey {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    })
}

/// Valid from a little before now (a minute, or a tenth of `length` when that is shorter:
/// clocks a little behind still accept it) for `length`.
fn validity(params: &mut CertificateParams, length: Duration) {
    let now = time::OffsetDateTime::from(SystemTime::now());
    params.not_before = now - Duration::from_secs(60).min(length / 10);
    params.not_after = now + length;
}

/// A certificate's validity period, as it says.
pub fn validity_of(cert_pem: &str) -> Result<(SystemTime, SystemTime), PkiError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
        .map_err(|e| PkiError::Pem(e.to_string()))?;
    let cert = pem.parse_x509().map_err(|e| PkiError::Pem(e.to_string()))?;
    let at = |t: x509_parser::time::ASN1Time| {
        SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(t.timestamp()).unwrap_or(0))
    };
    Ok((
        at(cert.validity().not_before),
        at(cert.validity().not_after),
    ))
}

/// Whether `cert_pem` is signed by the CA `ca_pem` (whatever it is for, valid or not).
pub fn issued_by(ca_pem: &str, cert_pem: &str) -> bool {
    let parse = |text: &str| {
        x509_parser::pem::parse_x509_pem(text.as_bytes())
            .ok()
            .map(|(_, pem)| pem)
    };
    let (Some(ca), Some(cert)) = (parse(ca_pem), parse(cert_pem)) else {
        return false;
    };
    let (Ok(ca), Ok(cert)) = (ca.parse_x509(), cert.parse_x509()) else {
        return false;
    };
    cert.verify_signature(Some(ca.public_key())).is_ok()
}

/// The URI SANs of a certificate (DER), e.g. a proxy's SPIFFE ID.
pub fn uri_sans(cert_der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(cert_der) else {
        return Vec::new();
    };
    let Ok(Some(sans)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    sans.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::URI(uri) => Some((*uri).to_owned()),
            _ => None,
        })
        .collect()
}

/// When `cert_pem` should be issued again: two thirds into its lifetime (so it is renewed
/// well before it expires, whatever its lifetime); `None` when it does not read.
pub fn renewal_at(cert_pem: &str) -> Option<SystemTime> {
    let (from, until) = validity_of(cert_pem).ok()?;
    Some(from + until.duration_since(from).unwrap_or_default() * 2 / 3)
}

/// Whether `cert_pem` should be issued again at `now` ([`renewal_at`]; one that does not read
/// is due).
pub fn renewal_due(cert_pem: &str, now: SystemTime) -> bool {
    renewal_at(cert_pem).is_none_or(|at| now >= at)
}

/// The DNS names and IP addresses a certificate (DER) names, as text.
pub fn dns_sans(cert_der: &[u8]) -> Vec<String> {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(cert_der) else {
        return Vec::new();
    };
    let Ok(Some(sans)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    sans.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => Some(IpAddr::from(<[u8; 4]>::try_from(*bytes).ok()?).to_string()),
                16 => Some(IpAddr::from(<[u8; 16]>::try_from(*bytes).ok()?).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Checks that `cert_pem` (a serving certificate) chains to `ca_pem` and names `name`, as a
/// client trusting that CA would.
pub fn verify_server(ca_pem: &str, cert_pem: &str, name: &str) -> Result<(), PkiError> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls_pki_types::pem::PemObject as _;
    let pem = |text: &str| {
        CertificateDer::from_pem_slice(text.as_bytes()).map_err(|e| PkiError::Pem(e.to_string()))
    };
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem(ca_pem)?)?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .map_err(|e| PkiError::Pem(e.to_string()))?;
    let name = rustls_pki_types::ServerName::try_from(name.to_owned())
        .map_err(|e| PkiError::Pem(e.to_string()))?;
    verifier.verify_server_cert(
        &pem(cert_pem)?,
        &[],
        &name,
        &[],
        rustls_pki_types::UnixTime::now(),
    )?;
    Ok(())
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

/// A server certificate verifier that accepts any certificate (the signatures of the
/// handshake are still checked): an encrypted, unauthenticated connection, as
/// `insecureSkipVerify` and nginx's `proxy_ssl_verify off` ask.
#[derive(Debug)]
pub struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl AcceptAny {
    /// The verifier, checking handshake signatures with `provider`'s algorithms.
    pub fn new(provider: Arc<rustls::crypto::CryptoProvider>) -> Self {
        Self(provider)
    }
}

/// A client configuration that accepts any server certificate ([`AcceptAny`]), offering
/// `alpn`.
pub fn insecure_client_config(alpn: &[&[u8]]) -> Result<rustls::ClientConfig, PkiError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
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

    /// What a restored CA issues is trusted by whoever trusts the certificate written before
    /// the restart.
    #[test]
    fn a_restored_ca_issues_what_its_old_certificate_verifies() {
        let ca = Ca::generate("test-ca").unwrap();
        let (cert_pem, key_pem) = (ca.cert_pem().to_owned(), ca.key_pem().to_owned());
        drop(ca);
        let restored = Ca::restore("test-ca", &cert_pem, &key_pem).unwrap();
        assert_eq!(restored.cert_pem(), cert_pem);
        let server = restored
            .issue_server(&["localhost"], &["127.0.0.1".parse().unwrap()])
            .unwrap();
        let verify = |anchor_pem: &str| verify_server(anchor_pem, &server.cert_pem, "localhost");
        assert!(verify(&cert_pem).is_ok(), "{:?}", verify(&cert_pem));
        // Another CA's certificate does not verify it: the check can fail.
        let other = Ca::generate("test-ca").unwrap();
        assert!(verify(other.cert_pem()).is_err());
        assert!(Ca::restore("test-ca", "not pem", &key_pem).is_err());
    }

    /// What a certificate names reads back: DNS names and addresses, URI SANs.
    #[test]
    fn names_read_back() {
        let ca = Ca::generate("test-ca").unwrap();
        let server = ca
            .issue_server(&["alb-xds.d8-alb.svc"], &["127.0.0.1".parse().unwrap()])
            .unwrap();
        assert_eq!(
            dns_sans(&server.cert_der()),
            ["alb-xds.d8-alb.svc", "127.0.0.1"]
        );
        assert!(uri_sans(&server.cert_der()).is_empty());
    }

    /// Names with a scheme become URI SANs, the others DNS names; a self-signed certificate
    /// verifies against itself and no other.
    #[test]
    fn server_names_and_self_signed_certificates() {
        let ca = Ca::generate("test-ca").unwrap();
        let server = ca
            .issue_server_names(&["abc.example.com", "spiffe://abc.example.com/id"])
            .unwrap();
        assert_eq!(dns_sans(&server.cert_der()), ["abc.example.com"]);
        assert_eq!(
            uri_sans(&server.cert_der()),
            ["spiffe://abc.example.com/id"]
        );
        assert!(verify_server(ca.cert_pem(), &server.cert_pem, "abc.example.com").is_ok());
        let own = self_signed_server(&["*.example.org", "example.net"]).unwrap();
        assert!(verify_server(&own.cert_pem, &own.cert_pem, "example.net").is_ok());
        assert!(verify_server(&own.cert_pem, &own.cert_pem, "a.example.org").is_ok());
        assert!(verify_server(&own.cert_pem, &own.cert_pem, "example.com").is_err());
        assert!(verify_server(ca.cert_pem(), &own.cert_pem, "example.net").is_err());
    }

    /// A proxy's identity is its URI SAN; renewal comes at two thirds of any lifetime.
    #[test]
    fn identities_and_renewal_at_two_thirds() {
        let ca = Ca::generate("test-ca").unwrap();
        let id = "spiffe://cluster.local/ns/d8-alb/gateway/main";
        let cert = ca.issue_client_uri(id, Duration::from_secs(300)).unwrap();
        assert_eq!(uri_sans(&cert.cert_der()), [id]);
        assert!(uri_sans(&ca.issue_client("proxy").unwrap().cert_der()).is_empty());
        let (from, until) = validity_of(&cert.cert_pem).unwrap();
        // Issued valid from half a minute ago (a tenth of its lifetime), for five minutes.
        assert_eq!(
            until.duration_since(from).unwrap(),
            Duration::from_secs(330)
        );
        assert!(!renewal_due(
            &cert.cert_pem,
            from + Duration::from_secs(210)
        ));
        assert!(renewal_due(&cert.cert_pem, from + Duration::from_secs(221)));
        // A short lifetime is not due at once.
        let short = ca.issue_client_uri(id, Duration::from_secs(15)).unwrap();
        assert!(!renewal_due(&short.cert_pem, SystemTime::now()));
        assert!(renewal_due("not pem", SystemTime::now()));
        assert!(issued_by(ca.cert_pem(), &cert.cert_pem));
        assert!(!issued_by(
            Ca::generate("test-ca").unwrap().cert_pem(),
            &cert.cert_pem
        ));
    }
}
