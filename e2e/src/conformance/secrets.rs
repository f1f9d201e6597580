//! The TLS material the suite makes before its tests (its `suite.go` setup, "programmatic
//! resources"): self-signed serving certificates, CAs in ConfigMaps (`ca.crt`), and serving
//! and client certificates they sign, in `kubernetes.io/tls` Secrets — the same names, the
//! same namespaces, the same DNS and URI names; ECDSA keys where the suite makes RSA ones (no
//! test depends on the key type).

use std::collections::BTreeMap;

use fairlead_kit::pki::{Ca, CertifiedKey, self_signed_server};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const INFRA: &str = "gateway-conformance-infra";
const WEB: &str = "gateway-conformance-web-backend";
const APP: &str = "gateway-conformance-app-backend";

/// The suite's TLS material, by `namespace/name`.
pub struct Secrets {
    /// The Secrets' certificates and keys.
    secrets: BTreeMap<String, CertifiedKey>,
    /// The ConfigMaps' CA certificates.
    cas: BTreeMap<String, String>,
}

impl Secrets {
    /// Makes all of it, as the suite's setup does.
    pub fn generate() -> Self {
        let mut made = Self {
            secrets: BTreeMap::new(),
            cas: BTreeMap::new(),
        };
        let self_signed = |names: &[&str]| self_signed_server(names).expect("a certificate");
        made.secret(WEB, "certificate", self_signed(&["*"]));
        made.secret(
            INFRA,
            "tls-validity-checks-certificate",
            self_signed(&["*", "*.org", "*.wildcard.org"]),
        );
        made.ca(WEB, "web-backend-cm");
        let validity = made.ca(INFRA, "tls-validity-checks-ca-certificate");
        made.secret(
            INFRA,
            "tls-validity-checks-client-certificate",
            client(&validity),
        );
        let per_port = made.ca(INFRA, "tls-validity-checks-per-port-ca-certificate");
        made.secret(
            INFRA,
            "tls-validity-checks-per-port-client-certificate",
            client(&per_port),
        );
        let checks = made.ca(INFRA, "tls-checks-ca-certificate");
        let server = |names: &[&str]| checks.issue_server_names(names).expect("a certificate");
        made.secret(
            INFRA,
            "tls-checks-certificate",
            server(&[
                "abc.example.com",
                "spiffe://abc.example.com/test-identity",
                "other.example.com",
            ]),
        );
        made.secret(INFRA, "tls-checks-client-certificate", client(&checks));
        for namespace in [INFRA, APP] {
            made.secret(
                namespace,
                "tls-passthrough-checks-certificate",
                server(&["abc.example.com"]),
            );
        }
        made.secret(
            INFRA,
            "tls-terminate-checks-certificate",
            server(&["tls.example.com"]),
        );
        made.ca(INFRA, "mismatch-ca-certificate");
        made
    }

    /// Keeps the Secret `namespace/name` of `certified`.
    fn secret(&mut self, namespace: &str, name: &str, certified: CertifiedKey) {
        self.secrets
            .insert(format!("{namespace}/{name}"), certified);
    }

    /// Makes a CA and keeps its certificate as the ConfigMap `namespace/name`.
    fn ca(&mut self, namespace: &str, name: &str) -> Ca {
        let ca = Ca::generate("Kubernetes Gateway API").expect("a CA");
        self.cas
            .insert(format!("{namespace}/{name}"), ca.cert_pem().to_owned());
        ca
    }

    /// The certificate and key of the Secret `key` (`namespace/name`).
    pub fn get(&self, key: &str) -> &CertifiedKey {
        self.secrets
            .get(key)
            .unwrap_or_else(|| panic!("no Secret {key} in the suite's setup"))
    }

    /// The CA certificate of the ConfigMap `key` (`namespace/name`).
    pub fn ca_of(&self, key: &str) -> &str {
        self.cas
            .get(key)
            .unwrap_or_else(|| panic!("no CA ConfigMap {key} in the suite's setup"))
    }

    /// The Secrets and ConfigMaps, as manifests to apply.
    pub fn manifests(&self) -> String {
        let meta = |key: &str| {
            let (namespace, name) = key.split_once('/').expect("namespace/name");
            ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            }
        };
        let mut documents = Vec::new();
        for (key, certified) in &self.secrets {
            let secret = Secret {
                metadata: meta(key),
                type_: Some("kubernetes.io/tls".to_owned()),
                data: Some(BTreeMap::from([
                    (
                        "tls.crt".to_owned(),
                        ByteString(certified.cert_pem.clone().into_bytes()),
                    ),
                    (
                        "tls.key".to_owned(),
                        ByteString(certified.key_pem.clone().into_bytes()),
                    ),
                ])),
                ..Secret::default()
            };
            documents.push(typed_yaml(&secret));
        }
        for (key, ca) in &self.cas {
            let config_map = ConfigMap {
                metadata: meta(key),
                data: Some(BTreeMap::from([("ca.crt".to_owned(), ca.clone())])),
                ..ConfigMap::default()
            };
            documents.push(typed_yaml(&config_map));
        }
        documents.join("---\n")
    }
}

/// A client certificate `ca` signs (the suite's has no names).
fn client(ca: &Ca) -> CertifiedKey {
    ca.issue_client("gateway-api-conformance-client")
        .expect("a certificate")
}

/// A typed object as YAML with its `apiVersion` and `kind`.
fn typed_yaml<K: k8s_openapi::Resource + serde::Serialize>(object: &K) -> String {
    let mut value = serde_json::to_value(object).expect("JSON");
    value["apiVersion"] = K::API_VERSION.into();
    value["kind"] = K::KIND.into();
    serde_yaml_ng::to_string(&value).expect("YAML")
}
