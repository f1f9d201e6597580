//! What changed between two graphs (the same user's view before and after): nodes and
//! edges added, changed and removed — what a watch sends, so a console patches its drawing
//! instead of redrawing it.

use serde::{Deserialize, Serialize};

use crate::id::NodeId;
use crate::model::{Edge, Graph, Node};

/// The change from one graph to the next.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Nodes new in the next graph.
    pub added_nodes: Vec<Node>,
    /// Nodes in both, changed (as they are now).
    pub changed_nodes: Vec<Node>,
    /// Nodes gone.
    pub removed_nodes: Vec<NodeId>,
    /// Edges new.
    pub added_edges: Vec<Edge>,
    /// Edges changed (as they are now).
    pub changed_edges: Vec<Edge>,
    /// Edges gone.
    pub removed_edges: Vec<String>,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added_nodes.is_empty()
            && self.changed_nodes.is_empty()
            && self.removed_nodes.is_empty()
            && self.added_edges.is_empty()
            && self.changed_edges.is_empty()
            && self.removed_edges.is_empty()
    }
}

/// The diff from `before` to `after`.
pub fn diff(before: &Graph, after: &Graph) -> Diff {
    let mut d = Diff::default();
    for (id, node) in &after.nodes {
        match before.nodes.get(id) {
            None => d.added_nodes.push(node.clone()),
            Some(old) if old != node => d.changed_nodes.push(node.clone()),
            Some(_) => {}
        }
    }
    d.removed_nodes = before
        .nodes
        .keys()
        .filter(|id| !after.nodes.contains_key(*id))
        .cloned()
        .collect();
    for (id, edge) in &after.edges {
        match before.edges.get(id) {
            None => d.added_edges.push(edge.clone()),
            Some(old) if old != edge => d.changed_edges.push(edge.clone()),
            Some(_) => {}
        }
    }
    d.removed_edges = before
        .edges
        .keys()
        .filter(|id| !after.edges.contains_key(*id))
        .cloned()
        .collect();
    d
}

/// `graph` with `diff` applied (what a client holds after it).
pub fn apply(graph: &mut Graph, diff: &Diff) {
    for id in &diff.removed_nodes {
        graph.nodes.remove(id);
    }
    for id in &diff.removed_edges {
        graph.edges.remove(id);
    }
    for node in diff.added_nodes.iter().chain(&diff.changed_nodes) {
        graph.nodes.insert(node.id.clone(), node.clone());
    }
    for edge in diff.added_edges.iter().chain(&diff.changed_edges) {
        graph.edges.insert(edge.id.clone(), edge.clone());
    }
}
