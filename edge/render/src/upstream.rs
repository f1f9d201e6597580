//! How backends are reached, in Envoy, as a route's annotations ask
//! ([`fairlead_edge_translate::upstream`]): `session-affinity` is a cookie hash policy on the
//! route (Envoy sets the cookie when a request has none) and `hash-key: source-ip` a hash of
//! the client's address, both over a ring-hash cluster whose ring holds
//! [`RING_POINTS_PER_ENDPOINT`] points of each endpoint that takes requests, so an endpoint
//! added keeps every other endpoint's points where they were and moves only the clients
//! that land on its own: about 1/N of them (Envoy's default ring of a fixed size would give
//! each endpoint fewer points and move about half); `proxy-buffer-size` bounds the response headers the cluster takes
//! (beyond it, 502: an upstream protocol error); `backend-tls-settings` is the cluster's TLS when no BackendTLSPolicy
//! decides it.

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::envoy::{duration, tls_socket};
use fairlead_edge_model::annotations::{Affinity, Upstream};
use fairlead_edge_translate::ir::Cluster;
use fairlead_edge_translate::upstream::{AnnotatedTls, Variant};

/// The route's hash policy for its affinity.
pub fn route_action(upstream: &Upstream, action: &mut route::RouteAction) {
    use route::route_action::hash_policy::{ConnectionProperties, Cookie, PolicySpecifier};
    let specifier = match &upstream.affinity {
        None => return,
        Some(Affinity::Cookie {
            name,
            path,
            ttl_seconds,
        }) => PolicySpecifier::Cookie(Cookie {
            name: name.clone(),
            // Set when absent; zero makes a session cookie.
            ttl: Some(duration(std::time::Duration::from_secs(u64::from(
                *ttl_seconds,
            )))),
            path: path.clone(),
            ..Default::default()
        }),
        Some(Affinity::SourceIp) => {
            PolicySpecifier::ConnectionProperties(ConnectionProperties { source_ip: true })
        }
    };
    action.hash_policy = vec![route::route_action::HashPolicy {
        policy_specifier: Some(specifier),
        terminal: true,
    }];
}

/// The points each endpoint has on a ring-hash cluster's ring.
pub const RING_POINTS_PER_ENDPOINT: u64 = 1024;

/// Envoy's largest ring.
const RING_MAX: u64 = 8 * 1024 * 1024;

/// How many endpoints a ring-hash cluster's ring is sized for: those that take requests;
/// `None` for other clusters.
pub fn ring_endpoints(c: &Cluster) -> Option<usize> {
    c.backend
        .variant
        .as_deref()
        .filter(|v| v.ring_hash)
        .map(|_| crate::endpoint::healthy(c))
}

/// What `variant` changes of a cluster: its balancing (a ring sized for `ring` endpoints),
/// its response header limit, and (when no BackendTLSPolicy set one, `policy_tls`) its TLS.
pub fn cluster(
    variant: &Variant,
    policy_tls: bool,
    http2: bool,
    ring: Option<usize>,
    c: &mut cluster::Cluster,
) {
    use envoy_types::pb::google::protobuf::UInt64Value;
    if let Some(healthy) = ring {
        c.lb_policy = cluster::cluster::LbPolicy::RingHash as i32;
        let endpoints = u64::try_from(healthy.max(1)).unwrap_or(u64::MAX);
        let size = RING_POINTS_PER_ENDPOINT
            .saturating_mul(endpoints)
            .min(RING_MAX);
        c.lb_config = Some(cluster::cluster::LbConfig::RingHashLbConfig(
            cluster::cluster::RingHashLbConfig {
                minimum_ring_size: Some(UInt64Value { value: size }),
                maximum_ring_size: Some(UInt64Value { value: size }),
                ..Default::default()
            },
        ));
    }
    if let (Some(t), false) = (&variant.tls, policy_tls) {
        c.transport_socket = Some(annotated_tls(t, http2));
    }
}

/// The HTTP protocol options of `variant`'s response header limit.
pub fn max_response_headers(variant: &Variant) -> Option<core::HttpProtocolOptions> {
    variant
        .max_response_headers_kb
        .map(|kb| core::HttpProtocolOptions {
            max_response_headers_kb: Some(UInt32Value { value: kb }),
            ..Default::default()
        })
}

/// The TLS of `backend-tls-settings`: SNI, the certificate checked against the trust
/// anchors given (the system's when none) unless `insecureSkipVerify`, a client certificate
/// for `MUTUAL`.
fn annotated_tls(t: &AnnotatedTls, http2: bool) -> core::TransportSocket {
    let inline = |bytes: &[u8]| core::DataSource {
        specifier: Some(core::data_source::Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    };
    let validation = (!t.insecure).then(|| {
        tls::common_tls_context::ValidationContextType::ValidationContext(
            tls::CertificateValidationContext {
                trusted_ca: Some(match &t.ca {
                    Some(pem) => inline(pem),
                    None => core::DataSource {
                        specifier: Some(core::data_source::Specifier::Filename(
                            fairlead_edge_model::names::SYSTEM_TRUST_STORE.to_owned(),
                        )),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            },
        )
    });
    let context = tls::UpstreamTlsContext {
        sni: t.sni.clone().unwrap_or_default(),
        common_tls_context: Some(tls::CommonTlsContext {
            alpn_protocols: if http2 { vec!["h2".into()] } else { Vec::new() },
            tls_certificates: t
                .client
                .iter()
                .map(|(chain, key)| tls::TlsCertificate {
                    certificate_chain: Some(inline(chain)),
                    private_key: Some(inline(key)),
                    ..Default::default()
                })
                .collect(),
            validation_context_type: validation,
            ..Default::default()
        }),
        ..Default::default()
    };
    tls_socket(&context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_holds_the_same_points_of_each_endpoint_however_many_there_are() {
        let variant = Variant {
            ring_hash: true,
            ..Variant::default()
        };
        let sizes = |endpoints: usize| {
            let mut c = cluster::Cluster::default();
            cluster(&variant, false, false, Some(endpoints), &mut c);
            let Some(cluster::cluster::LbConfig::RingHashLbConfig(ring)) = c.lb_config else {
                panic!("a ring");
            };
            (
                ring.minimum_ring_size.unwrap().value,
                ring.maximum_ring_size.unwrap().value,
            )
        };
        assert_eq!(sizes(2), (2048, 2048));
        assert_eq!(sizes(3), (3072, 3072), "an endpoint joins: its points only");
        assert_eq!(sizes(0), (1024, 1024));
        assert_eq!(sizes(1 << 20), (RING_MAX, RING_MAX), "Envoy's largest ring");
        let mut plain = cluster::Cluster::default();
        cluster(&Variant::default(), false, false, None, &mut plain);
        assert!(plain.lb_config.is_none());
    }
}
