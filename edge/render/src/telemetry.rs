//! What every edge connection manager tells about the requests it serves: a JSON access log line
//! per request on Envoy's stdout (the Gateway API route and rule that served it, the backend, the
//! response and its flags, timings, the client, and the trace id), and a span per request through
//! Envoy's OpenTelemetry tracer — exported over OTLP/gRPC (or OTLP/HTTP, as the Gateway's instance
//! asks) to the bootstrap's [`OTLP_CLUSTER`] (the collector the proxy is given; with none, spans
//! are dropped and counted). Sampling is OpenTelemetry's default, parent-based: a request whose
//! `traceparent` says sampled (or not) is traced (or not); others at [`SAMPLED_PERCENT`] (trace-id
//! ratio). The connection manager itself samples everything, leaving the decision to that sampler:
//! Envoy starts no span for a request it decided not to trace, whatever its `traceparent` says.

use envoy_types::pb::envoy::config::accesslog::v3 as accesslog;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::Any;

use fairlead_edge_model::names::{OTLP_CLUSTER, SERVICE_NAME};

use crate::pb::any;

/// The percentage of requests traced when the client sent no sampling decision.
pub const SAMPLED_PERCENT: u32 = 1;

/// The fields of an access log line and the Envoy command each comes from (besides
/// `listener`, the connection manager's name).
pub const ACCESS_LOG_FIELDS: &[(&str, &str)] = &[
    ("start_time", "%START_TIME%"),
    ("method", "%REQ(:METHOD)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration_ms", "%DURATION%"),
    (
        "upstream_service_time_ms",
        "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    ),
    ("route", "%ROUTE_NAME%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("client_address", "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("trace_id", "%TRACE_ID%"),
    // The WAF's verdict on the request (`rules`, `action`), when a WAF route asked it.
    ("waf", "%DYNAMIC_METADATA(fairlead.waf)%"),
];

/// The access log of a connection manager whose statistics prefix is `listener`.
pub fn access_log(listener: &str) -> accesslog::AccessLog {
    use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::StdoutAccessLog;
    use prost::Name as _;
    accesslog::AccessLog {
        name: "envoy.access_loggers.stdout".into(),
        config_type: Some(accesslog::access_log::ConfigType::TypedConfig(Any {
            type_url: StdoutAccessLog::type_url(),
            value: stdout_json_format(listener),
        })),
        ..Default::default()
    }
}

/// `StdoutAccessLog { log_format: { json_format: <the fields> } }`, encoded by hand with the
/// fields in name order: prost keeps a `Struct`'s fields in a hash map, whose order differs
/// from one encoding to the next, and the snapshot's versions hash these bytes.
fn stdout_json_format(listener: &str) -> Vec<u8> {
    use crate::wire;
    let mut fields: Vec<(&str, &str)> = ACCESS_LOG_FIELDS.to_vec();
    fields.push(("listener", listener));
    fields.sort_unstable();
    let mut structure = Vec::new();
    for (name, value) in fields {
        // Value { string_value (3) }
        let mut string = Vec::new();
        wire::string(3, value, &mut string);
        // Struct.fields (1): map entry { key (1), value (2) }
        let mut entry = Vec::new();
        wire::string(1, name, &mut entry);
        wire::bytes(2, &string, &mut entry);
        wire::bytes(1, &entry, &mut structure);
    }
    // SubstitutionFormatString { json_format (2) }
    let mut format = Vec::new();
    wire::bytes(2, &structure, &mut format);
    // StdoutAccessLog { log_format (1) }
    let mut out = Vec::new();
    wire::bytes(1, &format, &mut out);
    out
}

/// The tracing of an edge connection manager: OTLP/gRPC to [`OTLP_CLUSTER`], or OTLP/HTTP
/// posts to `http_uri` through it.
pub fn tracing(http_uri: Option<&str>) -> hcm::http_connection_manager::Tracing {
    use envoy_types::pb::envoy::config::trace::v3::OpenTelemetryConfig;
    let timeout = Some(crate::pb::duration(std::time::Duration::from_secs(1)));
    let (grpc_service, http_service) = match http_uri {
        None => (
            Some(core::GrpcService {
                target_specifier: Some(core::grpc_service::TargetSpecifier::EnvoyGrpc(
                    core::grpc_service::EnvoyGrpc {
                        cluster_name: OTLP_CLUSTER.into(),
                        ..Default::default()
                    },
                )),
                timeout,
                ..Default::default()
            }),
            None,
        ),
        Some(uri) => (
            None,
            Some(core::HttpService {
                http_uri: Some(core::HttpUri {
                    uri: uri.to_owned(),
                    timeout,
                    http_upstream_type: Some(core::http_uri::HttpUpstreamType::Cluster(
                        OTLP_CLUSTER.into(),
                    )),
                }),
                ..Default::default()
            }),
        ),
    };
    let otel = OpenTelemetryConfig {
        grpc_service,
        http_service,
        service_name: SERVICE_NAME.into(),
        sampler: Some(parent_based_sampler()),
        ..Default::default()
    };
    hcm::http_connection_manager::Tracing {
        random_sampling: Some(Percent { value: 100.0 }),
        provider: Some(envoy_types::pb::envoy::config::trace::v3::tracing::Http {
            name: "envoy.tracers.opentelemetry".into(),
            config_type: Some(
                envoy_types::pb::envoy::config::trace::v3::tracing::http::ConfigType::TypedConfig(
                    any(&otel),
                ),
            ),
        }),
        ..Default::default()
    }
}

/// OpenTelemetry's `parentbased_traceidratio` at [`SAMPLED_PERCENT`].
fn parent_based_sampler() -> core::TypedExtensionConfig {
    use envoy_types::pb::envoy::extensions::tracers::opentelemetry::samplers::v3::{
        ParentBasedSamplerConfig, TraceIdRatioBasedSamplerConfig,
    };
    use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
    let ratio = TraceIdRatioBasedSamplerConfig {
        sampling_percentage: Some(FractionalPercent {
            numerator: SAMPLED_PERCENT,
            denominator: fractional_percent::DenominatorType::Hundred as i32,
        }),
    };
    core::TypedExtensionConfig {
        name: "envoy.tracers.opentelemetry.samplers.parent_based".into(),
        typed_config: Some(any(&ParentBasedSamplerConfig {
            wrapped_sampler: Some(core::TypedExtensionConfig {
                name: "envoy.tracers.opentelemetry.samplers.trace_id_ratio_based".into(),
                typed_config: Some(any(&ratio)),
            }),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::{
        StdoutAccessLog, stdout_access_log,
    };
    use prost::Message as _;

    /// The hand-made bytes decode to the format meant, and are the same every time.
    #[test]
    fn the_access_log_format_is_every_field_in_one_order() {
        let bytes = stdout_json_format("http-80");
        assert_eq!(bytes, stdout_json_format("http-80"));
        let log = StdoutAccessLog::decode(bytes.as_slice()).unwrap();
        let Some(stdout_access_log::AccessLogFormat::LogFormat(format)) = log.access_log_format
        else {
            panic!("{log:?}")
        };
        let Some(core::substitution_format_string::Format::JsonFormat(fields)) = format.format
        else {
            panic!("{format:?}")
        };
        let value = |name: &str| match &fields.fields[name].kind {
            Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(s)) => s.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(fields.fields.len(), ACCESS_LOG_FIELDS.len() + 1);
        assert_eq!(value("listener"), "http-80");
        assert_eq!(value("trace_id"), "%TRACE_ID%");
        assert_eq!(value("route"), "%ROUTE_NAME%");
    }
}
