//! The builder: one pass over the published input and the world, drawing each kind in its
//! own module — `gateways` (instances, their workloads, classes, Gateways, ListenerSets,
//! listeners), `routes` (parents and backends per rule, mirrors), `backends` (Services,
//! their ports' EndpointSlices, ServiceWithHealthchecks), `refs` (certificates, CA bundles,
//! BackendTLSPolicies, ReferenceGrants). A referenced object that does not exist becomes a
//! placeholder under the id it would have, carrying why.
//!
//! Services, Secrets and ConfigMaps are drawn when something in the graph refers to them
//! (and a ServiceWithHealthchecks' child always), not every one the cluster has.
//!
//! [`build_with`] keeps a [`Memo`] between builds: a route or a Service whose inputs are the
//! objects they were last time is not drawn again, its elements are taken as they were.

mod backends;
mod gateways;
mod memo;
mod patch;
mod refs;
mod routes;

pub use memo::Memo;

use fairlead_edge_model::input::Input;
use fairlead_edge_translate::refs::Grants;

use crate::id::NodeId;
use crate::model::{Edge, Graph, Health, Node, Verdict};
use crate::world::World;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Builds the graph of `input` and `world`, judging certificate expiry at `now` (Unix
/// seconds).
pub fn build(input: &Input, world: &World, now: i64) -> Graph {
    build_with(input, world, now, &mut Memo::default())
}

/// [`build`], reusing what `memo` kept of the last build wherever its inputs did not change,
/// and keeping this build's for the next.
pub fn build_with(input: &Input, world: &World, now: i64, memo: &mut Memo) -> Graph {
    let fixed = memo::fixed_deps(input, world);
    if let Some(graph) = patch::patch(input, world, now, memo, &fixed) {
        return graph;
    }
    memo.begin(input);
    let mut builder = Builder {
        input,
        world,
        now,
        grants: Grants::new(input),
        graph: Draft::default(),
        memo,
        recording: Vec::new(),
        kept_every_unit: true,
    };
    builder.instances();
    builder.classes();
    builder.gateways();
    builder.listener_sets();
    builder.routes();
    builder.checks();
    builder.policies();
    builder.grants();
    builder.graph.seal();
    let patchable = builder.kept_every_unit.then(|| memo::Patchable {
        graph: builder.graph.clone(),
        fixed,
        checks: world.checks.clone(),
        workloads: world.workloads.clone(),
        judged_at: now,
    });
    let graph = builder.graph;
    memo.end(input, patchable);
    Graph {
        nodes: graph.nodes,
        edges: graph.edges,
    }
}

/// The graph while it is built. Elements are shared with the memo; one is copied only when
/// it is changed while shared.
#[derive(Clone, Debug, Default)]
struct Draft {
    nodes: BTreeMap<NodeId, Arc<Node>>,
    edges: BTreeMap<Arc<str>, Arc<Edge>>,
}

impl Draft {
    /// Seals the status of every node nothing else holds yet (see `status`): before the
    /// memo or a kept graph shares them, when no copy is needed.
    fn seal(&mut self) {
        for node in self.nodes.values_mut() {
            if let Some(node) = Arc::get_mut(node) {
                node.status.seal();
            }
        }
    }

    /// [`Draft::seal`] for the nodes `ids`.
    fn seal_some(&mut self, ids: &[NodeId]) {
        for id in ids {
            if let Some(node) = self.nodes.get_mut(id).and_then(Arc::get_mut) {
                node.status.seal();
            }
        }
    }
}

struct Builder<'a> {
    input: &'a Input,
    world: &'a World,
    now: i64,
    grants: Grants<'a>,
    graph: Draft,
    memo: &'a mut Memo,
    /// What the routes and Services being drawn add, innermost last.
    recording: Vec<memo::Recording>,
    /// Whether every route and Service was drawn as a unit of its own (kept by the memo),
    /// so the graph can be patched unit by unit.
    kept_every_unit: bool,
}

impl<'a> Builder<'a> {
    /// Adds (or returns) the node `id`.
    fn node(&mut self, id: &NodeId, kind: &str, name: &str) -> &mut Node {
        if !self.graph.nodes.contains_key(id)
            && let Some(recording) = self.recording.last_mut()
        {
            recording.nodes.push(id.clone());
        }
        self.entry(id, kind, name)
    }

