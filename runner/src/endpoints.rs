//! The EndpointSlice of a Service selecting the runner's pods, as kube-controller-manager's
//! EndpointSlice controller writes it: one slice `<service>-local` (IPv4), each selected pod
//! an endpoint (ready as the pod is), each Service port at its numeric `targetPort` (its
//! `port` when none is given; a named `targetPort` is not resolved here, and the port is left
//! out), owned by the Service (so the garbage collector deletes it with it). What the ALB's
//! translator reads for a Service's backends, so a workload run here is reachable through a
//! route as in a cluster.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use fairlead_key::ObjectKey;

/// The `endpointslice.kubernetes.io/managed-by` of the slices written here.
pub const MANAGED_BY: &str = "fairlead-up.local-runner";

/// The name of `service`'s slice.
pub fn name(service: &ObjectKey) -> String {
    format!("{}-local", service.name())
}

/// Where a Service port sends: its numeric `targetPort`, its `port` without one; `None` for a
/// named `targetPort` (not resolved here) or a number that is no port.
pub fn target_port(port: &ServicePort) -> Option<u16> {
    let target = match &port.target_port {
        None => port.port,
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(_)) => return None,
    };
    u16::try_from(target).ok()
}

/// Where a Service's forwarder for `port` sends, as kube-proxy would: each ready pod of
/// `pods` (the address it serves on, whether it is ready) at the port's target, once each
/// (a Gateway's proxies share one address).
pub fn targets(port: &ServicePort, pods: &[(IpAddr, bool)]) -> Vec<SocketAddr> {
    let Some(target) = target_port(port) else {
        return Vec::new();
    };
    pods.iter()
        .filter(|(_, ready)| *ready)
        .map(|(ip, _)| SocketAddr::new(*ip, target))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The slice of `service` (its `uid` and `spec`) with `pods`: each pod's address and whether
/// it is ready.
pub fn slice(service: &ObjectKey, uid: &str, spec: &ServiceSpec, pods: &[(IpAddr, bool)]) -> Value {
    let ports: Vec<Value> = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let target = target_port(p)?;
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

    #[test]
    fn a_port_forwards_to_its_ready_pods_at_their_target_once_each() {
        let port = |target: Option<IntOrString>| ServicePort {
            port: 80,
            target_port: target,
            ..ServicePort::default()
        };
        let (a, b): (IpAddr, IpAddr) = ("127.0.1.1".parse().unwrap(), "127.0.3.2".parse().unwrap());
        // Two proxies of one Gateway serve on its address; b is not ready.
        let pods = [(a, true), (a, true), (b, false)];
        assert_eq!(
            targets(&port(Some(IntOrString::Int(10080))), &pods),
            [SocketAddr::new(a, 10080)]
        );
        assert_eq!(
            targets(&port(None), &pods),
            [SocketAddr::new(a, 80)],
            "the port itself"
        );
        assert!(
            targets(&port(Some(IntOrString::String("http".into()))), &pods).is_empty(),
            "a named target is not resolved here"
        );
        assert!(
            targets(&port(None), &[(b, false)]).is_empty(),
            "no ready pod, no target"
        );
    }

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
