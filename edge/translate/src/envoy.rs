//! The per-Gateway IR to Envoy resources. Gateway listeners that share a port share one Envoy
//! listener: plain HTTP ports get one connection manager whose route configuration has a
//! virtual host per hostname; HTTPS ports get a filter chain per Gateway listener, picked by
//! SNI, each with its certificates over SDS and its own route configuration. Clusters are one
//! per Service port, with endpoints over EDS from the EndpointSlices of the Service.
//!
//! Names: listeners `<protocol>-<port>`, route configurations `<protocol>-<port>` (HTTPS:
//! `https-<port>-<listener>`), clusters `<namespace>/<service>/<port>`, secrets
//! `<namespace>/<name>`. Every name is unique within one Gateway's snapshot.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration, UInt32Value};
use prost::{Message, Name};

use crate::attach::{Attached, GatewayState};
use crate::backend::Backend;
use crate::backend_tls::{Policies, TrustAnchors, UpstreamTls};
use crate::gateway::{Protocol, ResolvedListener};
use crate::http::{Action, Entry, PathMatch, ValueMatch};
use crate::memo::{EncodedRoutes, Memo, through};
use crate::model::{HeaderModifier, Input};
use crate::wire;
use crate::{Encoded, Resources};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use std::sync::Arc;

/// Packs a message into an `Any`.
pub fn any<M: Message + Name>(message: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    }
}

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

fn duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or_default(),
    }
}

/// A connection manager that takes its routes from `route_config` over ADS, with the router
/// as its only HTTP filter (which is also what gRPC's xDS client requires of an API listener).
fn manager(stat_prefix: &str, route_config: &str) -> hcm::HttpConnectionManager {
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

/// The network filter of [`manager`].
fn connection_manager(stat_prefix: &str, route_config: &str) -> listener::Filter {
    listener::Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(listener::filter::ConfigType::TypedConfig(any(&manager(
            stat_prefix,
            route_config,
        )))),
    }
}

/// The suffix of the route configurations shaped for proxyless gRPC clients.
pub const GRPC_SHAPED: &str = "/grpc";

/// The listener a proxyless gRPC client asks for when it dials `xds:///host:port`: an API
/// listener whose routes are those of the Gateway's plain HTTP listener on `port` (gRFC
/// A27/A28), shaped for gRPC (see [`grpc_route_configuration`]). `None` when the name is not
/// `host:port` or the Gateway serves no HTTP there.
pub fn api_listener(name: &str, has_routes: impl Fn(&str) -> bool) -> Option<listener::Listener> {
    let (host, port) = name.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let route_config = format!("{}-{port}", Protocol::Http.name());
    if host.is_empty() || !has_routes(&route_config) {
        return None;
    }
    let shaped = format!("{route_config}{GRPC_SHAPED}");
    Some(listener::Listener {
        name: name.to_owned(),
        api_listener: Some(listener::ApiListener {
            api_listener: Some(any(&manager(&route_config, &shaped))),
        }),
        ..Default::default()
    })
}

/// A route configuration `<name>/grpc`: the configuration `<name>` with what gRPC's xDS client
/// does not implement rewritten into what it does: segment prefixes (`path_separated_prefix`)
/// become the equivalent expressions. Matching is otherwise the same, so a gRPC client and
/// Envoy route the same request the same way.
pub fn grpc_route_configuration(
    name: &str,
    routes: impl Fn(&str) -> Option<route::RouteConfiguration>,
) -> Option<route::RouteConfiguration> {
    let base = name.strip_suffix(GRPC_SHAPED)?;
    let mut config = routes(base)?;
    config.name = name.to_owned();
    for host in &mut config.virtual_hosts {
        for r in &mut host.routes {
            if let Some(m) = r.r#match.as_mut()
                && let Some(route::route_match::PathSpecifier::PathSeparatedPrefix(prefix)) =
                    &m.path_specifier
            {
                m.path_specifier = Some(route::route_match::PathSpecifier::SafeRegex(
                    matcher::RegexMatcher {
                        regex: format!("{}(/.*)?", regex::escape(prefix)),
                        ..Default::default()
                    },
                ));
            }
        }
    }
    Some(config)
}

