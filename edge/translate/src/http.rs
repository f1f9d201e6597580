//! HTTPRoute rules to route entries: matches, filters, backends and timeouts, checked as the
//! spec asks (an unknown filter or an invalid regular expression rejects the route with
//! `UnsupportedValue`, naming the field), ordered by the spec's precedence.

use std::cmp::Reverse;
use std::time::Duration;

use crate::backend::{self, Backend, Unresolved};
use crate::refs::Grants;
use fairlead_edge_model::annotations::Annotations;
use fairlead_edge_model::input::{
    BackendRef, HeaderModifier, HttpFilter, HttpRoute, Input, RequestRedirect, UrlRewrite,
};

/// How a request path is matched.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum PathMatch {
    /// The whole path.
    Exact(String),
    /// Whole segments (`/a` matches `/a` and `/a/b`, not `/ab`); `/` matches everything.
    Prefix(String),
    /// A regular expression over the whole path.
    Regex(String),
}

/// A header, query parameter or method condition: exact or regular expression.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
pub struct ValueMatch {
    /// Name.
    pub name: String,
    /// Value, or the expression.
    pub value: String,
    /// `value` is a regular expression.
    pub regex: bool,
}

/// One match of a rule.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Match {
    /// Path.
    pub path: PathMatch,
    /// Headers (the first of each name only, as the spec says).
    pub headers: Vec<ValueMatch>,
    /// Query parameters (the first of each name only).
    pub query: Vec<ValueMatch>,
    /// Method.
    pub method: Option<String>,
}

/// A backend and its weight; `None` stands for a reference that did not resolve, whose share
/// of the traffic fails (HTTP 500) as the spec requires.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Weighted {
    /// The backend.
    pub backend: Option<Backend>,
    /// Weight.
    pub weight: u32,
    /// Header changes for requests to this backend.
    #[serde(skip_serializing_if = "HeaderModifier::is_empty")]
    pub request_headers: HeaderModifier,
    /// Header changes for answers from this backend.
    #[serde(skip_serializing_if = "HeaderModifier::is_empty")]
    pub response_headers: HeaderModifier,
}

/// What a matched request gets.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Action {
    /// Forward to the weighted backends, after an optional rewrite.
    Forward {
        /// Backends (an empty list answers 500).
        backends: Vec<Weighted>,
        /// URL rewrite.
        rewrite: Option<UrlRewrite>,
        /// Mirrors (backend, share in parts per million).
        mirrors: Vec<(Backend, u32)>,
        /// Whole-request timeout.
        timeout: Option<Duration>,
        /// Retries ([`crate::retry`]; `None`: the ALB's default).
        #[serde(skip_serializing_if = "Option::is_none")]
        retry: Option<crate::retry::Retry>,
        /// A gRPC route: a backend that does not resolve fails its share with UNAVAILABLE
        /// (HTTP 503) rather than HTTP 500.
        grpc: bool,
    },
    /// Redirect.
    Redirect(RequestRedirect),
}

/// One Envoy route: a match of a rule, its action and header changes.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Unique name: `namespace/name/rule/i/match/j`.
    pub name: String,
    /// The name its statistics carry, one per rule: `httproute/<namespace>/<name>/rule/<i>`
    /// (or `grpcroute/…`; see [`stat_name`]).
    #[serde(skip)]
    pub stat_prefix: String,
    /// Precedence; smaller sorts first (the IR holds entries in this order already).
    #[serde(skip)]
    pub order: Order,
    /// Match.
    pub matcher: Match,
    /// Action (shared by the entries of one rule).
    pub action: std::sync::Arc<Action>,
    /// Rule-level request header changes.
    #[serde(skip_serializing_if = "HeaderModifier::is_empty")]
    pub request_headers: HeaderModifier,
    /// Rule-level response header changes.
    #[serde(skip_serializing_if = "HeaderModifier::is_empty")]
    pub response_headers: HeaderModifier,
    /// The route's ALB annotations (shared by its entries; see [`crate::annotations`]).
    #[serde(skip_serializing_if = "crate::annotations::asks_nothing")]
    pub annotations: std::sync::Arc<Annotations>,
    /// Who may pass, as the annotations decided it ([`crate::access`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<std::sync::Arc<crate::access::Guard>>,
    /// The WAF, as the annotation decided it ([`crate::waf`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waf: Option<std::sync::Arc<crate::waf::Firewall>>,
    /// The rule's CORS policy ([`crate::cors`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cors: Option<std::sync::Arc<crate::cors::Cors>>,
}

