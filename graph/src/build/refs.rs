//! References to what is not a route or a backend: a listener's certificates (the Secret's
//! name and the certificate's expiry — never its key or data), BackendTLSPolicies with their
//! Services and CA bundles, and what each ReferenceGrant allows.

use fairlead_edge_model::input::{GATEWAY_GROUP, ObjectRef, key};
use fairlead_key::ObjectKey;
use serde_json::json;

use super::Builder;
use crate::health;
use crate::id::NodeId;
use crate::model::{Edge, Health, Relation, Verdict};
use crate::world::object_id;

impl Builder<'_> {
    /// Draws a listener's certificate reference; the verdict it gives the listener.
    pub(super) fn certificate(
        &mut self,
        listener: &NodeId,
        parent: &NodeId,
        namespace: &str,
        certificate: &ObjectRef,
        refs_reason: Option<&str>,
    ) -> Verdict {
        let target_namespace = certificate.namespace.as_deref().unwrap_or(namespace);
        let key = ObjectKey::new(target_namespace, &certificate.name);
        let id = object_id("Secret", &key);
        let parent_kind = parent.as_str().split('/').nth(1).unwrap_or("Gateway");
        let verdict = if !self.grants.allows(
            (GATEWAY_GROUP, parent_kind, namespace),
            ("", "Secret", target_namespace, &certificate.name),
        ) {
            let reason = format!(
                "RefNotPermitted: no ReferenceGrant in {target_namespace} lets {parent_kind}s of {namespace} refer to Secret {}",
                certificate.name
            );
            if !self.secret(&key) {
                self.placeholder(&id, "Secret", &certificate.name, reason.clone());
            }
            Verdict::of(Health::Failing, reason)
        } else if self.secret(&key) {
            let node = &self.graph.nodes[&id];
            Verdict {
                health: node.health,
                reasons: node.reasons.clone(),
            }
        } else {
            let reason = format!(
                "{}: no Secret {key}",
                refs_reason.unwrap_or("InvalidCertificateRef")
            );
            self.placeholder(&id, "Secret", &certificate.name, reason.clone());
            Verdict::of(Health::Failing, reason)
        };
        self.edge(
            Edge::new(listener.clone(), Relation::CertificateRef, id).judged(verdict.clone()),
        );
        verdict
    }

    /// Draws Secret `key` (its name and certificate expiry), once; whether it exists.
    fn secret(&mut self, key: &ObjectKey) -> bool {
        let Some(secret) = self.input.secrets.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(key.namespace())
                && s.metadata.name.as_deref() == Some(key.name())
        }) else {
            return false;
        };
        let id = object_id("Secret", key);
        if self.graph.nodes.get(&id).is_some_and(|n| !n.missing) {
            return true;
        }
        let chain = secret
            .data
            .as_ref()
            .and_then(|d| d.get("tls.crt"))
            .map(|b| b.0.as_slice());
        let (verdict, expiry) = match chain.map(crate::certificate::read) {
            None => (
                Verdict::of(Health::Failing, "InvalidCertificate: no tls.crt"),
                None,
            ),
            Some(Err(e)) => (
                Verdict::of(Health::Failing, format!("InvalidCertificate: {e}")),
                None,
            ),
            Some(Ok(facts)) => (health::certificate(facts.not_after, self.now), Some(facts)),
        };
        let node = self.node(&id, "Secret", key.name());
        node.missing = false;
        if let Some(t) = &secret.type_ {
            node.status.insert("type", t.clone().into());
        }
        if let Some(facts) = expiry {
            node.status
                .insert("notAfter", health::rfc3339(facts.not_after).into());
            node.status.insert("subject", facts.subject.into());
            node.status.insert("dnsNames", facts.dns_names.into());
        }
        self.judge(&id, verdict);
        true
    }

    /// BackendTLSPolicies: their Services and CA bundles.
    pub(super) fn policies(&mut self) {
        for policy in &self.input.backend_tls_policies {
            let key = key(&policy.metadata);
            let id = object_id("BackendTLSPolicy", &key);
            let status = self.status(&id);
            let conditions: Vec<serde_json::Value> = status["ancestors"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|a| health::summarize(a.get("conditions")))
                .collect();
            let mut verdict = health::conditions(&conditions);
            let node = self.node(&id, "BackendTLSPolicy", key.name());
            node.status
                .insert("hostname", policy.spec.validation.hostname.clone().into());
            node.status.insert("conditions", conditions.clone().into());
            for target in &policy.spec.target_refs {
                let target_id =
                    NodeId::new(&target.group, &target.kind, key.namespace(), &target.name);
                let mut edge = Edge::new(id.clone(), Relation::TargetRef, target_id.clone());
                let exists = (target.group.as_str(), target.kind.as_str()) == ("", "Service")
                    && self.service(key.namespace(), &target.name);
                if !exists {
                    let reason = format!(
                        "TargetNotFound: no {} {}/{}",
                        target.kind,
                        key.namespace(),
                        target.name
                    );
                    self.placeholder(&target_id, &target.kind, &target.name, reason.clone());
                    edge = edge.judged(Verdict::of(Health::Failing, reason.clone()));
                    verdict.worsen(Verdict::of(Health::Failing, reason));
                }
                self.edge(edge);
            }
            let refs_reason = health::condition(&conditions, "ResolvedRefs")
                .filter(|c| c["status"] == "False")
                .and_then(|c| c["reason"].as_str())
                .unwrap_or("InvalidCACertificateRef")
                .to_owned();
            for ca in &policy.spec.validation.ca_certificate_refs {
                let ca_key = ObjectKey::new(key.namespace(), &ca.name);
                let ca_id = object_id("ConfigMap", &ca_key);
                let bundle = self.input.config_maps.iter().find(|c| {
                    c.metadata.namespace.as_deref() == Some(key.namespace())
                        && c.metadata.name.as_deref() == Some(ca.name.as_str())
                });
                let edge_verdict = match bundle {
                    None => {
                        let reason = format!("{refs_reason}: no ConfigMap {ca_key}");
                        self.placeholder(&ca_id, "ConfigMap", &ca.name, reason.clone());
                        Verdict::of(Health::Failing, reason)
                    }
                    Some(map) => {
                        let has_ca = map.data.as_ref().is_some_and(|d| d.contains_key("ca.crt"));
                        let v = if has_ca {
                            Verdict::healthy()
                        } else {
                            Verdict::of(
                                Health::Failing,
                                format!("{refs_reason}: ConfigMap {ca_key} has no ca.crt"),
                            )
                        };
                        let node = self.node(&ca_id, "ConfigMap", &ca.name);
                        node.status.insert("caBundle", has_ca.into());
                        self.judge(&ca_id, v.clone());
                        v
                    }
                };
                verdict.worsen(edge_verdict.clone());
                self.edge(
                    Edge::new(id.clone(), Relation::CaCertificateRef, ca_id).judged(edge_verdict),
                );
            }
            self.judge(&id, verdict);
        }
    }

    /// ReferenceGrants: an edge to each object they allow to be referred to (every object
    /// of a kind in the graph when the grant names none).
    pub(super) fn grants(&mut self) {
        for grant in &self.input.reference_grants {
            let key = key(&grant.metadata);
            let id = object_id("ReferenceGrant", &key);
            let from: Vec<serde_json::Value> = grant
                .spec
                .from
                .iter()
                .map(|f| json!({"group": f.group, "kind": f.kind, "namespace": f.namespace}))
                .collect();
            let node = self.node(&id, "ReferenceGrant", key.name());
            node.status.insert("from", from.into());
            for to in &grant.spec.to {
                let targets: Vec<NodeId> = match &to.name {
                    Some(name) => {
                        let target = NodeId::new(&to.group, &to.kind, key.namespace(), name);
                        let exists = match (to.group.as_str(), to.kind.as_str()) {
                            ("", "Service") => self.service(key.namespace(), name),
                            ("", "Secret") => self.secret(&ObjectKey::new(key.namespace(), name)),
                            _ => self.graph.nodes.get(&target).is_some_and(|n| !n.missing),
                        };
                        if !exists {
                            self.placeholder(
                                &target,
                                &to.kind,
                                name,
                                format!(
                                    "NotFound: the grant allows {} {}/{name}, which does not exist",
                                    to.kind,
                                    key.namespace()
                                ),
                            );
                        }
                        vec![target]
                    }
                    None => self
                        .graph
                        .nodes
                        .values()
                        .filter(|n| {
                            !n.missing
                                && n.group == to.group
                                && n.kind == to.kind
                                && n.namespace.as_deref() == Some(key.namespace())
                        })
                        .map(|n| n.id.clone())
                        .collect(),
                };
                for target in targets {
                    self.edge(Edge::new(id.clone(), Relation::ReferenceGrant, target));
                }
            }
        }
    }
}
