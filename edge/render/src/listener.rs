//! Envoy `Listener`s from the IR: plain HTTP ports with one connection manager, ports of
//! filter chains picked by SNI (TLS terminated with certificates over SDS, or passed
//! through), and UDP ports proxying every datagram to one cluster.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

use crate::envoy::{ClientAddress, ads, any, cidr, connection_manager, socket, tls_socket};
use crate::features::ByConfig;
use fairlead_edge_model::Encoded;
use fairlead_edge_model::instance::{RealIp, Settings};
use fairlead_edge_model::names::container_port;
use fairlead_edge_translate::frontend::ClientValidation;
use fairlead_edge_translate::ir::{Chain, Forward, Listener, Serves, Share};
use fairlead_key::ObjectKey;

/// The Envoy listener of `l`, bound to `addresses` (every address when empty; the first as
/// its address, the others as additional ones) at the container port of its Gateway port
/// ([`container_port`]), with what its instance asks (`edge`, see
/// [`fairlead_edge_model::instance`]).
pub fn encode(
    l: &Listener,
    addresses: &[std::net::IpAddr],
    edge: &Settings,
    filters: &ByConfig<'_>,
) -> Encoded {
    let bind = bind_address(addresses);
    let port = container_port(l.port);
    let mut listener_filters = Vec::new();
    if edge.proxy_protocol && !matches!(l.serves, Serves::Udp { .. }) {
        listener_filters.push(listener_filter(
            "envoy.filters.listener.proxy_protocol",
            any(&envoy_types::pb::envoy::extensions::filters::listener::proxy_protocol::v3::ProxyProtocol::default()),
        ));
    }
    let listener = match &l.serves {
        Serves::Http => listener::Listener {
            name: l.name.clone(),
            address: Some(socket(&bind, port, false)),
            listener_filters,
            filter_chains: http_chains(
                &l.name,
                &l.name,
                (edge, filters),
                listener::FilterChain::default(),
                false,
            ),
            ..Default::default()
        },
        Serves::Chains {
            inspect_tls,
            chains,
        } => {
            if *inspect_tls {
                listener_filters.push(listener_filter(
                    "envoy.filters.listener.tls_inspector",
                    any(&envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector::default()),
                ));
            }
            // A plain TCP default chain beside TLS ones: a client that sends nothing first
            // (a server-speaks-first protocol) gets that chain once the inspector's wait
            // ends, instead of being closed.
            let plain_default = chains
                .iter()
                .any(|c| c.server_names.is_empty() && c.certificates.is_none());
            listener::Listener {
                name: l.name.clone(),
                address: Some(socket(&bind, port, false)),
                listener_filters,
                continue_on_listener_filters_timeout: *inspect_tls && plain_default,
                filter_chains: chains
                    .iter()
                    .flat_map(|c| chain(c, edge, filters))
                    .collect(),
                ..Default::default()
            }
        }
        Serves::Udp { cluster } => udp(&l.name, &bind, port, cluster),
    };
    let udp = matches!(l.serves, Serves::Udp { .. });
    let listener = listener::Listener {
        additional_addresses: additional_addresses(addresses, port, udp),
        ..listener
    };
    Encoded::new(l.name.clone(), &listener)
}