impl Entry {
    /// Whether the entry answers 503: a guard or WAF it asks for cannot be applied.
    pub fn shut(&self) -> bool {
        self.guard.as_ref().is_some_and(|g| g.shut) || self.waf.as_ref().is_some_and(|w| w.shut)
    }
}

/// `name` as Envoy statistics carry it: dots (which Kubernetes names may hold) become `_`,
/// since Envoy cuts stat names into tags at dots; the bootstrap's tag extractors then find
/// routes and backends by these names.
pub fn stat_name(name: &str) -> String {
    name.replace('.', "_")
}

/// The spec's precedence: exact path, then regular expressions, then the longest prefix; a
/// method match; the most header matches; the most query matches; then the oldest route, the
/// route's namespace/name, the rule and the match order. GRPCRoute entries fill the same
/// slots with their own precedence (service length, method length, header matches).
pub type Order = (
    u8,
    Reverse<usize>,
    bool,
    Reverse<usize>,
    Reverse<usize>,
    String,
    String,
    usize,
    usize,
);

/// A translated route: entries, and whether its references resolved.
pub struct Translated {
    /// Entries (empty when the route is rejected), shared with the listeners they attach to.
    pub entries: Vec<std::sync::Arc<Entry>>,
    /// The first reference that did not resolve.
    pub unresolved: Option<Unresolved>,
}

/// Why a route cannot be accepted at all: a message naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected(pub String);

pub(crate) fn check_regex(field: &str, pattern: &str) -> Result<(), Rejected> {
    regex::Regex::new(pattern)
        .map(|_| ())
        .map_err(|e| Rejected(format!("{field}: invalid regular expression: {e}")))
}

pub(crate) fn value_matches(
    field: &str,
    list: &[fairlead_edge_model::input::ValueMatch],
    fold_case: bool,
) -> Result<Vec<ValueMatch>, Rejected> {
    let mut out: Vec<ValueMatch> = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let regex = match m.type_.as_deref().unwrap_or("Exact") {
            "Exact" => false,
            "RegularExpression" => {
                check_regex(&format!("{field}[{i}].value"), &m.value)?;
                true
            }
            other => {
                return Err(Rejected(format!(
                    "{field}[{i}].type: {other} is not supported"
                )));
            }
        };
        let same = |a: &str, b: &str| {
            if fold_case {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        if out.iter().any(|o| same(&o.name, &m.name)) {
            continue;
        }
        let name = if fold_case {
            m.name.to_ascii_lowercase()
        } else {
            m.name.clone()
        };
        out.push(ValueMatch {
            name,
            value: m.value.clone(),
            regex,
        });
    }
    Ok(out)
}

/// What makes `value` no path an `Exact` or `PathPrefix` match may name, as the Gateway
/// API's CRDs say (objects read from files never met them; found by fuzzing, a `#` in a
/// prefix was rendered into a route Envoy refuses): an absolute path of URI path characters
/// or percent-encodings, with no `//`, `/./`, `/../`, encoded slash or `#`.
fn path_problem(value: &str) -> Option<&'static str> {
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
            {
                i += 3;
                continue;
            }
            b if b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b) => {}
            _ => return Some("holds a character a path cannot (only URI path characters and %XX)"),
        }
        i += 1;
    }
    let lower = value.to_ascii_lowercase();
    if !value.starts_with('/') {
        Some("must start with /")
    } else if value.contains("//") {
        Some("must not contain //")
    } else if value.contains("/./") || value.ends_with("/.") {
        Some("must not contain /./")
    } else if value.contains("/../") || value.ends_with("/..") {
        Some("must not contain /../")
    } else if lower.contains("%2f") {
        Some("must not contain an encoded slash (%2F)")
    } else {
        None
    }
}

fn matcher(field: &str, m: &fairlead_edge_model::input::HttpMatch) -> Result<Match, Rejected> {
    let path = m.path.clone().unwrap_or_default();
    let value = path.value.clone().unwrap_or_else(|| "/".into());
    let kind = path.type_.as_deref().unwrap_or("PathPrefix");
    if matches!(kind, "Exact" | "PathPrefix")
        && let Some(problem) = path_problem(&value)
    {
        return Err(Rejected(format!("{field}.path.value: {value:?} {problem}")));
    }
    let path = match kind {
        "Exact" => PathMatch::Exact(value),
        "PathPrefix" => {
            let trimmed = value.trim_end_matches('/');
            PathMatch::Prefix(if trimmed.is_empty() {
                "/".into()
            } else {
                trimmed.into()
            })
        }
        "RegularExpression" => {
            check_regex(&format!("{field}.path.value"), &value)?;
            PathMatch::Regex(value)
        }
        other => {
            return Err(Rejected(format!(
                "{field}.path.type: {other} is not supported"
            )));
        }
    };
    Ok(Match {
        path,
        headers: value_matches(&format!("{field}.headers"), &m.headers, true)?,
        query: value_matches(&format!("{field}.queryParams"), &m.query_params, false)?,
        method: m.method.clone(),
    })
}

