//! `fairlead bench edge`: translation time and memory for growing numbers of routes and for
//! Envoy Gateway's "large" shape, and the latency from a route change to the new route
//! configuration at a connected client. Inputs are synthetic and deterministic.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use fairlead_edge_model::input::Input;

/// One synthetic Gateway (`bench/gw`, HTTP on 80) with `http` HTTPRoutes (two rules each: a
/// path prefix, and an exact path with a header match), `grpc` GRPCRoutes, and `services`
/// Services each with an EndpointSlice of three endpoints; route `i` goes to Service
/// `i % services`.
pub fn input(http: usize, grpc: usize, services: usize) -> Input {
    Input::from_yaml(&yaml(http, grpc, services)).expect("the synthetic input reads")
}

/// The objects of [`input`] as a YAML stream (the GatewayClass first).
pub fn yaml(http: usize, grpc: usize, services: usize) -> String {
    let mut yaml = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: d8-alb}\nspec: {controllerName: alb.network.deckhouse.io/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: bench}\nspec:\n  gatewayClassName: d8-alb\n  listeners: [{name: http, port: 80, protocol: HTTP}]\n",
    );
    let services = services.max(1);
    for i in 0..services {
        let _ = write!(
            yaml,
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i}, namespace: bench}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: s{i}, namespace: bench, labels: {{kubernetes.io/service-name: s{i}}}}}\naddressType: IPv4\nports: [{{name: http, port: 8080}}]\nendpoints: [{{addresses: [10.{a}.{b}.1]}}, {{addresses: [10.{a}.{b}.2]}}, {{addresses: [10.{a}.{b}.3]}}]\n",
            a = i / 250,
            b = i % 250,
        );
    }
    for i in 0..http {
        let _ = write!(
            yaml,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: h{i}, namespace: bench}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [h{i}.example.com]\n  rules:\n  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]\n    backendRefs: [{{name: s{s}, port: 80}}]\n  - matches: [{{path: {{type: Exact, value: /login}}, headers: [{{name: x-user, value: admin}}]}}]\n    backendRefs: [{{name: s{s}, port: 80, weight: 90}}, {{name: s{t}, port: 80, weight: 10}}]\n",
            s = i % services,
            t = (i + 1) % services,
        );
    }
    for i in 0..grpc {
        let _ = write!(
            yaml,
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{name: g{i}, namespace: bench}}\nspec:\n  parentRefs: [{{name: gw}}]\n  hostnames: [g{i}.example.com]\n  rules: [{{matches: [{{method: {{service: svc.S{i}, method: Call}}}}], backendRefs: [{{name: s{s}, port: 80}}]}}]\n",
            s = i % services,
        );
    }
    yaml
}

/// Changes the weights of the second rule of the first HTTPRoute of [`input`], as an update
/// does: the route becomes a new object (as the index holds it), the others stay shared.
fn change_first_route(input: &mut Input, weight: i32) {
    if let Some(rule) = input
        .http_routes
        .first_mut()
        .and_then(|r| std::sync::Arc::make_mut(r).spec.rules.get_mut(1))
    {
        rule.backend_refs[0].weight = Some(weight);
    }
}

/// The bytes one call of `once` allocates (as `allocated` counts them), then the median and
/// maximum time of `runs` more calls.
fn measure<R>(
    runs: usize,
    allocated: &dyn Fn() -> u64,
    mut once: impl FnMut() -> R,
) -> (Duration, Duration, u64) {
    let before = allocated();
    std::hint::black_box(once());
    let bytes = allocated().saturating_sub(before);
    let mut times: Vec<Duration> = (0..runs.max(1))
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(once());
            started.elapsed()
        })
        .collect();
    times.sort();
    (times[times.len() / 2], times[times.len() - 1], bytes)
}

/// Median and maximum of `runs` translations of `input` (with the snapshot built, as the
/// control plane does), and the bytes allocated by one, as `allocated` counts them (bytes
/// allocated by this thread so far).
pub fn translation(
    input: &Input,
    runs: usize,
    allocated: &dyn Fn() -> u64,
) -> (Duration, Duration, u64) {
    measure(runs, allocated, || {
        let t = fairlead_edge_render::run(input, fairlead_edge_model::CONTROLLER_NAME);
        t.gateways
            .into_values()
            .map(fairlead_edge_xds::cache::Snapshot::new)
            .count()
    })
}

