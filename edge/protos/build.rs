//! Compiles the Envoy API `.proto` files committed under `proto/` (copies of those the
//! `envoy-types` crate ships; `tests/protos.rs` checks they still are) into one descriptor set
//! with its imports, using `protox`, a protobuf compiler in Rust: building needs no `protoc`
//! and nothing from the cargo cache.

use std::path::PathBuf;

/// The Envoy API files fairlead generates resources of; their imports come along.
const FILES: &[&str] = &[
    "envoy/config/bootstrap/v3/bootstrap.proto",
    "envoy/config/listener/v3/listener.proto",
    "envoy/config/route/v3/route.proto",
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
    "envoy/extensions/transport_sockets/tls/v3/secret.proto",
    "envoy/extensions/transport_sockets/tls/v3/tls.proto",
    "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
    "envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto",
    "envoy/extensions/filters/udp/udp_proxy/v3/udp_proxy.proto",
    "envoy/extensions/filters/udp/udp_proxy/v3/route.proto",
    "envoy/extensions/filters/http/router/v3/router.proto",
    "envoy/extensions/filters/http/geoip/v3/geoip.proto",
    "envoy/extensions/filters/http/rbac/v3/rbac.proto",
    "envoy/extensions/filters/http/local_ratelimit/v3/local_rate_limit.proto",
    "envoy/extensions/filters/http/buffer/v3/buffer.proto",
    "envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto",
    "envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto",
    "envoy/extensions/filters/http/cors/v3/cors.proto",
    "envoy/extensions/filters/http/health_check/v3/health_check.proto",
    "envoy/extensions/geoip_providers/maxmind/v3/maxmind.proto",
    "envoy/extensions/http/early_header_mutation/header_mutation/v3/header_mutation.proto",
    "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
    "envoy/extensions/filters/listener/proxy_protocol/v3/proxy_protocol.proto",
    "envoy/extensions/filters/network/rbac/v3/rbac.proto",
    "envoy/extensions/http/original_ip_detection/xff/v3/xff.proto",
    "envoy/extensions/http/original_ip_detection/custom_header/v3/custom_header.proto",
    "envoy/extensions/transport_sockets/quic/v3/quic_transport.proto",
    "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
    "envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto",
    "envoy/extensions/resource_monitors/downstream_connections/v3/downstream_connections.proto",
    "envoy/extensions/access_loggers/stream/v3/stream.proto",
    "envoy/config/trace/v3/opentelemetry.proto",
    "envoy/extensions/tracers/opentelemetry/samplers/v3/parent_based_sampler.proto",
    "envoy/extensions/tracers/opentelemetry/samplers/v3/trace_id_ratio_based_sampler.proto",
    "envoy/service/discovery/v3/ads.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // The well-known types (google/protobuf/*.proto) come with protox.
    let mut compiler = protox::Compiler::new([&root])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(FILES)?;
    std::fs::write(out.join("envoy.bin"), compiler.encode_file_descriptor_set())?;
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
