//! What a request and its answer may be, in Envoy: `limit-rps` is the local rate limit
//! filter's per-route token bucket (per proxy and per route rule match, shared by all clients
//! — ingress-nginx's is per client address; `limit-rps` tokens a second, a burst of five times
//! that, ingress-nginx's default burst multiplier; beyond it 429); `buffer-max-request-bytes` is the buffer filter's per-route limit (the
//! request is buffered whole, a larger body gets 413); `idle-timeout` is the route's
//! `idle_timeout`; `rewrite-target` is a `regex_rewrite` of the rule's path expression;
//! `response-headers-to-add` are the route's response headers.

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::filters::http::buffer::v3 as buffer;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3 as ratelimit;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::envoy::r#type::v3 as types;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};

use crate::pb::{any, duration};
use fairlead_edge_model::annotations::Traffic;
use fairlead_edge_translate::http::PathMatch;

/// The local rate limit filter's name.
pub const RATE_LIMIT: &str = "envoy.filters.http.local_ratelimit";
/// The buffer filter's name.
pub const BUFFER: &str = "envoy.filters.http.buffer";

/// How many seconds' worth of `limit-rps` a client may burst (ingress-nginx's default burst
/// multiplier).
pub const BURST_SECONDS: u32 = 5;

/// The statistics prefix of the routes' rate limits (`http_local_rate_limit.limit_rps.*`).
const RATE_LIMIT_STATS: &str = "limit_rps";

/// The rate limit filter as a connection manager carries it (routes bring their buckets).
pub fn rate_limit_filter() -> Any {
    any(&ratelimit::LocalRateLimit {
        stat_prefix: RATE_LIMIT_STATS.into(),
        ..Default::default()
    })
}

/// Every request, as a runtime fraction.
fn always() -> core::RuntimeFractionalPercent {
    core::RuntimeFractionalPercent {
        default_value: Some(types::FractionalPercent {
            numerator: 100,
            denominator: types::fractional_percent::DenominatorType::Hundred as i32,
        }),
        ..Default::default()
    }
}

/// The per-route bucket of `limit-rps`.
pub fn rate_limit(rps: u32) -> Any {
    any(&ratelimit::LocalRateLimit {
        stat_prefix: RATE_LIMIT_STATS.into(),
        token_bucket: Some(types::TokenBucket {
            max_tokens: rps.saturating_mul(BURST_SECONDS),
            tokens_per_fill: Some(UInt32Value { value: rps }),
            fill_interval: Some(duration(std::time::Duration::from_secs(1))),
        }),
        filter_enabled: Some(always()),
        filter_enforced: Some(always()),
        ..Default::default()
    })
}

/// The buffer filter as a connection manager carries it: disabled, so its limit is only a
/// placeholder the routes replace.
pub fn buffer_filter() -> Any {
    any(&buffer::Buffer {
        max_request_bytes: Some(UInt32Value { value: 1 << 20 }),
    })
}

/// The per-route buffer of `buffer-max-request-bytes`.
pub fn buffer(bytes: u32) -> Any {
    any(&buffer::BufferPerRoute {
        r#override: Some(buffer::buffer_per_route::Override::Buffer(buffer::Buffer {
            max_request_bytes: Some(UInt32Value { value: bytes }),
        })),
    })
}

/// What `traffic` changes of a route to a backend: its idle timeout and, for a path matched
/// by `path`, the rewrite.
pub fn route_action(traffic: &Traffic, path: &PathMatch, action: &mut route::RouteAction) {
    if let Some(seconds) = traffic.idle_timeout_seconds {
        action.idle_timeout = Some(duration(std::time::Duration::from_secs(u64::from(seconds))));
    }
    if let (Some(target), PathMatch::Regex(pattern)) = (&traffic.rewrite_target, path) {
        action.regex_rewrite = Some(matcher::RegexMatchAndSubstitute {
            pattern: Some(matcher::RegexMatcher {
                regex: pattern.clone(),
                ..Default::default()
            }),
            substitution: target.clone(),
        });
    }
}

/// The response headers of `response-headers-to-add` (each replaces one the backend sent).
pub fn response_headers(traffic: &Traffic) -> impl Iterator<Item = core::HeaderValueOption> + '_ {
    traffic
        .response_headers
        .iter()
        .map(|h| core::HeaderValueOption {
            header: Some(core::HeaderValue {
                key: h.name.clone(),
                value: h.value.clone(),
                ..Default::default()
            }),
            append_action: core::header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd
                as i32,
            ..Default::default()
        })
}
