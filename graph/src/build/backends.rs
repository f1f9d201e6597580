//! Backends: a route's reference to a Service (kind, existence, ReferenceGrant), the Service
//! with its ports, each port's EndpointSlices summarised (ready, serving, terminating), and
//! ServiceWithHealthchecks with their probe results and child Service.

use std::collections::BTreeMap;

use fairlead_edge_model::input::{BackendRef, GATEWAY_GROUP};
use fairlead_key::ObjectKey;
use k8s_openapi::api::core::v1::ServicePort;
use serde_json::json;

use super::Builder;
use super::memo::{Dep, Op, Table};
use crate::health::{self, Counts};
use crate::id::NodeId;
use crate::model::{Edge, Health, Relation, Verdict};
use crate::world::{NETWORK_GROUP, object_id};

impl Builder<'_> {
    /// Draws a backend (or mirror) reference of rule `rule` of route `route`; its verdict.
    pub(super) fn backend(
        &mut self,
        route: &NodeId,
        route_key: &ObjectKey,
        route_kind: &str,
        rule: u32,
        backend: &BackendRef,
        relation: Relation,
    ) -> Verdict {
        let group = backend.group.as_deref().unwrap_or_default();
        let kind = backend.kind.as_deref().unwrap_or("Service");
        let namespace = backend
            .namespace
            .as_deref()
            .unwrap_or(route_key.namespace());
        let target = NodeId::new(group, kind, namespace, &backend.name);
        let mut edge = Edge::new(route.clone(), relation, target.clone()).in_rule(rule);
        if relation == Relation::BackendRef {
            edge.weight = Some(backend.weight.unwrap_or(1));
        }
        edge.port = backend.port;
        let verdict = if (group, kind) != ("", "Service") {
            let reason = format!("InvalidKind: {kind}.{group} is not a Service");
            self.placeholder(&target, kind, &backend.name, reason.clone());
            Verdict::of(Health::Failing, reason)
        } else if !self.grants.allows(
            (GATEWAY_GROUP, route_kind, route_key.namespace()),
            ("", "Service", namespace, &backend.name),
        ) {
            let reason = format!(
                "RefNotPermitted: no ReferenceGrant in {namespace} lets {route_kind}s of {} refer to Service {}",
                route_key.namespace(),
                backend.name
            );
            if !self.service(namespace, &backend.name) {
                self.placeholder(&target, kind, &backend.name, reason.clone());
            }
            Verdict::of(Health::Failing, reason)
        } else if !self.service(namespace, &backend.name) {
            let reason = format!("BackendNotFound: no Service {namespace}/{}", backend.name);
            self.placeholder(&target, kind, &backend.name, reason.clone());
            Verdict::of(Health::Failing, reason)
        } else {
            self.port_verdict(namespace, &backend.name, backend.port)
        };
        self.edge(edge.judged(verdict.clone()));
        verdict
    }

    /// The readiness of port `port` of Service `namespace/name` (every port when absent).
    fn port_verdict(&self, namespace: &str, name: &str, port: Option<i32>) -> Verdict {
        let Some(service) = self.input.service(namespace, name) else {
            return Verdict::healthy();
        };
        if is_external(service) {
            return Verdict::healthy();
        }
        let ports = ports(service);
        let Some(port) = port else {
            return self
                .graph
                .nodes
                .get(&object_id("Service", &ObjectKey::new(namespace, name)))
                .map(|n| Verdict {
                    health: n.health,
                    reasons: n.reasons.clone(),
                })
                .unwrap_or_default();
        };
        match ports.iter().find(|p| p.port == port) {
            None => Verdict::of(
                Health::Failing,
                format!("PortNotFound: Service {namespace}/{name} has no port {port}"),
            ),
            Some(p) => {
                let counts = self.counts(namespace, name, p.name.as_deref());
                let mut verdict = health::endpoints(counts, &port.to_string());
                if let Some(r) = verdict.reasons.first_mut() {
                    *r = format!("{r} (Service {namespace}/{name})");
                }
                verdict
            }
        }
    }

    /// What drawing Service `namespace/name` reads: the Service and its EndpointSlices
    /// (added to `deps`).
    pub(super) fn service_deps(&self, namespace: &str, name: &str, deps: &mut Vec<Dep>) {
        deps.push(Dep::at(self.input.shared_service(namespace, name)));
        deps.extend(
            self.input
                .slices_of(namespace, name)
                .map(|s| Dep::at(Some(s))),
        );
    }

    /// Draws Service `namespace/name` with its ports' EndpointSlices, once; whether it
    /// exists.
    pub(super) fn service(&mut self, namespace: &str, name: &str) -> bool {
        let Some(service) = self.input.service(namespace, name) else {
            return false;
        };
        let id = object_id("Service", &ObjectKey::new(namespace, name));
        // The node's own id, when it is there already: the request shares its text.
        let id = self
            .graph
            .nodes
            .get_key_value(&id)
            .map_or(id, |(kept, _)| kept.clone());
        if let Some(recording) = self.recording.last_mut() {
            recording.ops.push(Op::Service(id.clone()));
        }
        if self.graph.nodes.get(&id).is_some_and(|n| !n.missing) {
            return true;
        }
        let mut deps = Vec::new();
        self.service_deps(namespace, name, &mut deps);
        self.memoized(Table::Services, &id, deps, |b| {
            b.draw_service(&id, namespace, name, service);
        });
        true
    }

    /// Draws Service `namespace/name` (node `id`) with its ports' EndpointSlices.
    pub(super) fn draw_service(
        &mut self,
        id: &NodeId,
        namespace: &str,
        name: &str,
        service: &k8s_openapi::api::core::v1::Service,
    ) {
        let id = id.clone();
        let external = is_external(service);
        let ports = ports(service);
        let mut verdicts = Vec::new();
        let summary: Vec<serde_json::Value> = ports
            .iter()
            .map(|p| json!({"name": p.name, "port": p.port, "protocol": p.protocol.as_deref().unwrap_or("TCP")}))
            .collect();
        let node = self.node(&id, "Service", name);
        node.missing = false;
        node.status.insert(
            "type",
            service
                .spec
                .as_ref()
                .and_then(|s| s.type_.clone())
                .unwrap_or_else(|| "ClusterIP".into())
                .into(),
        );
        node.status.insert("ports", summary.into());
        if !external {
            for p in &ports {
                let counts = self.counts(namespace, name, p.name.as_deref());
                let label = p.port.to_string();
                let slices = NodeId::new("discovery.k8s.io", "EndpointSlice", namespace, name)
                    .section(&label);
                let verdict = health::endpoints(counts, &label);
                let node = self.node(&slices, "EndpointSlice", &format!("{name}:{label}"));
                node.status.insert("port", p.port.into());
                node.status.insert("total", counts.total.into());
                node.status.insert("ready", counts.ready.into());
                node.status.insert("serving", counts.serving.into());
                node.status.insert("terminating", counts.terminating.into());
                self.judge(&slices, verdict.clone());
                self.edge(
                    Edge::new(id.clone(), Relation::Endpoints, slices).judged(verdict.clone()),
                );
                verdicts.push(verdict);
            }
        }
        self.judge(&id, health::of_parts(&verdicts, "ports"));
    }

    /// Endpoint counts of Service `namespace/name`'s port named `port` (unnamed: `None`).
    fn counts(&self, namespace: &str, name: &str, port: Option<&str>) -> Counts {
        let mut counts = Counts::default();
        let port = port.unwrap_or_default();
        for slice in self.input.slices_of(namespace, name) {
            let carries = slice.ports.as_ref().is_some_and(|ports| {
                ports
                    .iter()
                    .any(|p| p.name.as_deref().unwrap_or_default() == port)
            });
            if !carries {
                continue;
            }
            for endpoint in slice.endpoints.iter().flatten() {
                let c = endpoint.conditions.as_ref();
                // The API's defaults: ready and serving when unset, not terminating.
                let ready = c.and_then(|c| c.ready).unwrap_or(true);
                let serving = c.and_then(|c| c.serving).unwrap_or(ready);
                let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
                if terminating {
                    counts.terminating += 1;
                } else {
                    counts.total += 1;
                    counts.ready += usize::from(ready);
                }
                counts.serving += usize::from(serving);
            }
        }
        counts
    }

    /// ServiceWithHealthchecks: probe results per port, and their child Services.
    pub(super) fn checks(&mut self) {
        for check in &self.world.checks {
            let id = NodeId::new(
                NETWORK_GROUP,
                "ServiceWithHealthchecks",
                check.key.namespace(),
                check.key.name(),
            );
            let mut failing: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
            let verdict = match &check.status {
                None => Verdict::of(
                    Health::Unknown,
                    "NoStatus: no agent has reported probe results",
                ),
                Some(status) => {
                    let mut verdict = Verdict::healthy();
                    for e in &status.endpoint_statuses {
                        for (i, probe) in e.failed_probes.iter().enumerate() {
                            // `<mode>:<podIP>:<port>`.
                            let port = probe.rsplit(':').next().unwrap_or_default().to_owned();
                            let why = e
                                .failure_reasons
                                .get(i)
                                .cloned()
                                .unwrap_or_else(|| e.failure_reasons.join("; "));
                            verdict.worsen(Verdict::of(
                                Health::Degraded,
                                format!(
                                    "ProbeFailed: pod {} fails {probe}{}",
                                    e.pod_name,
                                    if why.is_empty() {
                                        String::new()
                                    } else {
                                        format!(" ({why})")
                                    }
                                ),
                            ));
                            failing
                                .entry(port)
                                .or_default()
                                .push(json!({"pod": e.pod_name, "probe": probe, "reason": why}));
                        }
                    }
                    let counts = status.healthcheck_condition.unwrap_or_default();
                    if counts.ready_endpoints == 0 {
                        let reason = if counts.endpoints == 0 {
                            "NoEndpoints: no pod is selected".to_owned()
                        } else {
                            format!(
                                "NoEndpointPassesProbes: none of {} pods passes every probe",
                                counts.endpoints
                            )
                        };
                        verdict.worsen(Verdict::of(Health::Failing, reason));
                    }
                    verdict
                }
            };
            let node = self.node(&id, "ServiceWithHealthchecks", check.key.name());
            let ports: Vec<serde_json::Value> = check
                .ports
                .iter()
                .map(|p| {
                    let key = p.target_port.unwrap_or(p.port).to_string();
                    json!({"name": p.name, "port": p.port, "failing": failing.get(&key).cloned().unwrap_or_default()})
                })
                .collect();
            node.status.insert("ports", ports.into());
            if let Some(status) = &check.status {
                let counts = status.healthcheck_condition.unwrap_or_default();
                node.status.insert("endpoints", counts.endpoints.into());
                node.status
                    .insert("readyEndpoints", counts.ready_endpoints.into());
                let conditions = serde_json::Value::from(status.conditions.clone());
                node.status
                    .insert("conditions", health::summarize(Some(&conditions)).into());
            }
            self.judge(&id, verdict);
            let child = object_id("Service", &check.key);
            let mut edge = Edge::new(id, Relation::ChildService, child.clone());
            if !self.service(check.key.namespace(), check.key.name()) {
                let reason = format!("NotFound: the child Service {} is not there yet", check.key);
                self.placeholder(&child, "Service", check.key.name(), reason.clone());
                edge = edge.judged(Verdict::of(Health::Failing, reason));
            }
            self.edge(edge);
        }
    }
}

/// An ExternalName Service: no endpoints to count.
fn is_external(service: &k8s_openapi::api::core::v1::Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("ExternalName")
}

/// A Service's ports.
fn ports(service: &k8s_openapi::api::core::v1::Service) -> Vec<ServicePort> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
}
