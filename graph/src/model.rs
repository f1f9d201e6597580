//! The graph's data: nodes and named edges, each with its health and the reasons for it, in
//! the shape a console renders directly (Cytoscape's `{elements: {nodes: [{data}], edges:
//! [{data}]}}`). Nodes and edges are kept sorted by id, so equal worlds give equal graphs,
//! byte for byte.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::id::NodeId;
use crate::status::Status;

/// How a node or an edge is doing, ordered from best to worst.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum Health {
    /// Everything it depends on is there and ready.
    Healthy,
    /// Nothing says (no status from a controller yet, no probe results): worse than
    /// healthy when parts are combined, since it may be anything.
    #[default]
    Unknown,
    /// Serving, with a part missing (a backend at 0 ready endpoints whose share moved to the
    /// others, a pod failing a probe, a certificate close to expiry).
    Degraded,
    /// Not serving (not accepted, nothing ready, a reference to nothing).
    Failing,
}

impl Health {
    /// Its name, as it serializes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Healthy => "healthy",
            Self::Degraded => "degraded",
            Self::Failing => "failing",
        }
    }

    /// Reads a name back.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Unknown, Self::Healthy, Self::Degraded, Self::Failing]
            .into_iter()
            .find(|h| h.as_str() == text)
    }
}

/// A health with the reasons for it (empty when healthy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The health.
    pub health: Health,
    /// Why, each `Reason: message`.
    pub reasons: Vec<String>,
}

impl Verdict {
    /// Healthy.
    pub fn healthy() -> Self {
        Self {
            health: Health::Healthy,
            reasons: Vec::new(),
        }
    }

    /// `health`, for `reason`.
    pub fn of(health: Health, reason: impl Into<String>) -> Self {
        Self {
            health,
            reasons: vec![reason.into()],
        }
    }

    /// Takes in `other`: the worse health, and the reasons of whatever is not healthy.
    pub fn worsen(&mut self, other: Verdict) {
        if other.health > self.health {
            self.health = other.health;
        }
        for reason in other.reasons {
            if !self.reasons.contains(&reason) {
                self.reasons.push(reason);
            }
        }
    }
}

/// The relation an edge draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Relation {
    /// An ALB instance manages a Gateway.
    Manages,
    /// An ALB instance runs its proxy workload.
    Workload,
    /// A Gateway's GatewayClass.
    GatewayClass,
    /// A Gateway or ListenerSet holds a listener.
    Listener,
    /// A ListenerSet's Gateway, or a route's listener.
    ParentRef,
    /// A route rule's backend.
    BackendRef,
    /// A route rule's mirror.
    Mirror,
    /// A listener's certificate.
    CertificateRef,
    /// What a ReferenceGrant allows to be referred to.
    ReferenceGrant,
    /// A BackendTLSPolicy's Service.
    TargetRef,
    /// A BackendTLSPolicy's CA bundle.
    CaCertificateRef,
    /// A Service port's EndpointSlices.
    Endpoints,
    /// A ServiceWithHealthchecks' child Service.
    ChildService,
}

impl Relation {
    /// Its name, as it serializes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manages => "manages",
            Self::Workload => "workload",
            Self::GatewayClass => "gatewayClass",
            Self::Listener => "listener",
            Self::ParentRef => "parentRef",
            Self::BackendRef => "backendRef",
            Self::Mirror => "mirror",
            Self::CertificateRef => "certificateRef",
            Self::ReferenceGrant => "referenceGrant",
            Self::TargetRef => "targetRef",
            Self::CaCertificateRef => "caCertificateRef",
            Self::Endpoints => "endpoints",
            Self::ChildService => "childService",
        }
    }
}

/// Requests through a route or to a backend over the last minutes (only when Prometheus is
/// configured; never zeros for "unknown").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    /// Requests per second.
    pub requests_per_second: f64,
    /// Share of responses that were 5xx, 0 to 1 (absent without requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_ratio: Option<f64>,
    /// 99th percentile of upstream time, in milliseconds (absent without requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
}

