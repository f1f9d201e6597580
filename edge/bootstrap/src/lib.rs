//! The Envoy bootstrap of an ALB proxy, a pure function of a plain [`Spec`] (what
//! `fairlead edge bootstrap` prints, and what the gateway controller will render into a
//! proxy's ConfigMap): the node names its Gateway (`node.cluster = <namespace>/<name>`),
//! listeners and clusters come over ADS from the xDS server — delta (incremental) xDS, so a
//! change sends only the resources it touched — which is the one static cluster
//! (HTTP/2; over TLS when the spec names a CA, with the proxy's client certificate for mutual
//! TLS). That certificate reaches Envoy through file-based SDS ([`sds_document`], a file
//! beside the bootstrap naming the certificate files), so a renewed certificate is picked up
//! without a restart; a certificate in the static bootstrap would be read once. Its tests
//! check it against Envoy's validation rules.

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
use fairlead_key::ObjectKey;

/// The static cluster of the xDS server.
const XDS_CLUSTER: &str = "fairlead-xds";

use fairlead_edge_render::envoy::{ads, socket};

/// What a proxy's bootstrap says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The Gateway the proxy serves (the node's cluster, as `namespace/name`).
    pub gateway: ObjectKey,
    /// The node id (by default the Gateway's name).
    pub node_id: Option<String>,
    /// The xDS server's host name or IP address.
    pub xds_host: String,
    /// The xDS server's port.
    pub xds_port: u16,
    /// The port of Envoy's admin interface, on 127.0.0.1.
    pub admin_port: u16,
    /// TLS to the xDS server; plaintext without.
    pub tls: Option<Tls>,
    /// The OTLP collector the proxy's spans go to; without one they are dropped (and
    /// counted).
    pub otlp: Option<Otlp>,
}

/// The collector of a proxy's spans, and where its CA certificate is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Otlp {
    /// The collector (host, port, OTLP/gRPC or OTLP/HTTP, TLS).
    pub collector: Collector,
    /// The file of the CA its certificate chains to (with TLS; the system's trust store
    /// without it).
    pub ca_file: Option<String>,
}

impl Otlp {
    /// An OTLP/gRPC collector at `host:port` in plaintext.
    pub fn grpc(host: String, port: u16) -> Self {
        Self {
            collector: Collector {
                host,
                port,
                http_path: None,
                tls: None,
            },
            ca_file: None,
        }
    }
}

pub use fairlead_edge_model::instance::Collector;

/// The files of TLS to the xDS server, as Envoy reads them (absolute paths, so Envoy finds
/// them from any directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// The CA bundle the server's certificate must chain to.
    pub ca: String,
    /// The proxy's certificate, for mutual TLS.
    pub client: Option<ClientCertificate>,
}

/// The proxy's client certificate: its files, and the SDS document that names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    /// The certificate chain, PEM.
    pub cert: String,
    /// Its private key, PEM.
    pub key: String,
    /// Where [`sds_document`] is written (`.json`); its directory is watched, so a document
    /// moved into place is read again.
    pub sds: String,
}

/// The name of the proxy's client certificate in its SDS document.
const CLIENT_SECRET: &str = "fairlead-xds-client";

/// The directory of `path` (Envoy watches directories for files moved into them).
fn directory(path: &str) -> String {
    std::path::Path::new(path)
        .parent()
        .map(|dir| dir.display().to_string())
        .filter(|dir| !dir.is_empty())
        .unwrap_or_else(|| ".".into())
}

/// The SDS document (a discovery response in JSON) that hands Envoy the proxy's client
/// certificate from its files. Envoy watches the certificate's directory, so files renewed
/// in place (written and renamed, as a Kubernetes Secret volume swaps them) are read again.
pub fn sds_document(client: &ClientCertificate) -> Result<String, BootstrapError> {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
    use prost::Name as _;
    let file = |path: &str| core::DataSource {
        specifier: Some(core::data_source::Specifier::Filename(path.to_owned())),
        ..Default::default()
    };
    let secret = tls::Secret {
        name: CLIENT_SECRET.into(),
        r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
            certificate_chain: Some(file(&client.cert)),
            private_key: Some(file(&client.key)),
            watched_directory: Some(core::WatchedDirectory {
                path: directory(&client.cert),
                ..Default::default()
            }),
            ..Default::default()
        })),
    };
    let mut resource = fairlead_envoy_protos::to_json(&secret)
        .map_err(|e| BootstrapError::Render(e.to_string()))?;
    if let serde_json::Value::Object(fields) = &mut resource {
        fields.insert("@type".into(), tls::Secret::type_url().into());
    }
    serde_json::to_string_pretty(&serde_json::json!({ "resources": [resource] }))
        .map_err(|e| BootstrapError::Render(e.to_string()))
}