/// Like [`translation`], but by a translator that remembers its last translation and with
/// snapshots made after the last ones, each run after one HTTPRoute changed (the weights of
/// its second rule): what the control plane does per change once it runs.
pub fn retranslation(
    input: &Input,
    runs: usize,
    allocated: &dyn Fn() -> u64,
) -> (Duration, Duration, u64) {
    let mut input = input.clone();
    let mut translator = fairlead_edge_render::Pipeline::default();
    let mut last: std::collections::BTreeMap<
        fairlead_edge_model::ObjectKey,
        fairlead_edge_xds::cache::Snapshot,
    > = Default::default();
    let mut change = 0;
    let mut once = || {
        change += 1;
        change_first_route(&mut input, change % 50 + 1);
        let t = translator.run(&input, fairlead_edge_model::CONTROLLER_NAME);
        for (gateway, resources) in t.gateways {
            let previous = last.remove(&gateway).unwrap_or_default();
            last.insert(
                gateway,
                fairlead_edge_xds::cache::Snapshot::after(resources, &previous),
            );
        }
        last.len()
    };
    // The first translation has nothing to remember.
    std::hint::black_box(once());
    measure(runs, allocated, once)
}

/// The latency from a route change to the new route configuration at a connected client
/// (translation, snapshot, push, over a loopback gRPC stream), over `changes` changes of one
/// route's weights on [`input`]`(routes, 0, routes / 2)`: (p50, p99).
pub async fn push_latency(
    routes: usize,
    changes: usize,
) -> Result<(Duration, Duration), tonic::Status> {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    use std::sync::Arc;

    let mut input = input(routes, 0, (routes / 2).max(1));
    let cache = Arc::new(fairlead_edge_xds::cache::Cache::new());
    // One translator throughout, as the control plane keeps one.
    let mut translator = fairlead_edge_render::Pipeline::default();
    let gateway = fairlead_edge_model::ObjectKey::new("bench", "gw");
    let mut publish = |input: &Input| {
        let mut t = translator.run(input, fairlead_edge_model::CONTROLLER_NAME);
        let resources = t.gateways.remove(&gateway).unwrap_or_default();
        let snapshot = fairlead_edge_xds::cache::Snapshot::after(resources, &cache.get(&gateway));
        cache.set(&gateway, snapshot);
    };
    publish(&input);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| tonic::Status::internal(e.to_string()))?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                fairlead_edge_xds::server::Ads::new(
                    cache.clone(),
                    Arc::new(fairlead_edge_xds::server::Quiet),
                )
                .into_service(),
            )
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{addr}"))
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let request = |version: String, nonce: String| DiscoveryRequest {
        node: Some(Node {
            id: "bench".into(),
            cluster: "bench/gw".into(),
            ..Default::default()
        }),
        type_url: fairlead_edge_xds::cache::ROUTE.into(),
        resource_names: vec!["http-80".into()],
        version_info: version,
        response_nonce: nonce,
        ..Default::default()
    };
    let _ = tx.send(request(String::new(), String::new())).await;
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await?
        .into_inner();
    let first = responses
        .message()
        .await?
        .ok_or_else(|| tonic::Status::aborted("closed"))?;
    let _ = tx.send(request(first.version_info, first.nonce)).await;
    let mut samples = Vec::with_capacity(changes);
    for change in 0..changes {
        change_first_route(&mut input, i32::try_from(change % 50 + 1).unwrap_or(1));
        let started = Instant::now();
        publish(&input);
        let response = responses
            .message()
            .await?
            .ok_or_else(|| tonic::Status::aborted("closed"))?;
        samples.push(started.elapsed());
        let _ = tx
            .send(request(response.version_info, response.nonce))
            .await;
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Ok((at(0.5), at(0.99)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synthetic_input_translates_to_what_it_declares() {
        let input = input(3, 2, 2);
        assert_eq!(
            (
                input.http_routes.len(),
                input.grpc_routes.len(),
                input.services.len()
            ),
            (3, 2, 2)
        );
        let t = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
        let gw = &t.gateways[&fairlead_edge_model::ObjectKey::new("bench", "gw")];
        // Two Services over HTTP/1 (HTTPRoutes) and over HTTP/2 (GRPCRoutes).
        assert_eq!(gw.clusters.len(), 4);
        let routes: envoy_types::pb::envoy::config::route::v3::RouteConfiguration =
            gw.routes[0].decode().expect("decodes");
        assert_eq!(routes.virtual_hosts.len(), 5);
        let (_, _, bytes) = translation(&input, 1, &|| 0);
        assert_eq!(bytes, 0, "the counter given is the one used");
    }
}