    /// The node `id`, added when absent, without recording it as drawn here.
    fn entry(&mut self, id: &NodeId, kind: &str, name: &str) -> &mut Node {
        let node = self.graph.nodes.entry(id.clone()).or_insert_with(|| {
            let group = id.as_str().split('/').next().unwrap_or_default().to_owned();
            let namespace = id.namespace();
            Arc::new(Node {
                id: id.clone(),
                group,
                kind: kind.to_owned(),
                namespace: (!namespace.is_empty()).then(|| namespace.to_owned()),
                name: name.to_owned(),
                parent: None,
                missing: false,
                health: Health::Healthy,
                reasons: Vec::new(),
                status: crate::status::Status::default(),
                traffic: None,
                digest: Default::default(),
            })
        });
        Node::edit(node)
    }

    /// Marks `id` (of `kind`, named `name`) as referred to but absent, for `reason`; nothing
    /// when it exists.
    fn placeholder(&mut self, id: &NodeId, kind: &str, name: &str, reason: String) {
        if let Some(recording) = self.recording.last_mut() {
            recording
                .ops
                .push(memo::Op::Placeholder(Box::new(memo::Placeholder {
                    id: id.clone(),
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                    reason: reason.clone(),
                })));
        }
        self.mark_missing(id, kind, name, reason);
    }

    /// [`Self::placeholder`], unrecorded.
    fn mark_missing(&mut self, id: &NodeId, kind: &str, name: &str, reason: String) {
        // A node that is there is left as it is (and shared).
        if self
            .graph
            .nodes
            .get(id)
            .is_some_and(|n| !n.missing || n.reasons.contains(&reason))
        {
            return;
        }
        let fresh = !self.graph.nodes.contains_key(id);
        let node = self.entry(id, kind, name);
        if fresh {
            node.missing = true;
            node.health = Health::Failing;
        }
        node.reasons.push(reason);
    }

    /// Sets a node's verdict.
    fn judge(&mut self, id: &NodeId, verdict: Verdict) {
        if let Some(node) = self.graph.nodes.get_mut(id) {
            let node = Node::edit(node);
            node.health = verdict.health;
            node.reasons = verdict.reasons;
        }
    }

    /// Adds an edge.
    fn edge(&mut self, edge: Edge) {
        let edge = Arc::new(edge);
        if let Some(recording) = self.recording.last_mut() {
            recording.edges.push(edge.clone());
        }
        self.graph.edges.insert(edge.id.clone(), edge);
    }

    /// The status a controller wrote for `id` (borrowed from the world, not the builder).
    fn status(&self, id: &NodeId) -> &'a serde_json::Value {
        static NONE: serde_json::Value = serde_json::Value::Null;
        self.world.statuses.get(id).map_or(&NONE, |s| &**s)
    }

    /// Draws unit `id` of `table` with `draw`, or replays its last drawing when it read
    /// what `deps` says it reads now.
    fn memoized(
        &mut self,
        table: memo::Table,
        id: &NodeId,
        deps: Vec<memo::Dep>,
        draw: impl FnOnce(&mut Self),
    ) {
        // Only a unit whose node nothing else drew first is its own (and can be replayed).
        let own = !self.graph.nodes.contains_key(id);
        if own
            && let Some(entry) = self.memo.reusable(table, id, &deps)
            && self.replay(&entry)
        {
            self.memo.keep(table, id.clone(), entry, true);
            return;
        }
        self.recording.push(memo::Recording::default());
        draw(self);
        let recording = self.recording.pop().unwrap_or_default();
        self.kept_every_unit &= own;
        if own {
            self.graph.seal_some(&recording.nodes);
            let nodes = recording
                .nodes
                .iter()
                .filter_map(|n| self.graph.nodes.get(n).cloned())
                .collect();
            let entry = memo::Entry::new(deps, nodes, recording);
            self.memo.keep(table, id.clone(), Arc::new(entry), false);
        }
    }

    /// Adds what a unit added when it was last drawn, and makes its requests again; false
    /// (adding nothing) when something else drew one of its nodes first this time.
    fn replay(&mut self, entry: &memo::Entry) -> bool {
        for (i, node) in entry.nodes.iter().enumerate() {
            match self.graph.nodes.entry(node.id.clone()) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(node.clone());
                }
                std::collections::btree_map::Entry::Occupied(_) => {
                    for added in &entry.nodes[..i] {
                        self.graph.nodes.remove(&added.id);
                    }
                    return false;
                }
            }
        }
        for op in &entry.ops {
            match op {
                memo::Op::Placeholder(p) => {
                    self.mark_missing(&p.id, &p.kind, &p.name, p.reason.clone());
                }
                memo::Op::Service(id) => {
                    self.service(id.namespace(), id.name());
                }
            }
        }
        for edge in &entry.edges {
            self.graph.edges.insert(edge.id.clone(), edge.clone());
        }
        true
    }
}
