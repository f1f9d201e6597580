//! What the graph shows of a certificate: its expiry, subject and DNS names, read from the
//! first certificate of a PEM chain. The key and the rest of the Secret's data are never
//! read.

use x509_parser::extensions::GeneralName;

/// The facts of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// Expiry, Unix seconds.
    pub not_after: i64,
    /// Subject, as text.
    pub subject: String,
    /// DNS names of its subjectAltName.
    pub dns_names: Vec<String>,
}

/// A chain that is not a certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    /// Not PEM.
    #[error("tls.crt is not PEM: {0}")]
    Pem(String),
    /// PEM, not X.509.
    #[error("tls.crt is not an X.509 certificate: {0}")]
    X509(String),
}

/// Reads the first certificate of `chain` (PEM).
pub fn read(chain: &[u8]) -> Result<Facts, CertificateError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(chain)
        .map_err(|e| CertificateError::Pem(e.to_string()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents)
        .map_err(|e| CertificateError::X509(e.to_string()))?;
    let dns_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some((*d).to_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Facts {
        not_after: cert.validity().not_after.timestamp(),
        subject: cert.subject().to_string(),
        dns_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_and_names_are_read_and_garbage_is_refused() {
        let mut params = rcgen::CertificateParams::new(vec!["a.example.com".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 6);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let facts = read(cert.pem().as_bytes()).unwrap();
        assert_eq!(
            crate::health::rfc3339(facts.not_after),
            "2031-05-06T00:00:00Z"
        );
        assert_eq!(facts.dns_names, ["a.example.com"]);
        assert!(matches!(read(b"nope"), Err(CertificateError::Pem(_))));
        let not_x509 = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(read(not_x509), Err(CertificateError::X509(_))));
    }
}