/// The filters of a rule or backend, checked; returns (request headers, response headers,
/// redirect, rewrite, mirrors as backend refs).
pub(crate) struct Filters {
    pub(crate) request: HeaderModifier,
    pub(crate) response: HeaderModifier,
    pub(crate) redirect: Option<RequestRedirect>,
    pub(crate) rewrite: Option<UrlRewrite>,
    pub(crate) mirrors: Vec<(BackendRef, u32, String)>,
    pub(crate) cors: Option<crate::cors::Cors>,
}

pub(crate) fn filters(field: &str, list: &[HttpFilter]) -> Result<Filters, Rejected> {
    let mut out = Filters {
        request: HeaderModifier::default(),
        response: HeaderModifier::default(),
        redirect: None,
        rewrite: None,
        mirrors: Vec::new(),
        cors: None,
    };
    let missing =
        |i: usize, what: &str| Rejected(format!("{field}[{i}].{what}: required by its type"));
    for (i, f) in list.iter().enumerate() {
        match f.type_.as_str() {
            "RequestHeaderModifier" => {
                let m = f
                    .request_header_modifier
                    .clone()
                    .ok_or_else(|| missing(i, "requestHeaderModifier"))?;
                merge(&mut out.request, m);
            }
            "ResponseHeaderModifier" => {
                let m = f
                    .response_header_modifier
                    .clone()
                    .ok_or_else(|| missing(i, "responseHeaderModifier"))?;
                merge(&mut out.response, m);
            }
            "RequestRedirect" => {
                out.redirect = Some(
                    f.request_redirect
                        .clone()
                        .ok_or_else(|| missing(i, "requestRedirect"))?,
                );
            }
            "URLRewrite" => {
                out.rewrite = Some(
                    f.url_rewrite
                        .clone()
                        .ok_or_else(|| missing(i, "urlRewrite"))?,
                );
            }
            "RequestMirror" => {
                let m = f
                    .request_mirror
                    .clone()
                    .ok_or_else(|| missing(i, "requestMirror"))?;
                let share = match (m.percent, &m.fraction) {
                    (Some(_), Some(_)) => {
                        return Err(Rejected(format!(
                            "{field}[{i}].requestMirror: percent and fraction are exclusive"
                        )));
                    }
                    (_, Some(f)) => {
                        let denominator = f.denominator.unwrap_or(100);
                        if denominator <= 0 || f.numerator < 0 || f.numerator > denominator {
                            return Err(Rejected(format!(
                                "{field}[{i}].requestMirror.fraction: needs 0 <= numerator <= denominator, denominator > 0"
                            )));
                        }
                        i64::from(f.numerator) * PER_MILLION / i64::from(denominator)
                    }
                    (percent, None) => i64::from(percent.unwrap_or(100).clamp(0, 100)) * 10_000,
                };
                out.mirrors.push((
                    m.backend_ref,
                    u32::try_from(share).unwrap_or(0),
                    format!("{field}[{i}].requestMirror.backendRef"),
                ));
            }
            "CORS" => {
                let asked = f.cors.as_ref().ok_or_else(|| missing(i, "cors"))?;
                out.cors = Some(
                    crate::cors::cors(&format!("{field}[{i}].cors"), asked).map_err(Rejected)?,
                );
            }
            other => {
                return Err(Rejected(format!(
                    "{field}[{i}].type: {other} is not supported"
                )));
            }
        }
    }
    if out.redirect.is_some() && out.rewrite.is_some() {
        return Err(Rejected(format!(
            "{field}: RequestRedirect and URLRewrite cannot be used together"
        )));
    }
    Ok(out)
}

fn merge(into: &mut HeaderModifier, from: HeaderModifier) {
    into.set.extend(from.set);
    into.add.extend(from.add);
    into.remove.extend(from.remove);
}

pub(crate) fn rank(path: &PathMatch) -> (u8, Reverse<usize>) {
    match path {
        PathMatch::Exact(p) => (0, Reverse(p.len())),
        PathMatch::Regex(p) => (1, Reverse(p.len())),
        PathMatch::Prefix(p) => (2, Reverse(p.len())),
    }
}

