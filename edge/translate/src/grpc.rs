//! GRPCRoute rules to route entries: a method match becomes a path match on
//! `/<service>/<method>` (exact when both are given, a `/<service>/` prefix for a service
//! alone, an expression otherwise), header matches and filters as on HTTPRoutes, backends
//! speaking HTTP/2.

use std::cmp::Reverse;

use crate::http::{self, Action, Entry, Match, PathMatch, Rejected, Translated};
use crate::refs::Grants;
use fairlead_edge_model::input::{GrpcRoute, Input};

/// The path condition of a method match.
fn path(
    field: &str,
    m: Option<&fairlead_edge_model::input::GrpcMethodMatch>,
) -> Result<PathMatch, Rejected> {
    let Some(m) = m else {
        return Ok(PathMatch::Prefix("/".into()));
    };
    let service = m.service.as_deref().filter(|s| !s.is_empty());
    let method = m.method.as_deref().filter(|s| !s.is_empty());
    match m.type_.as_deref().unwrap_or("Exact") {
        "Exact" => {
            for (name, value) in [("service", service), ("method", method)] {
                if value.is_some_and(|v| v.contains('/')) {
                    return Err(Rejected(format!("{field}.{name}: must not contain /")));
                }
            }
            Ok(match (service, method) {
                (Some(s), Some(m)) => PathMatch::Exact(format!("/{s}/{m}")),
                (Some(s), None) => PathMatch::Prefix(format!("/{s}")),
                (None, Some(m)) => PathMatch::Regex(format!("/[^/]+/{}", regex::escape(m))),
                (None, None) => {
                    return Err(Rejected(format!(
                        "{field}: one of service and method is required"
                    )));
                }
            })
        }
        "RegularExpression" => {
            for (name, value) in [("service", service), ("method", method)] {
                if let Some(v) = value {
                    http::check_regex(&format!("{field}.{name}"), v)?;
                }
            }
            Ok(PathMatch::Regex(format!(
                "/{}/{}",
                service.unwrap_or("[^/]+"),
                method.unwrap_or("[^/]+")
            )))
        }
        other => Err(Rejected(format!("{field}.type: {other} is not supported"))),
    }
}

/// Translates one GRPCRoute.
pub fn translate(
    route: &GrpcRoute,
    input: &Input,
    grants: &Grants<'_>,
) -> Result<Translated, Rejected> {
    let (namespace, name, created) = http::identity(&route.metadata);
    let mut unresolved = None;
    let default_rule = [fairlead_edge_model::input::GrpcRule::default()];
    let rules = if route.spec.rules.is_empty() {
        &default_rule[..]
    } else {
        &route.spec.rules[..]
    };
    let mut entries = Vec::with_capacity(rules.iter().map(|r| r.matches.len().max(1)).sum());
    for (r, rule) in rules.iter().enumerate() {
        let field = format!("spec.rules[{r}]");
        let rule_filters = http::filters(&format!("{field}.filters"), &rule.filters)?;
        if rule_filters.redirect.is_some()
            || rule_filters.rewrite.is_some()
            || rule_filters.cors.is_some()
        {
            return Err(Rejected(format!(
                "{field}.filters: RequestRedirect, URLRewrite and CORS are not GRPCRoute filters"
            )));
        }
        let refs = http::RuleRefs {
            kind: "GRPCRoute",
            namespace: &namespace,
            field: &field,
            http2: true,
            headers_only: false,
            variant: None,
        };
        let (backends, mirrors) = refs.resolve(
            &rule.backend_refs,
            &rule_filters.mirrors,
            input,
            grants,
            &mut unresolved,
        )?;
        let action = std::sync::Arc::new(Action::Forward {
            backends,
            rewrite: None,
            mirrors,
            timeout: None,
            retry: None,
            grpc: true,
        });
        let default_match = [fairlead_edge_model::input::GrpcMatch::default()];
        let matches = if rule.matches.is_empty() {
            &default_match[..]
        } else {
            &rule.matches[..]
        };
        for (m, spec) in matches.iter().enumerate() {
            let f = format!("{field}.matches[{m}]");
            let matcher = Match {
                path: path(&format!("{f}.method"), spec.method.as_ref())?,
                headers: http::value_matches(&format!("{f}.headers"), &spec.headers, true)?,
                query: Vec::new(),
                method: None,
            };
            // The spec's GRPCRoute precedence: the most characters of service, then of
            // method, then the most header matches (whatever the match type).
            let length = |v: Option<&String>| v.map_or(0, String::len);
            let (service, method) = spec.method.as_ref().map_or((0, 0), |m| {
                (length(m.service.as_ref()), length(m.method.as_ref()))
            });
            entries.push(std::sync::Arc::new(Entry {
                name: format!("{namespace}/{name}/grpc/rule/{r}/match/{m}"),
                stat_prefix: http::stat_name(&format!("grpcroute/{namespace}/{name}/rule/{r}")),
                order: (
                    0,
                    Reverse(service),
                    true,
                    Reverse(method),
                    Reverse(matcher.headers.len()),
                    created.clone(),
                    format!("{namespace}/{name}"),
                    r,
                    m,
                ),
                matcher,
                action: action.clone(),
                request_headers: rule_filters.request.clone(),
                response_headers: rule_filters.response.clone(),
                annotations: crate::annotations::none(),
                guard: None,
                waf: None,
                cors: None,
            }));
        }
    }
    Ok(Translated {
        entries,
        unresolved,
    })
}
