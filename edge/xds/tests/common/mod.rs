//! Shared fixtures: snapshots from Gateway API YAML through the real translator.

use fairlead_edge_model::input::Input;
use std::sync::Arc;

use fairlead_edge_xds::cache::{Cache, Snapshot};

/// A Gateway `default/gw` with an HTTP listener on 80 and a route `/` to Service `a` (and to
/// `b` as well when `with_b`), each with one ready endpoint.
pub fn yaml(with_b: bool) -> String {
    let backends = if with_b {
        "[{name: a, port: 80}, {name: b, port: 80}]"
    } else {
        "[{name: a, port: 80}]"
    };
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: d8-alb}}
spec: {{controllerName: alb.network.deckhouse.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [echo.example.com]
  rules: [{{backendRefs: {backends}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: a, namespace: default}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: b, namespace: default}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: a, namespace: default, labels: {{kubernetes.io/service-name: a}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints: [{{addresses: [10.0.0.1]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: b, namespace: default, labels: {{kubernetes.io/service-name: b}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints: [{{addresses: [10.0.0.2]}}]
"#
    )
}

/// The snapshot of `default/gw` for [`yaml`], as a cache with the control plane's hook for
/// proxyless gRPC clients publishes it.
pub fn snapshot(with_b: bool) -> Snapshot {
    let input = Input::from_yaml(&yaml(with_b)).expect("fixture");
    let mut translation = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    let gw = fairlead_edge_model::ObjectKey::new("default", "gw");
    let cache = Cache::with_derive(Arc::new(fairlead_edge_render::proxyless::Proxyless));
    cache.set(
        &gw,
        Snapshot::new(translation.gateways.remove(&gw).expect("gateway")),
    );
    Snapshot::clone(&cache.get(&gw))
}
