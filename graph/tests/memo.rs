//! The memo between builds: a graph built reusing the last build's drawings is the graph a
//! fresh build gives. Every golden world is built, then built again without each of its
//! objects in turn (so every kind of dependency goes away once), without each status, and
//! whole again — through one memo, each compared with a fresh build.

use std::path::Path;
use std::sync::Arc;

use fairlead_edge_model::input::{Input, Object};
use fairlead_graph::world::{World, decided_statuses, from_yaml};
use fairlead_graph::{Memo, build, build_with};

const NOW: i64 = 1_800_000_000;

/// Every object of `input`, as the index would push them.
fn objects(input: &Input) -> Vec<Object> {
    let mut all = Vec::new();
    all.extend(input.instances.iter().cloned().map(Object::Instance));
    all.extend(
        input
            .gateway_classes
            .iter()
            .cloned()
            .map(Object::GatewayClass),
    );
    all.extend(input.gateways.iter().cloned().map(Object::Gateway));
    all.extend(input.listener_sets.iter().cloned().map(Object::ListenerSet));
    all.extend(input.http_routes.iter().cloned().map(Object::HttpRoute));
    all.extend(input.grpc_routes.iter().cloned().map(Object::GrpcRoute));
    all.extend(input.tls_routes.iter().cloned().map(Object::TlsRoute));
    all.extend(input.tcp_routes.iter().cloned().map(Object::TcpRoute));
    all.extend(input.udp_routes.iter().cloned().map(Object::UdpRoute));
    all.extend(
        input
            .reference_grants
            .iter()
            .cloned()
            .map(Object::ReferenceGrant),
    );
    all.extend(
        input
            .backend_tls_policies
            .iter()
            .cloned()
            .map(Object::BackendTlsPolicy),
    );
    all.extend(input.config_maps.iter().cloned().map(Object::ConfigMap));
    all.extend(input.services.iter().cloned().map(Object::Service));
    all.extend(
        input
            .endpoint_slices
            .iter()
            .cloned()
            .map(Object::EndpointSlice),
    );
    all.extend(input.secrets.iter().cloned().map(Object::Secret));
    all.extend(input.namespaces.iter().cloned().map(Object::Namespace));
    all
}

fn input_of(objects: impl IntoIterator<Item = Object>) -> Input {
    let mut input = Input::default();
    for o in objects {
        input.push(o);
    }
    input
}

fn cases() -> Vec<(String, Input, World)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    cases
        .into_iter()
        .map(|case| {
            let text = std::fs::read_to_string(case.join("in.yaml")).unwrap();
            let (input, mut world) = from_yaml(&text).unwrap();
            decided_statuses(&input, &mut world);
            let name = case.file_name().unwrap().to_string_lossy().into_owned();
            (name, input, world)
        })
        .collect()
}

#[test]
fn a_build_that_reuses_the_last_is_a_fresh_build() {
    for (case, input, world) in cases() {
        let all = objects(&input);
        let whole = input_of(all.iter().cloned());
        let fresh = build(&whole, &world, NOW);
        let mut memo = Memo::default();
        assert_eq!(build_with(&whole, &world, NOW, &mut memo), fresh, "{case}");
        assert_eq!(
            memo.reused(),
            0,
            "{case}: a first build has nothing to reuse"
        );
        assert_eq!(build_with(&whole, &world, NOW, &mut memo), fresh, "{case}");
        assert!(
            memo.reused() > 0,
            "{case}: the same world again reuses its units"
        );
        for skip in 0..all.len() {
            let without = input_of(
                all.iter()
                    .enumerate()
                    .filter(|(i, _)| *i != skip)
                    .map(|(_, o)| o.clone()),
            );
            assert_eq!(
                build_with(&without, &world, NOW, &mut memo),
                build(&without, &world, NOW),
                "{case}: without object {skip} ({:?})",
                all[skip]
            );
            assert_eq!(
                build_with(&whole, &world, NOW, &mut memo),
                fresh,
                "{case}: with object {skip} back"
            );
        }
        for id in world.statuses.keys() {
            let mut changed = world.clone();
            changed.statuses.remove(id);
            assert_eq!(
                build_with(&whole, &changed, NOW, &mut memo),
                build(&whole, &changed, NOW),
                "{case}: without the status of {id}"
            );
            // An equal status read again (another allocation) is the same status.
            let mut reread = world.clone();
            if let Some(status) = reread.statuses.get_mut(id) {
                *status = Arc::new((**status).clone());
            }
            assert_eq!(build_with(&whole, &reread, NOW, &mut memo), fresh, "{case}");
        }
    }
}

#[test]
fn a_changed_endpoint_slice_redraws_its_service_and_the_routes_to_it_only() {
    let yaml = "
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: web}
spec:
  gatewayClassName: d8-alb
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: web}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: b, namespace: web}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a, namespace: web, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: b, namespace: web, labels: {kubernetes.io/service-name: b}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.0.0.2]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-a, namespace: web}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: a, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-b, namespace: web}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: b, port: 80}]}]
";
    let (input, mut world) = from_yaml(yaml).unwrap();
    decided_statuses(&input, &mut world);
    let mut memo = Memo::default();
    let before = build_with(&input, &world, NOW, &mut memo);
    // Slice `a` loses its endpoint's readiness: a new object, the others shared.
    let mut changed = input_of(objects(&input).into_iter().map(|o| match o {
        Object::EndpointSlice(s) if s.metadata.name.as_deref() == Some("a") => {
            let mut s = (*s).clone();
            let endpoint = &mut s.endpoints.as_mut().unwrap()[0];
            endpoint.conditions = Some(Default::default());
            if let Some(c) = endpoint.conditions.as_mut() {
                c.ready = Some(false);
            }
            Object::EndpointSlice(Arc::new(s))
        }
        other => other,
    }));
    let after = build_with(&changed, &world, NOW, &mut memo);
    assert_eq!(after, build(&changed, &world, NOW));
    // What a build and a patch keep holds every status as its text (its compact form).
    for graph in [&before, &after] {
        for node in graph.nodes.values() {
            assert!(
                node.status.is_empty() || node.status.is_sealed(),
                "{} kept its status open",
                node.id
            );
        }
    }
    assert!(
        memo.patched_last(),
        "only a slice changed: the last graph is patched"
    );
    // Two routes and two Services: route to-b and Service b are reused, to-a and a are not.
    assert_eq!(memo.reused(), 2);
    let route_a = "gateway.networking.k8s.io/HTTPRoute/web/to-a";
    let route_b = "gateway.networking.k8s.io/HTTPRoute/web/to-b";
    let node = |g: &fairlead_graph::Graph, id: &str| {
        g.nodes[&fairlead_graph::NodeId::parse(id).unwrap()].clone()
    };
    assert!(Arc::ptr_eq(&node(&before, route_b), &node(&after, route_b)));
    assert_ne!(
        node(&before, route_a),
        node(&after, route_a),
        "to-a is failing now"
    );
    // And back: everything is as it was.
    changed = input;
    assert_eq!(build_with(&changed, &world, NOW, &mut memo), before);
    assert!(memo.patched_last());
    // A minute on, certificates are judged anew: a whole build.
    assert_eq!(build_with(&changed, &world, NOW + 60, &mut memo), before);
    assert!(!memo.patched_last());
}
