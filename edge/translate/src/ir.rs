//! The intermediate representation of one Gateway: what its proxies serve, self-contained
//! (rendering it reads nothing of the input), built from the Gateway's attached state by
//! [`gateway`] and rendered into Envoy resources by one module per xDS type (`listener`,
//! `route`, `cluster`, `endpoint`, `secret`). The golden tests write it as `ir.yaml`, the
//! seam between deciding and encoding.
//!
//! Gateway listeners that share a port share one Envoy listener: plain HTTP ports get one
//! connection manager whose route configuration has a virtual host per hostname; HTTPS and
//! TLS ports get a filter chain per Gateway listener (TLS passthrough: per route), picked by
//! SNI, each HTTPS one with its certificates over SDS and its own route configuration.
//! Clusters are one per Service port (and per HTTP/2 or opaque use of it), with endpoints
//! over EDS from the EndpointSlices of the Service.
//!
//! Names: listeners `<protocol>-<port>`, route configurations `<protocol>-<port>` (HTTPS:
//! `https-<port>-<listener>`), clusters `<namespace>/<service>/<port>`, secrets
//! `<namespace>/<name>`. Every name is unique within one Gateway's snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;

use crate::attach::{Attached, AttachedStream, GatewayState};
use crate::backend::Backend;
use crate::backend_tls::{Policies, UpstreamTls};
use crate::gateway::{Protocol, ResolvedListener};
use crate::http::{Action, Entry};
use crate::{FastMap, FastSet};
use fairlead_edge_model::input::Input;
use fairlead_key::ObjectKey;

/// One Gateway's configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    /// The addresses the listeners bind (every address when empty; see
    /// [`crate::gateway::listen_addresses`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<std::net::IpAddr>,
    /// Envoy listeners, by port (TCP before UDP).
    pub listeners: Vec<Listener>,
    /// Route configurations, in the order of their listeners.
    pub route_configs: Vec<RouteConfig>,
    /// Clusters, one per backend reached, in backend order.
    pub clusters: Vec<Cluster>,
    /// UDP listeners' weighted backends, one cluster each ([`Split`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<Split>,
    /// TLS certificates the listeners present, by name.
    pub secrets: Vec<Certificate>,
    /// What the Gateway's ALB instance asks of its listeners.
    #[serde(skip_serializing_if = "fairlead_edge_model::instance::Settings::is_default")]
    pub edge: fairlead_edge_model::instance::Settings,
}

impl Gateway {
    /// The backends the Gateway reaches (what BackendTLSPolicies are reported against).
    pub fn backends(&self) -> impl Iterator<Item = &Backend> + Clone {
        self.clusters.iter().map(|c| &c.backend)
    }
}

/// One Envoy listener.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listener {
    /// `<protocol>-<port>`.
    pub name: String,
    /// The port, on every address.
    pub port: u16,
    /// What it does with a connection.
    pub serves: Serves,
}

/// What a listener does with a connection (or datagram).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Serves {
    /// Plain HTTP: one connection manager, its routes the route configuration of the
    /// listener's name.
    Http,
    /// Filter chains, picked by SNI: named chains first, the default (no names) last.
    #[serde(rename_all = "camelCase")]
    Chains {
        /// Whether the TLS inspector reads the ClientHello (some chain matches a name or
        /// terminates TLS).
        inspect_tls: bool,
        /// The chains.
        chains: Vec<Chain>,
    },
    /// UDP: every datagram to one cluster.
    Udp {
        /// The cluster (`invalid-backend` when none resolved: datagrams are dropped).
        cluster: String,
    },
}

/// A filter chain of a listener.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chain {
    /// Unique within the listener.
    pub name: String,
    /// The SNI names it is picked for; empty: the listener's default chain.
    pub server_names: Vec<String>,
    /// Terminates TLS presenting these certificates (their Secrets); `None`: no TLS here.
    pub certificates: Option<Vec<ObjectKey>>,
    /// Terminating TLS, checks clients' certificates as the Gateway's frontend TLS says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_validation: Option<std::sync::Arc<crate::frontend::ClientValidation>>,
    /// Where connections go.
    pub forward: Forward,
    /// TLS offers HTTP/1.1 only (no `h2` in ALPN): a route served here carries
    /// `tls-disable-protocol: http2`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http1_only: bool,
}

