//! A rule's CORS policy ([`fairlead_edge_translate::cors`] decides it) as Envoy's CORS
//! filter: on the connection manager when some route asks for it, before the filters that
//! judge who may pass (a browser's preflight carries no credentials), and a `CorsPolicy` per
//! route. Envoy answers a preflight from an allowed origin itself and adds the response
//! headers to the answers of the others; it always names the requesting origin in
//! `access-control-allow-origin`, which the Fetch standard requires once credentials go along.

use envoy_types::pb::envoy::extensions::filters::http::cors::v3::{Cors as Filter, CorsPolicy};
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::{Any, BoolValue};

use crate::pb::any;
use fairlead_edge_translate::cors::{Cors, Origin};

/// The filter's name.
pub const FILTER: &str = "envoy.filters.http.cors";

/// The filter on the connection manager (its policy is each route's).
pub fn filter() -> Any {
    any(&Filter {})
}

/// The route's policy.
pub fn per_route(cors: &Cors) -> Any {
    let matcher = |pattern| StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    };
    let regex = |regex: String| {
        string_matcher::MatchPattern::SafeRegex(RegexMatcher {
            regex,
            ..Default::default()
        })
    };
    let origins = cors
        .origins
        .iter()
        .map(|o| {
            matcher(match o {
                Origin::Any => regex(".*".to_owned()),
                Origin::Exact(origin) => string_matcher::MatchPattern::Exact(origin.clone()),
                Origin::Pattern(pattern) => regex(pattern.clone()),
            })
        })
        .collect();
    any(&CorsPolicy {
        allow_origin_string_match: origins,
        allow_methods: cors.methods.join(", "),
        allow_headers: cors.headers.join(", "),
        expose_headers: cors.expose.join(", "),
        max_age: cors.max_age.map(|a| a.to_string()).unwrap_or_default(),
        allow_credentials: cors.credentials.then_some(BoolValue { value: true }),
        ..Default::default()
    })
}
