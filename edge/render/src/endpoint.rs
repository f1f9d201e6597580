//! Envoy `ClusterLoadAssignment`s from the IR: the endpoints of a cluster from the
//! EndpointSlices of its Service, or none when the cluster must fail closed.

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::google::protobuf::UInt32Value;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use prost::Message;

use crate::envoy::socket;
use crate::wire;
use fairlead_edge_translate::backend::Backend;
use fairlead_edge_translate::ir::Cluster;

/// The endpoint assignment of `c`, encoded.
pub fn encode(c: &Cluster) -> Vec<u8> {
    match &c.endpoints {
        Some(slices) => from_slices(&c.backend, &c.name, slices),
        None => endpoint::ClusterLoadAssignment {
            cluster_name: c.name.clone(),
            ..Default::default()
        }
        .encode_to_vec(),
    }
}

/// The endpoints of a backend from the EndpointSlices of its Service: the slice port whose
/// name is the Service port's; `ready` (absent = true) → HEALTHY; terminating but `serving` →
/// DRAINING; anything else is left out, since Envoy still sends traffic to UNHEALTHY hosts
/// under its panic threshold. FQDN slices are skipped (EDS takes IP addresses).
/// Encoded as it is built (a decoded `LbEndpoint` is about 400 bytes): the cluster's name and
/// one locality holding every endpoint.
fn from_slices(backend: &Backend, cluster_name: &str, slices: &[Arc<EndpointSlice>]) -> Vec<u8> {
    let hosts = hosts(backend, slices);
    // gRPC's xDS client rejects a locality without its (even empty) `locality` field and
    // drops one without a weight.
    let mut locality = Vec::new();
    wire::message(1, &core::Locality::default(), &mut locality);
    for ((address, port), health) in hosts {
        wire::message(2, &lb_endpoint(&address, port, health), &mut locality);
    }
    wire::message(3, &UInt32Value { value: 1 }, &mut locality);
    let mut assignment = Vec::with_capacity(cluster_name.len() + locality.len() + 8);
    wire::string(1, cluster_name, &mut assignment);
    wire::bytes(2, &locality, &mut assignment);
    assignment
}

/// The endpoint at `address:port` in `health`.
pub(crate) fn lb_endpoint(
    address: &str,
    port: u16,
    health: core::HealthStatus,
) -> endpoint::LbEndpoint {
    endpoint::LbEndpoint {
        health_status: health as i32,
        host_identifier: Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(
            endpoint::Endpoint {
                address: Some(socket(address, port, false)),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// How many of `c`'s endpoints take new requests (HEALTHY in its assignment).
pub fn healthy(c: &Cluster) -> usize {
    c.endpoints.as_deref().map_or(0, |slices| {
        hosts(&c.backend, slices)
            .values()
            .filter(|h| **h == core::HealthStatus::Healthy)
            .count()
    })
}

/// The endpoints of `backend` in `slices`, by address and port, with their health.
pub(crate) fn hosts(
    backend: &Backend,
    slices: &[Arc<EndpointSlice>],
) -> BTreeMap<(String, u16), core::HealthStatus> {
    let mut hosts = BTreeMap::new();
    for slice in slices {
        // Envoy's EDS takes IP addresses only: an FQDN slice would fail the whole update.
        if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        let Some(port) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or_default() == &*backend.port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for e in slice.endpoints.iter().flatten() {
            let conditions = e.conditions.clone().unwrap_or_default();
            let health = if conditions.ready.unwrap_or(true) {
                core::HealthStatus::Healthy
            } else if conditions.terminating == Some(true) && conditions.serving == Some(true) {
                core::HealthStatus::Draining
            } else {
                continue;
            };
            for address in &e.addresses {
                hosts.insert((address.clone(), port), health);
            }
        }
    }
    hosts
}
