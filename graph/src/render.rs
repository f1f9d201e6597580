//! Renderings of a graph: Cytoscape-shaped JSON (what the API serves and the JSON Schema
//! describes), Graphviz DOT (as gwctl prints) and Mermaid; and its version, a digest of the
//! JSON, so it changes exactly when what a client would draw does.

use std::fmt::Write as _;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::json;
use crate::model::{Graph, Health};

/// The version of `graph`: 16 hex digits of a SHA-256 over its elements' digests (each kept
/// in its element), so it changes exactly when what a client would draw does.
pub fn version(graph: &Graph) -> String {
    let mut hasher = Sha256::new();
    for n in graph.nodes.values() {
        hasher.update(n.digest.get(|out| json::node(out, n)));
    }
    for e in graph.edges.values() {
        hasher.update(e.digest.get(|out| json::edge(out, e)));
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

/// Bytes an element's JSON takes, about (to size a document's buffer once).
const ELEMENT_BYTES: usize = 320;

/// The API's document as text, `{"version":…,"elements":{"nodes":[{"data":…}],"edges":[…]}}`,
/// each element written into it; and its version.
pub fn document(graph: &Graph) -> (String, String) {
    let version = version(graph);
    let mut out = String::with_capacity(graph.len() * ELEMENT_BYTES + 64);
    let _ = write!(
        out,
        "{{\"version\":\"{version}\",\"elements\":{{\"nodes\":["
    );
    for (i, n) in graph.nodes.values().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::node(&mut out, n);
    }
    out.push_str("],\"edges\":[");
    for (i, e) in graph.edges.values().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::edge(&mut out, e);
    }
    out.push_str("]}}");
    (out, version)
}

/// The API's document: `{version, elements}` (Cytoscape's shape: `{nodes: [{data}], edges:
/// [{data}]}`).
pub fn json(graph: &Graph) -> Value {
    serde_json::from_str(&document(graph).0).unwrap_or_default()
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
