//! A listener's certificate Secret checked as Envoy will load it: `tls.crt` a PEM chain of
//! X.509 certificates, the first of them the leaf; `tls.key` a PEM private key (PKCS#8,
//! PKCS#1 or SEC1) of a type Envoy serves (RSA, ECDSA, Ed25519) whose public key is the
//! leaf's; and no OCSP must-staple (the TLS Feature extension asking for `status_request`),
//! which Envoy refuses without a stapled OCSP response, and a Secret has none. A Secret that
//! fails is refused by name and reason instead of being pushed, where Envoy would reject
//! the whole SDS update and the hostname would answer nothing.

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why `chain` and `key` are not a certificate Envoy can serve; `None` when they are.
pub fn problem(chain: &[u8], key: &[u8]) -> Option<String> {
    let certs: Vec<CertificateDer<'static>> =
        match CertificateDer::pem_slice_iter(chain).collect::<Result<_, _>>() {
            Ok(certs) => certs,
            Err(e) => return Some(format!("tls.crt is not a PEM certificate chain: {e}")),
        };
    let Some(leaf) = certs.first() else {
        return Some("tls.crt holds no PEM certificate".into());
    };
    for (i, cert) in certs.iter().enumerate() {
        if let Err(e) = webpki::EndEntityCert::try_from(cert) {
            return Some(format!(
                "tls.crt: certificate {i} of the chain is not a valid X.509 certificate: {e}"
            ));
        }
    }
    let key = match PrivateKeyDer::from_pem_slice(key) {
        Ok(key) => key,
        Err(e) => {
            return Some(format!(
                "tls.key is not a PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"
            ));
        }
    };
    let signing = match rustls::crypto::ring::sign::any_supported_type(&key) {
        Ok(signing) => signing,
        Err(e) => return Some(format!("tls.key is not a key Envoy can serve: {e}")),
    };
    if must_staple(leaf) {
        return Some(
            "tls.crt: the certificate requires OCSP stapling (TLS Feature status_request, \
             \"must-staple\"), and a Secret carries no OCSP response: Envoy refuses such a \
             certificate; issue one without must-staple"
                .into(),
        );
    }
    let leaf = webpki::EndEntityCert::try_from(leaf).ok()?;
    match signing.public_key() {
        Some(public) if public.as_ref() != leaf.subject_public_key_info().as_ref() => Some(
            "tls.key does not match the certificate: its public key is not the first certificate's"
                .into(),
        ),
        _ => None,
    }
}

/// The TLS Feature extension (RFC 7633).
const TLS_FEATURE: &str = "1.3.6.1.5.5.7.1.24";

/// Whether `leaf` asks for a stapled OCSP response: its TLS Feature extension (a sequence of
/// small INTEGERs, TLS extension numbers) names `status_request` (5).
fn must_staple(leaf: &CertificateDer<'_>) -> bool {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf) else {
        return false;
    };
    cert.extensions().iter().any(|e| {
        e.oid.to_id_string() == TLS_FEATURE && e.value.windows(3).any(|w| w == [0x02, 0x01, 0x05])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EC_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBkjCCATegAwIBAgIUV3PFwYZZGixuFSESY9DQBA7Mb9YwCgYIKoZIzj0EAwIw\nHTEbMBkGA1UEAwwSZmFpcmxlYWQgZ29sZGVuIENBMCAXDTI2MTEzMDE1NTExNFoY\nDzIxMjYxMTA2MTU1MTE0WjAdMRswGQYDVQQDDBJmYWlybGVhZCBnb2xkZW4gQ0Ew\nWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAR5TL9ZoWZTgpNUX7hiyPG1eC4ypa3U\ni1kvFyzsV6ElfyWHYRrPa9ZcGibwhmxfK+XX/gKkssFdK0cViXkMNiqRo1MwUTAd\nBgNVHQ4EFgQUD6DeTkpyPl3vv+17NoWYF/IAe50wHwYDVR0jBBgwFoAUD6DeTkpy\nPl3vv+17NoWYF/IAe50wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBG\nAiEAtlrnYOQHIrhJ97uDju/pUw1aNEagKXbE8UxNXEV2G+kCIQDd1MLfQZK7lFRW\nIxAIce1IID8IMPU9zTjB3p11rVgeMw==\n-----END CERTIFICATE-----\n";

    fn pair() -> (String, String) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["a.example.com".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A certificate with the TLS Feature extension asking for `status_request`, as
    /// `openssl req -addext tlsfeature=status_request` makes it.
    fn must_staple_pair() -> (String, String) {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["a.example.com".to_owned()]).unwrap();
        params
            .custom_extensions
            .push(rcgen::CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 5, 5, 7, 1, 24],
                vec![0x30, 0x03, 0x02, 0x01, 0x05],
            ));
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    #[test]
    fn a_chain_and_its_key_pass_and_every_fault_is_named() {
        let (cert, key) = pair();
        assert_eq!(problem(cert.as_bytes(), key.as_bytes()), None);
        let (_, other_key) = pair();
        let (staple, staple_key) = must_staple_pair();
        let cases = [
            (
                b"not pem".as_slice(),
                key.as_bytes(),
                "holds no PEM certificate",
            ),
            (
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".as_slice(),
                key.as_bytes(),
                "not a valid X.509 certificate",
            ),
            (
                cert.as_bytes(),
                b"nothing".as_slice(),
                "tls.key is not a PEM private key",
            ),
            (
                cert.as_bytes(),
                other_key.as_bytes(),
                "does not match the certificate",
            ),
            (EC_CERT.as_bytes(), key.as_bytes(), "does not match"),
            (
                staple.as_bytes(),
                staple_key.as_bytes(),
                "requires OCSP stapling",
            ),
        ];
        for (chain, key, expected) in cases {
            let said = problem(chain, key).unwrap_or_else(|| panic!("accepted: {expected}"));
            assert!(said.contains(expected), "{said:?} lacks {expected:?}");
        }
    }
}