/// The Envoy resources of one Gateway, and the backends they reach; with a `memo`, the
/// Envoy routes, clusters and endpoint assignments whose inputs did not change are taken from
/// it.
pub(crate) fn resources(
    state: &GatewayState<'_>,
    input: &Input,
    tls: &Policies,
    mut memo: Option<&mut Memo>,
) -> (Resources, Vec<Backend>) {
    let mut out = Resources::default();
    let mut backends: BTreeSet<Backend> = BTreeSet::new();
    let mut secrets: BTreeSet<String> = BTreeSet::new();
    // Envoy listeners by (port, UDP): HTTPS and TLS listeners of one port share one Envoy
    // listener (chains picked by SNI); other protocols on one TCP port are conflicts.
    let mut ports: BTreeMap<(u16, bool), Vec<usize>> = BTreeMap::new();
    for (i, l) in state.listeners.iter().enumerate() {
        if let (true, Some(protocol)) = (l.programmed(), l.protocol) {
            ports
                .entry((l.port, protocol == Protocol::Udp))
                .or_default()
                .push(i);
        }
    }
    for ((port, udp), indices) in &ports {
        let first = indices
            .iter()
            .filter_map(|i| state.listeners[*i].protocol)
            .min()
            .unwrap_or(Protocol::Tcp);
        let name = format!("{}-{port}", first.name());
        if *udp {
            if let Some(listener) = udp_listener(&name, *port, indices, state, &mut backends) {
                out.listeners.push(Encoded::new(name, &listener));
            }
            continue;
        }
        if first == Protocol::Http {
            let listeners: Vec<(Option<&str>, Vec<&Attached>)> = indices
                .iter()
                .map(|i| {
                    (
                        state.listeners[*i].hostname.as_deref(),
                        state.http[*i].iter().collect(),
                    )
                })
                .collect();
            let origin = Origin {
                port: *port,
                secure: false,
            };
            out.routes.push(route_configuration(
                &name,
                origin,
                &listeners,
                &mut backends,
                memo.as_deref_mut().map(|m| &mut m.encoded),
            ));
            let listener = listener::Listener {
                name: name.clone(),
                address: Some(socket("0.0.0.0", *port, false)),
                filter_chains: vec![listener::FilterChain {
                    filters: vec![connection_manager(&name, &name)],
                    ..Default::default()
                }],
                ..Default::default()
            };
            out.listeners.push(Encoded::new(name, &listener));
            continue;
        }
        let mut chains = Vec::new();
        for i in indices {
            let l = &state.listeners[*i];
            match l.protocol {
                Some(Protocol::Https) => {
                    let config = format!("{name}-{}", l.envoy_name());
                    let listeners = [(l.hostname.as_deref(), state.http[*i].iter().collect())];
                    let origin = Origin {
                        port: *port,
                        secure: true,
                    };
                    out.routes.push(route_configuration(
                        &config,
                        origin,
                        &listeners,
                        &mut backends,
                        memo.as_deref_mut().map(|m| &mut m.encoded),
                    ));
                    secrets.extend(l.certificates.iter().cloned());
                    chains.push(tls_chain(l, connection_manager(&config, &config)));
                }
                Some(Protocol::Tls | Protocol::Tcp) => {
                    chains.extend(stream_chains(&name, l, &state.streams[*i], &mut backends));
                    if !l.passthrough {
                        secrets.extend(l.certificates.iter().cloned());
                    }
                }
                _ => {}
            }
        }
        // Each server name belongs to the first chain by precedence that names it (Envoy
        // rejects a listener whose chains overlap): later chains lose the names already
        // taken, and a chain left with none is dropped. One chain without names is the
        // default and goes last.
        let mut taken: BTreeSet<String> = BTreeSet::new();
        let mut default_taken = false;
        chains.retain_mut(
            |c: &mut listener::FilterChain| match c.filter_chain_match.as_mut() {
                Some(m) if !m.server_names.is_empty() => {
                    m.server_names.retain(|n| taken.insert(n.clone()));
                    !m.server_names.is_empty()
                }
                _ => !std::mem::replace(&mut default_taken, true),
            },
        );
        chains.sort_by_key(|c: &listener::FilterChain| {
            c.filter_chain_match
                .as_ref()
                .is_none_or(|m| m.server_names.is_empty())
        });
        if chains.is_empty() {
            continue;
        }
        let sni = chains.iter().any(|c| {
            c.filter_chain_match
                .as_ref()
                .is_some_and(|m| !m.server_names.is_empty())
        }) || chains.iter().any(|c| c.transport_socket.is_some());
        let listener = listener::Listener {
            name: name.clone(),
            address: Some(socket("0.0.0.0", *port, false)),
            listener_filters: if sni {
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
            filter_chains: chains,
            ..Default::default()
        };
        out.listeners.push(Encoded::new(name, &listener));
    }
    out.clusters.reserve_exact(backends.len());
    out.endpoints.reserve_exact(backends.len());
    for backend in &backends {
        let upstream = tls.for_backend(backend);
        let name = backend.cluster();
        // Envoy's Cluster is a large message (over 3 KB before any field is set): built on
        // the stack and encoded at once, never collected.
        let cluster = through(
            memo.as_deref_mut().map(|m| &mut m.clusters),
            || backend.clone(),
            |(made_with, _)| made_with.as_ref() == upstream,
            || {
                let cluster = cluster_for(backend, name.clone(), upstream);
                (upstream.cloned(), cluster.encode_to_vec())
            },
            |(_, bytes)| bytes.clone(),
        );
        out.clusters.push(Encoded {
            name: name.clone(),
            bytes: cluster,
        });
        // No valid trust anchor: no endpoint, so requests fail (503) instead of going out
        // unchecked.
        let slices: Option<Vec<Arc<EndpointSlice>>> =
            upstream.is_none_or(|u| u.anchors.is_some()).then(|| {
                input
                    .slices_of(&backend.namespace, &backend.service)
                    .cloned()
                    .collect()
            });
        let assignment = through(
            memo.as_deref_mut().map(|m| &mut m.endpoints),
            || backend.clone(),
            |(made_from, _)| match (made_from, &slices) {
                (Some(a), Some(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| crate::memo::same(a, b))
                }
                (None, None) => true,
                _ => false,
            },
            || {
                let bytes = match &slices {
                    Some(slices) => endpoints_for(backend, &name, slices),
                    None => endpoint::ClusterLoadAssignment {
                        cluster_name: name.clone(),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                };
                (slices.clone(), bytes)
            },
            |(_, bytes)| bytes.clone(),
        );
        out.endpoints.push(Encoded {
            name,
            bytes: assignment,
        });
    }
    for key in &secrets {
        if let Some((namespace, name)) = key.split_once('/')
            && let Some(secret) = crate::gateway::tls_secret(input, namespace, name)
        {
            let data = secret.data.clone().unwrap_or_default();
            let bytes = |k: &str| core::DataSource {
                specifier: Some(core::data_source::Specifier::InlineBytes(
                    data.get(k).map(|v| v.0.clone()).unwrap_or_default(),
                )),
                ..Default::default()
            };
            let secret = tls::Secret {
                name: key.clone(),
                r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
                    certificate_chain: Some(bytes("tls.crt")),
                    private_key: Some(bytes("tls.key")),
                    ..Default::default()
                })),
            };
            out.secrets.push(Encoded::new(key.clone(), &secret));
        }
    }
    (out, backends.into_iter().collect())
}