/// Why no bootstrap could be made.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The xDS address is not `host:port`.
    #[error("--xds {0:?} is not host:port")]
    Address(String),
    /// Rendering failed.
    #[error("rendering the bootstrap: {0}")]
    Render(String),
}

/// `host:port` (IPv6 hosts in brackets) as host and port.
pub fn parse_address(text: &str) -> Result<(String, u16), BootstrapError> {
    text.rsplit_once(':')
        .and_then(|(h, p)| {
            Some((
                h.trim_matches(['[', ']']).to_owned(),
                p.parse::<u16>().ok()?,
            ))
        })
        .ok_or_else(|| BootstrapError::Address(text.to_owned()))
}

/// The bootstrap of `spec`.
pub fn bootstrap(spec: &Spec) -> Bootstrap {
    let (host, port) = (spec.xds_host.as_str(), spec.xds_port);
    let name = spec.gateway.name();
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
    let transport_socket = spec.tls.as_ref().map(|files| {
        use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
        let context = tls::UpstreamTlsContext {
            // SNI carries host names only (RFC 6066): an address dialled sends none, and the
            // server's certificate is checked for the address itself.
            sni: if is_address(host) {
                String::new()
            } else {
                host.to_owned()
            },
            common_tls_context: Some(tls::CommonTlsContext {
                alpn_protocols: vec!["h2".into()],
                tls_certificate_sds_secret_configs: files
                    .client
                    .iter()
                    .map(|client| tls::SdsSecretConfig {
                        name: CLIENT_SECRET.into(),
                        sds_config: Some(core::ConfigSource {
                            resource_api_version: ApiVersion::V3 as i32,
                            config_source_specifier: Some(
                                core::config_source::ConfigSourceSpecifier::PathConfigSource(
                                    core::PathConfigSource {
                                        path: client.sds.clone(),
                                        watched_directory: Some(core::WatchedDirectory {
                                            path: directory(&client.sds),
                                            ..Default::default()
                                        }),
                                        ..Default::default()
                                    },
                                ),
                            ),
                            ..Default::default()
                        }),
                    })
                    .collect(),
                // The server's certificate must name the address dialled, not merely chain
                // to the CA (which signs the proxies' too).
                validation_context_type: Some(validation(&files.ca, host)),
                ..Default::default()
            }),
            ..Default::default()
        };
        tls_socket(&context)
    });
    let xds_cluster = Cluster {
        name: XDS_CLUSTER.into(),
        transport_socket,
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(if is_address(host) {
            cluster::DiscoveryType::Static
        } else {
            cluster::DiscoveryType::StrictDns
        } as i32)),
        // A name resolving to both families (`localhost`: ::1 and 127.0.0.1) is dialled over
        // IPv4 first, where a server on 127.0.0.1 (as `fairlead up`'s) listens; IPv6 only when
        // the name has no IPv4 address.
        dns_lookup_family: cluster::DnsLookupFamily::V4Preferred as i32,
        connect_timeout: Some(Duration {
            seconds: 5,
            nanos: 0,
        }),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_owned(),
            fairlead_edge_render::envoy::any(&http2),
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
    let collector = otlp_cluster(spec.otlp.as_ref(), &http2);
    Bootstrap {
        node: Some(Node {
            id: spec.node_id.clone().unwrap_or_else(|| name.to_owned()),
            cluster: spec.gateway.to_string(),
            ..Default::default()
        }),
        admin: Some(Admin {
            address: Some(socket("127.0.0.1", spec.admin_port, false)),
            ..Default::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::DeltaGrpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            retry_policy: Some(reconnect()),
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
            clusters: vec![xds_cluster, collector],
            ..Default::default()
        }),
        overload_manager: Some(overload()),
        stats_config: Some(stats_config()),
        ..Default::default()
    }
}

/// The longest a proxy waits before dialling the xDS server again after its stream broke.
/// Envoy's own back-off grows to 30 s, so a proxy could stay on its last configuration for
/// half a minute after the control plane was back; bounded at a second, a restarted control
/// plane has every proxy again within a second of serving. Envoy jitters each wait (a random
/// share of the bound), so proxies do not dial all at once.
pub const RECONNECT_AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);

