//! Compiles the `.proto` files that the `envoy-types` crate ships into one descriptor set
//! (with imports), using `protoc` (Debian `protobuf-compiler`). The crate is located with
//! `cargo metadata`, so the set always matches the envoy-types version in the lock file.

use std::path::PathBuf;
use std::process::Command;

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
    "envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.proto",
    "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
    "envoy/service/discovery/v3/ads.proto",
];

fn envoy_types_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"))
        .output()
        .expect("running cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata JSON");
    let manifest = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("envoy-types in the dependency graph");
    PathBuf::from(manifest)
        .parent()
        .expect("crate dir")
        .to_path_buf()
}

fn main() {
    let root = envoy_types_dir().join("proto");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("envoy.bin");
    let protoc = std::env::var("PROTOC").unwrap_or_else(|_| "protoc".into());
    let mut command = Command::new(&protoc);
    command
        .arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.display()));
    for include in [
        "data-plane-api",
        "xds",
        "protoc-gen-validate",
        "googleapis",
        "cel-spec/proto",
        "opentelemetry-proto",
        "client_model",
    ] {
        command.arg(format!("-I{}", root.join(include).display()));
    }
    // protoc's own well-known types (google/protobuf/*.proto).
    command.arg("-I/usr/include");
    command.args(FILES);
    let status = command.status().unwrap_or_else(|e| {
        panic!("running {protoc} (install Debian protobuf-compiler, or set PROTOC): {e}")
    });
    assert!(status.success(), "protoc failed on the Envoy API files");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PROTOC");
}
