//! What proxyless gRPC clients are served (gRFC A27/A28), derived on request from a Gateway's
//! own configuration, so that a gRPC client routes every RPC as Envoy routes the same request:
//!
//! - an API listener per `host:port` a client dials, over the route configuration of the
//!   Gateway's plain HTTP listener on that port ([`api_listener`]);
//! - that route configuration rewritten into what gRPC's xDS clients implement
//!   ([`grpc_route_configuration`]): every path matcher as the equivalent regular expression
//!   (gRPC refuses `path_separated_prefix`, and grpc C-core ignores exact paths and prefixes
//!   not of the form `/service/method`); routes that match on a query never match an RPC
//!   (RPCs carry none) and are left out, as are routes whose `:method` is not `POST` (every
//!   RPC is one; gRPC clients cannot match pseudo-headers); a route that answers itself (no
//!   backends, a redirect) forwards to [`UNAVAILABLE`], a cluster without endpoints, so the
//!   RPC fails with UNAVAILABLE (grpc-js refuses a whole configuration with such a route, and
//!   C-core would fail it the same way); weighted clusters state their total (grpc-js draws
//!   from 100 otherwise).
//!
//! [`Proxyless`] makes them when the xDS server asks ([`Derive`]).

use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::endpoint::v3 as endpoint;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::google::protobuf::UInt32Value;
use fairlead_edge_model::resources::{Derive, Encoded, Held};
use fairlead_edge_translate::gateway::Protocol;
use prost::{Message, Name};

use crate::envoy::{ads, manager};
use crate::pb::any;

/// The suffix of the route configurations shaped for proxyless gRPC clients.
pub const GRPC_SHAPED: &str = "/grpc";

/// The cluster (with its endpoints: none) that RPCs matching a route Envoy answers itself go
/// to, so that they fail with UNAVAILABLE.
pub const UNAVAILABLE: &str = "fairlead/grpc-unavailable";

/// The listener a proxyless gRPC client asks for when it dials `xds:///host:port`: an API
/// listener whose routes are those of the Gateway's plain HTTP listener on `port`, shaped for
/// gRPC. `None` when the name is not `host:port` or the Gateway serves no HTTP there.
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

/// The route configuration `<name>/grpc`: the configuration `<name>` rewritten as the module
/// says.
pub fn grpc_route_configuration(
    name: &str,
    routes: impl Fn(&str) -> Option<route::RouteConfiguration>,
) -> Option<route::RouteConfiguration> {
    let base = name.strip_suffix(GRPC_SHAPED)?;
    let mut config = routes(base)?;
    config.name = name.to_owned();
    for host in &mut config.virtual_hosts {
        host.routes.retain_mut(shape);
    }
    Some(config)
}

/// Rewrites one route for gRPC; `false` when no RPC can match it.
fn shape(r: &mut route::Route) -> bool {
    use route::route_match::PathSpecifier;
    let Some(m) = r.r#match.as_mut() else {
        return true;
    };
    if !m.query_parameters.is_empty() {
        return false;
    }
    let mut posts = true;
    m.headers.retain(|h| {
        if h.name != ":method" {
            return true;
        }
        posts &= matches!(
            &h.header_match_specifier,
            Some(route::header_matcher::HeaderMatchSpecifier::StringMatch(matcher::StringMatcher {
                match_pattern: Some(matcher::string_matcher::MatchPattern::Exact(method)),
                ..
            })) if method == "POST" && !h.invert_match
        );
        false
    });
    if !posts {
        return false;
    }
    let regex = match &m.path_specifier {
        Some(PathSpecifier::Prefix(prefix)) => Some(format!("{}.*", regex::escape(prefix))),
        Some(PathSpecifier::Path(path)) => Some(regex::escape(path)),
        Some(PathSpecifier::PathSeparatedPrefix(prefix)) => {
            Some(format!("{}(/.*)?", regex::escape(prefix)))
        }
        _ => None,
    };
    if let Some(regex) = regex {
        m.path_specifier = Some(PathSpecifier::SafeRegex(matcher::RegexMatcher {
            regex,
            ..Default::default()
        }));
    }
    match &mut r.action {
        Some(route::route::Action::Route(action)) => {
            if let Some(route::route_action::ClusterSpecifier::WeightedClusters(weighted)) =
                &mut action.cluster_specifier
            {
                let total: u32 = weighted
                    .clusters
                    .iter()
                    .filter_map(|c| c.weight.map(|w| w.value))
                    .sum();
                if total > 0 {
                    #[allow(deprecated)]
                    {
                        weighted.total_weight = Some(UInt32Value { value: total });
                    }
                }
            }
        }
        _ => {
            r.action = Some(route::route::Action::Route(route::RouteAction {
                cluster_specifier: Some(route::route_action::ClusterSpecifier::Cluster(
                    UNAVAILABLE.into(),
                )),
                ..Default::default()
            }));
        }
    }
    true
}

