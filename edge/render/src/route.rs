//! Envoy `RouteConfiguration`s from the IR: a virtual host per hostname (domains `host` and
//! `host:port`, since clients — gRPC among them — send the port in the authority when it is
//! not the scheme's default; named after the hostname with `_` for dots) with its routes in
//! precedence, each with the statistics name of its rule, and the ALB's default retry
//! ([`crate::retry::unsent`]); each route's match (path, headers, query, method), its action
//! (weighted clusters, a redirect, rewrites, mirrors, timeouts, retries) and its header
//! changes.
//!
//! A configuration is encoded as it is built (a decoded `Route` is about 2 KB): its name,
//! then each virtual host, in the fields' order, as prost would; each route's encoding comes
//! from the caller, which may have it from the last translation.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::envoy::duration;
use crate::wire;
use fairlead_edge_model::Encoded;
use fairlead_edge_model::input::HeaderModifier;
use fairlead_edge_translate::backend::Backend;
use fairlead_edge_translate::http::{Action, Entry, PathMatch, ValueMatch};
use fairlead_edge_translate::ir::{Drained, Origin, Route, RouteConfig};

/// The route configuration `config`; `route(route, origin, write)` writes the encoding of
/// each of its routes (see [`entry`]). `alt_svc`, when given, is added to every response
/// (the `alt-svc` header advertising HTTP/3 on the same port).
pub fn encode(
    config: &RouteConfig,
    alt_svc: Option<&str>,
    mut route: impl FnMut(&Route, Origin, &mut dyn FnMut(&[u8])),
) -> Encoded {
    let mut bytes = Vec::new();
    wire::string(1, &config.name, &mut bytes);
    let mut host_bytes = Vec::new();
    for host in &config.virtual_hosts {
        host_bytes.clear();
        // Named without dots: Envoy's statistics cut names at dots.
        wire::string(
            1,
            &fairlead_edge_translate::http::stat_name(&host.host),
            &mut host_bytes,
        );
        wire::string(2, &host.host, &mut host_bytes);
        if host.host != "*" {
            wire::string(
                2,
                &format!("{}:{}", host.host, config.origin.port),
                &mut host_bytes,
            );
        }
        if host.misdirected {
            wire::bytes(3, misdirected(), &mut host_bytes);
        }
        for e in &host.routes {
            route(e, config.origin, &mut |encoded| {
                wire::bytes(3, encoded, &mut host_bytes);
            });
        }
        if !host.misdirected {
            // VirtualHost.retry_policy: the ALB's default, for routes naming none.
            wire::bytes(16, crate::retry::unsent(), &mut host_bytes);
        }
        wire::bytes(2, &host_bytes, &mut bytes);
    }
    if let Some(value) = alt_svc {
        use prost::Message as _;
        let header = envoy_types::pb::envoy::config::core::v3::HeaderValueOption {
            header: Some(envoy_types::pb::envoy::config::core::v3::HeaderValue {
                key: "alt-svc".into(),
                value: value.to_owned(),
                ..Default::default()
            }),
            append_action: envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
            ..Default::default()
        };
        // RouteConfiguration.response_headers_to_add.
        wire::bytes(4, &header.encode_to_vec(), &mut bytes);
    }
    Encoded {
        name: config.name.clone(),
        bytes,
    }
}