/// The route timeout of `timeouts`: without retries the backend request is the request, so
/// the shorter of `request` and `backendRequest` bounds it; with retries only `request` does,
/// and `backendRequest` bounds each try ([`crate::retry`]). `0s` is no limit; no limit at all
/// is `Some(0)`, which Envoy reads as none.
fn timeout(
    field: &str,
    timeouts: Option<&fairlead_edge_model::input::HttpTimeouts>,
    retrying: bool,
) -> Result<Option<std::time::Duration>, Rejected> {
    let Some(timeouts) = timeouts else {
        return Ok(None);
    };
    let mut limits = Vec::new();
    let backend_request = if retrying {
        &None
    } else {
        &timeouts.backend_request
    };
    for (name, text) in [
        ("request", &timeouts.request),
        ("backendRequest", backend_request),
    ] {
        if let Some(text) = text {
            limits.push(fairlead_edge_model::duration::parse(text).ok_or_else(|| {
                Rejected(format!(
                    "{field}.timeouts.{name}: {text:?} is not a duration"
                ))
            })?);
        }
    }
    if limits.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        limits
            .iter()
            .copied()
            .filter(|d| !d.is_zero())
            .min()
            .unwrap_or_default(),
    ))
}

/// The unit of a mirror's share: parts per million.
const PER_MILLION: i64 = 1_000_000;

/// Mirror backends and the share of requests each gets, in parts per million.
pub(crate) type Mirrors = Vec<(Backend, u32)>;

/// Where a rule's references come from, for resolving them.
pub(crate) struct RuleRefs<'a> {
    /// The route kind (the referrer of ReferenceGrants).
    pub(crate) kind: &'a str,
    /// The route's namespace.
    pub(crate) namespace: &'a str,
    /// The rule's field path (`spec.rules[0]`).
    pub(crate) field: &'a str,
    /// The backends speak HTTP/2 (gRPC).
    pub(crate) http2: bool,
    /// Backend filters other than header modifiers are refused.
    pub(crate) headers_only: bool,
    /// What the route's annotations change of its backends' clusters.
    pub(crate) variant: Option<std::sync::Arc<crate::upstream::Variant>>,
}

impl RuleRefs<'_> {
    /// A rule's weighted backends (with their own header filters) and its mirrors, resolved;
    /// the first reference that does not resolve is kept in `unresolved`, and its share
    /// stays (a `None` backend) so that it fails as the spec asks.
    pub(crate) fn resolve(
        &self,
        backend_refs: &[BackendRef],
        mirrors: &[(BackendRef, u32, String)],
        input: &Input,
        grants: &Grants<'_>,
        unresolved: &mut Option<crate::backend::Unresolved>,
    ) -> Result<(Vec<Weighted>, Mirrors), Rejected> {
        let field = self.field;
        let resolve = |b: &BackendRef, f: &str| {
            backend::resolve(b, (self.kind, self.namespace), f, input, grants, self.http2)
        };
        let mut backends = Vec::with_capacity(backend_refs.len());
        for (b, backend_ref) in backend_refs.iter().enumerate() {
            let f = format!("{field}.backendRefs[{b}]");
            let own = filters(&format!("{f}.filters"), &backend_ref.filters)?;
            if self.headers_only
                && (own.redirect.is_some()
                    || own.rewrite.is_some()
                    || !own.mirrors.is_empty()
                    || own.cors.is_some())
            {
                return Err(Rejected(format!(
                    "{f}.filters: only header modifiers are supported on a backend"
                )));
            }
            let weight = u32::try_from(backend_ref.weight.unwrap_or(1).max(0)).unwrap_or(1);
            let backend = match resolve(backend_ref, &f) {
                Ok(b) => Some(Backend {
                    variant: self.variant.clone(),
                    ..b
                }),
                Err(problem) => {
                    unresolved.get_or_insert(problem);
                    None
                }
            };
            if weight > 0 {
                backends.push(Weighted {
                    backend,
                    weight,
                    request_headers: own.request,
                    response_headers: own.response,
                });
            }
        }
        let mut resolved_mirrors = Vec::new();
        for (mirror, percent, field) in mirrors {
            match resolve(mirror, field) {
                Ok(b) => resolved_mirrors.push((b, *percent)),
                Err(problem) => {
                    unresolved.get_or_insert(problem);
                }
            }
        }
        Ok((backends, resolved_mirrors))
    }
}

/// A route's namespace, name and creation time (the last orders routes of equal rules).
pub(crate) fn identity(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (String, String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
        meta.creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
    )
}

