//! BackendTLSPolicy (GEP-1897): which Service ports the proxy reaches over TLS, with which
//! SNI, trust anchors and names to check, and the policies' own conditions.
//!
//! A policy targets Services (a whole Service, or one port by its name as `sectionName`).
//! Where several target the same Service port (or the same whole Service), the oldest wins,
//! then the first by name; the others are `Accepted=False`/`Conflicted` (one that also wins
//! another target still applies there). A policy on one port and one on the whole Service do
//! not conflict: the port's applies to it. CA bundles come from ConfigMaps (key `ca.crt`) in
//! the policy's namespace, or from the proxy's system trust store
//! (`wellKnownCACertificates: System`). A policy whose every CA reference is invalid is
//! `Accepted=False`/`NoValidCACertificate`, and its backends get no endpoints, so requests
//! to them fail with a 5xx as the spec demands rather than go out unchecked.

use std::collections::{BTreeMap, HashMap};

use crate::backend::Backend;
use crate::status::{Condition, PolicyAncestorStatus};
use fairlead_edge_model::input::{BackendTlsPolicy, Input, ParentRef};
use fairlead_key::ObjectKey;

/// Trust anchors.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum TrustAnchors {
    /// The proxy's system trust store.
    System,
    /// PEM bundles, concatenated.
    Pem(#[serde(serialize_with = "text")] Vec<u8>),
}

/// A name the backend's certificate must carry.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Name {
    /// A DNS name.
    Dns(String),
    /// A URI.
    Uri(String),
}

/// How the proxy speaks TLS to one backend.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
pub struct UpstreamTls {
    /// SNI.
    pub sni: String,
    /// Trust anchors; `None` when every CA reference is invalid (no connection may be made).
    pub anchors: Option<TrustAnchors>,
    /// Names of which the certificate must carry one.
    pub names: Vec<Name>,
    /// The client certificate presented (its Secret, over SDS): the Gateway's
    /// `spec.tls.backend.clientCertificateRef`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<ObjectKey>,
}

/// One policy's decision, independent of the Gateways that use it.
#[derive(Clone, Debug)]
struct Decided {
    conditions: Vec<Condition>,
    tls: UpstreamTls,
    /// `(namespace, service, section)` targets.
    targets: Vec<(String, String, Option<String>)>,
}

/// The policies of an input, resolved.
#[derive(Debug, Default)]
pub struct Policies {
    /// Decisions by policy key, in key order.
    decided: BTreeMap<ObjectKey, Decided>,
    /// The winning policy per `(namespace, service, section)`.
    winners: HashMap<(String, String, Option<String>), ObjectKey>,
}

impl Policies {
    /// Resolves the policies of `input`.
    pub fn new(input: &Input) -> Self {
        let mut policies = Self::default();
        if input.backend_tls_policies.is_empty() {
            return policies;
        }
        let mut claims: HashMap<(String, String, Option<String>), Vec<&BackendTlsPolicy>> =
            HashMap::new();
        for policy in &input.backend_tls_policies {
            let decided = decide(policy, input);
            for target in &decided.targets {
                claims.entry(target.clone()).or_default().push(policy);
            }
            policies.decided.insert(key(policy), decided);
        }
        for (target, mut claimants) in claims {
            claimants.sort_by(|a, b| {
                (&a.metadata.creation_timestamp, &a.metadata.name)
                    .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
            });
            let winner = key(claimants[0]);
            // The others on the same target lose: not accepted, Conflicted (where one also
            // wins another target, it still applies there).
            for loser in &claimants[1..] {
                if let Some(decided) = policies.decided.get_mut(&key(loser)) {
                    let (namespace, service, section) = &target;
                    let message = format!(
                        "Service {namespace}/{service}{} is already targeted by the older \
                         BackendTLSPolicy {winner}",
                        section
                            .as_ref()
                            .map(|s| format!(" port {s}"))
                            .unwrap_or_default()
                    );
                    for c in decided
                        .conditions
                        .iter_mut()
                        .filter(|c| c.type_ == "Accepted" && c.holds())
                    {
                        *c = Condition::new(
                            "Accepted",
                            false,
                            "Conflicted",
                            message.clone(),
                            loser.metadata.generation,
                        );
                    }
                }
            }
            policies.winners.insert(target, winner);
        }
        policies
    }

    /// Whether there is no policy at all.
    pub fn is_empty(&self) -> bool {
        self.decided.is_empty()
    }

    /// The TLS settings for `backend`: the policy on its port, else the one on the whole
    /// Service; none behind TLS passthrough or for UDP (forwarded as is).
    pub fn for_backend(&self, backend: &Backend) -> Option<&UpstreamTls> {
        self.policy_for(backend)
            .and_then(|key| self.decided.get(key))
            .map(|d| &d.tls)
    }

    /// The policy deciding TLS to `backend` ([`Self::for_backend`]'s).
    pub fn policy_for(&self, backend: &Backend) -> Option<&ObjectKey> {
        if self.winners.is_empty() || backend.opaque {
            return None;
        }
        let port = (
            backend.namespace.to_string(),
            backend.service.to_string(),
            Some(backend.port_name.to_string()),
        );
        let whole = (port.0.clone(), port.1.clone(), None);
        self.winners.get(&port).or_else(|| self.winners.get(&whole))
    }