fn listener_filter(
    name: &str,
    config: envoy_types::pb::google::protobuf::Any,
) -> listener::ListenerFilter {
    listener::ListenerFilter {
        name: name.into(),
        config_type: Some(listener::listener_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// The RBAC network filter of `acceptRequestsFrom`: connections whose real peer is in none of
/// the ranges are closed.
fn accept_from(ranges: &[fairlead_edge_model::instance::Cidr]) -> listener::Filter {
    use envoy_types::pb::envoy::config::rbac::v3 as rbac;
    use envoy_types::pb::envoy::extensions::filters::network::rbac::v3 as network;
    let policy = crate::envoy::allow_from(ranges, rbac::principal::Identifier::DirectRemoteIp);
    listener::Filter {
        name: "envoy.filters.network.rbac".into(),
        config_type: Some(listener::filter::ConfigType::TypedConfig(any(
            &network::Rbac {
                stat_prefix: "accept_requests_from".into(),
                rules: Some(rbac::Rbac {
                    action: rbac::rbac::Action::Allow as i32,
                    policies: [("accept-requests-from".to_owned(), policy)].into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ))),
    }
}

/// `filter` behind the instance's `acceptRequestsFrom` filter, if it has one.
fn guarded(edge: &Settings, filter: listener::Filter) -> Vec<listener::Filter> {
    let mut filters = Vec::new();
    if !edge.accept_from.is_empty() {
        filters.push(accept_from(&edge.accept_from));
    }
    filters.push(filter);
    filters
}

/// The chains of an HTTP connection manager from `base` (its match and TLS): one, or with a
/// header naming the client's address, a chain believing it from the trusted peers only and
/// one for everyone else.
fn http_chains(
    stat_prefix: &str,
    route_config: &str,
    (edge, filters): (&Settings, &ByConfig<'_>),
    base: listener::FilterChain,
    http3: bool,
) -> Vec<listener::FilterChain> {
    let asked = filters.get(route_config).copied().unwrap_or_default();
    let manager = |client: ClientAddress<'_>| {
        let manager = connection_manager(
            stat_prefix,
            route_config,
            &client,
            http3,
            edge,
            asked.http_filters(),
        );
        // A QUIC chain takes the connection manager alone: it matches only the peers of
        // `acceptRequestsFrom` instead (below).
        if http3 {
            vec![manager]
        } else {
            guarded(edge, manager)
        }
    };
    let mut chains = match &edge.real_ip {
        None => vec![listener::FilterChain {
            filters: manager(ClientAddress::Connection),
            ..base
        }],
        Some(RealIp::ForwardedFor { trusted }) => vec![listener::FilterChain {
            filters: manager(ClientAddress::ForwardedFor(trusted)),
            ..base
        }],
        Some(RealIp::Header { name, trusted }) => {
            let mut matching = base.filter_chain_match.clone().unwrap_or_default();
            matching.direct_source_prefix_ranges = trusted.iter().map(cidr).collect();
            vec![
                listener::FilterChain {
                    name: if base.name.is_empty() {
                        String::new()
                    } else {
                        format!("{}-trusted", base.name)
                    },
                    filter_chain_match: Some(matching),
                    filters: manager(ClientAddress::Header(name)),
                    ..base.clone()
                },
                listener::FilterChain {
                    filters: manager(ClientAddress::Connection),
                    ..base
                },
            ]
        }
    };
    if http3 && !edge.accept_from.is_empty() {
        // Peers outside `acceptRequestsFrom` match no QUIC chain, and are refused.
        for chain in &mut chains {
            let matching = chain
                .filter_chain_match
                .get_or_insert_with(Default::default);
            if matching.direct_source_prefix_ranges.is_empty() {
                matching.direct_source_prefix_ranges = edge.accept_from.iter().map(cidr).collect();
            }
        }
    }
    chains
}

/// The chain of `c` without its filters: its name, its server names (none: the default
/// chain) and `transport` (TLS).
fn base_chain(c: &Chain, transport: Option<core::TransportSocket>) -> listener::FilterChain {
    listener::FilterChain {
        name: c.name.clone(),
        filter_chain_match: (!c.server_names.is_empty()).then(|| listener::FilterChainMatch {
            server_names: c.server_names.clone(),
            ..Default::default()
        }),
        transport_socket: transport,
        ..Default::default()
    }
}

/// The filter chains of `c`: matched by its server names (none: the default chain),
/// terminating TLS when it has certificates, then an HTTP connection manager (see
/// [`http_chains`]) or a TCP proxy.
fn chain(c: &Chain, edge: &Settings, filters: &ByConfig<'_>) -> Vec<listener::FilterChain> {
    let base = base_chain(
        c,
        c.certificates.as_deref().map(|certificates| {
            downstream_tls(certificates, c.http1_only, c.client_validation.as_deref())
        }),
    );
    match &c.forward {
        Forward::Http { route_config } => {
            http_chains(route_config, route_config, (edge, filters), base, false)
        }
        Forward::Tcp {
            stat_prefix,
            clusters,
        } => vec![listener::FilterChain {
            filters: guarded(edge, tcp_proxy(stat_prefix, clusters)),
            ..base
        }],
    }
}

/// The address a listener binds: the first of `addresses`, every address when none.
fn bind_address(addresses: &[std::net::IpAddr]) -> String {
    addresses
        .first()
        .map_or_else(|| "0.0.0.0".to_owned(), ToString::to_string)
}

/// The addresses a listener binds besides [`bind_address`]'s: the rest of `addresses`.
fn additional_addresses(
    addresses: &[std::net::IpAddr],
    port: u16,
    udp: bool,
) -> Vec<listener::AdditionalAddress> {
    addresses
        .iter()
        .skip(1)
        .map(|ip| listener::AdditionalAddress {
            address: Some(socket(&ip.to_string(), port, udp)),
            ..Default::default()
        })
        .collect()
}

/// The QUIC listener beside `l` when its instance asks for HTTP/3 and `l` terminates HTTPS:
/// the same UDP port, the chains that terminate TLS to a connection manager, speaking HTTP/3.
pub fn encode_quic(
    l: &Listener,
    addresses: &[std::net::IpAddr],
    edge: &Settings,
    filters: &ByConfig<'_>,
) -> Option<Encoded> {
    let Serves::Chains { chains, .. } = &l.serves else {
        return None;
    };
    if !edge.http3 {
        return None;
    }
    let filter_chains: Vec<listener::FilterChain> = chains
        .iter()
        .filter_map(|c| {
            let (Forward::Http { route_config }, Some(certificates)) =
                (&c.forward, c.certificates.as_deref())
            else {
                return None;
            };
            let base = base_chain(
                c,
                Some(quic_tls(certificates, c.client_validation.as_deref())),
            );
            Some(http_chains(
                route_config,
                route_config,
                (edge, filters),
                base,
                true,
            ))
        })
        .flatten()
        .collect();
    if filter_chains.is_empty() {
        return None;
    }
    let bind = bind_address(addresses);
    let name = format!("quic-{}", l.port);
    let listener = listener::Listener {
        name: name.clone(),
        address: Some(socket(&bind, container_port(l.port), true)),
        additional_addresses: additional_addresses(addresses, container_port(l.port), true),
        udp_listener_config: Some(listener::UdpListenerConfig {
            quic_options: Some(listener::QuicProtocolOptions::default()),
            ..Default::default()
        }),
        filter_chains,
        ..Default::default()
    };
    Some(Encoded::new(name, &listener))
}

/// The `alt-svc` value of each route configuration a QUIC listener serves (by name):
/// `h3=":<port>"; ma=86400`, the port the one clients dial ([`Settings::exposed`]).
pub fn alt_svc(
    listeners: &[Listener],
    edge: &Settings,
) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    if !edge.http3 {
        return out;
    }
    for l in listeners {
        let Serves::Chains { chains, .. } = &l.serves else {
            continue;
        };
        for c in chains {
            if let (Forward::Http { route_config }, Some(_)) = (&c.forward, &c.certificates) {
                out.insert(
                    route_config.clone(),
                    format!("h3=\":{}\"; ma=86400", edge.exposed(l.port)),
                );
            }
        }
    }
    out
}

/// QUIC's TLS presenting `certificates` (over SDS), offering HTTP/3, checking clients as
/// `validation` says.
fn quic_tls(
    certificates: &[ObjectKey],
    validation: Option<&ClientValidation>,
) -> core::TransportSocket {
    use envoy_types::pb::envoy::extensions::transport_sockets::quic::v3::QuicDownstreamTransport;
    let transport = QuicDownstreamTransport {
        downstream_tls_context: Some(downstream_context(
            certificates,
            vec!["h3".into()],
            validation,
        )),
        ..Default::default()
    };
    core::TransportSocket {
        name: "envoy.transport_sockets.quic".into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(any(
            &transport,
        ))),
    }
}

/// TLS termination presenting `certificates` (fetched over SDS), offering HTTP/2 and 1.1
/// (1.1 only: `http1_only`), checking clients as `validation` says.
fn downstream_tls(
    certificates: &[ObjectKey],
    http1_only: bool,
    validation: Option<&ClientValidation>,
) -> core::TransportSocket {
    let alpn = if http1_only {
        vec!["http/1.1".into()]
    } else {
        vec!["h2".into(), "http/1.1".into()]
    };
    tls_socket(&downstream_context(certificates, alpn, validation))
}

/// A TLS server presenting `certificates` (over SDS) offering `alpn`; with `validation`, it
/// asks clients for a certificate chaining to its CAs — a client without one is refused in
/// the handshake, or served anyway (untrusted chains accepted) on an insecure fallback.
fn downstream_context(
    certificates: &[ObjectKey],
    alpn: Vec<String>,
    validation: Option<&ClientValidation>,
) -> tls::DownstreamTlsContext {
    use tls::certificate_validation_context::TrustChainVerification;
    tls::DownstreamTlsContext {
        common_tls_context: Some(tls::CommonTlsContext {
            tls_certificate_sds_secret_configs: certificates
                .iter()
                .map(|secret| tls::SdsSecretConfig {
                    name: secret.to_string(),
                    sds_config: Some(ads()),
                })
                .collect(),
            alpn_protocols: alpn,
            validation_context_type: validation.map(|v| {
                tls::common_tls_context::ValidationContextType::ValidationContext(
                    tls::CertificateValidationContext {
                        trusted_ca: Some(core::DataSource {
                            specifier: Some(core::data_source::Specifier::InlineBytes(
                                v.ca.clone(),
                            )),
                            ..Default::default()
                        }),
                        trust_chain_verification: if v.insecure_fallback {
                            TrustChainVerification::AcceptUntrusted as i32
                        } else {
                            TrustChainVerification::VerifyTrustChain as i32
                        },
                        ..Default::default()
                    },
                )
            }),
            ..Default::default()
        }),
        require_client_certificate: validation.map(|v| {
            envoy_types::pb::google::protobuf::BoolValue {
                value: !v.insecure_fallback,
            }
        }),
        ..Default::default()
    }
}

fn tcp_proxy(stat_prefix: &str, clusters: &[Share]) -> listener::Filter {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
    let specifier = match clusters {
        [one] => tcp::tcp_proxy::ClusterSpecifier::Cluster(one.cluster.clone()),
        many => {
            tcp::tcp_proxy::ClusterSpecifier::WeightedClusters(tcp::tcp_proxy::WeightedCluster {
                clusters: many
                    .iter()
                    .map(|share| tcp::tcp_proxy::weighted_cluster::ClusterWeight {
                        name: share.cluster.clone(),
                        weight: share.weight,
                        ..Default::default()
                    })
                    .collect(),
            })
        }
    };
    listener::Filter {
        name: "envoy.filters.network.tcp_proxy".into(),
        config_type: Some(listener::filter::ConfigType::TypedConfig(any(
            &tcp::TcpProxy {
                stat_prefix: stat_prefix.to_owned(),
                cluster_specifier: Some(specifier),
                ..Default::default()
            },
        ))),
    }
}

/// A UDP listener sending every datagram to `cluster`.
fn udp(name: &str, bind: &str, port: u16, cluster: &str) -> listener::Listener {
    use envoy_types::pb::envoy::extensions::filters::udp::udp_proxy::v3 as udp;
    let cluster = cluster.to_owned();
    use envoy_types::pb::xds::core::v3::TypedExtensionConfig;
    use envoy_types::pb::xds::r#type::matcher::v3 as xds_matcher;
    // Every datagram takes the no-match action: the route to the cluster.
    let config = udp::UdpProxyConfig {
        stat_prefix: name.to_owned(),
        route_specifier: Some(udp::udp_proxy_config::RouteSpecifier::Matcher(
            xds_matcher::Matcher {
                on_no_match: Some(Box::new(xds_matcher::matcher::OnMatch {
                    on_match: Some(xds_matcher::matcher::on_match::OnMatch::Action(
                        TypedExtensionConfig {
                            name: "route".into(),
                            typed_config: Some(any(&udp::Route { cluster })),
                        },
                    )),
                    ..Default::default()
                })),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    listener::Listener {
        name: name.to_owned(),
        address: Some(socket(bind, port, true)),
        listener_filters: vec![listener::ListenerFilter {
            name: "envoy.filters.udp_listener.udp_proxy".into(),
            config_type: Some(listener::listener_filter::ConfigType::TypedConfig(any(
                &config,
            ))),
            ..Default::default()
        }],
        udp_listener_config: Some(listener::UdpListenerConfig::default()),
        ..Default::default()
    }
}
