//! Each element's `{"data": …}` JSON, written straight into a document: the text serde
//! gives for the element (the tests hold the two equal for every field), at a fraction of
//! the cost, so a document is written anew when asked for instead of kept element by element.

use crate::model::{Edge, Node, Traffic};

/// Writes `{"data":{…}}` of `node`.
pub(crate) fn node(out: &mut String, node: &Node) {
    out.push_str("{\"data\":{\"id\":");
    string(out, node.id.as_str());
    field(out, "group", &node.group);
    field(out, "kind", &node.kind);
    if let Some(namespace) = &node.namespace {
        field(out, "namespace", namespace);
    }
    field(out, "name", &node.name);
    if let Some(parent) = &node.parent {
        field(out, "parent", parent.as_str());
    }
    if node.missing {
        out.push_str(",\"missing\":true");
    }
    field(out, "health", node.health.as_str());
    reasons(out, &node.reasons);
    if !node.status.is_empty() {
        out.push_str(",\"status\":");
        out.push_str(&node.status.text());
    }
    traffic(out, node.traffic.as_deref());
    out.push_str("}}");
}

/// Writes `{"data":{…}}` of `edge`.
pub(crate) fn edge(out: &mut String, edge: &Edge) {
    out.push_str("{\"data\":{\"id\":");
    string(out, &edge.id);
    field(out, "source", edge.source.as_str());
    field(out, "target", edge.target.as_str());
    field(out, "relation", edge.relation.as_str());
    field(out, "health", edge.health.as_str());
    reasons(out, &edge.reasons);
    if let Some(rule) = edge.rule {
        number(out, "rule", itoa::Buffer::new().format(rule));
    }
    if let Some(weight) = edge.weight {
        number(out, "weight", itoa::Buffer::new().format(weight));
    }
    if let Some(port) = edge.port {
        number(out, "port", itoa::Buffer::new().format(port));
    }
    if let Some(accepted) = edge.accepted {
        number(out, "accepted", if accepted { "true" } else { "false" });
    }
    if let Some(reason) = &edge.reason {
        field(out, "reason", reason);
    }
    traffic(out, edge.traffic.as_deref());
    out.push_str("}}");
}

/// `,"key":value` of a value written already.
fn number(out: &mut String, key: &str, value: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(value);
}

/// `,"key":"value"`.
fn field(out: &mut String, key: &str, value: &str) {
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":");
    string(out, value);
}

fn reasons(out: &mut String, reasons: &[String]) {
    if reasons.is_empty() {
        return;
    }
    out.push_str(",\"reasons\":[");
    for (i, reason) in reasons.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, reason);
    }
    out.push(']');
}

/// Traffic is rare (with Prometheus only) and holds floats: serde writes it.
fn traffic(out: &mut String, traffic: Option<&Traffic>) {
    if let Some(traffic) = traffic {
        out.push_str(",\"traffic\":");
        out.push_str(&serde_json::to_string(traffic).unwrap_or_else(|_| "null".into()));
    }
}

/// A JSON string: quoted as it is when nothing in it needs escaping (ids and names never
/// do), escaped by serde otherwise.
fn string(out: &mut String, text: &str) {
    // Folded without stopping early, so it runs on whole vectors of bytes.
    let escapes = text.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escapes {
        out.push_str(&serde_json::to_string(text).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;
    use crate::id::NodeId;
    use crate::model::{Health, Relation};
    use crate::status::Status;

    #[derive(Serialize)]
    struct Data<'a, T> {
        data: &'a T,
    }

    fn serde<T: Serialize>(element: &T) -> String {
        serde_json::to_string(&Data { data: element }).unwrap()
    }

    fn traffic() -> Traffic {
        Traffic {
            requests_per_second: 12.5,
            error_ratio: Some(0.1),
            p99_ms: None,
        }
    }

    #[test]
    fn nodes_are_written_as_serde_writes_them_with_every_field_present_or_absent() {
        let id = NodeId::new("gateway.networking.k8s.io", "Gateway", "web", "gw");
        let mut status = Status::default();
        status.insert("ready", 3.into());
        let mut full = Node {
            id: id.section("https"),
            group: "gateway.networking.k8s.io".into(),
            kind: "Listener".into(),
            namespace: Some("web".into()),
            name: "https".into(),
            parent: Some(id),
            missing: true,
            health: Health::Degraded,
            reasons: vec![
                "Odd: a \"quoted\"\\ reason\n\u{1}".into(),
                "Other: é".into(),
            ],
            status,
            traffic: Some(Box::new(traffic())),
            digest: Default::default(),
        };
        let open = {
            let mut out = String::new();
            node(&mut out, &full);
            out
        };
        assert_eq!(open, serde(&full));
        full.status.seal();
        let mut sealed = String::new();
        node(&mut sealed, &full);
        assert_eq!(sealed, open, "a sealed status writes the same text");
        let bare = Node {
            namespace: None,
            parent: None,
            missing: false,
            reasons: Vec::new(),
            status: Status::default(),
            traffic: None,
            ..full
        };
        let mut out = String::new();
        node(&mut out, &bare);
        assert_eq!(out, serde(&bare));
    }

    #[test]
    fn edges_are_written_as_serde_writes_them_with_every_field_present_or_absent() {
        let source = NodeId::new("gateway.networking.k8s.io", "HTTPRoute", "web", "r");
        let target = NodeId::new("", "Service", "web", "api");
        let bare = Edge::new(source.clone(), Relation::BackendRef, target);
        let mut out = String::new();
        edge(&mut out, &bare);
        assert_eq!(out, serde(&bare));
        for accepted in [true, false] {
            let full = Edge {
                reasons: vec!["BackendNotFound: \"api\"".into()],
                weight: Some(-1),
                port: Some(8080),
                accepted: Some(accepted),
                reason: Some("NotAllowedByListeners".into()),
                traffic: Some(Box::new(traffic())),
                ..bare.clone().in_rule(2)
            };
            let mut out = String::new();
            edge(&mut out, &full);
            assert_eq!(out, serde(&full));
        }
    }
}
