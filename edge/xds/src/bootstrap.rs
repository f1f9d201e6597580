//! The Envoy bootstrap of `fairlead edge bootstrap`: the node names its Gateway
//! (`node.cluster = <namespace>/<name>`), listeners and clusters come over ADS from the xDS
//! server, which is the one static cluster (HTTP/2; over TLS when `--xds-ca` is given, with
//! the proxy's client certificate for mutual TLS). Its tests check it against Envoy's
//! validation rules.

use envoy_types::pb::envoy::config::bootstrap::v3::{Admin, Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    self as core, ApiConfigSource, ApiVersion, GrpcService, Node, api_config_source, grpc_service,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use envoy_types::pb::google::protobuf::Duration;

use crate::cli::BootstrapArgs;

/// The static cluster of the xDS server.
const XDS_CLUSTER: &str = "fairlead-xds";

use fairlead_edge_translate::envoy::{ads, socket};

/// Why no bootstrap could be made.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// `--xds` is not `host:port`.
    #[error("--xds {0:?} is not host:port")]
    Address(String),
    /// Rendering failed.
    #[error("rendering the bootstrap: {0}")]
    Render(String),
}

/// The bootstrap for `args`.
pub fn bootstrap(args: &BootstrapArgs) -> Result<Bootstrap, BootstrapError> {
    let (host, port) = args
        .xds
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.trim_matches(['[', ']']), p.parse::<u16>().ok()?)))
        .ok_or_else(|| BootstrapError::Address(args.xds.clone()))?;
    let name = args.gateway.rsplit('/').next().unwrap_or_default();
    let http2 = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            core::Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let transport_socket = args.xds_ca.as_ref().map(|ca| {
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
        // Absolute, so Envoy finds the files whatever directory it is started from.
        let file = |path: &std::path::Path| core::DataSource {
            specifier: Some(core::data_source::Specifier::Filename(
                std::path::absolute(path)
                    .unwrap_or_else(|_| path.to_path_buf())
                    .display()
                    .to_string(),
            )),
            ..Default::default()
        };
        let context = tls::UpstreamTlsContext {
            sni: host.to_owned(),
            common_tls_context: Some(tls::CommonTlsContext {
                alpn_protocols: vec!["h2".into()],
                tls_certificates: match (&args.xds_cert, &args.xds_key) {
                    (Some(cert), Some(key)) => vec![tls::TlsCertificate {
                        certificate_chain: Some(file(cert)),
                        private_key: Some(file(key)),
                        ..Default::default()
                    }],
                    _ => Vec::new(),
                },
                validation_context_type: Some(
                    tls::common_tls_context::ValidationContextType::ValidationContext(
                        tls::CertificateValidationContext {
                            trusted_ca: Some(file(ca)),
                            // The server's certificate must name the address dialled, not
                            // merely chain to the CA (which signs the proxies' too).
                            match_typed_subject_alt_names: vec![tls::SubjectAltNameMatcher {
                                san_type: if host.parse::<std::net::IpAddr>().is_ok() {
                                    tls::subject_alt_name_matcher::SanType::IpAddress
                                } else {
                                    tls::subject_alt_name_matcher::SanType::Dns
                                } as i32,
                                matcher: Some(
                                    envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher {
                                        match_pattern: Some(
                                            envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern::Exact(
                                                host.to_owned(),
                                            ),
                                        ),
                                        ..Default::default()
                                    },
                                ),
                                ..Default::default()
                            }],
                            ..Default::default()
                        },
                    ),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        core::TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(core::transport_socket::ConfigType::TypedConfig(
                fairlead_edge_translate::envoy::any(&context),
            )),
        }
    });
    let xds_cluster = Cluster {
        name: XDS_CLUSTER.into(),
        transport_socket,
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(if host
            .parse::<std::net::IpAddr>()
            .is_ok()
        {
            cluster::DiscoveryType::Static
        } else {
            cluster::DiscoveryType::StrictDns
        } as i32)),
        connect_timeout: Some(Duration {
            seconds: 5,
            nanos: 0,
        }),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_owned(),
            fairlead_edge_translate::envoy::any(&http2),
        )]
        .into(),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(socket(host, port, false)),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(Bootstrap {
        node: Some(Node {
            id: args.node_id.clone().unwrap_or_else(|| name.to_owned()),
            cluster: args.gateway.clone(),
            ..Default::default()
        }),
        admin: Some(Admin {
            address: Some(socket("127.0.0.1", args.admin_port, false)),
            ..Default::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                set_node_on_first_message_only: true,
                ..Default::default()
            }),
            cds_config: Some(ads()),
            lds_config: Some(ads()),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources {
            clusters: vec![xds_cluster],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The bootstrap as YAML.
pub fn yaml(args: &BootstrapArgs) -> Result<String, BootstrapError> {
    let json = fairlead_envoy_protos::to_json(&bootstrap(args)?)
        .map_err(|e| BootstrapError::Render(e.to_string()))?;
    serde_yaml_ng::to_string(&json).map_err(|e| BootstrapError::Render(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> BootstrapArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: BootstrapArgs,
        }
        let base = [
            "bootstrap",
            "--gateway",
            "infra/web",
            "--xds",
            "xds.d8-alb.svc:18000",
        ];
        Cli::parse_from(base.iter().chain(extra)).args
    }

    #[test]
    fn every_bootstrap_keeps_envoys_validation_rules() {
        for extra in [
            &[][..],
            &["--xds-ca", "ca.crt"],
            &[
                "--xds-ca",
                "ca.crt",
                "--xds-cert",
                "p.crt",
                "--xds-key",
                "p.key",
            ],
            &["--node-id", "web-0", "--admin-port", "19001"],
        ] {
            let bootstrap = bootstrap(&args(extra)).expect("a bootstrap");
            fairlead_envoy_protos::validate(&bootstrap)
                .unwrap_or_else(|e| panic!("{extra:?}: {e}"));
        }
        // The check has teeth: a cluster without a name breaks a rule.
        let mut broken = bootstrap(&args(&[])).expect("a bootstrap");
        broken.static_resources.as_mut().expect("static").clusters[0]
            .name
            .clear();
        assert!(fairlead_envoy_protos::validate(&broken).is_err());
    }
}
