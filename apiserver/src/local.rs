//! A Service that reaches a process on this machine: a selector-less Service and an
//! EndpointSlice at a loopback address (accepted when the server allows loopback endpoints,
//! as `fairlead up` does). This is how `fairlead up` stands in for a chart's Service in front
//! of a component it runs in-process, so that what resolves Services (webhooks named by
//! `clientConfig.service`) reaches it.

use std::net::SocketAddr;

use serde_json::{Value, json};

/// The Service `namespace/name` with one port, `port` named `port_name`, and the
/// EndpointSlice sending it to `addr`.
pub fn service(
    namespace: &str,
    name: &str,
    port_name: &str,
    port: u16,
    addr: SocketAddr,
) -> [Value; 2] {
    let family = if addr.is_ipv4() { "IPv4" } else { "IPv6" };
    [
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"name": port_name, "port": port, "targetPort": addr.port(), "protocol": "TCP"}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-local"), "namespace": namespace,
                "labels": {"kubernetes.io/service-name": name,
                    "endpointslice.kubernetes.io/managed-by": "fairlead-up"}},
            "addressType": family,
            "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
            "ports": [{"name": port_name, "port": addr.port(), "protocol": "TCP"}]}),
    ]
}
