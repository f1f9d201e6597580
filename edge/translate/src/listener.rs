//! Envoy `Listener`s from the IR: plain HTTP ports with one connection manager, ports of
//! filter chains picked by SNI (TLS terminated with certificates over SDS, or passed
//! through), and UDP ports proxying every datagram to one cluster.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

use crate::Encoded;
use crate::envoy::{ads, any, connection_manager, socket, tls_socket};
use crate::gateway::container_port;
use crate::ir::{Chain, Forward, Listener, Serves, Share};
use fairlead_key::ObjectKey;

/// The Envoy listener of `l`, bound to `address` (every address when `None`) at the
/// container port of its Gateway port ([`container_port`]).
pub fn encode(l: &Listener, address: Option<std::net::IpAddr>) -> Encoded {
    let bind = address.map_or_else(|| "0.0.0.0".to_owned(), |ip| ip.to_string());
    let port = container_port(l.port);
    let listener = match &l.serves {
        Serves::Http => listener::Listener {
            name: l.name.clone(),
            address: Some(socket(&bind, port, false)),
            filter_chains: vec![listener::FilterChain {
                filters: vec![connection_manager(&l.name, &l.name)],
                ..Default::default()
            }],
            ..Default::default()
        },
        Serves::Chains {
            inspect_tls,
            chains,
        } => listener::Listener {
            name: l.name.clone(),
            address: Some(socket(&bind, port, false)),
            listener_filters: if *inspect_tls {
                vec![listener::ListenerFilter {
                    name: "envoy.filters.listener.tls_inspector".into(),
                    config_type: Some(listener::listener_filter::ConfigType::TypedConfig(
                        any(&envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector::default()),
                    )),
                    ..Default::default()
                }]
            } else {
                Vec::new()
            },
            filter_chains: chains.iter().map(chain).collect(),
            ..Default::default()
        },
        Serves::Udp { cluster } => udp(&l.name, &bind, port, cluster),
    };
    Encoded::new(l.name.clone(), &listener)
}

/// A filter chain: matched by its server names (none: the default chain), terminating TLS
/// when it has certificates, then an HTTP connection manager or a TCP proxy.
fn chain(c: &Chain) -> listener::FilterChain {
    let filter = match &c.forward {
        Forward::Http { route_config } => connection_manager(route_config, route_config),
        Forward::Tcp {
            stat_prefix,
            clusters,
        } => tcp_proxy(stat_prefix, clusters),
    };
    listener::FilterChain {
        name: c.name.clone(),
        filter_chain_match: (!c.server_names.is_empty()).then(|| listener::FilterChainMatch {
            server_names: c.server_names.clone(),
            ..Default::default()
        }),
        filters: vec![filter],
        transport_socket: c.certificates.as_deref().map(downstream_tls),
        ..Default::default()
    }
}

/// TLS termination presenting `certificates` (fetched over SDS), offering HTTP/2 and 1.1.
fn downstream_tls(certificates: &[ObjectKey]) -> core::TransportSocket {
    let context = tls::DownstreamTlsContext {
        common_tls_context: Some(tls::CommonTlsContext {
            tls_certificate_sds_secret_configs: certificates
                .iter()
                .map(|secret| tls::SdsSecretConfig {
                    name: secret.to_string(),
                    sds_config: Some(ads()),
                })
                .collect(),
            alpn_protocols: vec!["h2".into(), "http/1.1".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    tls_socket(&context)
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