/// The one route of a misdirected host: every request answered 421.
fn misdirected() -> &'static [u8] {
    use prost::Message as _;
    static ENCODED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ENCODED.get_or_init(|| {
        route::Route {
            name: "misdirected".into(),
            r#match: Some(route::RouteMatch {
                path_specifier: Some(route::route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(route::route::Action::DirectResponse(
                route::DirectResponseAction {
                    status: 421,
                    ..Default::default()
                },
            )),
            ..Default::default()
        }
        .encode_to_vec()
    })
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
fn redirect_port(r: &fairlead_edge_model::input::RequestRedirect, origin: Origin) -> u32 {
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

/// The encoding of [`entry`]'s route: its per-filter configurations (a protobuf map, which
/// prost writes in the random order of a `HashMap`) written last and by name, so the same
/// route always encodes to the same bytes (the xDS server compares resources by content).
pub fn encode_entry(e: &Entry, origin: Origin, drained: Drained) -> Vec<u8> {
    use prost::Message as _;
    let mut r = entry(e, origin, drained);
    let per_filter: std::collections::BTreeMap<String, envoy_types::pb::google::protobuf::Any> =
        std::mem::take(&mut r.typed_per_filter_config)
            .into_iter()
            .collect();
    let mut bytes = r.encode_to_vec();
    let mut pair = Vec::new();
    for (name, config) in &per_filter {
        pair.clear();
        wire::string(1, name, &mut pair);
        wire::message(2, config, &mut pair);
        // Route.typed_per_filter_config.
        wire::bytes(13, &pair, &mut bytes);
    }
    bytes
}

/// The Envoy route of one entry, served at `origin`, its `drained` backends weighted 0, with
/// what its annotations ask ([`crate::features`], [`crate::traffic`]).
pub fn entry(entry: &Entry, origin: Origin, drained: Drained) -> route::Route {
    let shut = entry.shut();
    let action = match entry.action.as_ref() {
        // A guard or WAF that cannot be applied: the route answers 503, never its backends.
        _ if shut => route::route::Action::DirectResponse(route::DirectResponseAction {
            status: 503,
            ..Default::default()
        }),
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
                    Some(301) => ra::RedirectResponseCode::MovedPermanently,
                    Some(303) => ra::RedirectResponseCode::SeeOther,
                    Some(307) => ra::RedirectResponseCode::TemporaryRedirect,
                    Some(308) => ra::RedirectResponseCode::PermanentRedirect,
                    _ => ra::RedirectResponseCode::Found,
                } as i32,
                ..Default::default()
            })
        }
        Action::Forward {
            backends: weighted,
            rewrite,
            mirrors,
            timeout,
            retry,
            grpc,
        } => {
            let weight = |i: usize, w: &fairlead_edge_translate::http::Weighted| {
                if drained.contains(i) { 0 } else { w.weight }
            };
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
                    .enumerate()
                    .map(|(i, w)| {
                        route::weighted_cluster::ClusterWeight {
                            // A backend that did not resolve keeps its share, on a cluster that
                            // does not exist: Envoy answers it with the route's
                            // cluster_not_found_response_code (500; 503, which gRPC reads as
                            // UNAVAILABLE, on gRPC routes), as the spec requires.
                            name: w
                                .backend
                                .as_ref()
                                .map_or_else(|| "invalid-backend".to_owned(), Backend::cluster),
                            weight: Some(UInt32Value {
                                value: weight(i, w),
                            }),
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
                    retry_policy: retry.as_ref().map(crate::retry::policy),
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
                crate::traffic::route_action(
                    &entry.annotations.traffic,
                    &entry.matcher.path,
                    &mut action,
                );
                crate::upstream::route_action(&entry.annotations.upstream, &mut action);
                route::route::Action::Route(action)
            }
        }
    };
    route::Route {
        name: entry.name.clone(),
        stat_prefix: if origin.route_statistics {
            entry.stat_prefix.clone()
        } else {
            String::new()
        },
        r#match: Some(route_match(entry)),
        action: Some(action),
        request_headers_to_add: header_options(&entry.request_headers),
        request_headers_to_remove: entry.request_headers.remove.clone(),
        response_headers_to_add: header_options(&entry.response_headers)
            .into_iter()
            .chain(crate::traffic::response_headers(&entry.annotations.traffic))
            .collect(),
        response_headers_to_remove: entry.response_headers.remove.clone(),
        typed_per_filter_config: crate::features::per_route(entry).into_iter().collect(),
        ..Default::default()
    }
}
