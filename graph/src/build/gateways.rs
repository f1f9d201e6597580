//! ALB instances and their proxy workloads, GatewayClasses, Gateways, ListenerSets and their
//! listeners.

use fairlead_edge_model::input::{GATEWAY_GROUP, Listener, key};
use serde_json::Value;

use super::Builder;
use crate::health;
use crate::id::NodeId;
use crate::model::{Edge, Health, Relation, Verdict};
use crate::world::{CLUSTER_NAMESPACE, object_id};

impl Builder<'_> {
    pub(super) fn instances(&mut self) {
        for instance in &self.input.instances {
            let key = key(&instance.metadata);
            let id = object_id(&instance.kind, &key);
            let conditions = health::summarize(self.status(&id).get("conditions"));
            let verdict = health::conditions(&conditions);
            let node = self.node(&id, &instance.kind, key.name());
            node.status.insert("conditions", conditions.into());
            self.judge(&id, verdict);
            let namespace = if instance.kind == "ClusterALBInstance" {
                CLUSTER_NAMESPACE
            } else {
                key.namespace()
            };
            let gateway = &instance.spec.gateway_name;
            let gateway_id = NodeId::new(GATEWAY_GROUP, "Gateway", namespace, gateway);
            let exists = self.input.gateways.iter().any(|g| {
                g.metadata.namespace.as_deref() == Some(namespace)
                    && g.metadata.name.as_deref() == Some(gateway.as_str())
            });
            let mut edge = Edge::new(id.clone(), Relation::Manages, gateway_id.clone());
            if !exists {
                let reason = format!("NotFound: no Gateway {namespace}/{gateway}");
                self.placeholder(&gateway_id, "Gateway", gateway, reason.clone());
                edge = edge.judged(Verdict::of(Health::Failing, reason));
            }
            self.edge(edge);
            for w in self
                .world
                .workloads
                .iter()
                .filter(|w| w.key.namespace() == namespace && &w.gateway == gateway)
            {
                let workload = object_id(&w.kind, &w.key);
                let verdict = health::replicas(w.desired, w.ready);
                let node = self.node(&workload, &w.kind, w.key.name());
                node.status.insert("replicas", w.desired.into());
                node.status.insert("readyReplicas", w.ready.into());
                self.judge(&workload, verdict.clone());
                self.edge(Edge::new(id.clone(), Relation::Workload, workload).judged(verdict));
            }
        }
    }

    pub(super) fn classes(&mut self) {
        for class in &self.input.gateway_classes {
            let name = class.metadata.name.clone().unwrap_or_default();
            let id = NodeId::new(GATEWAY_GROUP, "GatewayClass", "", &name);
            let conditions = health::summarize(self.status(&id).get("conditions"));
            let verdict = health::conditions(&conditions);
            let node = self.node(&id, "GatewayClass", &name);
            node.status
                .insert("controllerName", class.spec.controller_name.clone().into());
            node.status.insert("conditions", conditions.into());
            self.judge(&id, verdict);
        }
    }

    pub(super) fn gateways(&mut self) {
        for gateway in &self.input.gateways {
            let key = key(&gateway.metadata);
            let id = object_id("Gateway", &key);
            let status = self.status(&id);
            let conditions = health::summarize(status.get("conditions"));
            let mut verdict = health::conditions(&conditions);
            let node = self.node(&id, "Gateway", key.name());
            node.status.insert("conditions", conditions.clone().into());
            if let Some(addresses) = status.get("addresses") {
                node.status.insert("addresses", addresses.clone());
            }
            let class = &gateway.spec.gateway_class_name;
            let class_id = NodeId::new(GATEWAY_GROUP, "GatewayClass", "", class);
            let mut edge = Edge::new(id.clone(), Relation::GatewayClass, class_id.clone());
            if !self
                .input
                .gateway_classes
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(class))
            {
                let reason = format!("NotFound: no GatewayClass {class}");
                self.placeholder(&class_id, "GatewayClass", class, reason.clone());
                edge = edge.judged(Verdict::of(Health::Failing, reason));
            }
            self.edge(edge);
            let listeners = self.listeners(&id, &gateway.spec.listeners, status, key.namespace());
            verdict.worsen(listeners);
            self.judge(&id, verdict);
        }
    }

    pub(super) fn listener_sets(&mut self) {
        for set in &self.input.listener_sets {
            let key = key(&set.metadata);
            let id = object_id("ListenerSet", &key);
            let status = self.status(&id);
            let conditions = health::summarize(status.get("conditions"));
            let mut verdict = health::conditions(&conditions);
            self.node(&id, "ListenerSet", key.name())
                .status
                .insert("conditions", conditions.clone().into());
            let parent = &set.spec.parent_ref;
            let namespace = parent.namespace.as_deref().unwrap_or(key.namespace());
            let gateway_id = NodeId::new(GATEWAY_GROUP, "Gateway", namespace, &parent.name);
            let accepted = health::condition(&conditions, "Accepted");
            let mut edge = Edge::new(id.clone(), Relation::ParentRef, gateway_id.clone());
            edge.accepted = accepted.map(|c| c["status"] == "True");
            edge.reason = accepted.and_then(|c| c["reason"].as_str()).map(Into::into);
            if self.graph.nodes.get(&gateway_id).is_none_or(|n| n.missing) {
                let why = edge.reason.as_deref().unwrap_or("NotFound");
                let reason = format!("{why}: no Gateway {namespace}/{}", parent.name);
                self.placeholder(&gateway_id, "Gateway", &parent.name, reason.clone());
                edge = edge.judged(Verdict::of(Health::Failing, reason));
            } else if edge.accepted == Some(false) {
                edge = edge.judged(health::conditions(&conditions));
            }
            self.edge(edge);
            let listeners = self.listeners(&id, &set.spec.listeners, status, key.namespace());
            verdict.worsen(listeners);
            self.judge(&id, verdict);
        }
    }

    /// Draws the listeners of `parent` (a Gateway or ListenerSet) with their statuses and
    /// certificates; what they make of their parent's health (degraded at worst).
    fn listeners(
        &mut self,
        parent: &NodeId,
        listeners: &[Listener],
        status: &Value,
        namespace: &str,
    ) -> Verdict {
        let mut worst = Verdict::healthy();
        for listener in listeners {
            let id = parent.section(&listener.name);
            let listener_status = status["listeners"]
                .as_array()
                .and_then(|l| l.iter().find(|s| s["name"] == listener.name.as_str()));
            let conditions = health::summarize(listener_status.and_then(|s| s.get("conditions")));
            let mut verdict = health::conditions(&conditions);
            let node = self.node(&id, "Listener", &listener.name);
            node.parent = Some(parent.clone());
            node.status.insert("port", listener.port.into());
            node.status
                .insert("protocol", listener.protocol.clone().into());
            if let Some(host) = &listener.hostname {
                node.status.insert("hostname", host.clone().into());
            }
            if let Some(attached) = listener_status.and_then(|s| s.get("attachedRoutes")) {
                node.status.insert("attachedRoutes", attached.clone());
            }
            node.status.insert("conditions", conditions.clone().into());
            let refs_reason = health::condition(&conditions, "ResolvedRefs")
                .filter(|c| c["status"] == "False")
                .and_then(|c| c["reason"].as_str())
                .map(str::to_owned);
            for certificate in listener.tls.iter().flat_map(|t| &t.certificate_refs) {
                verdict.worsen(self.certificate(
                    &id,
                    parent,
                    namespace,
                    certificate,
                    refs_reason.as_deref(),
                ));
            }
            self.judge(&id, verdict.clone());
            self.edge(
                Edge::new(parent.clone(), Relation::Listener, id.clone()).judged(verdict.clone()),
            );
            if verdict.health > Health::Healthy {
                worst.worsen(Verdict {
                    health: verdict.health.min(Health::Degraded),
                    reasons: vec![format!(
                        "Listener{}: {}",
                        if verdict.health == Health::Unknown {
                            "Unknown"
                        } else {
                            "NotReady"
                        },
                        listener.name
                    )],
                });
            }
        }
        worst
    }
}

/// The parent of a route's `parentRef`, as a node id.
pub(super) fn parent_id(kind: &str, namespace: &str, name: &str) -> NodeId {
    NodeId::new(GATEWAY_GROUP, kind, namespace, name)
}
