//! A Service that reaches a process on this machine: a selector-less Service and an
//! EndpointSlice at a loopback address (accepted when the API server allows loopback
//! endpoints, as `fairlead up`'s does). This is how `fairlead up` stands in for a chart's
//! Service in front of a component it runs in-process, so that what resolves Services
//! (webhooks named by `clientConfig.service`, routes to an echo backend) reaches it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A Service with one port leading to one local address.
#[derive(Clone, Copy, Debug)]
pub struct LocalService<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The name of its port.
    pub port_name: &'a str,
    /// The Service's port.
    pub port: u16,
    /// Where the process listens.
    pub addr: SocketAddr,
    /// UDP rather than TCP.
    pub udp: bool,
    /// The EndpointSlice's `endpointslice.kubernetes.io/managed-by`.
    pub managed_by: &'a str,
}

/// The Service `local` describes and the EndpointSlice (`<name>-local`) sending it to its
/// address.
pub fn service(local: &LocalService<'_>) -> (Service, EndpointSlice) {
    let protocol = Some(if local.udp { "UDP" } else { "TCP" }.to_owned());
    let service = Service {
        metadata: ObjectMeta {
            name: Some(local.name.to_owned()),
            namespace: Some(local.namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                name: Some(local.port_name.to_owned()),
                port: i32::from(local.port),
                target_port: Some(IntOrString::Int(i32::from(local.addr.port()))),
                protocol: protocol.clone(),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    };
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{}-local", local.name)),
            namespace: Some(local.namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (
                    "kubernetes.io/service-name".to_owned(),
                    local.name.to_owned(),
                ),
                (
                    "endpointslice.kubernetes.io/managed-by".to_owned(),
                    local.managed_by.to_owned(),
                ),
            ])),
            ..ObjectMeta::default()
        },
        address_type: if local.addr.is_ipv4() { "IPv4" } else { "IPv6" }.to_owned(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![local.addr.ip().to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                ..EndpointConditions::default()
            }),
            ..Endpoint::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some(local.port_name.to_owned()),
            port: Some(i32::from(local.addr.port())),
            protocol,
            ..EndpointPort::default()
        }]),
    };
    (service, slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_leads_to_the_local_address() {
        let (service, slice) = service(&LocalService {
            namespace: "d8-alb",
            name: "hook",
            port_name: "webhook",
            port: 443,
            addr: "127.0.0.1:9443".parse().unwrap(),
            udp: true,
            managed_by: "test",
        });
        let port = &service.spec.unwrap().ports.unwrap()[0];
        assert_eq!(
            (
                port.port,
                port.target_port.clone(),
                port.protocol.as_deref()
            ),
            (443, Some(IntOrString::Int(9443)), Some("UDP"))
        );
        assert_eq!(slice.metadata.name.as_deref(), Some("hook-local"));
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels["kubernetes.io/service-name"], "hook");
        assert_eq!(labels["endpointslice.kubernetes.io/managed-by"], "test");
        assert_eq!(slice.endpoints.unwrap()[0].addresses, ["127.0.0.1"]);
        assert_eq!(slice.ports.unwrap()[0].port, Some(9443));
    }
}