    /// The policies' statuses: one ancestor entry per Gateway whose configuration reaches a
    /// Service the policy targets. `used` gives each Gateway's backends.
    pub fn statuses<'a, B>(
        &self,
        used: impl IntoIterator<Item = (&'a ObjectKey, B)>,
        controller_name: &str,
    ) -> BTreeMap<ObjectKey, Vec<PolicyAncestorStatus>>
    where
        B: Iterator<Item = &'a Backend> + Clone,
    {
        let mut out: BTreeMap<ObjectKey, Vec<PolicyAncestorStatus>> = BTreeMap::new();
        if self.decided.is_empty() {
            return out;
        }
        for (gateway, backends) in used {
            for (key, decided) in &self.decided {
                let reaches = decided.targets.iter().any(|(ns, svc, section)| {
                    backends.clone().any(|b| {
                        !b.opaque
                            && *b.namespace == **ns
                            && *b.service == **svc
                            && section.as_deref().is_none_or(|s| s == &*b.port_name)
                    })
                });
                if reaches {
                    out.entry(key.clone())
                        .or_default()
                        .push(PolicyAncestorStatus {
                            ancestor_ref: ParentRef {
                                group: Some(fairlead_edge_model::input::GATEWAY_GROUP.to_owned()),
                                kind: Some("Gateway".to_owned()),
                                namespace: Some(gateway.namespace().to_owned()),
                                name: gateway.name().to_owned(),
                                section_name: None,
                                port: None,
                            },
                            controller_name: controller_name.to_owned(),
                            conditions: decided.conditions.clone(),
                        });
                }
            }
        }
        out
    }
}

/// A policy's key, `namespace/name`.
fn key(policy: &BackendTlsPolicy) -> ObjectKey {
    fairlead_edge_model::input::key(&policy.metadata)
}

/// One policy's TLS settings and conditions (`Accepted`, `ResolvedRefs`), before conflicts.
fn decide(policy: &BackendTlsPolicy, input: &Input) -> Decided {
    let namespace = policy.metadata.namespace.clone().unwrap_or_default();
    let generation = policy.metadata.generation;
    let validation = &policy.spec.validation;
    let targets = policy
        .spec
        .target_refs
        .iter()
        .filter(|t| t.group.is_empty() && t.kind == "Service")
        .map(|t| (namespace.clone(), t.name.clone(), t.section_name.clone()))
        .collect();
    let names = if validation.subject_alt_names.is_empty() {
        vec![Name::Dns(validation.hostname.clone())]
    } else {
        validation
            .subject_alt_names
            .iter()
            .filter_map(|san| match san.type_.as_str() {
                "Hostname" => san.hostname.clone().map(Name::Dns),
                "URI" => san.uri.clone().map(Name::Uri),
                _ => None,
            })
            .collect()
    };
    let mut tls = UpstreamTls {
        sni: validation.hostname.clone(),
        anchors: None,
        names,
        client_certificate: None,
    };
    let accepted = |holds: bool, reason: &str, message: String| {
        Condition::new("Accepted", holds, reason, message, generation)
    };
    let resolved = |holds: bool, reason: &str, message: String| {
        Condition::new("ResolvedRefs", holds, reason, message, generation)
    };
    if let Some(known) = validation
        .well_known_ca_certificates
        .as_deref()
        .filter(|k| !k.is_empty())
    {
        let conditions = if known == "System" && validation.ca_certificate_refs.is_empty() {
            tls.anchors = Some(TrustAnchors::System);
            vec![
                accepted(true, "Accepted", "policy accepted".to_owned()),
                resolved(true, "ResolvedRefs", "system trust store".to_owned()),
            ]
        } else {
            let message = if known == "System" {
                "spec.validation: caCertificateRefs and wellKnownCACertificates are exclusive"
                    .to_owned()
            } else {
                format!(
                    "spec.validation.wellKnownCACertificates: {known:?} is not supported (System is)"
                )
            };
            vec![
                accepted(false, "Invalid", message.clone()),
                resolved(false, "Invalid", message),
            ]
        };
        return Decided {
            conditions,
            tls,
            targets,
        };
    }
    let referrer = crate::ca_bundle::Referrer {
        kind: "BackendTLSPolicy",
        namespace: &namespace,
        kind_reason: "InvalidKind",
    };
    let crate::ca_bundle::Bundle {
        pem: bundle,
        problems,
        reason,
    } = crate::ca_bundle::read(
        "spec.validation.caCertificateRefs",
        &validation.ca_certificate_refs,
        &referrer,
        input,
        &crate::refs::Grants::new(input),
    );
    let worst = reason.unwrap_or("ResolvedRefs");
    if validation.ca_certificate_refs.is_empty() {
        let message =
            "spec.validation: caCertificateRefs or wellKnownCACertificates is required".to_owned();
        return Decided {
            conditions: vec![
                accepted(false, "Invalid", message.clone()),
                resolved(false, "Invalid", message),
            ],
            tls,
            targets,
        };
    }
    let conditions = if bundle.is_empty() {
        let message = problems.join("; ");
        vec![
            accepted(false, "NoValidCACertificate", message.clone()),
            resolved(false, worst, message),
        ]
    } else {
        tls.anchors = Some(TrustAnchors::Pem(bundle));
        vec![
            accepted(true, "Accepted", "policy accepted".to_owned()),
            if problems.is_empty() {
                resolved(true, "ResolvedRefs", "all references resolved".to_owned())
            } else {
                resolved(false, worst, problems.join("; "))
            },
        ]
    };
    Decided {
        conditions,
        tls,
        targets,
    }
}

/// Bytes that are text (PEM), as text.
pub(crate) fn text<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}