/// The cluster [`UNAVAILABLE`] (EDS, as gRPC clients take clusters).
pub fn unavailable_cluster() -> cluster::Cluster {
    cluster::Cluster {
        name: UNAVAILABLE.into(),
        cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
            cluster::cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The endpoints of [`UNAVAILABLE`]: none.
pub fn unavailable_endpoints() -> endpoint::ClusterLoadAssignment {
    endpoint::ClusterLoadAssignment {
        cluster_name: UNAVAILABLE.into(),
        ..Default::default()
    }
}

/// What the xDS server is told to make for proxyless gRPC clients: a listener named
/// `host:port` ([`api_listener`]), the route configuration shaped for gRPC that it names
/// ([`grpc_route_configuration`], decoded from the Gateway's own only when a client asks), and
/// the cluster [`UNAVAILABLE`] with its (no) endpoints.
#[derive(Clone, Copy, Debug, Default)]
pub struct Proxyless;

impl Derive for Proxyless {
    fn derive(&self, type_url: &str, name: &str, held: &dyn Held) -> Option<Encoded> {
        let routes = route::RouteConfiguration::type_url();
        if type_url == listener::Listener::type_url() {
            let listener = api_listener(name, |n| held.get(&routes, n).is_some())?;
            Some(Encoded::new(name, &listener))
        } else if type_url == routes {
            let shaped = grpc_route_configuration(name, |base| {
                route::RouteConfiguration::decode(held.get(&routes, base)?).ok()
            })?;
            Some(Encoded::new(name, &shaped))
        } else if name != UNAVAILABLE {
            None
        } else if type_url == cluster::Cluster::type_url() {
            Some(Encoded::new(name, &unavailable_cluster()))
        } else if type_url == endpoint::ClusterLoadAssignment::type_url() {
            Some(Encoded::new(name, &unavailable_endpoints()))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use route::route_match::PathSpecifier;

    fn route(path: PathSpecifier, action: Option<route::route::Action>) -> route::Route {
        route::Route {
            r#match: Some(route::RouteMatch {
                path_specifier: Some(path),
                ..Default::default()
            }),
            action,
            ..Default::default()
        }
    }

    fn forward(cluster: &str) -> Option<route::route::Action> {
        Some(route::route::Action::Route(route::RouteAction {
            cluster_specifier: Some(route::route_action::ClusterSpecifier::Cluster(
                cluster.into(),
            )),
            ..Default::default()
        }))
    }

    fn regex_of(r: &route::Route) -> &str {
        match &r.r#match.as_ref().unwrap().path_specifier {
            Some(PathSpecifier::SafeRegex(m)) => &m.regex,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn routes_are_shaped_as_grpc_clients_match_them() {
        let method = |value: &str| route::HeaderMatcher {
            name: ":method".into(),
            header_match_specifier: Some(route::header_matcher::HeaderMatchSpecifier::StringMatch(
                matcher::StringMatcher {
                    match_pattern: Some(matcher::string_matcher::MatchPattern::Exact(value.into())),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        let mut exact = route(PathSpecifier::Path("/one.two".into()), forward("a"));
        let mut prefix = route(PathSpecifier::Prefix("/match/prefix/".into()), forward("a"));
        let mut segments = route(
            PathSpecifier::PathSeparatedPrefix("/api".into()),
            forward("a"),
        );
        let mut answered = route(
            PathSpecifier::Prefix("/".into()),
            Some(route::route::Action::DirectResponse(
                route::DirectResponseAction {
                    status: 500,
                    ..Default::default()
                },
            )),
        );
        let mut queried = route(PathSpecifier::Prefix("/".into()), forward("a"));
        queried.r#match.as_mut().unwrap().query_parameters = vec![route::QueryParameterMatcher {
            name: "v".into(),
            ..Default::default()
        }];
        let mut post = route(PathSpecifier::Prefix("/".into()), forward("a"));
        post.r#match.as_mut().unwrap().headers = vec![method("POST")];
        let mut get = route(PathSpecifier::Prefix("/".into()), forward("a"));
        get.r#match.as_mut().unwrap().headers = vec![method("GET")];
        for r in [
            &mut exact,
            &mut prefix,
            &mut segments,
            &mut answered,
            &mut post,
        ] {
            assert!(shape(r), "{r:?}");
        }
        assert!(!shape(&mut queried), "no RPC carries a query");
        assert!(!shape(&mut get), "every RPC is a POST");
        assert_eq!(regex_of(&exact), r"/one\.two");
        assert_eq!(regex_of(&prefix), "/match/prefix/.*");
        assert_eq!(regex_of(&segments), "/api(/.*)?");
        assert!(
            post.r#match.unwrap().headers.is_empty(),
            "POST always holds"
        );
        assert_eq!(answered.action, forward(UNAVAILABLE));
    }

    #[test]
    fn weighted_clusters_state_their_total() {
        let mut split = route(
            PathSpecifier::Prefix("/".into()),
            Some(route::route::Action::Route(route::RouteAction {
                cluster_specifier: Some(route::route_action::ClusterSpecifier::WeightedClusters(
                    route::WeightedCluster {
                        clusters: ["a", "b"]
                            .iter()
                            .zip([80, 0])
                            .map(|(name, weight)| route::weighted_cluster::ClusterWeight {
                                name: (*name).into(),
                                weight: Some(UInt32Value { value: weight }),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            })),
        );
        assert!(shape(&mut split));
        let Some(route::route::Action::Route(action)) = split.action else {
            unreachable!()
        };
        let Some(route::route_action::ClusterSpecifier::WeightedClusters(weighted)) =
            action.cluster_specifier
        else {
            unreachable!()
        };
        #[allow(deprecated)]
        let total = weighted.total_weight;
        assert_eq!(total.map(|t| t.value), Some(80));
    }
}
