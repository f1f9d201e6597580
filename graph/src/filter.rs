//! Views of a graph: what a user may see, then the filters a request asks for — a
//! namespace, a root with a depth (a breadth-first walk both ways, as gwctl's), kinds,
//! health. An edge stays when both its ends do; a listener whose Gateway is filtered out
//! loses its `parent` (a console cannot draw a child inside nothing).

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::id::NodeId;
use crate::model::{Graph, Health, Node};

/// How deep a walk from a root goes unless asked otherwise (gwctl's default).
pub const DEFAULT_DEPTH: usize = 3;

/// What a request asks to see.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Filter {
    /// Only this namespace (and the cluster-scoped objects next to it).
    pub namespace: Option<String>,
    /// Only what is within `depth` edges of this node.
    pub root: Option<NodeId>,
    /// The depth of the walk from `root`.
    pub depth: Option<usize>,
    /// Only these kinds.
    pub kinds: BTreeSet<String>,
    /// Only nodes of these healths.
    pub health: BTreeSet<Health>,
}

impl Filter {
    /// Whether it keeps everything.
    pub fn keeps_everything(&self) -> bool {
        *self == Self::default()
    }
}

/// A filter that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The root is not in the (visible) graph.
    #[error("root {0} is not in the graph")]
    NoRoot(NodeId),
}

/// The part of `graph` a user who may see what `visible` admits asks for with `filter`.
pub fn view(
    graph: &Graph,
    visible: &dyn Fn(&Node) -> bool,
    filter: &Filter,
) -> Result<Graph, FilterError> {
    let mut keep: BTreeSet<&NodeId> = graph
        .nodes
        .values()
        .filter(|n| visible(n))
        .map(|n| &n.id)
        .collect();
    if let Some(namespace) = &filter.namespace {
        let inside: BTreeSet<&NodeId> = keep
            .iter()
            .copied()
            .filter(|id| id.namespace() == namespace)
            .collect();
        // Cluster-scoped objects next to the namespace's (its Gateways' classes).
        let next: BTreeSet<&NodeId> = graph
            .edges
            .values()
            .flat_map(|e| [(&e.source, &e.target), (&e.target, &e.source)])
            .filter(|(a, b)| inside.contains(a) && b.namespace().is_empty() && keep.contains(b))
            .map(|(_, b)| b)
            .collect();
        keep = inside.union(&next).copied().collect();
    }
    if let Some(root) = &filter.root {
        if !keep.contains(root) {
            return Err(FilterError::NoRoot(root.clone()));
        }
        let mut adjacent: HashMap<&NodeId, Vec<&NodeId>> = HashMap::new();
        for e in graph.edges.values() {
            if keep.contains(&e.source) && keep.contains(&e.target) {
                adjacent.entry(&e.source).or_default().push(&e.target);
                adjacent.entry(&e.target).or_default().push(&e.source);
            }
        }
        let depth = filter.depth.unwrap_or(DEFAULT_DEPTH);
        let mut reached: BTreeSet<&NodeId> = BTreeSet::from([root]);
        let mut queue = VecDeque::from([(root, 0)]);
        while let Some((id, d)) = queue.pop_front() {
            if d == depth {
                continue;
            }
            for next in adjacent.get(id).into_iter().flatten() {
                if reached.insert(next) {
                    queue.push_back((next, d + 1));
                }
            }
        }
        keep = reached;
    }
    if !filter.kinds.is_empty() {
        keep.retain(|id| filter.kinds.contains(&graph.nodes[*id].kind));
    }
    if !filter.health.is_empty() {
        keep.retain(|id| filter.health.contains(&graph.nodes[*id].health));
    }
    let mut out = Graph::default();
    for id in &keep {
        let mut node = graph.nodes[*id].clone();
        if node.parent.as_ref().is_some_and(|p| !keep.contains(p)) {
            Node::edit(&mut node).parent = None;
        }
        out.nodes.insert((*id).clone(), node);
    }
    for (id, edge) in &graph.edges {
        if keep.contains(&edge.source) && keep.contains(&edge.target) {
            out.edges.insert(id.clone(), edge.clone());
        }
    }
    Ok(out)
}