/// A chain that terminates TLS with the listener's certificates, then runs `filter`.
fn tls_chain(l: &ResolvedListener, filter: listener::Filter) -> listener::FilterChain {
    let context = tls::DownstreamTlsContext {
        common_tls_context: Some(tls::CommonTlsContext {
            tls_certificate_sds_secret_configs: l
                .certificates
                .iter()
                .map(|name| tls::SdsSecretConfig {
                    name: name.clone(),
                    sds_config: Some(ads()),
                })
                .collect(),
            alpn_protocols: vec!["h2".into(), "http/1.1".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    listener::FilterChain {
        name: l.envoy_name(),
        filter_chain_match: l.hostname.as_ref().map(|h| listener::FilterChainMatch {
            server_names: vec![h.clone()],
            ..Default::default()
        }),
        filters: vec![filter],
        transport_socket: Some(core::TransportSocket {
            name: "envoy.transport_sockets.tls".into(),
            config_type: Some(core::transport_socket::ConfigType::TypedConfig(any(
                &context,
            ))),
        }),
        ..Default::default()
    }
}

/// The cluster choice of weighted stream backends: one cluster, or a weighted set; a share
/// whose backend did not resolve goes to a cluster that does not exist, so its connections
/// are closed.
fn stream_clusters(
    entry: &crate::stream::Entry,
    opaque: bool,
    backends: &mut BTreeSet<Backend>,
) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = entry
        .backends
        .iter()
        .map(|w| {
            let backend = w.backend.as_ref().map(|b| Backend {
                opaque,
                ..b.clone()
            });
            let cluster = backend
                .as_ref()
                .map_or_else(|| "invalid-backend".to_owned(), Backend::cluster);
            backends.extend(backend);
            (cluster, w.weight)
        })
        .collect();
    if out.is_empty() {
        out.push(("invalid-backend".to_owned(), 1));
    }
    out
}

fn tcp_proxy(stat_prefix: &str, clusters: &[(String, u32)]) -> listener::Filter {
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
    let specifier = match clusters {
        [(one, _)] => tcp::tcp_proxy::ClusterSpecifier::Cluster(one.clone()),
        many => {
            tcp::tcp_proxy::ClusterSpecifier::WeightedClusters(tcp::tcp_proxy::WeightedCluster {
                clusters: many
                    .iter()
                    .map(
                        |(name, weight)| tcp::tcp_proxy::weighted_cluster::ClusterWeight {
                            name: name.clone(),
                            weight: *weight,
                            ..Default::default()
                        },
                    )
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

/// The chains of a TLS or TCP listener: TLS passthrough gets one chain per route, matched by
/// the SNI names the route serves there; TLS termination and TCP forward to the first route
/// by precedence (a listener forwards a connection one way).
fn stream_chains(
    name: &str,
    l: &ResolvedListener,
    attached: &[crate::attach::AttachedStream],
    backends: &mut BTreeSet<Backend>,
) -> Vec<listener::FilterChain> {
    let mut entries: Vec<_> = attached.iter().collect();
    entries.sort_by(|a, b| a.1.order.cmp(&b.1.order));
    let names = |hostnames: &Option<Vec<String>>| -> Option<listener::FilterChainMatch> {
        hostnames
            .clone()
            .or_else(|| l.hostname.clone().map(|h| vec![h]))
            .filter(|h| !h.is_empty())
            .map(|server_names| listener::FilterChainMatch {
                server_names,
                ..Default::default()
            })
    };
    match (l.protocol, l.passthrough) {
        (Some(Protocol::Tls), true) => entries
            .into_iter()
            .map(|(hostnames, entry)| listener::FilterChain {
                name: format!("{}/{}", l.envoy_name(), entry.name),
                filter_chain_match: names(hostnames),
                filters: vec![tcp_proxy(name, &stream_clusters(entry, true, backends))],
                ..Default::default()
            })
            .collect(),
        (Some(Protocol::Tls), false) => entries
            .first()
            .map(|(_, entry)| {
                tls_chain(l, tcp_proxy(name, &stream_clusters(entry, false, backends)))
            })
            .into_iter()
            .collect(),
        _ => entries
            .first()
            .map(|(_, entry)| listener::FilterChain {
                name: format!("{}/{}", l.envoy_name(), entry.name),
                filters: vec![tcp_proxy(name, &stream_clusters(entry, false, backends))],
                ..Default::default()
            })
            .into_iter()
            .collect(),
    }
}

/// A UDP listener: the first UDPRoute by precedence, to its first valid backend (a weighted
/// split of datagrams is not offered: a weighted UDPRoute is sent to its first backend that
/// resolved, the documented limit).
fn udp_listener(
    name: &str,
    port: u16,
    indices: &[usize],
    state: &GatewayState<'_>,
    backends: &mut BTreeSet<Backend>,
) -> Option<listener::Listener> {
    use envoy_types::pb::envoy::extensions::filters::udp::udp_proxy::v3 as udp;
    let mut entries: Vec<_> = indices.iter().flat_map(|i| &state.streams[*i]).collect();
    entries.sort_by(|a, b| a.1.order.cmp(&b.1.order));
    let (_, entry) = entries.first()?;
    // The first backend that resolved and carries weight; without one, datagrams go to a
    // cluster that does not exist and are dropped.
    let cluster = entry
        .backends
        .iter()
        .filter(|w| w.weight > 0)
        .find_map(|w| w.backend.as_ref())
        .map_or_else(
            || "invalid-backend".to_owned(),
            |b| {
                let b = Backend {
                    opaque: true,
                    ..b.clone()
                };
                let name = b.cluster();
                backends.insert(b);
                name
            },
        );
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
    Some(listener::Listener {
        name: name.to_owned(),
        address: Some(socket("0.0.0.0", port, true)),
        listener_filters: vec![listener::ListenerFilter {
            name: "envoy.filters.udp_listener.udp_proxy".into(),
            config_type: Some(listener::listener_filter::ConfigType::TypedConfig(any(
                &config,
            ))),
            ..Default::default()
        }],
        udp_listener_config: Some(listener::UdpListenerConfig::default()),
        ..Default::default()
    })
}

/// A route configuration: one virtual host per hostname (`*` for routes without one), routes
/// in the spec's precedence. Domains carry `host` and `host:port`, since clients (gRPC among
/// them) send the port in the authority when it is not the scheme's default.
/// Where a route configuration is served: its port and whether it is behind TLS (redirects
/// derive their port from it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    port: u16,
    secure: bool,
}

/// The route configuration of one port: a virtual host per hostname. Listener isolation: a
/// host is served by the most specific listener whose hostname matches it, and only that
/// listener's routes apply (a listener without routes still gets its host, answering 404,
/// rather than leave it to a wildcard listener). Within a host, the routes whose hostname
/// matches it most specifically come first (exact before wildcard before none), then the
/// rule precedence.
fn route_configuration(
    name: &str,
    origin: Origin,
    listeners: &[(Option<&str>, Vec<&Attached>)],
    backends: &mut BTreeSet<Backend>,
    mut memo: Option<&mut EncodedRoutes>,
) -> Encoded {
    use crate::hostname::specificity;
    /// One listener's attached entries by the hostname they serve: exact (and wildcard)
    /// names looked up by equality, wildcards also scanned for the names they cover, and the
    /// entries without hostnames that every host of the listener gets.
    #[derive(Default)]
    struct ByHost<'a> {
        named: std::collections::HashMap<&'a str, Vec<&'a Arc<Entry>>>,
        wildcards: BTreeMap<&'a str, Vec<&'a Arc<Entry>>>,
        any: Vec<&'a Arc<Entry>>,
    }
    let mut hosts: BTreeSet<&str> = BTreeSet::new();
    let mut indexed: Vec<ByHost<'_>> = Vec::with_capacity(listeners.len());
    for (hostname, attached) in listeners {
        if let Some(h) = hostname {
            hosts.insert(h);
        }
        let mut by_host = ByHost::default();
        for a in attached {
            match &a.hostnames {
                None => {
                    hosts.insert("*");
                    by_host.any.push(&a.entry);
                }
                Some(names) => {
                    for n in names {
                        hosts.insert(n);
                        by_host.named.entry(n).or_default().push(&a.entry);
                        if n.starts_with('*') {
                            by_host.wildcards.entry(n).or_default().push(&a.entry);
                        }
                    }
                }
            }
        }
        indexed.push(by_host);
    }
    let wildcard_hosts: Vec<&str> = hosts
        .iter()
        .copied()
        .filter(|h| *h == "*" || h.starts_with('*'))
        .collect();
    // Encoded as it is built (a `Route` is about 2 KB decoded): the configuration's name, then
    // each virtual host (name, domains, routes), in the fields' order, as prost would.
    let mut config = Vec::new();
    wire::string(1, name, &mut config);
    let mut host_bytes = Vec::new();
    for host in &hosts {
        let best = listeners
            .iter()
            .zip(&indexed)
            .filter_map(|((h, _), by_host)| {
                let rank = if *host == "*" {
                    h.is_none().then_some((0, 0))
                } else {
                    specificity(*h, host)
                };
                rank.map(|r| (r, by_host))
            })
            .max_by_key(|(rank, _)| *rank)
            .map(|(_, by_host)| by_host);
        let mut entries: Vec<((u8, usize), &Arc<Entry>)> = Vec::new();
        if let Some(by_host) = best {
            entries.extend(by_host.any.iter().map(|e| ((0, 0), *e)));
            if *host != "*" {
                let exact = if host.starts_with('*') { 1 } else { 2 };
                entries.extend(
                    by_host
                        .named
                        .get(host)
                        .into_iter()
                        .flatten()
                        .map(|e| ((exact, host.len()), *e)),
                );
                for (w, covering) in &by_host.wildcards {
                    if let Some(rank) = (*w != *host).then(|| specificity(Some(w), host)).flatten()
                    {
                        entries.extend(covering.iter().map(|e| (rank, *e)));
                    }
                }
            }
        }
        // A listener's own host with nothing to serve still gets a (404) virtual host when a
        // wildcard or catch-all would otherwise answer for it.
        let covered = || {
            wildcard_hosts
                .iter()
                .any(|w| w != host && (*w == "*" || specificity(Some(w), host).is_some()))
        };
        if entries.is_empty() && !covered() {
            continue;
        }
        // The most specific hostname first, then rule precedence; an entry reached through
        // several names keeps its most specific.
        entries.sort_by(|(ra, a), (rb, b)| rb.cmp(ra).then_with(|| a.order.cmp(&b.order)));
        let mut seen = std::collections::HashSet::with_capacity(entries.len());
        entries.retain(|(_, e)| seen.insert(e.name.as_str()));
        host_bytes.clear();
        wire::string(1, host, &mut host_bytes);
        wire::string(2, host, &mut host_bytes);
        if *host != "*" {
            wire::string(2, &format!("{host}:{}", origin.port), &mut host_bytes);
        }
        for (_, e) in &entries {
            referenced(e, backends);
            through(
                memo.as_deref_mut(),
                || (Arc::as_ptr(e) as usize, origin),
                |(old, _)| Arc::ptr_eq(old, e),
                || ((*e).clone(), envoy_route(e, origin).encode_to_vec()),
                |(_, route)| wire::bytes(3, route, &mut host_bytes),
            );
        }
        wire::bytes(2, &host_bytes, &mut config);
    }
    Encoded {
        name: name.to_owned(),
        bytes: config,
    }
}

fn string_match(value: &ValueMatch) -> matcher::StringMatcher {
    matcher::StringMatcher {
        match_pattern: Some(if value.regex {
            matcher::string_matcher::MatchPattern::SafeRegex(matcher::RegexMatcher {
                regex: value.value.clone(),
                ..Default::default()
            })
        } else {
            matcher::string_matcher::MatchPattern::Exact(value.value.clone())
        }),
        ..Default::default()
    }
}

fn route_match(entry: &Entry) -> route::RouteMatch {
    use route::route_match::PathSpecifier;
    let m = &entry.matcher;
    let path = match &m.path {
        PathMatch::Exact(p) => PathSpecifier::Path(p.clone()),
        PathMatch::Prefix(p) if p == "/" => PathSpecifier::Prefix("/".into()),
        PathMatch::Prefix(p) => PathSpecifier::PathSeparatedPrefix(p.clone()),
        PathMatch::Regex(r) => PathSpecifier::SafeRegex(matcher::RegexMatcher {
            regex: r.clone(),
            ..Default::default()
        }),
    };
    let mut headers: Vec<route::HeaderMatcher> = m
        .headers
        .iter()
        .map(|h| route::HeaderMatcher {
            name: h.name.clone(),
            header_match_specifier: Some(route::header_matcher::HeaderMatchSpecifier::StringMatch(
                string_match(h),
            )),
            ..Default::default()
        })
        .collect();
    if let Some(method) = &m.method {
        headers.push(route::HeaderMatcher {
            name: ":method".into(),
            header_match_specifier: Some(route::header_matcher::HeaderMatchSpecifier::StringMatch(
                string_match(&ValueMatch {
                    name: ":method".into(),
                    value: method.clone(),
                    regex: false,
                }),
            )),
            ..Default::default()
        });
    }
    route::RouteMatch {
        path_specifier: Some(path),
        headers,
        query_parameters: m
            .query
            .iter()
            .map(|q| route::QueryParameterMatcher {
                name: q.name.clone(),
                query_parameter_match_specifier: Some(
                    route::query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(
                        string_match(q),
                    ),
                ),
            })
            .collect(),
        ..Default::default()
    }
}

fn header_options(modifier: &HeaderModifier) -> Vec<core::HeaderValueOption> {
    let option =
        |name: &str, value: &str, action: core::header_value_option::HeaderAppendAction| {
            core::HeaderValueOption {
                header: Some(core::HeaderValue {
                    key: name.to_owned(),
                    value: value.to_owned(),
                    ..Default::default()
                }),
                append_action: action as i32,
                ..Default::default()
            }
        };
    use core::header_value_option::HeaderAppendAction as A;
    modifier
        .set
        .iter()
        .map(|h| option(&h.name, &h.value, A::OverwriteIfExistsOrAdd))
        .chain(
            modifier
                .add
                .iter()
                .map(|h| option(&h.name, &h.value, A::AppendIfExistsOrAdd)),
        )
        .collect()
}

/// The port of a redirect, as the spec derives it: the one given; else the well-known port
/// of the scheme given; else the listener's. Zero (no port in `Location`, as the spec asks
/// for a scheme's well-known port) where Envoy gets it right without one: a new hostname
/// carries no port, and on a listener at its scheme's well-known port clients send none.
fn redirect_port(r: &crate::model::RequestRedirect, origin: Origin) -> u32 {
    let well_known = |scheme: &str| match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let listener_scheme = if origin.secure { "https" } else { "http" };
    let scheme = r.scheme.as_deref().unwrap_or(listener_scheme);
    let port = match (r.port, r.scheme.as_deref()) {
        (Some(p), _) => u32::try_from(p).unwrap_or_default(),
        (None, Some(s)) => well_known(s).unwrap_or(u32::from(origin.port)),
        (None, None) => u32::from(origin.port),
    };
    let standard_listener = well_known(listener_scheme) == Some(u32::from(origin.port));
    if well_known(scheme) == Some(port) && (standard_listener || r.hostname.is_some()) {
        0
    } else {
        port
    }
}

/// How `ReplacePrefixMatch` replaces the matched prefix, as the spec's table has it: trailing
/// slashes of the prefix and the replacement do not count, and replacing with `/` (or
/// nothing) leaves one slash, never two (`/foo/bar` → `/bar`). A plain prefix rewrite where
/// that holds, an expression where it would not (a root prefix, an empty replacement).
enum PrefixReplacement {
    Prefix(String),
    Regex(matcher::RegexMatchAndSubstitute),
}

fn prefix_replacement(matched: &PathMatch, replacement: &str) -> PrefixReplacement {
    let prefix = match matched {
        PathMatch::Prefix(p) => p.trim_end_matches('/'),
        _ => "",
    };
    let replacement = replacement.trim_end_matches('/');
    let regex = |pattern: String, substitution: String| {
        PrefixReplacement::Regex(matcher::RegexMatchAndSubstitute {
            pattern: Some(matcher::RegexMatcher {
                regex: pattern,
                ..Default::default()
            }),
            substitution,
        })
    };
    if prefix.is_empty() {
        regex("^/".into(), format!("{replacement}/"))
    } else if replacement.is_empty() {
        regex(format!("^{}/*", regex::escape(prefix)), "/".into())
    } else {
        PrefixReplacement::Prefix(replacement.to_owned())
    }
}

/// Adds the backends an entry sends to (its shares and mirrors) to `backends`.
fn referenced(entry: &Entry, backends: &mut BTreeSet<Backend>) {
    if let Action::Forward {
        backends: weighted,
        mirrors,
        ..
    } = entry.action.as_ref()
    {
        let shares = weighted.iter().filter_map(|w| w.backend.as_ref());
        for b in shares.chain(mirrors.iter().map(|(b, _)| b)) {
            if !backends.contains(b) {
                backends.insert(b.clone());
            }
        }
    }
}

fn envoy_route(entry: &Entry, origin: Origin) -> route::Route {
    let action = match entry.action.as_ref() {
        Action::Redirect(r) => {
            use route::redirect_action as ra;
            let path = r.path.as_ref().and_then(|p| match p.type_.as_str() {
                "ReplaceFullPath" => p
                    .replace_full_path
                    .clone()
                    .map(ra::PathRewriteSpecifier::PathRedirect),
                "ReplacePrefixMatch" => p.replace_prefix_match.as_deref().map(|r| {
                    match prefix_replacement(&entry.matcher.path, r) {
                        PrefixReplacement::Prefix(p) => ra::PathRewriteSpecifier::PrefixRewrite(p),
                        PrefixReplacement::Regex(r) => ra::PathRewriteSpecifier::RegexRewrite(r),
                    }
                }),
                _ => None,
            });
            route::route::Action::Redirect(route::RedirectAction {
                scheme_rewrite_specifier: r
                    .scheme
                    .clone()
                    .map(ra::SchemeRewriteSpecifier::SchemeRedirect),
                host_redirect: r.hostname.clone().unwrap_or_default(),
                port_redirect: redirect_port(r, origin),
                path_rewrite_specifier: path,
                response_code: match r.status_code {
                    Some(301) => ra::RedirectResponseCode::MovedPermanently as i32,
                    _ => ra::RedirectResponseCode::Found as i32,
                },
                ..Default::default()
            })
        }
        Action::Forward {
            backends: weighted,
            rewrite,
            mirrors,
            timeout,
            grpc,
        } => {
            let valid: u32 = weighted.iter().map(|w| w.weight).sum();
            if valid == 0 || weighted.iter().all(|w| w.backend.is_none()) {
                route::route::Action::DirectResponse(route::DirectResponseAction {
                    status: if *grpc { 503 } else { 500 },
                    ..Default::default()
                })
            } else {
                use route::route_action::ClusterSpecifier;
                let clusters: Vec<route::weighted_cluster::ClusterWeight> = weighted
                    .iter()
                    .map(|w| {
                        route::weighted_cluster::ClusterWeight {
                            // A backend that did not resolve keeps its share, on a cluster that
                            // does not exist: Envoy answers it with the route's
                            // cluster_not_found_response_code (500; 503, which gRPC reads as
                            // UNAVAILABLE, on gRPC routes), as the spec requires.
                            name: w
                                .backend
                                .as_ref()
                                .map_or_else(|| "invalid-backend".to_owned(), Backend::cluster),
                            weight: Some(UInt32Value { value: w.weight }),
                            request_headers_to_add: header_options(&w.request_headers),
                            request_headers_to_remove: w.request_headers.remove.clone(),
                            response_headers_to_add: header_options(&w.response_headers),
                            response_headers_to_remove: w.response_headers.remove.clone(),
                            ..Default::default()
                        }
                    })
                    .collect();
                let specifier = match clusters.as_slice() {
                    [one]
                        if weighted[0].request_headers.set.is_empty()
                            && weighted[0].request_headers.add.is_empty()
                            && weighted[0].request_headers.remove.is_empty()
                            && weighted[0].response_headers.set.is_empty()
                            && weighted[0].response_headers.add.is_empty()
                            && weighted[0].response_headers.remove.is_empty()
                            && weighted[0].backend.is_some() =>
                    {
                        ClusterSpecifier::Cluster(one.name.clone())
                    }
                    _ => ClusterSpecifier::WeightedClusters(route::WeightedCluster {
                        clusters,
                        ..Default::default()
                    }),
                };
                let mut action = route::RouteAction {
                    cluster_specifier: Some(specifier),
                    cluster_not_found_response_code: if *grpc {
                        route::route_action::ClusterNotFoundResponseCode::ServiceUnavailable
                    } else {
                        route::route_action::ClusterNotFoundResponseCode::InternalServerError
                    } as i32,
                    timeout: timeout.map(duration),
                    request_mirror_policies: mirrors
                        .iter()
                        .map(|(b, share)| {
                            use envoy_types::pb::envoy::r#type::v3::{
                                FractionalPercent, fractional_percent::DenominatorType,
                            };
                            route::route_action::RequestMirrorPolicy {
                                cluster: b.cluster(),
                                runtime_fraction: (*share < 1_000_000).then(|| {
                                    core::RuntimeFractionalPercent {
                                        default_value: Some(FractionalPercent {
                                            numerator: *share,
                                            denominator: DenominatorType::Million as i32,
                                        }),
                                        ..Default::default()
                                    }
                                }),
                                ..Default::default()
                            }
                        })
                        .collect(),
                    ..Default::default()
                };
                if let Some(rewrite) = rewrite {
                    if let Some(host) = &rewrite.hostname {
                        action.host_rewrite_specifier = Some(
                            route::route_action::HostRewriteSpecifier::HostRewriteLiteral(
                                host.clone(),
                            ),
                        );
                    }
                    if let Some(path) = &rewrite.path {
                        match path.type_.as_str() {
                            "ReplaceFullPath" => {
                                action.regex_rewrite = Some(matcher::RegexMatchAndSubstitute {
                                    pattern: Some(matcher::RegexMatcher {
                                        regex: "^/.*$".into(),
                                        ..Default::default()
                                    }),
                                    substitution: path
                                        .replace_full_path
                                        .clone()
                                        .unwrap_or_default(),
                                });
                            }
                            "ReplacePrefixMatch" => {
                                match prefix_replacement(
                                    &entry.matcher.path,
                                    path.replace_prefix_match.as_deref().unwrap_or_default(),
                                ) {
                                    PrefixReplacement::Prefix(p) => action.prefix_rewrite = p,
                                    PrefixReplacement::Regex(r) => {
                                        action.regex_rewrite = Some(r);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                route::route::Action::Route(action)
            }
        }
    };
    route::Route {
        name: entry.name.clone(),
        r#match: Some(route_match(entry)),
        action: Some(action),
        request_headers_to_add: header_options(&entry.request_headers),
        request_headers_to_remove: entry.request_headers.remove.clone(),
        response_headers_to_add: header_options(&entry.response_headers),
        response_headers_to_remove: entry.response_headers.remove.clone(),
        ..Default::default()
    }
}

fn cluster_for(
    backend: &Backend,
    name: String,
    upstream: Option<&UpstreamTls>,
) -> cluster::Cluster {
    cluster::Cluster {
        // Without a trust anchor there is no TLS to configure (Envoy refuses name checks
        // without a CA): the cluster gets no endpoints instead, see `resources`.
        transport_socket: upstream
            .and_then(|u| Some((u, u.anchors.as_ref()?)))
            .map(|(u, anchors)| upstream_tls(u, anchors, backend.http2)),
        name,
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
            cluster::cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        connect_timeout: Some(duration(std::time::Duration::from_secs(5))),
        typed_extension_protocol_options: if backend.http2 {
            use envoy_types::pb::envoy::extensions::upstreams::http::v3 as upstream;
            let options = upstream::HttpProtocolOptions {
                upstream_protocol_options: Some(
                    upstream::http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                        upstream::http_protocol_options::ExplicitHttpConfig {
                            protocol_config: Some(
                                upstream::http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                                    core::Http2ProtocolOptions::default(),
                                ),
                            ),
                        },
                    ),
                ),
                ..Default::default()
            };
            [(
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_owned(),
                any(&options),
            )]
            .into()
        } else {
            Default::default()
        },
        ..Default::default()
    }
}

/// The TLS transport socket of a cluster under a BackendTLSPolicy: SNI, trust anchors, and
/// the names of which the certificate must carry one.
fn upstream_tls(u: &UpstreamTls, anchors: &TrustAnchors, http2: bool) -> core::TransportSocket {
    let trusted_ca = Some(core::DataSource {
        specifier: Some(match anchors {
            TrustAnchors::System => core::data_source::Specifier::Filename(
                crate::backend_tls::SYSTEM_TRUST_STORE.to_owned(),
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
                crate::backend_tls::Name::Dns(v) => {
                    (tls::subject_alt_name_matcher::SanType::Dns, v)
                }
                crate::backend_tls::Name::Uri(v) => {
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
    core::TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(any(
            &context,
        ))),
    }
}

/// The endpoints of a backend from the EndpointSlices of its Service: the slice port whose
/// name is the Service port's; `ready` (absent = true) → HEALTHY; terminating but `serving` →
/// DRAINING; anything else is left out, since Envoy still sends traffic to UNHEALTHY hosts
/// under its panic threshold. FQDN slices are skipped (EDS takes IP addresses).
/// Encoded as it is built (a decoded `LbEndpoint` is about 400 bytes): the cluster's name and
/// one locality holding every endpoint.
fn endpoints_for(backend: &Backend, cluster_name: &str, slices: &[Arc<EndpointSlice>]) -> Vec<u8> {
    let mut hosts: BTreeMap<(String, u16), i32> = BTreeMap::new();
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
                hosts.insert((address.clone(), port), health as i32);
            }
        }
    }
    // gRPC's xDS client rejects a locality without its (even empty) `locality` field and
    // drops one without a weight.
    let mut locality = Vec::new();
    wire::message(1, &core::Locality::default(), &mut locality);
    for ((address, port), health) in hosts {
        let lb_endpoint = endpoint::LbEndpoint {
            health_status: health,
            host_identifier: Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(
                endpoint::Endpoint {
                    address: Some(socket(&address, port, false)),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        wire::message(2, &lb_endpoint, &mut locality);
    }
    wire::message(3, &UInt32Value { value: 1 }, &mut locality);
    let mut assignment = Vec::with_capacity(cluster_name.len() + locality.len() + 8);
    wire::string(1, cluster_name, &mut assignment);
    wire::bytes(2, &locality, &mut assignment);
    assignment
}
