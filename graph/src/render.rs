//! Renderings of a graph: Cytoscape-shaped JSON (what the API serves and the JSON Schema
//! describes), Graphviz DOT (as gwctl prints) and Mermaid; and its version, a digest of the
//! JSON, so it changes exactly when what a client would draw does.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::id::NodeId;
use crate::model::{Edge, Graph, Health, Node};

/// One element rendered: `{"data": …}`, and the SHA-256 of that text.
#[derive(Debug)]
pub struct Fragment {
    json: Box<str>,
    digest: [u8; 32],
}

#[derive(Serialize)]
struct Data<'a, T> {
    data: &'a T,
}

impl Fragment {
    fn of<T: Serialize>(element: &T) -> Self {
        let json = serde_json::to_string(&Data { data: element })
            .unwrap_or_default()
            .into_boxed_str();
        let digest = Sha256::digest(json.as_bytes()).into();
        Self { json, digest }
    }
}

/// The rendered elements of a published graph, kept beside it: the next version renders
/// only the elements that changed (an element is the same when it is the same `Arc`), and
/// every view of every user is assembled from them, so a request costs copying text.
#[derive(Debug, Default)]
pub struct Fragments {
    nodes: HashMap<NodeId, (Arc<Node>, Arc<Fragment>)>,
    edges: HashMap<String, (Arc<Edge>, Arc<Fragment>)>,
}

impl Fragments {
    /// The fragments of `graph`, reusing `previous`'s for the elements it shares.
    pub fn of(graph: &Graph, previous: Option<&Fragments>) -> Self {
        let mut out = Self::default();
        for (id, node) in &graph.nodes {
            let fragment = previous
                .and_then(|p| p.nodes.get(id))
                .filter(|(kept, _)| Arc::ptr_eq(kept, node))
                .map(|(_, f)| f.clone())
                .unwrap_or_else(|| Arc::new(Fragment::of(&**node)));
            out.nodes.insert(id.clone(), (node.clone(), fragment));
        }
        for (id, edge) in &graph.edges {
            let fragment = previous
                .and_then(|p| p.edges.get(id))
                .filter(|(kept, _)| Arc::ptr_eq(kept, edge))
                .map(|(_, f)| f.clone())
                .unwrap_or_else(|| Arc::new(Fragment::of(&**edge)));
            out.edges.insert(id.clone(), (edge.clone(), fragment));
        }
        out
    }

    fn node(&self, node: &Arc<Node>) -> Arc<Fragment> {
        self.nodes
            .get(&node.id)
            .filter(|(kept, _)| Arc::ptr_eq(kept, node))
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| Arc::new(Fragment::of(&**node)))
    }

    fn edge(&self, edge: &Arc<Edge>) -> Arc<Fragment> {
        self.edges
            .get(&edge.id)
            .filter(|(kept, _)| Arc::ptr_eq(kept, edge))
            .map(|(_, f)| f.clone())
            .unwrap_or_else(|| Arc::new(Fragment::of(&**edge)))
    }
}

/// The fragments of `graph`'s nodes, then its edges, from `fragments` where they are kept.
fn parts(graph: &Graph, fragments: &Fragments) -> (Vec<Arc<Fragment>>, Vec<Arc<Fragment>>) {
    (
        graph.nodes.values().map(|n| fragments.node(n)).collect(),
        graph.edges.values().map(|e| fragments.edge(e)).collect(),
    )
}

