//! The traffic overlay: requests per second, 5xx share and p99 per route (from Envoy's
//! per-route statistics, which Gateways with route statistics carry, labelled
//! `<kind>/<namespace>/<name>/rule/<i>`) and per backend (from the clusters
//! `backend/<namespace>/<service>/<port>`), put on route nodes, backendRef edges and
//! Service nodes. Without samples nothing is added: no traffic field means "not measured",
//! never zero.

use std::collections::BTreeMap;

use crate::model::{Edge, Graph, Node, Relation, Traffic};

/// What Prometheus said, by route (`httproute/<namespace>/<name>`) and by cluster
/// (`backend/<namespace>/<service>/<port>`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Samples {
    /// Per route (its rules summed).
    pub routes: BTreeMap<String, Traffic>,
    /// Per backend cluster.
    pub backends: BTreeMap<String, Traffic>,
}

/// The statistics key of a route (as the translator names its `stat_prefix`, `.` → `_`).
pub fn route_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{}/{namespace}/{name}", kind.to_ascii_lowercase()).replace('.', "_")
}

/// The route key of a per-rule statistics label (`httproute/ns/name/rule/0`).
pub fn route_of_rule(label: &str) -> Option<&str> {
    label.rsplit_once("/rule/").map(|(route, _)| route)
}

/// The cluster of a Service port.
pub fn backend_key(namespace: &str, service: &str, port: i32) -> String {
    format!("backend/{namespace}/{service}/{port}")
}

/// Rounds to three significant digits, so noise in the last digits does not make a new
/// graph version every sample.
pub fn round(value: f64) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let scale = 10f64.powi(2 - value.abs().log10().floor() as i32);
    (value * scale).round() / scale
}

/// Puts `samples` on `graph`.
pub fn overlay(graph: &mut Graph, samples: &Samples) {
    for node in graph.nodes.values_mut() {
        if node.kind.ends_with("Route") && !node.missing {
            let key = route_key(
                &node.kind,
                node.namespace.as_deref().unwrap_or_default(),
                &node.name,
            );
            let traffic = samples.routes.get(&key).cloned().map(Box::new);
            // Elements are shared with other versions: copied only where numbers differ.
            if node.traffic != traffic {
                Node::edit(node).traffic = traffic;
            }
        }
    }
    let mut services = std::collections::BTreeSet::new();
    for edge in graph.edges.values_mut() {
        if edge.relation != Relation::BackendRef {
            continue;
        }
        let (Some(port), target) = (edge.port, edge.target.clone()) else {
            continue;
        };
        let key = backend_key(
            target.namespace(),
            target.as_str().rsplit('/').next().unwrap_or_default(),
            port,
        );
        let traffic = samples.backends.get(&key).cloned().map(Box::new);
        if edge.traffic != traffic {
            Edge::edit(edge).traffic = traffic;
        }
        if edge.traffic.is_some() {
            services.insert(target);
        }
    }
    for service in &services {
        let Some(node) = graph.nodes.get_mut(service) else {
            continue;
        };
        // Every port's cluster, each once (several edges may share one).
        let prefix = format!("backend/{}/{}/", service.namespace(), node.name);
        let mut total = 0.0;
        let mut errors = 0.0;
        let mut p99: Option<f64> = None;
        for (key, t) in &samples.backends {
            if key.starts_with(&prefix) {
                total += t.requests_per_second;
                errors += t.error_ratio.unwrap_or(0.0) * t.requests_per_second;
                p99 = match (p99, t.p99_ms) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let traffic = Some(Box::new(Traffic {
            requests_per_second: round(total),
            error_ratio: (total > 0.0).then(|| round(errors / total)),
            p99_ms: p99,
        }));
        if node.traffic != traffic {
            Node::edit(node).traffic = traffic;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_the_translators_names_and_values_round() {
        assert_eq!(
            route_key("HTTPRoute", "shop", "web.v2"),
            "httproute/shop/web_v2"
        );
        assert_eq!(route_of_rule("grpcroute/a/b/rule/3"), Some("grpcroute/a/b"));
        assert_eq!(backend_key("shop", "web", 80), "backend/shop/web/80");
        assert_eq!(round(123.456), 123.0);
        assert_eq!(round(0.012345), 0.0123);
        assert_eq!(round(0.0), 0.0);
    }
}
