//! The builder: one pass over the published input and the world, drawing each kind in its
//! own module — `gateways` (instances, their workloads, classes, Gateways, ListenerSets,
//! listeners), `routes` (parents and backends per rule, mirrors), `backends` (Services,
//! their ports' EndpointSlices, ServiceWithHealthchecks), `refs` (certificates, CA bundles,
//! BackendTLSPolicies, ReferenceGrants). A referenced object that does not exist becomes a
//! placeholder under the id it would have, carrying why.
//!
//! Services, Secrets and ConfigMaps are drawn when something in the graph refers to them
//! (and a ServiceWithHealthchecks' child always), not every one the cluster has.

mod backends;
mod gateways;
mod refs;
mod routes;

use fairlead_edge_translate::model::Input;
use fairlead_edge_translate::refs::Grants;

use crate::id::NodeId;
use crate::model::{Edge, Graph, Health, Node, Verdict};
use crate::world::World;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Builds the graph of `input` and `world`, judging certificate expiry at `now` (Unix
/// seconds).
pub fn build(input: &Input, world: &World, now: i64) -> Graph {
    let mut builder = Builder {
        input,
        world,
        now,
        grants: Grants::new(input),
        graph: Draft::default(),
    };
    builder.instances();
    builder.classes();
    builder.gateways();
    builder.listener_sets();
    builder.routes();
    builder.checks();
    builder.policies();
    builder.grants();
    Graph {
        nodes: builder
            .graph
            .nodes
            .into_iter()
            .map(|(id, node)| (id, Arc::new(node)))
            .collect(),
        edges: builder
            .graph
            .edges
            .into_iter()
            .map(|(id, edge)| (id, Arc::new(edge)))
            .collect(),
    }
}

/// The graph while it is built: its elements owned, changed in place.
#[derive(Default)]
struct Draft {
    nodes: BTreeMap<NodeId, Node>,
    edges: BTreeMap<String, Edge>,
}

struct Builder<'a> {
    input: &'a Input,
    world: &'a World,
    now: i64,
    grants: Grants<'a>,
    graph: Draft,
}

impl<'a> Builder<'a> {
    /// Adds (or returns) the node `id`.
    fn node(&mut self, id: &NodeId, kind: &str, name: &str) -> &mut Node {
        self.graph.nodes.entry(id.clone()).or_insert_with(|| {
            let group = id.as_str().split('/').next().unwrap_or_default().to_owned();
            let namespace = id.namespace();
            Node {
                id: id.clone(),
                group,
                kind: kind.to_owned(),
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                name: name.to_owned(),
                parent: None,
                missing: false,
                health: Health::Healthy,
                reasons: Vec::new(),
                status: serde_json::Map::new(),
                traffic: None,
            }
        })
    }

    /// Marks `id` (of `kind`, named `name`) as referred to but absent, for `reason`; nothing
    /// when it exists.
    fn placeholder(&mut self, id: &NodeId, kind: &str, name: &str, reason: String) {
        let fresh = !self.graph.nodes.contains_key(id);
        let node = self.node(id, kind, name);
        if fresh {
            node.missing = true;
            node.health = Health::Failing;
        }
        if node.missing && !node.reasons.contains(&reason) {
            node.reasons.push(reason);
        }
    }

    /// Sets a node's verdict.
    fn judge(&mut self, id: &NodeId, verdict: Verdict) {
        if let Some(node) = self.graph.nodes.get_mut(id) {
            node.health = verdict.health;
            node.reasons = verdict.reasons;
        }
    }

    /// Adds an edge.
    fn edge(&mut self, edge: Edge) {
        self.graph.edges.insert(edge.id.clone(), edge);
    }

    /// The status a controller wrote for `id` (borrowed from the world, not the builder).
    fn status(&self, id: &NodeId) -> &'a serde_json::Value {
        static NONE: serde_json::Value = serde_json::Value::Null;
        self.world.statuses.get(id).unwrap_or(&NONE)
    }
}
