//! How an HTTPRoute's annotations shape the clusters of its backends
//! (`session-affinity`/`hash-key`: consistent hashing; `service-upstream`: the Service's
//! cluster IP as the one endpoint; `proxy-buffer-size`: the largest response headers taken;
//! `backend-tls-settings`: TLS to the backends): a [`Variant`] of each backend the route
//! sends to, so a route asking for one gets clusters of its own and routes asking nothing
//! share theirs. A Secret named by `backend-tls-settings` is read only in the route's
//! namespace or under a ReferenceGrant; one that cannot be read leaves the variant
//! [`AnnotatedTls::refused`]: its clusters get no endpoint (503), never a connection without
//! the TLS asked for.

use std::sync::Arc;

use fairlead_edge_model::annotations::{Annotations, BackendTlsSettings};
use fairlead_edge_model::input::{GATEWAY_GROUP, Input};

use crate::refs::{Grants, Unresolved};

/// TLS to the backends, as `backend-tls-settings` asks (a BackendTLSPolicy on the same
/// Service wins). Its `Debug` leaves the client key out.
#[derive(Clone, Default, serde::Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct AnnotatedTls {
    /// The SNI sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// The backend's certificate is not checked.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// Trust anchors, PEM (the system's when absent).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "size")]
    pub ca: Option<Vec<u8>>,
    /// The client certificate chain and key, PEM.
    #[serde(skip_serializing)]
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Its Secret could not be read: no connection is made.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

impl std::fmt::Debug for AnnotatedTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnnotatedTls")
            .field("sni", &self.sni)
            .field("insecure", &self.insecure)
            .field("ca", &self.ca.as_ref().map(Vec::len))
            .field("client", &self.client.is_some())
            .field("refused", &self.refused)
            .finish()
    }
}

fn size<S: serde::Serializer>(bytes: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{} bytes", bytes.as_ref().map_or(0, Vec::len)))
}

/// What a route's annotations change of its backends' clusters.
#[derive(Clone, Debug, Default, serde::Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    /// Consistent hashing (a ring), for `session-affinity` and `hash-key`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ring_hash: bool,
    /// The Service's cluster IP is the one endpoint.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub service_address: bool,
    /// The largest response headers taken, in KiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_response_headers_kb: Option<u32>,
    /// TLS to the backends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<AnnotatedTls>,
    /// What the cluster's name carries after the backend's (unique per variant).
    #[serde(skip)]
    pub suffix: String,
}

impl Variant {
    /// The variant `annotations` ask of the backends of a route in `namespace`; `None` when
    /// they ask none. A Secret that cannot be read is the [`Unresolved`] reference.
    pub fn of(
        annotations: &Annotations,
        namespace: &str,
        input: &Input,
        grants: &Grants<'_>,
    ) -> (Option<Arc<Self>>, Option<Unresolved>) {
        let upstream = &annotations.upstream;
        let mut unresolved = None;
        let mut variant = Self {
            ring_hash: upstream.affinity.is_some(),
            service_address: upstream.service_upstream,
            max_response_headers_kb: annotations
                .traffic
                .proxy_buffer_size
                .map(|bytes| bytes.div_ceil(1024)),
            tls: upstream
                .tls
                .as_ref()
                .map(|t| tls(t, namespace, input, grants, &mut unresolved)),
            suffix: String::new(),
        };
        if variant == Self::default() {
            return (None, None);
        }
        variant.suffix = variant.name();
        (Some(Arc::new(variant)), unresolved)
    }

    fn name(&self) -> String {
        use std::hash::{Hash as _, Hasher as _};
        let mut suffix = String::new();
        if self.ring_hash {
            suffix.push_str("/ring-hash");
        }
        if self.service_address {
            suffix.push_str("/service");
        }
        if let Some(kb) = self.max_response_headers_kb {
            suffix.push_str(&format!("/headers-{kb}k"));
        }
        if let Some(tls) = &self.tls {
            // FNV-1a over the settings: stable across runs and builds (unlike the std hasher's
            // keys, which are not promised).
            struct Fnv(u64);
            impl std::hash::Hasher for Fnv {
                fn finish(&self) -> u64 {
                    self.0
                }
                fn write(&mut self, bytes: &[u8]) {
                    for b in bytes {
                        self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
                    }
                }
            }
            let mut h = Fnv(0xcbf2_9ce4_8422_2325);
            tls.hash(&mut h);
            suffix.push_str(&format!("/tls-{:08x}", h.finish() & 0xffff_ffff));
        }
        suffix
    }
}

