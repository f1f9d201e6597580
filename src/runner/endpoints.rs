//! The EndpointSlice of a Service selecting the runner's pods, as kube-controller-manager's
//! EndpointSlice controller writes it: one slice `<service>-local` (IPv4), each selected pod
//! an endpoint (ready as the pod is), each Service port at its numeric `targetPort` (its
//! `port` when none is given; a named `targetPort` is not resolved here, and the port is left
//! out), owned by the Service (so the garbage collector deletes it with it). What the ALB's
//! translator reads for a Service's backends, so a workload run here is reachable through a
//! route as in a cluster.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::ServiceSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use fairlead_key::ObjectKey;

/// The `endpointslice.kubernetes.io/managed-by` of the slices written here.
pub const MANAGED_BY: &str = "fairlead-up.local-runner";

/// The name of `service`'s slice.
pub fn name(service: &ObjectKey) -> String {
    format!("{}-local", service.name())
}

/// The slice of `service` (its `uid` and `spec`) with `pods`: each pod's address and whether
/// it is ready.
pub fn slice(service: &ObjectKey, uid: &str, spec: &ServiceSpec, pods: &[(IpAddr, bool)]) -> Value {
    let ports: Vec<Value> = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let target = match &p.target_port {
                None => p.port,
                Some(IntOrString::Int(n)) => *n,
                Some(IntOrString::String(_)) => return None,
            };
            Some(
                json!({"name": p.name.clone().unwrap_or_default(), "port": target,
                "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())}),
            )
        })
        .collect();
    let endpoints: Vec<Value> = pods
        .iter()
        .filter(|(ip, _)| ip.is_ipv4())
        .map(|(ip, ready)| json!({"addresses": [ip.to_string()], "conditions": {"ready": ready}}))
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name(service),
            "namespace": service.namespace(),
            "labels": {"kubernetes.io/service-name": service.name(),
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": service.name(),
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": endpoints,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServicePort;

    #[test]
    fn a_slice_holds_each_pod_at_each_port_s_target() {
        let spec = ServiceSpec {
            ports: Some(vec![
                ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::Int(8080)),
                    ..ServicePort::default()
                },
                ServicePort {
                    name: Some("dns".into()),
                    port: 53,
                    protocol: Some("UDP".into()),
                    ..ServicePort::default()
                },
                ServicePort {
                    name: Some("named".into()),
                    port: 9000,
                    target_port: Some(IntOrString::String("metrics".into())),
                    ..ServicePort::default()
                },
            ]),
            ..ServiceSpec::default()
        };
        let pods = [
            ("127.0.3.1".parse().unwrap(), true),
            ("127.0.3.2".parse().unwrap(), false),
        ];
        let slice = slice(&ObjectKey::new("shop", "web"), "u-1", &spec, &pods);
        assert_eq!(slice["metadata"]["name"], "web-local");
        assert_eq!(
            slice["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(slice["metadata"]["namespace"], "shop");
        assert_eq!(
            slice["metadata"]["labels"]["kubernetes.io/service-name"],
            "web"
        );
        assert_eq!(
            slice["ports"],
            json!([{"name": "http", "port": 8080, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"}])
        );
        assert_eq!(
            slice["endpoints"],
            json!([{"addresses": ["127.0.3.1"], "conditions": {"ready": true}},
                {"addresses": ["127.0.3.2"], "conditions": {"ready": false}}])
        );
    }
}