/// Where a chain's connections go.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Forward {
    /// An HTTP connection manager with the route configuration of this name.
    #[serde(rename_all = "camelCase")]
    Http {
        /// The route configuration (also the statistics prefix).
        route_config: String,
    },
    /// TCP proxying to weighted clusters.
    #[serde(rename_all = "camelCase")]
    Tcp {
        /// The statistics prefix (the listener's name).
        stat_prefix: String,
        /// Clusters and weights (`invalid-backend`: a share whose backend did not resolve,
        /// whose connections are closed).
        clusters: Vec<Share>,
    },
}

/// A cluster's share of the connections.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Share {
    /// The cluster.
    pub cluster: String,
    /// Its weight.
    pub weight: u32,
}

/// Where a route configuration is served: its port and whether it is behind TLS (redirects
/// derive their port from it), and whether its routes keep statistics of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// The port.
    pub port: u16,
    /// Behind TLS.
    pub secure: bool,
    /// Routes carry the statistics name of their rule ([`fairlead_edge_model::names::ROUTE_STATISTICS`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub route_statistics: bool,
}

/// A route configuration: virtual hosts with their routes in precedence order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteConfig {
    /// Its name.
    pub name: String,
    /// Where it is served.
    pub origin: Origin,
    /// Virtual hosts, by hostname (`*`: requests of any host no other names).
    pub virtual_hosts: Vec<VirtualHost>,
}

/// A virtual host: the requests of one hostname (and `hostname:port`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtualHost {
    /// The hostname, or `*`.
    pub host: String,
    /// Its routes, first match wins.
    pub routes: Vec<Route>,
    /// The host belongs to another HTTPS listener of the port than the one whose TLS
    /// connection (its SNI) the request came on: answered 421 Misdirected Request, as
    /// the spec asks of a connection reused (HTTP/2 coalescing) for another host.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub misdirected: bool,
}

/// A route of a virtual host: its entry, and which of its backends have no ready endpoint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Route {
    /// The entry.
    #[serde(flatten)]
    pub entry: Arc<Entry>,
    /// The backendRefs (by index) whose backend has no ready endpoint while another of the
    /// rule's has one: their share goes to the others. (When none has one, nothing is
    /// drained: Envoy answers 503, no healthy upstream.)
    #[serde(skip_serializing_if = "Drained::is_empty")]
    pub drained: Drained,
}

/// A set of backendRef indices (the first 64; a rule has at most 16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Drained(u64);

impl Drained {
    /// Whether backendRef `index` is drained.
    pub fn contains(self, index: usize) -> bool {
        index < 64 && self.0 & (1 << index) != 0
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    fn insert(&mut self, index: usize) {
        if index < 64 {
            self.0 |= 1 << index;
        }
    }
}

impl Serialize for Drained {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((0..64).filter(|i| self.contains(*i)))
    }
}

/// A cluster: one backend, how the proxy speaks TLS to it, and its endpoints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cluster {
    /// The cluster's name ([`Backend::cluster`]).
    pub name: String,
    /// The backend.
    pub backend: Backend,
    /// TLS to the backend, under a BackendTLSPolicy.
    pub tls: Option<UpstreamTls>,
    /// The EndpointSlices its endpoints come from; `None` when a policy left it without a
    /// valid trust anchor: no endpoint, so requests fail rather than go out unchecked.
    #[serde(serialize_with = "slice_names")]
    pub endpoints: Option<Vec<Arc<EndpointSlice>>>,
}

/// A UDP listener whose route shares its datagrams among several backends: one Envoy cluster
/// whose localities are the backends' endpoints, each locality weighted as its backend (Envoy's
/// locality-weighted balancing picks a backend for each new session by weight, as UDP proxying
/// names one cluster). Each backend is also among the Gateway's clusters, whose endpoints the
/// localities are.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Split {
    /// The cluster's name (`split/<listener>`).
    pub name: String,
    /// The backends and their weights (a share whose backend did not resolve is left out:
    /// its datagrams go to the others).
    pub shares: Vec<(Backend, u32)>,
}

