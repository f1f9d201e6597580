//! Envoy `Cluster`s from the IR: EDS over ADS, a connect timeout, HTTP/2 upstream for
//! backends that speak it, TLS to the backend under a BackendTLSPolicy (SNI, trust anchors,
//! the names the certificate must carry), and the ALB's passive health check
//! ([`outlier_detection`]); what a route's annotations change of its clusters is
//! [`crate::upstream`]'s.

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use prost::Message;

use crate::envoy::{ads, any, duration, tls_socket};
use fairlead_edge_translate::backend_tls::{TrustAnchors, UpstreamTls};
use fairlead_edge_translate::ir::Cluster;

/// The cluster `c`, encoded. Envoy's Cluster is a large message (over 3 KB before any field
/// is set): built on the stack and encoded at once, never collected.
pub fn encode(c: &Cluster) -> Vec<u8> {
    let backend = &c.backend;
    let upstream = c.tls.as_ref();
    let mut out = cluster::Cluster {
        // Without a trust anchor there is no TLS to configure (Envoy refuses name checks
        // without a CA): the cluster gets no endpoints instead (`ir::Cluster::endpoints`).
        transport_socket: upstream
            .and_then(|u| Some((u, u.anchors.as_ref()?)))
            .map(|(u, anchors)| upstream_tls(u, anchors, backend.http2)),
        typed_extension_protocol_options: protocol_options(c),
        outlier_detection: Some(outlier_detection()),
        // Statistics by Gateway API object: `backend/<namespace>/<service>/<port>`.
        ..eds(&c.name, &format!("backend/{}", c.name))
    };
    if let Some(variant) = backend.variant.as_deref() {
        let ring = crate::upstream::ring_endpoints(c);
        crate::upstream::cluster(variant, upstream.is_some(), backend.http2, ring, &mut out);
    }
    out.encode_to_vec()
}

/// The ALB's passive health check of a backend's endpoints: one the proxy could not connect
/// to three times running is left out for 10 s (longer each time it is again), so requests
/// stop paying a connection attempt to a pod that is gone before its probe withdraws it; at
/// most half of the endpoints at once. Only the proxy's own connection failures count
/// (`split_external_local_origin_errors`): a backend's answers, 5xx included, never eject it,
/// as an application's errors are its own (ingress-nginx ejects no endpoint either); success
/// rate and failure percentage ejection are off (gRPC's proxyless clients, which read these
/// clusters too, would turn them on from the fields' defaults).
pub fn outlier_detection() -> cluster::OutlierDetection {
    use envoy_types::pb::google::protobuf::UInt32Value;
    let n = |value: u32| Some(UInt32Value { value });
    cluster::OutlierDetection {
        split_external_local_origin_errors: true,
        consecutive_local_origin_failure: n(3),
        enforcing_consecutive_local_origin_failure: n(100),
        enforcing_consecutive_5xx: n(0),
        enforcing_consecutive_gateway_failure: n(0),
        enforcing_success_rate: n(0),
        enforcing_local_origin_success_rate: n(0),
        enforcing_failure_percentage: n(0),
        enforcing_failure_percentage_local_origin: n(0),
        interval: Some(duration(std::time::Duration::from_secs(1))),
        base_ejection_time: Some(duration(std::time::Duration::from_secs(10))),
        max_ejection_percent: n(50),
        ..Default::default()
    }
}

/// A cluster named `name` whose endpoints come over EDS (on the ADS stream), its statistics
/// named `stat_name`, connecting within 5 s.
pub(crate) fn eds(name: &str, stat_name: &str) -> cluster::Cluster {
    cluster::Cluster {
        name: name.to_owned(),
        alt_stat_name: fairlead_edge_translate::http::stat_name(stat_name),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
            cluster::cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        connect_timeout: Some(duration(std::time::Duration::from_secs(5))),
        ..Default::default()
    }
}

/// The upstream HTTP protocol options of `c`: HTTP/2 for backends that speak it, the
/// response header limit its routes ask for; none when neither applies.
fn protocol_options(
    c: &Cluster,
) -> std::collections::HashMap<String, envoy_types::pb::google::protobuf::Any> {
    use envoy_types::pb::envoy::extensions::upstreams::http::v3 as upstream;
    use upstream::http_protocol_options::{
        ExplicitHttpConfig, UpstreamProtocolOptions, explicit_http_config::ProtocolConfig,
    };
    let common = c
        .backend
        .variant
        .as_deref()
        .and_then(crate::upstream::max_response_headers);
    if !c.backend.http2 && common.is_none() {
        return Default::default();
    }
    let protocol = if c.backend.http2 {
        ProtocolConfig::Http2ProtocolOptions(core::Http2ProtocolOptions::default())
    } else {
        ProtocolConfig::HttpProtocolOptions(core::Http1ProtocolOptions::default())
    };
    let options = upstream::HttpProtocolOptions {
        common_http_protocol_options: common,
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(protocol),
            },
        )),
        ..Default::default()
    };
    [(
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_owned(),
        any(&options),
    )]
    .into()
}

/// The TLS transport socket of a cluster under a BackendTLSPolicy: SNI, trust anchors, and
/// the names of which the certificate must carry one.
fn upstream_tls(u: &UpstreamTls, anchors: &TrustAnchors, http2: bool) -> core::TransportSocket {
    let trusted_ca = Some(core::DataSource {
        specifier: Some(match anchors {
            TrustAnchors::System => core::data_source::Specifier::Filename(
                fairlead_edge_model::names::SYSTEM_TRUST_STORE.to_owned(),
            ),
            TrustAnchors::Pem(pem) => core::data_source::Specifier::InlineBytes(pem.clone()),
        }),
        ..Default::default()
    });
    let match_typed_subject_alt_names = u
        .names
        .iter()
        .map(|n| {
            let (san_type, value) = match n {
                fairlead_edge_translate::backend_tls::Name::Dns(v) => {
                    (tls::subject_alt_name_matcher::SanType::Dns, v)
                }
                fairlead_edge_translate::backend_tls::Name::Uri(v) => {
                    (tls::subject_alt_name_matcher::SanType::Uri, v)
                }
            };
            tls::SubjectAltNameMatcher {
                san_type: san_type as i32,
                matcher: Some(matcher::StringMatcher {
                    match_pattern: Some(matcher::string_matcher::MatchPattern::Exact(
                        value.clone(),
                    )),
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let context = tls::UpstreamTlsContext {
        sni: u.sni.clone(),
        common_tls_context: Some(tls::CommonTlsContext {
            alpn_protocols: if http2 { vec!["h2".into()] } else { Vec::new() },
            tls_certificate_sds_secret_configs: u
                .client_certificate
                .iter()
                .map(|secret| tls::SdsSecretConfig {
                    name: secret.to_string(),
                    sds_config: Some(crate::envoy::ads()),
                })
                .collect(),
            validation_context_type: Some(
                tls::common_tls_context::ValidationContextType::ValidationContext(
                    tls::CertificateValidationContext {
                        trusted_ca,
                        match_typed_subject_alt_names,
                        ..Default::default()
                    },
                ),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    tls_socket(&context)
}
