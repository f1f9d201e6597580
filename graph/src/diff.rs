//! What changed between two graphs (the same user's view before and after): nodes and
//! edges added, changed and removed — what a watch sends, so a console patches its drawing
//! instead of redrawing it.

use std::sync::Arc;

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
    pub removed_edges: Vec<Arc<str>>,
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

/// The diff from `before` to `after` (both maps walked once, in order; shared elements
/// compared by pointer).
pub fn diff(before: &Graph, after: &Graph) -> Diff {
    let mut d = Diff::default();
    for step in merge(&before.nodes, &after.nodes) {
        match step {
            Step::Removed(id) => d.removed_nodes.push(id.clone()),
            Step::Added(node) => d.added_nodes.push((**node).clone()),
            Step::Both(old, new) => {
                if !Arc::ptr_eq(old, new) && old != new {
                    d.changed_nodes.push((**new).clone());
                }
            }
        }
    }
    for step in merge(&before.edges, &after.edges) {
        match step {
            Step::Removed(id) => d.removed_edges.push(id.clone()),
            Step::Added(edge) => d.added_edges.push((**edge).clone()),
            Step::Both(old, new) => {
                if !Arc::ptr_eq(old, new) && old != new {
                    d.changed_edges.push((**new).clone());
                }
            }
        }
    }
    d
}

/// One key of two sorted maps.
enum Step<'a, K, V> {
    Removed(&'a K),
    Added(&'a V),
    Both(&'a V, &'a V),
}

/// The keys of `before` and `after` in order, each once.
fn merge<'a, K: Ord, V>(
    before: &'a std::collections::BTreeMap<K, V>,
    after: &'a std::collections::BTreeMap<K, V>,
) -> Vec<Step<'a, K, V>> {
    let mut out = Vec::with_capacity(after.len());
    let (mut a, mut b) = (before.iter().peekable(), after.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => return out,
            (Some(_), None) => {
                out.push(Step::Removed(a.next().expect("peeked").0));
            }
            (None, Some(_)) => out.push(Step::Added(b.next().expect("peeked").1)),
            (Some((ka, _)), Some((kb, _))) => match ka.cmp(kb) {
                std::cmp::Ordering::Less => {
                    out.push(Step::Removed(a.next().expect("peeked").0));
                }
                std::cmp::Ordering::Greater => out.push(Step::Added(b.next().expect("peeked").1)),
                std::cmp::Ordering::Equal => {
                    let (_, old) = a.next().expect("peeked");
                    let (_, new) = b.next().expect("peeked");
                    out.push(Step::Both(old, new));
                }
            },
        }
    }
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
        graph.nodes.insert(node.id.clone(), Arc::new(node.clone()));
    }
    for edge in diff.added_edges.iter().chain(&diff.changed_edges) {
        graph.edges.insert(edge.id.clone(), Arc::new(edge.clone()));
    }
}
