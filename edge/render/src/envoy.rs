//! Envoy building blocks shared by the renderers (`listener`, `route`, `cluster`,
//! `endpoint`, `secret`), the shapes served to proxyless gRPC clients (`proxyless`) and
//! the bootstrap: `Any` packing, the ADS config source, socket addresses, the HTTP
//! connection manager.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use prost::{Message, Name};

pub use crate::pb::{any, duration};

/// A config source: over the ADS stream, v3.
pub fn ads() -> core::ConfigSource {
    core::ConfigSource {
        resource_api_version: core::ApiVersion::V3 as i32,
        config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

/// A socket address (TCP, or UDP when `udp`).
pub fn socket(address: &str, port: u16, udp: bool) -> core::Address {
    core::Address {
        address: Some(core::address::Address::SocketAddress(core::SocketAddress {
            protocol: if udp {
                core::socket_address::Protocol::Udp as i32
            } else {
                core::socket_address::Protocol::Tcp as i32
            },
            address: address.to_owned(),
            port_specifier: Some(core::socket_address::PortSpecifier::PortValue(u32::from(
                port,
            ))),
            ..Default::default()
        })),
    }
}

/// Envoy's TLS transport socket with `context` (a downstream or upstream TLS context).
pub(crate) fn tls_socket<M: Message + Name>(context: &M) -> core::TransportSocket {
    core::TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(any(
            context,
        ))),
    }
}

