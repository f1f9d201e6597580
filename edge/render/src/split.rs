//! A UDP listener's weighted backends ([`fairlead_edge_translate::ir::Split`]) as one Envoy
//! cluster: EDS like the others, with locality-weighted balancing, and an assignment with a
//! locality per backend (named after the backend's own cluster) holding that backend's
//! endpoints and weighted as its share. Envoy picks a locality by weight, then an endpoint in
//! it, for each new UDP session.

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::google::protobuf::UInt32Value;
use prost::Message;

use fairlead_edge_translate::ir::{Cluster, Split};

/// The split's cluster, encoded.
pub fn cluster(split: &Split) -> Vec<u8> {
    cluster::Cluster {
        common_lb_config: Some(cluster::cluster::CommonLbConfig {
            locality_config_specifier: Some(
                cluster::cluster::common_lb_config::LocalityConfigSpecifier::LocalityWeightedLbConfig(
                    cluster::cluster::common_lb_config::LocalityWeightedLbConfig {},
                ),
            ),
            ..Default::default()
        }),
        ..crate::cluster::eds(&split.name, &split.name)
    }
    .encode_to_vec()
}

/// The split's endpoints: each share's backend's endpoints (as its own cluster has them) in a
/// locality of their own, weighted as the share.
pub fn endpoints(split: &Split, clusters: &[Cluster]) -> Vec<u8> {
    let localities = split
        .shares
        .iter()
        .map(|(backend, weight)| {
            let hosts = clusters
                .iter()
                .find(|c| &c.backend == backend)
                .and_then(|c| Some(crate::endpoint::hosts(backend, c.endpoints.as_deref()?)))
                .unwrap_or_default();
            endpoint::LocalityLbEndpoints {
                locality: Some(core::Locality {
                    sub_zone: backend.cluster(),
                    ..Default::default()
                }),
                lb_endpoints: hosts
                    .into_iter()
                    .map(|((address, port), health)| {
                        crate::endpoint::lb_endpoint(&address, port, health)
                    })
                    .collect(),
                load_balancing_weight: Some(UInt32Value { value: *weight }),
                ..Default::default()
            }
        })
        .collect();
    endpoint::ClusterLoadAssignment {
        cluster_name: split.name.clone(),
        endpoints: localities,
        ..Default::default()
    }
    .encode_to_vec()
}
