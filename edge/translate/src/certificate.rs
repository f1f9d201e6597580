//! A listener's certificate Secret checked as Envoy will load it: `tls.crt` a PEM chain of
//! X.509 certificates, the first of them the leaf; `tls.key` a PEM private key (PKCS#8,
//! PKCS#1 or SEC1) of a type Envoy serves (RSA, ECDSA, Ed25519) whose public key is the
//! leaf's. A Secret that fails is refused by name and reason instead of being pushed, where
//! Envoy would reject the whole SDS update and the hostname would answer nothing.

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
    let leaf = webpki::EndEntityCert::try_from(leaf).ok()?;
    match signing.public_key() {
        Some(public) if public.as_ref() != leaf.subject_public_key_info().as_ref() => Some(
            "tls.key does not match the certificate: its public key is not the first certificate's"
                .into(),
        ),
        _ => None,
    }
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

    #[test]
    fn a_chain_and_its_key_pass_and_every_fault_is_named() {
        let (cert, key) = pair();
        assert_eq!(problem(cert.as_bytes(), key.as_bytes()), None);
        let (_, other_key) = pair();
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
        ];
        for (chain, key, expected) in cases {
            let said = problem(chain, key).unwrap_or_else(|| panic!("accepted: {expected}"));
            assert!(said.contains(expected), "{said:?} lacks {expected:?}");
        }
    }
}