/// A TLS certificate a listener presents: PEM chain and key (never written out: the IR's
/// YAML shows their sizes).
#[derive(Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    /// Its Secret.
    pub name: ObjectKey,
    /// The chain, PEM.
    #[serde(serialize_with = "size")]
    pub chain: Vec<u8>,
    /// The private key, PEM.
    #[serde(serialize_with = "size")]
    pub key: Vec<u8>,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn size<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{} bytes", bytes.len()))
}

fn slice_names<S: serde::Serializer>(
    slices: &Option<Vec<Arc<EndpointSlice>>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let names: Option<Vec<String>> = slices.as_ref().map(|slices| {
        slices
            .iter()
            .map(|slice| slice.metadata.name.clone().unwrap_or_default())
            .collect()
    });
    names.serialize(s)
}

/// The IR of one Gateway from its attached state: listeners grouped by port, filter chains
/// by SNI precedence, virtual hosts with listener isolation, the backends reached and their
/// TLS and EndpointSlices, and the certificates presented.
pub fn gateway(state: &GatewayState<'_>, input: &Input, tls: &Policies) -> Gateway {
    let (None, Ok(addresses)) = (
        crate::gateway::refused(state.gateway),
        crate::gateway::listen_addresses(state.gateway),
    ) else {
        // Not accepted (its status says why): nothing is served.
        return Gateway::default();
    };
    let mut out = Gateway {
        addresses,
        edge: fairlead_edge_model::instance::of(state.gateway, input),
        ..Gateway::default()
    };
    let route_statistics = crate::gateway::route_statistics(state.gateway);
    let mut backends: BTreeSet<Backend> = BTreeSet::new();
    let mut secrets: BTreeSet<ObjectKey> = BTreeSet::new();
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
            if let Some(cluster) =
                udp_cluster(&name, indices, state, &mut backends, &mut out.splits)
            {
                out.listeners.push(Listener {
                    name,
                    port: *port,
                    serves: Serves::Udp { cluster },
                });
            }
            continue;
        }
        if first == Protocol::Http {
            let listeners: Vec<(Option<&str>, &[Attached])> = indices
                .iter()
                .map(|i| {
                    (
                        state.listeners[*i].hostname.as_deref(),
                        state.http[*i].as_slice(),
                    )
                })
                .collect();
            let origin = Origin {
                port: *port,
                secure: false,
                route_statistics,
            };
            out.route_configs.push(route_config(
                &name,
                origin,
                (&listeners, None),
                &mut backends,
            ));
            out.listeners.push(Listener {
                name,
                port: *port,
                serves: Serves::Http,
            });
            continue;
        }
        let mut chains = Vec::new();
        for i in indices {
            let l = &state.listeners[*i];
            match l.protocol {
                Some(Protocol::Https) => {
                    let config = format!("{name}-{}", l.envoy_name());
                    // The port's other HTTPS listeners by their hostnames only: a host one
                    // of them serves is misdirected on this listener's connections.
                    let (listeners, own) = https_neighbours(state, indices, *i);
                    let origin = Origin {
                        port: *port,
                        secure: true,
                        route_statistics,
                    };
                    out.route_configs.push(route_config(
                        &config,
                        origin,
                        (&listeners, own),
                        &mut backends,
                    ));
                    secrets.extend(l.certificates.iter().cloned());
                    let chain = Chain {
                        name: l.envoy_name(),
                        server_names: l.hostname.iter().cloned().collect(),
                        certificates: Some(l.certificates.clone()),
                        client_validation: l.client_validation.clone(),
                        forward: Forward::Http {
                            route_config: config,
                        },
                        http1_only: false,
                    };
                    chains.extend(http1_chains(chain, &state.http[*i]));
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
        chains.retain_mut(|c| {
            if c.server_names.is_empty() {
                !std::mem::replace(&mut default_taken, true)
            } else {
                c.server_names.retain(|n| taken.insert(n.clone()));
                !c.server_names.is_empty()
            }
        });
        chains.sort_by_key(|c| c.server_names.is_empty());
        if chains.is_empty() {
            continue;
        }
        let inspect_tls = chains
            .iter()
            .any(|c| !c.server_names.is_empty() || c.certificates.is_some());
        out.listeners.push(Listener {
            name,
            port: *port,
            serves: Serves::Chains {
                inspect_tls,
                chains,
            },
        });
    }
    out.clusters.reserve_exact(backends.len());
    // What the proxies present to backends that ask for a client certificate (a reference
    // that does not resolve is reported on the Gateway; TLS then goes without one).
    let client_certificate = state.client_certificate.clone().ok().flatten();
    for backend in backends {
        let upstream = tls.for_backend(&backend).cloned().map(|mut upstream| {
            if let Some(key) = &client_certificate {
                secrets.insert(key.clone());
                upstream.client_certificate = Some(key.clone());
            }
            upstream
        });
        let variant = backend.variant.as_deref();
        // No valid trust anchor (or an annotation's TLS Secret that cannot be read, where no
        // policy decides): no endpoint, so requests fail (503) instead of going out unchecked.
        let refused = upstream.is_none()
            && variant
                .and_then(|v| v.tls.as_ref())
                .is_some_and(|t| t.refused);
        let endpoints =
            (upstream.as_ref().is_none_or(|u| u.anchors.is_some()) && !refused).then(|| {
                if variant.is_some_and(|v| v.service_address) {
                    service_address(input, &backend).into_iter().collect()
                } else {
                    input
                        .slices_of(&backend.namespace, &backend.service)
                        .cloned()
                        .collect()
                }
            });
        out.clusters.push(Cluster {
            name: backend.cluster(),
            backend,
            tls: upstream,
            endpoints,
        });
    }
    drain(&mut out);
    for key in secrets {
        if let Some(secret) = crate::gateway::tls_secret(input, key.namespace(), key.name()) {
            let data = secret.data.as_ref();
            let bytes = |k: &str| {
                data.and_then(|d| d.get(k))
                    .map(|v| v.0.clone())
                    .unwrap_or_default()
            };
            out.secrets.push(Certificate {
                chain: bytes("tls.crt"),
                key: bytes("tls.key"),
                name: key,
            });
        }
    }
    out
}

/// The one endpoint of a backend reached at its Service's address (`service-upstream`): the
/// cluster IP and Service port, as an EndpointSlice of the Service (none for a headless
/// Service or one without an address yet: its requests get 503).
fn service_address(input: &Input, backend: &Backend) -> Option<Arc<EndpointSlice>> {
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    let service = input.service(&backend.namespace, &backend.service)?;
    let ip = service
        .spec
        .as_ref()?
        .cluster_ip
        .as_deref()
        .filter(|ip| !ip.is_empty() && *ip != "None")?;
    let address_type = if ip.contains(':') { "IPv6" } else { "IPv4" };
    Some(Arc::new(EndpointSlice {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(format!("{}-service-address", backend.service)),
            namespace: Some(backend.namespace.to_string()),
            ..Default::default()
        },
        address_type: address_type.to_owned(),
        endpoints: Some(vec![Endpoint {
            addresses: vec![ip.to_owned()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ports: Some(vec![EndpointPort {
            name: Some(backend.port_name.to_string()),
            port: Some(i32::from(backend.port)),
            ..Default::default()
        }]),
    }))
}

/// Marks, on every route, the backends whose cluster has no ready endpoint.
fn drain(ir: &mut Gateway) {
    let unready: FastSet<&Backend> = ir
        .clusters
        .iter()
        .filter(|c| !has_ready_endpoint(c))
        .map(|c| &c.backend)
        .collect();
    if unready.is_empty() {
        return;
    }
    for config in &mut ir.route_configs {
        for host in &mut config.virtual_hosts {
            for route in &mut host.routes {
                let Action::Forward { backends, .. } = route.entry.action.as_ref() else {
                    continue;
                };
                let mut drained = Drained::default();
                let mut serving = false;
                for (i, w) in backends.iter().enumerate() {
                    match &w.backend {
                        Some(b) if unready.contains(b) => drained.insert(i),
                        Some(_) if w.weight > 0 => serving = true,
                        _ => {}
                    }
                }
                // Without any backend to take the share, the weights stay: Envoy answers 503
                // (no healthy upstream; UNAVAILABLE to gRPC) as the clusters have no endpoint.
                if serving {
                    route.drained = drained;
                }
            }
        }
    }
}

/// Whether a cluster has an endpoint that takes new requests: a ready endpoint, with an IP
/// address, on the Service port's EndpointSlice port (what its endpoint assignment serves as
/// HEALTHY).
fn has_ready_endpoint(c: &Cluster) -> bool {
    c.endpoints.iter().flatten().any(|slice| {
        matches!(slice.address_type.as_str(), "IPv4" | "IPv6")
            && slice
                .ports
                .iter()
                .flatten()
                .any(|p| p.name.as_deref().unwrap_or_default() == &*c.backend.port_name)
            && slice.endpoints.iter().flatten().any(|e| {
                !e.addresses.is_empty()
                    && e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
            })
    })
}

/// The shares of weighted stream backends: one cluster, or a weighted set; a share whose
/// backend did not resolve goes to a cluster that does not exist, so its connections are
/// closed.
fn stream_shares(
    entry: &crate::stream::Entry,
    opaque: bool,
    backends: &mut BTreeSet<Backend>,
) -> Vec<Share> {
    let mut out: Vec<Share> = entry
        .backends
        .iter()
        .map(|w| {
            let backend = w.backend.as_ref().map(|b| Backend {
                opaque,
                variant: None,
                ..b.clone()
            });
            let cluster = backend
                .as_ref()
                .map_or_else(|| "invalid-backend".to_owned(), Backend::cluster);
            backends.extend(backend);
            Share {
                cluster,
                weight: w.weight,
            }
        })
        .collect();
    if out.is_empty() {
        out.push(Share {
            cluster: "invalid-backend".to_owned(),
            weight: 1,
        });
    }
    out
}

/// The chains of a TLS or TCP listener: TLS passthrough gets one chain per route, matched by
/// the SNI names the route serves there; TLS termination and TCP forward to the first route
/// by precedence (a listener forwards a connection one way).
fn stream_chains(
    name: &str,
    l: &ResolvedListener,
    attached: &[AttachedStream],
    backends: &mut BTreeSet<Backend>,
) -> Vec<Chain> {
    let mut entries: Vec<_> = attached.iter().collect();
    entries.sort_by(|a, b| a.1.order.cmp(&b.1.order));
    let tcp = |entry: &crate::stream::Entry, opaque: bool, backends: &mut BTreeSet<Backend>| {
        Forward::Tcp {
            stat_prefix: name.to_owned(),
            clusters: stream_shares(entry, opaque, backends),
        }
    };
    match (l.protocol, l.passthrough) {
        (Some(Protocol::Tls), true) => entries
            .into_iter()
            .map(|(hostnames, entry)| Chain {
                name: format!("{}/{}", l.envoy_name(), entry.name),
                server_names: hostnames
                    .clone()
                    .or_else(|| l.hostname.clone().map(|h| vec![h]))
                    .unwrap_or_default(),
                certificates: None,
                client_validation: None,
                forward: tcp(entry, true, backends),
                http1_only: false,
            })
            .collect(),
        (Some(Protocol::Tls), false) => entries
            .first()
            .map(|(_, entry)| Chain {
                name: l.envoy_name(),
                server_names: l.hostname.iter().cloned().collect(),
                certificates: Some(l.certificates.clone()),
                client_validation: l.client_validation.clone(),
                forward: tcp(entry, false, backends),
                http1_only: false,
            })
            .into_iter()
            .collect(),
        _ => entries
            .first()
            .map(|(_, entry)| Chain {
                name: format!("{}/{}", l.envoy_name(), entry.name),
                server_names: Vec::new(),
                certificates: None,
                client_validation: None,
                forward: tcp(entry, false, backends),
                http1_only: false,
            })
            .into_iter()
            .collect(),
    }
}

/// `tls-disable-protocol: http2` on an HTTPS listener's chain: when a route attached there
/// (`attached`) carries it, the chain of the route's hostnames offers HTTP/1.1 only — the
/// whole chain when the route serves every name of the listener or the listener's one name,
/// else a chain of its own for those names ahead of the listener's.
pub(crate) fn http1_chains(chain: Chain, attached: &[Attached]) -> Vec<Chain> {
    let mut names = std::collections::BTreeSet::new();
    for a in attached
        .iter()
        .filter(|a| a.entry.annotations.disable_http2)
    {
        match &a.hostnames {
            None => {
                return vec![Chain {
                    http1_only: true,
                    ..chain
                }];
            }
            Some(hostnames) => names.extend(hostnames.iter().cloned()),
        }
    }
    if names.is_empty() {
        return vec![chain];
    }
    if chain.server_names.len() == 1 && names.contains(&chain.server_names[0]) {
        return vec![Chain {
            http1_only: true,
            ..chain
        }];
    }
    vec![
        Chain {
            name: format!("{}-http1", chain.name),
            server_names: names.into_iter().collect(),
            http1_only: true,
            ..chain.clone()
        },
        chain,
    ]
}

/// The cluster of a UDP port: the first UDPRoute by precedence, to its first backend that
/// resolved and carries weight (a weighted split of datagrams is not offered, the documented
/// limit); `invalid-backend` without one, so datagrams are dropped. `None` without a route.
fn udp_cluster(
    listener: &str,
    indices: &[usize],
    state: &GatewayState<'_>,
    backends: &mut BTreeSet<Backend>,
    splits: &mut Vec<Split>,
) -> Option<String> {
    let mut entries: Vec<_> = indices.iter().flat_map(|i| &state.streams[*i]).collect();
    entries.sort_by(|a, b| a.1.order.cmp(&b.1.order));
    let (_, entry) = entries.first()?;
    let mut shares: Vec<(Backend, u32)> = entry
        .backends
        .iter()
        .filter(|w| w.weight > 0)
        .filter_map(|w| {
            let b = Backend {
                opaque: true,
                variant: None,
                ..w.backend.clone()?
            };
            Some((b, w.weight))
        })
        .collect();
    for (b, _) in &shares {
        backends.insert(b.clone());
    }
    Some(match shares.len() {
        0 => "invalid-backend".to_owned(),
        1 => shares.remove(0).0.cluster(),
        _ => {
            let name = format!("split/{listener}");
            splits.push(Split {
                name: name.clone(),
                shares,
            });
            name
        }
    })
}

/// The route configuration of one port: a virtual host per hostname. Listener isolation: a
/// host is served by the most specific listener whose hostname matches it, and only that
/// listener's routes apply (a listener without routes still gets its host, answering 404,
/// rather than leave it to a wildcard listener). Within a host, the routes whose hostname
/// matches it most specifically come first (exact before wildcard before none), then the
/// rule precedence.
/// Listeners of one port as a route configuration sees them: hostname, attached routes.
type PortListeners<'a> = Vec<(Option<&'a str>, &'a [Attached])>;

/// The HTTPS listeners of a port (`indices`) as the route configuration of the one at `own`
/// sees them: its own hostname and routes, the others' hostnames (`*` for one without) with
/// no routes; and `own`'s position among them.
fn https_neighbours<'a>(
    state: &'a GatewayState<'_>,
    indices: &[usize],
    own: usize,
) -> (PortListeners<'a>, Option<usize>) {
    let mut position = None;
    let listeners = indices
        .iter()
        .filter(|i| state.listeners[**i].protocol == Some(Protocol::Https))
        .enumerate()
        .map(|(n, i)| {
            let l = &state.listeners[*i];
            if *i == own {
                position = Some(n);
                (l.hostname.as_deref(), state.http[*i].as_slice())
            } else {
                (Some(l.hostname.as_deref().unwrap_or("*")), &[][..])
            }
        })
        .collect();
    (listeners, position)
}

/// The route configuration `name` of `listeners` (hostname, attached routes) on one port:
/// each host goes to its most specific listener. With `own`, the configuration is that
/// listener's (an HTTPS listener's chain): the others give their hostnames only, and a host
/// whose most specific listener is another is misdirected (421).
fn route_config(
    name: &str,
    origin: Origin,
    (listeners, own): (&PortListeners<'_>, Option<usize>),
    backends: &mut BTreeSet<Backend>,
) -> RouteConfig {
    use crate::hostname::specificity;
    /// One listener's attached entries by the hostname they serve: exact (and wildcard)
    /// names looked up by equality, wildcards also scanned for the names they cover, and the
    /// entries without hostnames that every host of the listener gets.
    #[derive(Default)]
    struct ByHost<'a> {
        named: FastMap<&'a str, Vec<&'a Arc<Entry>>>,
        wildcards: BTreeMap<&'a str, Vec<&'a Arc<Entry>>>,
        any: Vec<&'a Arc<Entry>>,
    }
    // Every host served, sorted and deduplicated once all are in.
    let mut hosts: Vec<&str> = Vec::new();
    let mut indexed: Vec<ByHost<'_>> = Vec::with_capacity(listeners.len());
    for (n, (hostname, attached)) in listeners.iter().enumerate() {
        match hostname {
            Some(h) => hosts.push(h),
            // Another listener's catch-all: every host no more specific listener takes.
            None if own.is_some_and(|own| own != n) => hosts.push("*"),
            None => {}
        }
        let mut by_host = ByHost::default();
        for a in *attached {
            match &a.hostnames {
                None => {
                    hosts.push("*");
                    by_host.any.push(&a.entry);
                }
                Some(names) => {
                    for n in names.iter() {
                        hosts.push(n);
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
    hosts.sort_unstable();
    hosts.dedup();
    let wildcard_hosts: Vec<&str> = hosts
        .iter()
        .copied()
        .filter(|h| *h == "*" || h.starts_with('*'))
        .collect();
    let mut virtual_hosts = Vec::new();
    // One buffer for every host's ranked entries, and one for the names seen.
    let mut entries: Vec<((u8, usize), &Arc<Entry>)> = Vec::new();
    let mut seen: FastSet<&str> = FastSet::default();
    // The backends already added to `backends`: each is looked up there once.
    let mut reached: FastSet<&Backend> = FastSet::default();
    for host in &hosts {
        let best = listeners
            .iter()
            .zip(&indexed)
            .enumerate()
            .filter_map(|(n, ((h, _), by_host))| {
                let rank = if *host == "*" {
                    (h.is_none() || *h == Some("*")).then_some((0, 0))
                } else {
                    specificity(h.filter(|h| *h != "*"), host)
                };
                rank.map(|r| (r, n, by_host))
            })
            .max_by_key(|(rank, _, _)| *rank);
        if let (Some(own), Some((_, n, _))) = (own, best)
            && own != n
        {
            virtual_hosts.push(VirtualHost {
                host: (*host).to_owned(),
                routes: Vec::new(),
                misdirected: true,
            });
            continue;
        }
        let best = best.map(|(_, _, by_host)| by_host);
        entries.clear();
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
        seen.clear();
        entries.retain(|(_, e)| seen.insert(e.name.as_str()));
        for (_, e) in &entries {
            referenced(e, &mut reached, backends);
        }
        virtual_hosts.push(VirtualHost {
            host: (*host).to_owned(),
            routes: entries
                .iter()
                .map(|(_, e)| Route {
                    entry: (*e).clone(),
                    drained: Drained::default(),
                })
                .collect(),
            misdirected: false,
        });
    }
    RouteConfig {
        name: name.to_owned(),
        origin,
        virtual_hosts,
    }
}

/// Adds the backends an entry sends to (its shares and mirrors) to `backends`, unless
/// `reached` has them already.
fn referenced<'a>(
    entry: &'a Entry,
    reached: &mut FastSet<&'a Backend>,
    backends: &mut BTreeSet<Backend>,
) {
    if let Action::Forward {
        backends: weighted,
        mirrors,
        ..
    } = entry.action.as_ref()
    {
        let shares = weighted.iter().filter_map(|w| w.backend.as_ref());
        for b in shares.chain(mirrors.iter().map(|(b, _)| b)) {
            if reached.insert(b) && !backends.contains(b) {
                backends.insert(b.clone());
            }
        }
    }
}