/// One node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// `group/kind/namespace/name[/section]`.
    pub id: NodeId,
    /// The API group (empty for the core group).
    pub group: String,
    /// Kind (`Listener` for a listener, `EndpointSlice` for a port's slices).
    pub kind: String,
    /// Namespace (absent when cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name (a listener's own name; `service:port` for a port's slices).
    pub name: String,
    /// The node it is drawn inside (a listener's Gateway or ListenerSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<NodeId>,
    /// A placeholder: something refers to this object, and it does not exist (or may not be
    /// referred to); `reasons` say which.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    /// Health.
    pub health: Health,
    /// Why (empty when healthy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// What the kind summarizes: conditions, ports, endpoint counts, probe failures,
    /// certificate expiry, replicas.
    #[serde(default, skip_serializing_if = "Status::is_empty")]
    pub status: Status,
    /// Traffic (with Prometheus only; out of line, as most graphs have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Box<Traffic>>,
    /// Its JSON's digest, made once when first asked for and kept with it (not part of it:
    /// empty in a copy, which may be changed).
    #[serde(skip)]
    pub digest: Digest,
}

/// One edge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// `source>relation>target`, with `#<rule>` for a route rule's backends (shared with the
    /// graph's map).
    pub id: Arc<str>,
    /// From.
    pub source: NodeId,
    /// To.
    pub target: NodeId,
    /// What it draws.
    pub relation: Relation,
    /// Health.
    pub health: Health,
    /// Why (empty when healthy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The route rule (backendRef, mirror).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<u32>,
    /// The backend's weight in its rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// The Service port referred to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Whether the parent accepted the route (parentRef of a route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// The reason of the parent's `Accepted` condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Box<str>>,
    /// Traffic (with Prometheus only; out of line, as most graphs have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Box<Traffic>>,
    /// Its JSON's digest, as a node's.
    #[serde(skip)]
    pub digest: Digest,
}

impl Node {
    /// `node` to change: copied first when shared, its digest forgotten. The only way the
    /// graph's code changes a node in place (a digest kept past a change would leave the
    /// version as it was).
    pub fn edit(node: &mut Arc<Node>) -> &mut Node {
        let node = Arc::make_mut(node);
        node.digest.clear();
        node
    }
}

impl Edge {
    /// `edge` to change, as [`Node::edit`].
    pub fn edit(edge: &mut Arc<Edge>) -> &mut Edge {
        let edge = Arc::make_mut(edge);
        edge.digest.clear();
        edge
    }

    /// An edge of `relation`, healthy until told otherwise.
    pub fn new(source: NodeId, relation: Relation, target: NodeId) -> Self {
        Self {
            id: format!("{source}>{}>{target}", relation.as_str()).into(),
            source,
            target,
            relation,
            health: Health::Healthy,
            reasons: Vec::new(),
            rule: None,
            weight: None,
            port: None,
            accepted: None,
            reason: None,
            traffic: None,
            digest: Digest::default(),
        }
    }

    /// The same edge for rule `rule` (a route's backends, per rule; a route has at most 16).
    pub fn in_rule(mut self, rule: u32) -> Self {
        self.id = format!("{}#{rule}", self.id).into();
        self.rule = Some(rule);
        self
    }

    /// With `verdict`.
    pub fn judged(mut self, verdict: Verdict) -> Self {
        self.health = verdict.health;
        self.reasons = verdict.reasons;
        self
    }
}

/// The graph. Nodes and edges are shared (`Arc`): a view, a version kept for resuming
/// watches and the next build reuse the same elements, so holding many costs little and
/// comparing them is mostly comparing pointers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// Nodes by id.
    pub nodes: BTreeMap<NodeId, Arc<Node>>,
    /// Edges by id.
    pub edges: BTreeMap<Arc<str>, Arc<Edge>>,
}