/// Translates one HTTPRoute.
pub fn translate(
    route: &HttpRoute,
    input: &Input,
    grants: &Grants<'_>,
    compile: &dyn crate::waf::Compile,
) -> Result<Translated, Rejected> {
    let (namespace, name, created) = identity(&route.metadata);
    let annotations = crate::annotations::read(&route.metadata).map_err(Rejected)?;
    let (variant, mut unresolved) =
        crate::upstream::Variant::of(&annotations, &namespace, input, grants);
    let (guard, unguarded) = crate::access::Guard::of(&annotations, &namespace, input, grants);
    if let Some(problem) = unguarded {
        unresolved.get_or_insert(problem);
    }
    let (waf, unprotected) =
        crate::waf::Firewall::of(&annotations, &namespace, input, grants, compile);
    if let Some(problem) = unprotected {
        unresolved.get_or_insert(problem);
    }
    let default_rule = [fairlead_edge_model::input::HttpRule::default()];
    let rules = if route.spec.rules.is_empty() {
        &default_rule[..]
    } else {
        &route.spec.rules[..]
    };
    let mut entries = Vec::with_capacity(rules.iter().map(|r| r.matches.len().max(1)).sum());
    for (r, rule) in rules.iter().enumerate() {
        let field = format!("spec.rules[{r}]");
        let rule_filters = filters(&format!("{field}.filters"), &rule.filters)?;
        let refs = RuleRefs {
            kind: "HTTPRoute",
            namespace: &namespace,
            field: &field,
            http2: false,
            headers_only: true,
            variant: variant.clone(),
        };
        let (backends, mirrors) = refs.resolve(
            &rule.backend_refs,
            &rule_filters.mirrors,
            input,
            grants,
            &mut unresolved,
        )?;
        let retry = crate::retry::retry(&field, rule.retry.as_ref(), rule.timeouts.as_ref())
            .map_err(Rejected)?;
        let timeout = timeout(
            &field,
            rule.timeouts.as_ref(),
            retry.as_ref().is_some_and(crate::retry::Retry::retries),
        )?;
        let cors = rule_filters.cors.clone().map(std::sync::Arc::new);
        crate::annotations::check_rule(&annotations, &field, rule, rule_filters.rewrite.as_ref())
            .map_err(Rejected)?;
        let action = std::sync::Arc::new(match rule_filters.redirect.clone() {
            Some(redirect) => Action::Redirect(redirect),
            None => Action::Forward {
                backends,
                rewrite: rule_filters.rewrite.clone(),
                mirrors,
                timeout,
                retry,
                grpc: false,
            },
        });
        let default_match = [fairlead_edge_model::input::HttpMatch::default()];
        let matches = if rule.matches.is_empty() {
            &default_match[..]
        } else {
            &rule.matches[..]
        };
        for (m, spec) in matches.iter().enumerate() {
            let matcher = matcher(&format!("{field}.matches[{m}]"), spec)?;
            let (kind, length) = rank(&matcher.path);
            entries.push(std::sync::Arc::new(Entry {
                name: format!("{namespace}/{name}/rule/{r}/match/{m}"),
                stat_prefix: stat_name(&format!("httproute/{namespace}/{name}/rule/{r}")),
                order: (
                    kind,
                    length,
                    matcher.method.is_none(),
                    Reverse(matcher.headers.len()),
                    Reverse(matcher.query.len()),
                    created.clone(),
                    format!("{namespace}/{name}"),
                    r,
                    m,
                ),
                matcher,
                action: action.clone(),
                request_headers: rule_filters.request.clone(),
                response_headers: rule_filters.response.clone(),
                annotations: annotations.clone(),
                guard: guard.clone(),
                waf: waf.clone(),
                cors: cors.clone(),
            }));
        }
    }
    Ok(Translated {
        entries,
        unresolved,
    })
}

#[cfg(test)]
mod tests {
    use super::path_problem;

    /// The Gateway API's rules for an `Exact` or `PathPrefix` value (the fuzzer's `#`
    /// among them: `fuzz/regressions/translate`).
    #[test]
    fn a_path_match_is_what_the_gateway_api_admits() {
        for ok in ["/", "/api", "/a/b/", "/%7Euser", "/a:b@c", "/v1.2/x_y-z~"] {
            assert_eq!(path_problem(ok), None, "{ok}");
        }
        for bad in [
            "api",
            "/pa#rtial",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a/..",
            "/a%2Fb",
            "/a%2fb",
            "/a b",
            "/a?b",
            "/%zz",
            "/a\\b",
        ] {
            assert!(path_problem(bad).is_some(), "{bad}");
        }
    }
}
