//! The traffic overlay on the golden world `relations`: Prometheus's numbers land on the
//! route, on its backendRef edges and on the Services (their ports summed); without samples
//! the graph has no traffic field at all, never zeros.

use std::path::Path;

use fairlead_graph::model::Traffic;
use fairlead_graph::traffic::{Samples, overlay};
use fairlead_graph::world::{decided_statuses, from_yaml};
use fairlead_graph::{Graph, NodeId, render};

fn graph() -> Graph {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/relations/in.yaml");
    let (input, mut world) = from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap();
    decided_statuses(&input, &mut world);
    fairlead_graph::build(&input, &world, 1_800_000_000)
}

fn traffic(rps: f64, errors: Option<f64>, p99: Option<f64>) -> Traffic {
    Traffic {
        requests_per_second: rps,
        error_ratio: errors,
        p99_ms: p99,
    }
}

#[test]
fn without_samples_there_are_no_traffic_fields() {
    let mut g = graph();
    overlay(&mut g, &Samples::default());
    let json = render::json(&g).to_string();
    assert!(!json.contains("traffic"), "{json}");
}

#[test]
fn samples_land_on_routes_backends_and_services() {
    let mut g = graph();
    let samples = Samples {
        routes: [(
            "httproute/team-a/shop".to_owned(),
            traffic(12.5, Some(0.04), Some(87.0)),
        )]
        .into(),
        backends: [
            (
                "backend/team-a/web/80".to_owned(),
                traffic(9.0, Some(0.0), Some(40.0)),
            ),
            (
                "backend/team-a/web/443".to_owned(),
                traffic(1.0, Some(1.0), Some(900.0)),
            ),
            (
                "backend/team-a/web-v2/80".to_owned(),
                traffic(1.0, Some(0.5), Some(60.0)),
            ),
        ]
        .into(),
    };
    overlay(&mut g, &samples);
    let node = |id: &str| g.nodes[&NodeId::parse(id).unwrap()].clone();
    assert_eq!(
        node("gateway.networking.k8s.io/HTTPRoute/team-a/shop").traffic,
        Some(Box::new(traffic(12.5, Some(0.04), Some(87.0))))
    );
    // A route without samples (no route statistics on its Gateway) has none.
    assert_eq!(
        node("gateway.networking.k8s.io/HTTPRoute/team-a/admin").traffic,
        None
    );
    let edge = &g.edges["gateway.networking.k8s.io/HTTPRoute/team-a/shop>backendRef>/Service/team-a/web-v2#0"];
    assert_eq!(
        edge.traffic.as_deref(),
        Some(&traffic(1.0, Some(0.5), Some(60.0)))
    );
    // The Service: both ports' clusters, the error share weighted by their rates, the
    // slowest p99.
    assert_eq!(
        node("/Service/team-a/web").traffic,
        Some(Box::new(traffic(10.0, Some(0.1), Some(900.0))))
    );
    // The mirror carries no backend share.
    let mirror =
        &g.edges["gateway.networking.k8s.io/HTTPRoute/team-a/shop>mirror>/Service/team-a/shadow#0"];
    assert_eq!(mirror.traffic, None);
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/graph.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource("graph.schema.json", schema).unwrap();
    let index = compiler.compile("graph.schema.json", &mut schemas).unwrap();
    schemas
        .validate(&render::json(&g), index)
        .expect("the overlaid graph fits the schema");
}