impl Graph {
    /// How many nodes and edges.
    pub fn len(&self) -> usize {
        self.nodes.len() + self.edges.len()
    }

    /// Whether it has nothing.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Takes `previous`'s element wherever this graph's is equal to it, so unchanged elements
    /// are shared across versions (both maps walked once, in order).
    pub fn share(&mut self, previous: &Graph) {
        share(&mut self.nodes, &previous.nodes);
        share(&mut self.edges, &previous.edges);
    }

    /// Whether this graph holds exactly `other`'s elements (the same `Arc`s): after
    /// [`Graph::share`], whether the two are equal.
    pub fn same_as(&self, other: &Graph) -> bool {
        fn same<K: Eq, V>(a: &BTreeMap<K, Arc<V>>, b: &BTreeMap<K, Arc<V>>) -> bool {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && Arc::ptr_eq(va, vb))
        }
        same(&self.nodes, &other.nodes) && same(&self.edges, &other.edges)
    }
}

/// Replaces each element of `next` by `previous`'s of the same key when they are equal.
fn share<K: Ord, V: PartialEq>(next: &mut BTreeMap<K, Arc<V>>, previous: &BTreeMap<K, Arc<V>>) {
    let mut old = previous.iter().peekable();
    for (key, element) in next.iter_mut() {
        while old.next_if(|(k, _)| *k < key).is_some() {}
        if let Some((_, kept)) = old.next_if(|(k, _)| *k == key)
            && !Arc::ptr_eq(kept, element)
            && **kept == **element
        {
            *element = kept.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render;

    fn graph(health: Health) -> Graph {
        let id = NodeId::new("", "Service", "web", "api");
        let node = Node {
            id: id.clone(),
            group: String::new(),
            kind: "Service".into(),
            namespace: Some("web".into()),
            name: "api".into(),
            parent: None,
            missing: false,
            health,
            reasons: Vec::new(),
            status: Status::default(),
            traffic: None,
            digest: Digest::default(),
        };
        let edge = Edge::new(id.clone(), Relation::Endpoints, id.section("80"));
        let mut g = Graph::default();
        g.nodes.insert(id, Arc::new(node));
        g.edges.insert(edge.id.clone(), Arc::new(edge));
        g
    }

    #[test]
    fn equal_elements_are_shared_and_then_the_graphs_are_the_same() {
        let old = graph(Health::Healthy);
        let mut next = graph(Health::Healthy);
        assert!(!next.same_as(&old), "equal, but other elements");
        next.share(&old);
        assert!(next.same_as(&old));
        let mut changed = graph(Health::Failing);
        changed.share(&old);
        assert!(!changed.same_as(&old));
        assert!(
            Arc::ptr_eq(
                changed.edges.values().next().unwrap(),
                old.edges.values().next().unwrap()
            ),
            "the unchanged edge is shared"
        );
    }

    #[test]
    fn elements_fit_the_allocator_classes_the_memory_figure_was_measured_with() {
        // With an `Arc`'s two counts, jemalloc gives a node 256 bytes and an edge 160 (the
        // graph benchmark's 2 KiB per object counts on both; a field inline would cross).
        assert!(
            std::mem::size_of::<Node>() + 16 <= 256,
            "{}",
            std::mem::size_of::<Node>()
        );
        assert!(
            std::mem::size_of::<Edge>() + 16 <= 160,
            "{}",
            std::mem::size_of::<Edge>()
        );
    }

    #[test]
    fn a_changed_copy_of_an_element_already_digested_changes_the_version() {
        let mut g = graph(Health::Healthy);
        let before = render::document(&g);
        assert!(before.0.contains("\"health\":\"healthy\""), "{}", before.0);
        let node = g.nodes.values_mut().next().unwrap();
        Node::edit(node).health = Health::Failing;
        let after = render::document(&g);
        assert!(after.0.contains("\"health\":\"failing\""), "{}", after.0);
        assert_ne!(before.1, after.1, "the version follows the change");
    }
}