fn version_of(nodes: &[Arc<Fragment>], edges: &[Arc<Fragment>]) -> String {
    let mut hasher = Sha256::new();
    for f in nodes.iter().chain(edges) {
        hasher.update(f.digest);
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The version of `graph`: 16 hex digits of a SHA-256 over its elements' renderings, so it
/// changes exactly when what a client would draw does.
pub fn version(graph: &Graph) -> String {
    version_with(graph, &Fragments::default())
}

/// [`version`], from kept fragments.
pub fn version_with(graph: &Graph, fragments: &Fragments) -> String {
    let (nodes, edges) = parts(graph, fragments);
    version_of(&nodes, &edges)
}

/// The API's document as text, `{"version":…,"elements":{"nodes":[{"data":…}],"edges":[…]}}`,
/// assembled from kept fragments; and its version.
pub fn document(graph: &Graph, fragments: &Fragments) -> (String, String) {
    let (nodes, edges) = parts(graph, fragments);
    let version = version_of(&nodes, &edges);
    let size: usize = nodes.iter().chain(&edges).map(|f| f.json.len() + 1).sum();
    let mut out = String::with_capacity(size + 64);
    let _ = write!(
        out,
        "{{\"version\":\"{version}\",\"elements\":{{\"nodes\":["
    );
    for (i, f) in nodes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&f.json);
    }
    out.push_str("],\"edges\":[");
    for (i, f) in edges.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&f.json);
    }
    out.push_str("]}}");
    (out, version)
}

/// The API's document: `{version, elements}` (Cytoscape's shape: `{nodes: [{data}], edges:
/// [{data}]}`).
pub fn json(graph: &Graph) -> Value {
    serde_json::from_str(&document(graph, &Fragments::default()).0).unwrap_or_default()
}

/// The colour a health is drawn in (the viewer uses the same).
pub fn colour(health: Health) -> &'static str {
    match health {
        Health::Healthy => "#2e7d32",
        Health::Degraded => "#ef6c00",
        Health::Failing => "#c62828",
        Health::Unknown => "#757575",
    }
}

fn label(node: &crate::model::Node) -> String {
    let place = node
        .namespace
        .as_ref()
        .map(|ns| format!("{ns}/{}", node.name))
        .unwrap_or_else(|| node.name.clone());
    let missing = if node.missing { " (missing)" } else { "" };
    format!("{}{missing}\n{place}", node.kind)
}

/// Graphviz DOT: one node per object (listeners inside their Gateway's cluster), edges
/// labelled with their relation, colours by health, placeholders dashed.
pub fn dot(graph: &Graph) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out =
        String::from("digraph gateway_api {\n  rankdir=LR;\n  node [shape=box, style=rounded];\n");
    for node in graph.nodes.values() {
        let style = if node.missing { "dashed" } else { "rounded" };
        let _ = writeln!(
            out,
            "  {} [label={}, color={}, style={style}];",
            quote(node.id.as_str()),
            quote(&label(node)).replace('\n', "\\n"),
            quote(colour(node.health)),
        );
    }
    for edge in graph.edges.values() {
        let mut text = edge.relation.as_str().to_owned();
        if let Some(w) = edge.weight {
            let _ = write!(text, " w={w}");
        }
        if let Some(r) = &edge.reason {
            let _ = write!(text, " {r}");
        }
        let _ = writeln!(
            out,
            "  {} -> {} [label={}, color={}];",
            quote(edge.source.as_str()),
            quote(edge.target.as_str()),
            quote(&text),
            quote(colour(edge.health)),
        );
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart: nodes numbered in id order (Mermaid ids cannot hold `/`), a class per
/// health.
pub fn mermaid(graph: &Graph) -> String {
    let mut out = String::from("flowchart LR\n");
    let index: std::collections::HashMap<_, _> = graph
        .nodes
        .keys()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    let text = |s: &str| s.replace('"', "#quot;").replace('\n', "<br/>");
    for (i, node) in graph.nodes.values().enumerate() {
        let _ = writeln!(
            out,
            "  n{i}[\"{}\"]:::{}",
            text(&label(node)),
            node.health.as_str()
        );
    }
    for edge in graph.edges.values() {
        let (Some(a), Some(b)) = (index.get(&edge.source), index.get(&edge.target)) else {
            continue;
        };
        let arrow = if edge.health == Health::Failing {
            "-.->"
        } else {
            "-->"
        };
        let _ = writeln!(out, "  n{a} {arrow}|{}| n{b}", edge.relation.as_str());
    }
    for health in [
        Health::Healthy,
        Health::Degraded,
        Health::Failing,
        Health::Unknown,
    ] {
        let _ = writeln!(
            out,
            "  classDef {} stroke:{},stroke-width:2px",
            health.as_str(),
            colour(health)
        );
    }
    out
}
