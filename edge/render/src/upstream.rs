//! How backends are reached, in Envoy, as a route's annotations ask
//! ([`fairlead_edge_translate::upstream`]): `session-affinity` is a cookie hash policy on the
//! route (Envoy sets the cookie when a request has none) and `hash-key: source-ip` a hash of
//! the client's address, both over a ring-hash cluster (an endpoint added moves only about
//! 1/N of the clients); `proxy-buffer-size` bounds the response headers the cluster takes
//! (beyond it, 502: an upstream protocol error); `backend-tls-settings` is the cluster's TLS when no BackendTLSPolicy
//! decides it.

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::envoy::{duration, tls_socket};
use fairlead_edge_model::annotations::{Affinity, Upstream};
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

/// What `variant` changes of a cluster: its balancing, its response header limit, and (when
/// no BackendTLSPolicy set one, `policy_tls`) its TLS.
pub fn cluster(variant: &Variant, policy_tls: bool, http2: bool, c: &mut cluster::Cluster) {
    if variant.ring_hash {
        c.lb_policy = cluster::cluster::LbPolicy::RingHash as i32;
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
