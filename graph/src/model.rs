//! The graph's data: nodes and named edges, each with its health and the reasons for it, in
//! the shape a console renders directly (Cytoscape's `{elements: {nodes: [{data}], edges:
//! [{data}]}}`). Nodes and edges are kept sorted by id, so equal worlds give equal graphs,
//! byte for byte.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::id::NodeId;

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
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub status: serde_json::Map<String, serde_json::Value>,
    /// Traffic (with Prometheus only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

/// One edge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// `source>relation>target`, with `#<rule>` for a route rule's backends.
    pub id: String,
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
    pub rule: Option<usize>,
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
    pub reason: Option<String>,
    /// Traffic (with Prometheus only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Traffic>,
}

impl Edge {
    /// An edge of `relation`, healthy until told otherwise.
    pub fn new(source: NodeId, relation: Relation, target: NodeId) -> Self {
        Self {
            id: format!("{source}>{}>{target}", relation.as_str()),
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
        }
    }

    /// The same edge for rule `rule` (a route's backends, per rule).
    pub fn in_rule(mut self, rule: usize) -> Self {
        self.id = format!("{}#{rule}", self.id);
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
    pub edges: BTreeMap<String, Arc<Edge>>,
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
    /// are shared across versions.
    pub fn share(&mut self, previous: &Graph) {
        for (id, node) in &mut self.nodes {
            if let Some(old) = previous.nodes.get(id)
                && !Arc::ptr_eq(old, node)
                && old == node
            {
                *node = old.clone();
            }
        }
        for (id, edge) in &mut self.edges {
            if let Some(old) = previous.edges.get(id)
                && !Arc::ptr_eq(old, edge)
                && old == edge
            {
                *edge = old.clone();
            }
        }
    }
}