/// A connection manager that takes its routes from `route_config` over ADS, with the router
/// as its only HTTP filter (which is also what gRPC's xDS client requires of an API listener).
pub(crate) fn manager(stat_prefix: &str, route_config: &str) -> hcm::HttpConnectionManager {
    hcm::HttpConnectionManager {
        stat_prefix: stat_prefix.to_owned(),
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(
            hcm::Rds {
                config_source: Some(ads()),
                route_config_name: route_config.to_owned(),
            },
        )),
        http_filters: vec![hcm::HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(hcm::http_filter::ConfigType::TypedConfig(any(
                &Router::default(),
            ))),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The limits of an edge connection manager (Envoy's edge best practices), in one place:
/// the README's table lists them.
pub mod limits {
    use std::time::Duration;

    /// A stream with no activity for this long is reset.
    pub const STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
    /// A client must send its request headers within this time.
    pub const REQUEST_HEADERS_TIMEOUT: Duration = Duration::from_secs(10);
    /// A connection with no stream for this long is closed.
    pub const IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
    /// Request headers beyond this size are refused (431).
    pub const MAX_REQUEST_HEADERS_KB: u32 = 60;
    /// Concurrent HTTP/2 streams per connection.
    pub const MAX_CONCURRENT_STREAMS: u32 = 100;
}

/// The connection manager of a proxy's listener: [`manager`] as an edge proxy runs it. The
/// client's address is the connection's (`use_remote_address`: appended to
/// `x-forwarded-for`, `x-envoy-*` headers from outside dropped); the port of the `Host`
/// header is ignored when matching hostnames, as Gateway API says; WebSocket upgrades pass;
/// paths are normalized (dot segments, merged slashes, escaped slashes redirected unescaped);
/// header names with underscores are dropped, as ingress-nginx does; timeouts and header
/// sizes are bounded ([`limits`]); each request is logged and traced
/// ([`crate::telemetry`], over OTLP/HTTP when the instance asks). An instance's
/// `originalIPDetection` replaces `use_remote_address` ([`ClientAddress`]), here and only
/// here; its `geoIP` removes client-sent geolocation headers first and adds Envoy's GeoIP
/// filter before the router ([`geoip`]); its Gateway answers load balancers' health checks
/// ([`health_check`]).
pub(crate) fn edge_manager(
    stat_prefix: &str,
    route_config: &str,
    client: &ClientAddress<'_>,
    http3: bool,
    edge: &fairlead_edge_model::instance::Settings,
    filters: Vec<hcm::HttpFilter>,
) -> hcm::HttpConnectionManager {
    use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
    let (use_remote_address, original_ip_detection_extensions) = match client {
        ClientAddress::Connection => (true, Vec::new()),
        ClientAddress::ForwardedFor(trusted) => (false, vec![xff(trusted)]),
        ClientAddress::Header(name) => (false, vec![custom_header(name)]),
    };
    hcm::HttpConnectionManager {
        codec_type: if http3 {
            hcm::http_connection_manager::CodecType::Http3 as i32
        } else {
            hcm::http_connection_manager::CodecType::Auto as i32
        },
        http3_protocol_options: http3.then(core::Http3ProtocolOptions::default),
        use_remote_address: Some(BoolValue {
            value: use_remote_address,
        }),
        original_ip_detection_extensions,
        strip_port_mode: Some(hcm::http_connection_manager::StripPortMode::StripAnyHostPort(true)),
        // `app.example.com.` is `app.example.com` (a fully qualified name): matched to the
        // same virtual host, and its protections, not left to a wildcard or catch-all.
        strip_trailing_host_dot: true,
        upgrade_configs: vec![hcm::http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..Default::default()
        }],
        normalize_path: Some(BoolValue { value: true }),
        merge_slashes: true,
        path_with_escaped_slashes_action:
            hcm::http_connection_manager::PathWithEscapedSlashesAction::UnescapeAndRedirect as i32,
        common_http_protocol_options: Some(core::HttpProtocolOptions {
            idle_timeout: Some(duration(limits::IDLE_TIMEOUT)),
            headers_with_underscores_action:
                core::http_protocol_options::HeadersWithUnderscoresAction::DropHeader as i32,
            ..Default::default()
        }),
        http2_protocol_options: Some(core::Http2ProtocolOptions {
            max_concurrent_streams: Some(UInt32Value {
                value: limits::MAX_CONCURRENT_STREAMS,
            }),
            ..Default::default()
        }),
        max_request_headers_kb: Some(UInt32Value {
            value: limits::MAX_REQUEST_HEADERS_KB,
        }),
        stream_idle_timeout: Some(duration(limits::STREAM_IDLE_TIMEOUT)),
        request_headers_timeout: Some(duration(limits::REQUEST_HEADERS_TIMEOUT)),
        access_log: vec![crate::telemetry::access_log(stat_prefix)],
        tracing: Some(crate::telemetry::tracing(edge.otlp_http_uri.as_deref())),
        ..geoip(
            edge.geoip.as_ref(),
            health_check(
                edge.health_check,
                routes_filters(filters, manager(stat_prefix, route_config)),
            ),
        )
    }
}

/// The path a load balancer's health check asks of an instance's proxies.
pub const HEALTH_CHECK_PATH: &str = "/healthz";

/// `manager` with, for an instance's Gateway (`on`), Envoy's health check filter first:
/// `GET /healthz` addressed to an IP (as load balancers ask; an application's own
/// `/healthz` on a host name still reaches it) answers 200 while the proxy serves and 503
/// once it drains (the supervisor fails Envoy's health checks before draining).
fn health_check(on: bool, mut manager: hcm::HttpConnectionManager) -> hcm::HttpConnectionManager {
    use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
    use envoy_types::pb::envoy::extensions::filters::http::health_check::v3::HealthCheck;
    use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
    use envoy_types::pb::google::protobuf::BoolValue;
    if !on {
        return manager;
    }
    let string = |pattern: matcher::string_matcher::MatchPattern| {
        Some(header_matcher::HeaderMatchSpecifier::StringMatch(
            matcher::StringMatcher {
                match_pattern: Some(pattern),
                ..Default::default()
            },
        ))
    };
    let check = HealthCheck {
        pass_through_mode: Some(BoolValue { value: false }),
        headers: vec![
            HeaderMatcher {
                name: ":path".into(),
                header_match_specifier: string(matcher::string_matcher::MatchPattern::Exact(
                    HEALTH_CHECK_PATH.into(),
                )),
                ..Default::default()
            },
            HeaderMatcher {
                name: ":authority".into(),
                header_match_specifier: string(matcher::string_matcher::MatchPattern::SafeRegex(
                    matcher::RegexMatcher {
                        regex: r"(\d{1,3}\.){3}\d{1,3}(:\d+)?|\[[0-9a-fA-F:.]+\](:\d+)?".into(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    manager.http_filters.insert(
        0,
        hcm::HttpFilter {
            name: "envoy.filters.http.health_check".into(),
            config_type: Some(hcm::http_filter::ConfigType::TypedConfig(any(&check))),
            ..Default::default()
        },
    );
    manager
}

/// `manager` with `filters` (those its routes ask for) before the router.
fn routes_filters(
    filters: Vec<hcm::HttpFilter>,
    mut manager: hcm::HttpConnectionManager,
) -> hcm::HttpConnectionManager {
    let router = manager.http_filters.len().saturating_sub(1);
    manager.http_filters.splice(router..router, filters);
    manager
}

/// `manager` with what `geoip` asks: the named headers removed before anything reads the
/// request (early header mutation), and Envoy's GeoIP filter (MaxMind provider) first among
/// the HTTP filters when a header is served. The filter looks up the address the connection
/// manager settled on, and its databases are relative to Envoy's working directory
/// ([`Edition::proxy_path`](fairlead_edge_api::geoip::Edition::proxy_path)).
fn geoip(
    geoip: Option<&fairlead_edge_model::instance::GeoIp>,
    mut manager: hcm::HttpConnectionManager,
) -> hcm::HttpConnectionManager {
    use envoy_types::pb::envoy::config::common::mutation_rules::v3 as rules;
    use envoy_types::pb::envoy::extensions::filters::http::geoip::v3::Geoip;
    use envoy_types::pb::envoy::extensions::geoip_providers::common::v3 as common;
    use envoy_types::pb::envoy::extensions::geoip_providers::maxmind::v3::MaxMindConfig;
    use envoy_types::pb::envoy::extensions::http::early_header_mutation::header_mutation::v3::HeaderMutation;
    use fairlead_edge_api::geoip::{Field, Slot};
    let Some(geoip) = geoip else {
        return manager;
    };
    if !geoip.removed.is_empty() {
        manager.early_header_mutation_extensions = vec![core::TypedExtensionConfig {
            name: "envoy.http.early_header_mutation.header_mutation".into(),
            typed_config: Some(any(&HeaderMutation {
                mutations: geoip
                    .removed
                    .iter()
                    .map(|name| rules::HeaderMutation {
                        action: Some(rules::header_mutation::Action::Remove(name.clone())),
                    })
                    .collect(),
            })),
        }];
    }
    if !geoip.filters() {
        return manager;
    }
    let path = |slot| {
        geoip
            .databases
            .get(&slot)
            .map(|e| e.proxy_path())
            .unwrap_or_default()
    };
    let header = |field| geoip.headers.get(&field).cloned().unwrap_or_default();
    let keys = common::common_geoip_provider_config::GeolocationFieldKeys {
        country: header(Field::Country),
        city: header(Field::City),
        region: header(Field::Region),
        asn: header(Field::Asn),
        anon: header(Field::Anon),
        anon_vpn: header(Field::AnonVpn),
        anon_hosting: header(Field::AnonHosting),
        anon_tor: header(Field::AnonTor),
        anon_proxy: header(Field::AnonProxy),
        isp: header(Field::Isp),
        apple_private_relay: header(Field::ApplePrivateRelay),
        ..Default::default()
    };
    let provider = MaxMindConfig {
        city_db_path: path(Slot::City),
        asn_db_path: path(Slot::Asn),
        isp_db_path: path(Slot::Isp),
        anon_db_path: path(Slot::Anonymous),
        common_provider_config: Some(common::CommonGeoipProviderConfig {
            geo_field_keys: Some(keys),
            ..Default::default()
        }),
        ..Default::default()
    };
    let filter = hcm::HttpFilter {
        name: "envoy.filters.http.geoip".into(),
        config_type: Some(hcm::http_filter::ConfigType::TypedConfig(any(&Geoip {
            provider: Some(core::TypedExtensionConfig {
                name: "envoy.geoip_providers.maxmind".into(),
                typed_config: Some(any(&provider)),
            }),
            ..Default::default()
        }))),
        ..Default::default()
    };
    manager.http_filters.insert(0, filter);
    manager
}

/// Where a connection manager takes the client's address from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ClientAddress<'a> {
    /// The connection's peer (`use_remote_address`).
    Connection,
    /// `X-Forwarded-For`, its entries believed from these peers.
    ForwardedFor(&'a [fairlead_edge_model::instance::Cidr]),
    /// A header of one address (its filter chain matches only trusted peers).
    Header(&'a str),
}

/// An Envoy address range.
pub(crate) fn cidr(range: &fairlead_edge_model::instance::Cidr) -> core::CidrRange {
    use envoy_types::pb::google::protobuf::UInt32Value;
    core::CidrRange {
        address_prefix: range.address.clone(),
        prefix_len: Some(UInt32Value {
            value: range.prefix,
        }),
    }
}

/// An RBAC policy allowing every request from `ranges`, each client address made a principal
/// by `principal` (the connection's peer, or the client address the connection manager
/// settled on).
pub(crate) fn allow_from(
    ranges: &[fairlead_edge_model::instance::Cidr],
    principal: fn(
        core::CidrRange,
    ) -> envoy_types::pb::envoy::config::rbac::v3::principal::Identifier,
) -> envoy_types::pb::envoy::config::rbac::v3::Policy {
    use envoy_types::pb::envoy::config::rbac::v3 as rbac;
    rbac::Policy {
        permissions: vec![rbac::Permission {
            rule: Some(rbac::permission::Rule::Any(true)),
        }],
        principals: ranges
            .iter()
            .map(|range| rbac::Principal {
                identifier: Some(principal(cidr(range))),
            })
            .collect(),
        ..Default::default()
    }
}

/// Envoy's `xff` original-IP detection, trusting `trusted`'s entries.
fn xff(trusted: &[fairlead_edge_model::instance::Cidr]) -> core::TypedExtensionConfig {
    use envoy_types::pb::envoy::extensions::http::original_ip_detection::xff::v3 as xff;
    core::TypedExtensionConfig {
        name: "envoy.http.original_ip_detection.xff".into(),
        typed_config: Some(any(&xff::XffConfig {
            xff_trusted_cidrs: Some(xff::XffTrustedCidrs {
                cidrs: trusted.iter().map(cidr).collect(),
            }),
            ..Default::default()
        })),
    }
}

/// Envoy's `custom_header` original-IP detection from the header `name`.
fn custom_header(name: &str) -> core::TypedExtensionConfig {
    use envoy_types::pb::envoy::extensions::http::original_ip_detection::custom_header::v3 as custom;
    core::TypedExtensionConfig {
        name: "envoy.http.original_ip_detection.custom_header".into(),
        typed_config: Some(any(&custom::CustomHeaderConfig {
            header_name: name.to_owned(),
            ..Default::default()
        })),
    }
}

/// The network filter of [`edge_manager`] (speaking HTTP/3 on a QUIC listener).
pub(crate) fn connection_manager(
    stat_prefix: &str,
    route_config: &str,
    client: &ClientAddress<'_>,
    http3: bool,
    edge: &fairlead_edge_model::instance::Settings,
    filters: Vec<hcm::HttpFilter>,
) -> listener::Filter {
    listener::Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(listener::filter::ConfigType::TypedConfig(any(
            &edge_manager(stat_prefix, route_config, client, http3, edge, filters),
        ))),
    }
}