/// The first wait before dialling again ([`RECONNECT_AT_MOST`] bounds the doubling).
const RECONNECT_FIRST: std::time::Duration = std::time::Duration::from_millis(250);

/// The back-off of the xDS stream: from [`RECONNECT_FIRST`], doubling, at most
/// [`RECONNECT_AT_MOST`].
fn reconnect() -> core::RetryPolicy {
    let duration = |d: std::time::Duration| Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    };
    core::RetryPolicy {
        retry_back_off: Some(core::BackoffStrategy {
            base_interval: Some(duration(RECONNECT_FIRST)),
            max_interval: Some(duration(RECONNECT_AT_MOST)),
        }),
        ..Default::default()
    }
}

/// Whether `host` is an IP address rather than a name.
fn is_address(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
}

/// The Prometheus label of a route's statistics: the Gateway API rule they count
/// (`httproute/<namespace>/<name>/rule/<i>`, `grpcroute/…`), which the translator names each
/// route's `stat_prefix`. Envoy's own extractor of `vhost.*.route.$.**` gives it (a split on
/// dots, no regular expression): the bootstrap adds none for routes, as an extractor of its
/// own (a `std::regex` run on every route statistic Envoy makes) tripled the time Envoy took
/// to apply a change of 1,000 routes with statistics.
pub const ROUTE_TAG: &str = "envoy_route";

/// The Prometheus label of the GeoIP filter's statistics naming the database kind it looked
/// up or loaded (`city_db`, `isp_db`, `anon_db`, …).
pub const MAXMIND_DB_TAG: &str = "maxmind_db";

/// The Prometheus label of a MaxMind database's load statistics naming its file
/// (`geoip/GeoIP2-City.mmdb`).
pub const MAXMIND_FILE_TAG: &str = "maxmind_file";

/// Tags Envoy's default extractors miss: the database kind of the GeoIP filter's
/// `http.<prefix>.maxmind.<kind>.…` lookups and of `maxmind.<kind>.<file>.…` loads, and the
/// file of the latter — so `envoy_maxmind_db_build_epoch{maxmind_db, maxmind_file}` is one
/// series family whatever the database. Each begins with a fixed first name (`^http\.`,
/// `^maxmind\.`): Envoy runs such an extractor only on the statistics of that name, while one
/// without runs on every statistic it makes ([`TAGS`]).
fn stats_config() -> envoy_types::pb::envoy::config::metrics::v3::StatsConfig {
    use envoy_types::pb::envoy::config::metrics::v3 as metrics;
    metrics::StatsConfig {
        stats_tags: TAGS
            .iter()
            .map(|(name, regex)| metrics::TagSpecifier {
                tag_name: (*name).into(),
                tag_value: Some(metrics::tag_specifier::TagValue::Regex((*regex).into())),
            })
            .collect(),
        ..Default::default()
    }
}

/// The bootstrap's own tag extractors: (label, regular expression).
const TAGS: [(&str, &str); 3] = [
    (MAXMIND_DB_TAG, r"^http\.[^.]+\.maxmind\.((\w+_db)\.)"),
    (MAXMIND_DB_TAG, r"^maxmind\.((\w+_db)\.)"),
    (MAXMIND_FILE_TAG, r"^maxmind\.\w+_db\.((.+)\.)db_\w+$"),
];

/// Trust in `ca_file` for a server that must name `host` (a DNS name or an address).
fn validation(
    ca_file: &str,
    host: &str,
) -> envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::common_tls_context::ValidationContextType{
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
    use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
    tls::common_tls_context::ValidationContextType::ValidationContext(
        tls::CertificateValidationContext {
            trusted_ca: Some(core::DataSource {
                specifier: Some(core::data_source::Specifier::Filename(ca_file.to_owned())),
                ..Default::default()
            }),
            match_typed_subject_alt_names: vec![tls::SubjectAltNameMatcher {
                san_type: if is_address(host) {
                    tls::subject_alt_name_matcher::SanType::IpAddress
                } else {
                    tls::subject_alt_name_matcher::SanType::Dns
                } as i32,
                matcher: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::Exact(host.to_owned())),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        },
    )
}

/// The TLS transport socket of `context`.
fn tls_socket(
    context: &envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext,
) -> core::TransportSocket {
    core::TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(
            fairlead_edge_render::envoy::any(context),
        )),
    }
}

