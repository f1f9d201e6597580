//! The WAF in Envoy: the `ext_proc` filter asking the proxy pod's WAF
//! ([`fairlead_edge_model::names::WAF_CLUSTER`], `fairlead edge waf`) about each request of a
//! route with `mod-security` — its headers, and its body once buffered; never a response.
//! The connection manager carries the filter disabled; a WAF route enables it with its rule
//! set in the stream's opening metadata (digest and JSON), so routes without it are never
//! inspected. When the WAF cannot answer, the request gets 503 (`failure_mode_allow` off);
//! the WAF's verdict (rule ids, `blocked` or `detected`) lands in the request's dynamic
//! metadata ([`fairlead_edge_model::names::WAF_METADATA`]) for the access log.

use base64::Engine as _;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::filters::http::ext_proc::v3 as ext_proc;
use envoy_types::pb::google::protobuf::Any;

use crate::pb::{any, duration};
use fairlead_edge_model::names;
use fairlead_edge_translate::waf::Firewall;

/// The filter's name.
pub const FILTER: &str = "envoy.filters.http.ext_proc";

/// How long Envoy waits for a verdict (the CRS on a large body takes milliseconds, not
/// seconds).
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What Envoy tells the WAF beside the request: the client's address as Envoy settled it
/// (under the instance's `originalIPDetection`), where the request came in, its protocol.
pub const ATTRIBUTES: &[&str] = &[
    "source.address",
    "source.port",
    "destination.address",
    "destination.port",
    "request.protocol",
];

/// The filter as a connection manager carries it: requests' headers and buffered bodies to
/// the WAF, closed when it cannot answer.
pub fn filter() -> Any {
    use ext_proc::processing_mode::{BodySendMode, HeaderSendMode};
    any(&ext_proc::ExternalProcessor {
        grpc_service: Some(core::GrpcService {
            target_specifier: Some(core::grpc_service::TargetSpecifier::EnvoyGrpc(
                core::grpc_service::EnvoyGrpc {
                    cluster_name: names::WAF_CLUSTER.into(),
                    ..Default::default()
                },
            )),
            timeout: Some(duration(TIMEOUT)),
            ..Default::default()
        }),
        failure_mode_allow: false,
        // The WAF down, hanging or failing: 503, as the authentication service's failures.
        status_on_error: Some(envoy_types::pb::envoy::r#type::v3::HttpStatus {
            code: envoy_types::pb::envoy::r#type::v3::StatusCode::ServiceUnavailable as i32,
        }),
        processing_mode: Some(ext_proc::ProcessingMode {
            request_header_mode: HeaderSendMode::Send as i32,
            response_header_mode: HeaderSendMode::Skip as i32,
            request_body_mode: BodySendMode::Buffered as i32,
            response_body_mode: BodySendMode::None as i32,
            request_trailer_mode: HeaderSendMode::Skip as i32,
            response_trailer_mode: HeaderSendMode::Skip as i32,
        }),
        request_attributes: ATTRIBUTES.iter().map(|a| (*a).to_owned()).collect(),
        message_timeout: Some(duration(TIMEOUT)),
        metadata_options: Some(ext_proc::MetadataOptions {
            receiving_namespaces: Some(ext_proc::metadata_options::MetadataNamespaces {
                untyped: vec![names::WAF_METADATA.to_owned()],
                ..Default::default()
            }),
            ..Default::default()
        }),
        stat_prefix: "waf".into(),
        ..Default::default()
    })
}

/// The per-route configuration of a route `route` (`namespace/name`) whose WAF is
/// `firewall`: the rule set in the stream's opening metadata. `None` when shut (the route
/// answers 503 without asking).
pub fn per_route(route: &str, firewall: &Firewall) -> Option<Any> {
    let rules = firewall.rules.as_ref()?;
    let json = serde_json::to_vec(rules).ok()?;
    let header = |key: &str, value: String| core::HeaderValue {
        key: key.to_owned(),
        value,
        ..Default::default()
    };
    Some(any(&ext_proc::ExtProcPerRoute {
        r#override: Some(ext_proc::ext_proc_per_route::Override::Overrides(
            ext_proc::ExtProcOverrides {
                grpc_initial_metadata: vec![
                    header(names::WAF_ROUTE_HEADER, route.to_owned()),
                    header(names::WAF_DIGEST_HEADER, firewall.digest.clone()),
                    header(
                        names::WAF_RULES_HEADER,
                        base64::engine::general_purpose::STANDARD_NO_PAD.encode(json),
                    ),
                ],
                ..Default::default()
            },
        )),
    }))
}