/// `backend-tls-settings` resolved: inline certificates, or those of its Secret (`ca.crt`,
/// `tls.crt`, `tls.key`).
fn tls(
    settings: &BackendTlsSettings,
    namespace: &str,
    input: &Input,
    grants: &Grants<'_>,
    unresolved: &mut Option<Unresolved>,
) -> AnnotatedTls {
    let mut out = AnnotatedTls {
        sni: settings.sni.clone(),
        insecure: settings.insecure_skip_verify,
        ca: settings.ca_certificates.clone().map(String::into_bytes),
        client: settings
            .client_certificate
            .clone()
            .zip(settings.private_key.clone())
            .map(|(c, k)| (c.into_bytes(), k.into_bytes())),
        refused: false,
    };
    let Some(reference) = &settings.secret else {
        return out;
    };
    let field = "metadata.annotations[alb.network.deckhouse.io/backend-tls-settings].secret";
    let secret_namespace = reference.namespace_or(namespace);
    let allowed = grants.allows(
        (GATEWAY_GROUP, "HTTPRoute", namespace),
        ("", "Secret", secret_namespace, &reference.name),
    );
    let found = allowed
        .then(|| crate::refs::secret(input, secret_namespace, &reference.name))
        .flatten();
    let Some(found) = found else {
        out.refused = true;
        *unresolved = Some(if allowed {
            Unresolved {
                reason: "InvalidSecret",
                message: format!(
                    "{field}: Secret {secret_namespace}/{} not found",
                    reference.name
                ),
            }
        } else {
            Unresolved {
                reason: "RefNotPermitted",
                message: format!(
                    "{field}: Secret {secret_namespace}/{} is in another namespace and no ReferenceGrant there allows it",
                    reference.name
                ),
            }
        });
        return out;
    };
    let data = |key: &str| {
        found
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|v| v.0.clone())
            .filter(|v| !v.is_empty())
    };
    if out.ca.is_none() {
        out.ca = data("ca.crt");
    }
    if out.client.is_none() && settings.mutual {
        out.client = data("tls.crt").zip(data("tls.key"));
        if out.client.is_none() {
            out.refused = true;
            *unresolved = Some(Unresolved {
                reason: "InvalidSecret",
                message: format!(
                    "{field}: Secret {secret_namespace}/{} has no tls.crt and tls.key for mode MUTUAL",
                    reference.name
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        Annotations::read(
            &pairs
                .iter()
                .map(|(k, v)| {
                    (
                        format!("{}{k}", fairlead_edge_model::annotations::PREFIX),
                        (*v).to_owned(),
                    )
                })
                .collect(),
        )
        .unwrap()
    }

    fn input(yaml: &str) -> Input {
        Input::from_yaml(yaml).unwrap()
    }

    #[test]
    fn a_variant_names_what_it_changes() {
        let empty = Input::default();
        let grants = Grants::new(&empty);
        let (none, _) = Variant::of(&annotations(&[("limit-rps", "5")]), "apps", &empty, &grants);
        assert!(
            none.is_none(),
            "a route asking nothing of its clusters shares them"
        );
        let (v, unresolved) = Variant::of(
            &annotations(&[
                ("hash-key", "source-ip"),
                ("service-upstream", "true"),
                ("proxy-buffer-size", "9000"),
            ]),
            "apps",
            &empty,
            &grants,
        );
        assert!(unresolved.is_none());
        assert_eq!(v.unwrap().suffix, "/ring-hash/service/headers-9k");
        let tls = |sni: &str| {
            Variant::of(
                &annotations(&[("backend-tls-settings", &format!("{{\"sni\": \"{sni}\"}}"))]),
                "apps",
                &empty,
                &grants,
            )
            .0
            .unwrap()
            .suffix
            .clone()
        };
        assert_eq!(tls("a.example.com"), tls("a.example.com"), "stable");
        assert_ne!(
            tls("a.example.com"),
            tls("b.example.com"),
            "one cluster per setting"
        );
        assert!(tls("a.example.com").starts_with("/tls-"));
    }

    #[test]
    fn a_secret_elsewhere_needs_a_grant_and_without_one_nothing_connects() {
        let world = input(
            "apiVersion: v1
kind: Secret
metadata: {name: ca, namespace: certs}
type: Opaque
data: {ca.crt: Y2E=}
",
        );
        let grants = Grants::new(&world);
        let asks = annotations(&[("backend-tls-settings", r#"{"secret": "certs/ca"}"#)]);
        let (v, unresolved) = Variant::of(&asks, "apps", &world, &grants);
        let tls = v.unwrap().tls.clone().unwrap();
        assert!(tls.refused && tls.ca.is_none());
        let unresolved = unresolved.unwrap();
        assert_eq!(unresolved.reason, "RefNotPermitted");
        assert!(
            unresolved.message.contains("certs/ca"),
            "{}",
            unresolved.message
        );
        let (v, unresolved) = Variant::of(&asks, "certs", &world, &grants);
        assert!(unresolved.is_none(), "its own namespace");
        assert_eq!(
            v.unwrap().tls.as_ref().unwrap().ca.as_deref(),
            Some(&b"ca"[..])
        );
    }
}