/// The cluster of the OTLP collector the translator's connection managers send spans to
/// (HTTP/2 for OTLP/gRPC; over TLS, checking the collector's certificate names its SNI,
/// when it asks for TLS); with no collector, a cluster without endpoints.
fn otlp_cluster(otlp: Option<&Otlp>, http2: &HttpProtocolOptions) -> Cluster {
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
    use fairlead_edge_model::names::OTLP_CLUSTER;
    let collector = otlp.map(|o| &o.collector);
    let by_name = collector.is_some_and(|c| c.host.parse::<std::net::IpAddr>().is_err());
    let grpc = collector.is_none_or(|c| c.http_path.is_none());
    let transport_socket = otlp.and_then(|o| {
        let given = o.collector.tls.as_ref()?;
        let ca = o
            .ca_file
            .as_deref()
            .unwrap_or(fairlead_edge_model::names::SYSTEM_TRUST_STORE);
        Some(tls_socket(&tls::UpstreamTlsContext {
            sni: given.sni.clone(),
            common_tls_context: Some(tls::CommonTlsContext {
                alpn_protocols: if grpc { vec!["h2".into()] } else { Vec::new() },
                validation_context_type: Some(validation(ca, &given.sni)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    });
    Cluster {
        name: OTLP_CLUSTER.into(),
        transport_socket,
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(if by_name {
            cluster::DiscoveryType::StrictDns
        } else {
            cluster::DiscoveryType::Static
        } as i32)),
        dns_lookup_family: cluster::DnsLookupFamily::V4Preferred as i32,
        connect_timeout: Some(Duration {
            seconds: 2,
            nanos: 0,
        }),
        typed_extension_protocol_options: if grpc {
            [(
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_owned(),
                fairlead_edge_render::envoy::any(http2),
            )]
            .into()
        } else {
            Default::default()
        },
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: OTLP_CLUSTER.into(),
            endpoints: collector
                .map(|c| LocalityLbEndpoints {
                    lb_endpoints: vec![LbEndpoint {
                        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                            address: Some(socket(&c.host, c.port, false)),
                            ..Default::default()
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `http://host:port` or `host:port` (an `OTEL_EXPORTER_OTLP_ENDPOINT`) as host and port;
/// OTLP/gRPC's port 4317 when none is given.
pub fn parse_otlp(text: &str) -> Result<(String, u16), BootstrapError> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .unwrap_or(text)
        .trim_end_matches('/');
    if rest.is_empty() || rest.contains('/') {
        return Err(BootstrapError::Address(text.to_owned()));
    }
    match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(':') => Ok((
            host.trim_matches(['[', ']']).to_owned(),
            port.parse()
                .map_err(|_| BootstrapError::Address(text.to_owned()))?,
        )),
        _ => Ok((rest.trim_matches(['[', ']']).to_owned(), 4317)),
    }
}

/// Downstream connections a proxy accepts at once, over all its listeners; beyond it Envoy
/// refuses new connections (and counts them) rather than run out of memory or descriptors.
pub const MAX_DOWNSTREAM_CONNECTIONS: i64 = 50_000;

/// The overload manager: the global downstream connection limit.
fn overload() -> envoy_types::pb::envoy::config::overload::v3::OverloadManager {
    use envoy_types::pb::envoy::config::overload::v3 as overload;
    use envoy_types::pb::envoy::extensions::resource_monitors::downstream_connections::v3::DownstreamConnectionsConfig;
    overload::OverloadManager {
        resource_monitors: vec![overload::ResourceMonitor {
            name: "envoy.resource_monitors.global_downstream_max_connections".into(),
            config_type: Some(overload::resource_monitor::ConfigType::TypedConfig(
                fairlead_edge_render::envoy::any(&DownstreamConnectionsConfig {
                    max_active_downstream_connections: MAX_DOWNSTREAM_CONNECTIONS,
                }),
            )),
        }],
        ..Default::default()
    }
}

/// The bootstrap as YAML.
pub fn yaml(spec: &Spec) -> Result<String, BootstrapError> {
    let json = fairlead_envoy_protos::to_json(&bootstrap(spec))
        .map_err(|e| BootstrapError::Render(e.to_string()))?;
    serde_yaml_ng::to_string(&json).map_err(|e| BootstrapError::Render(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(tls: Option<Tls>) -> Spec {
        Spec {
            gateway: ObjectKey::new("infra", "web"),
            node_id: None,
            xds_host: "xds.d8-alb.svc".into(),
            xds_port: 18000,
            admin_port: 19000,
            tls,
            otlp: None,
        }
    }

    /// Envoy picks the extractors to run on a statistic by its first name: an extractor's
    /// own is the word between `^` and the first `\.` of its expression; one without runs on
    /// every statistic Envoy makes. None of the bootstrap's may be of those, and routes are
    /// left to Envoy's own extractor.
    #[test]
    fn every_tag_extractor_runs_only_on_the_statistics_of_its_first_name() {
        for (label, regex) in TAGS {
            let first = regex
                .strip_prefix('^')
                .and_then(|r| r.split_once(r"\."))
                .map(|(word, _)| word);
            assert!(
                first.is_some_and(|w| {
                    !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                }),
                "{label}: {regex} has no first name, so Envoy would run it on every statistic"
            );
            assert_ne!(label, ROUTE_TAG);
            assert!(
                !regex.starts_with(r"^vhost\."),
                "{regex}: routes are Envoy's own"
            );
        }
    }

    #[test]
    fn every_bootstrap_keeps_envoys_validation_rules() {
        let ca = || "/etc/xds/ca.crt".to_owned();
        for spec in [
            spec(None),
            spec(Some(Tls {
                ca: ca(),
                client: None,
            })),
            spec(Some(Tls {
                ca: ca(),
                client: Some(ClientCertificate {
                    cert: "/etc/xds/p.crt".into(),
                    key: "/etc/xds/p.key".into(),
                    sds: "/etc/envoy/xds-client.json".into(),
                }),
            })),
            Spec {
                node_id: Some("web-0".into()),
                admin_port: 19001,
                xds_host: "127.0.0.1".into(),
                ..spec(None)
            },
        ] {
            fairlead_envoy_protos::validate(&bootstrap(&spec))
                .unwrap_or_else(|e| panic!("{spec:?}: {e}"));
        }
        // The check has teeth: a cluster without a name breaks a rule.
        let mut broken = bootstrap(&spec(None));
        broken.static_resources.as_mut().expect("static").clusters[0]
            .name
            .clear();
        assert!(fairlead_envoy_protos::validate(&broken).is_err());
    }

    /// The SDS document is a discovery response whose one Secret is the one the bootstrap
    /// names, reading the certificate files and watching their directory.
    #[test]
    fn the_client_certificate_comes_from_an_sds_document() {
        let client = ClientCertificate {
            cert: "/etc/xds/p.crt".into(),
            key: "/etc/xds/p.key".into(),
            sds: "/etc/envoy/xds-client.json".into(),
        };
        let document: serde_json::Value =
            serde_json::from_str(&sds_document(&client).unwrap()).unwrap();
        let secret = &document["resources"][0];
        assert_eq!(
            secret["@type"],
            "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
        );
        assert_eq!(secret["name"], CLIENT_SECRET);
        let certificate = &secret["tlsCertificate"];
        assert_eq!(
            certificate["certificateChain"]["filename"],
            "/etc/xds/p.crt"
        );
        assert_eq!(certificate["privateKey"]["filename"], "/etc/xds/p.key");
        assert_eq!(certificate["watchedDirectory"]["path"], "/etc/xds");
        let bootstrap = serde_json::to_string(
            &fairlead_envoy_protos::to_json(&bootstrap(&spec(Some(Tls {
                ca: "/etc/xds/ca.crt".into(),
                client: Some(client),
            }))))
            .unwrap(),
        )
        .unwrap();
        assert!(
            bootstrap.contains(r#""path":"/etc/envoy/xds-client.json""#)
                && bootstrap.contains(&format!(r#""name":"{CLIENT_SECRET}""#))
                && !bootstrap.contains("p.crt"),
            "the bootstrap names the SDS document, not the files: {bootstrap}"
        );
    }

    /// SNI names a host (RFC 6066 allows no addresses): a server dialled by address gets
    /// none, and its certificate is checked for the address.
    #[test]
    fn sni_is_sent_for_a_name_and_never_for_an_address() {
        let tls = || {
            Some(Tls {
                ca: "/etc/xds/ca.crt".into(),
                client: None,
            })
        };
        for (host, sni, san) in [
            ("xds.d8-alb.svc", Some("xds.d8-alb.svc"), "DNS"),
            ("127.0.0.1", None, "IP_ADDRESS"),
            ("::1", None, "IP_ADDRESS"),
        ] {
            let bootstrap = fairlead_envoy_protos::to_json(&bootstrap(&Spec {
                xds_host: host.into(),
                ..spec(tls())
            }))
            .unwrap();
            let context =
                &bootstrap["staticResources"]["clusters"][0]["transportSocket"]["typedConfig"];
            assert_eq!(context["sni"].as_str(), sni, "{host}: {context}");
            let matcher =
                &context["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"][0];
            assert_eq!(matcher["sanType"], san, "{host}");
            assert_eq!(matcher["matcher"]["exact"], host, "{host}");
        }
    }

    /// The xDS stream is dialled again at most a second after it broke (Envoy's default
    /// back-off grows to 30 s).
    #[test]
    fn the_xds_stream_is_dialled_again_within_a_second() {
        let bootstrap = fairlead_envoy_protos::to_json(&bootstrap(&spec(None))).unwrap();
        let back_off = &bootstrap["dynamicResources"]["adsConfig"]["grpcServices"][0]["envoyGrpc"]
            ["retryPolicy"]["retryBackOff"];
        assert_eq!(back_off["baseInterval"], "0.250s", "{bootstrap}");
        assert_eq!(back_off["maxInterval"], "1s", "{bootstrap}");
    }

    #[test]
    fn spans_go_to_the_collector_given() {
        let with = Spec {
            otlp: Some(Otlp::grpc("otel.monitoring.svc".into(), 4317)),
            ..spec(None)
        };
        let json = fairlead_envoy_protos::to_json(&bootstrap(&with)).unwrap();
        let collector = &json["staticResources"]["clusters"][1];
        assert_eq!(collector["name"], fairlead_edge_model::names::OTLP_CLUSTER);
        assert_eq!(collector["type"], "STRICT_DNS");
        assert!(collector.get("transportSocket").is_none());
        assert!(
            collector["typedExtensionProtocolOptions"].is_object(),
            "OTLP/gRPC is HTTP/2"
        );
        fairlead_envoy_protos::validate(&bootstrap(&with)).unwrap();
        // OTLP/HTTP over TLS: HTTP/1.1 (no HTTP/2 options, no ALPN), the certificate checked
        // against the CA file for the SNI.
        let https = Spec {
            otlp: Some(Otlp {
                collector: Collector {
                    host: "10.0.0.5".into(),
                    port: 4318,
                    http_path: Some("/v1/traces".into()),
                    tls: Some(fairlead_edge_model::instance::CollectorTls {
                        sni: "otel.example.com".into(),
                        ca_secret: Some("otel-ca".into()),
                    }),
                },
                ca_file: Some("otlp-ca/cacert".into()),
            }),
            ..spec(None)
        };
        fairlead_envoy_protos::validate(&bootstrap(&https)).unwrap();
        let json = fairlead_envoy_protos::to_json(&bootstrap(&https)).unwrap();
        let collector = &json["staticResources"]["clusters"][1];
        assert_eq!(collector["type"], "STATIC");
        assert!(collector.get("typedExtensionProtocolOptions").is_none());
        let context = &collector["transportSocket"]["typedConfig"];
        assert_eq!(context["sni"], "otel.example.com");
        let validation = &context["commonTlsContext"]["validationContext"];
        assert_eq!(validation["trustedCa"]["filename"], "otlp-ca/cacert");
        assert_eq!(
            validation["matchTypedSubjectAltNames"][0]["matcher"]["exact"],
            "otel.example.com"
        );
        assert!(context["commonTlsContext"].get("alpnProtocols").is_none());
        let without = fairlead_envoy_protos::to_json(&bootstrap(&spec(None))).unwrap();
        assert!(
            without["staticResources"]["clusters"][1]["loadAssignment"]
                .get("endpoints")
                .is_none(),
            "no collector, no endpoints: {without}"
        );
        assert_eq!(
            parse_otlp("http://127.0.0.1:4317").unwrap(),
            ("127.0.0.1".to_owned(), 4317)
        );
        assert_eq!(
            parse_otlp("otel.example.com").unwrap(),
            ("otel.example.com".to_owned(), 4317)
        );
        assert!(parse_otlp("http://x:1/v1/traces").is_err());
    }

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(
            parse_address("[::1]:18000").unwrap(),
            ("::1".to_owned(), 18000)
        );
        assert!(parse_address("nowhere").is_err());
    }
}
