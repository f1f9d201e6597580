//! Test fixtures shared by every crate's tests (feature `testing`): free ports, an in-process
//! OTLP/gRPC trace receiver, a real Prometheus server and throwaway PostgreSQL servers, started
//! from the Debian packages, and the sources of locked crates.

pub mod crates;
pub mod otlp;
pub mod postgres;
pub mod prometheus;

/// A free TCP port on 127.0.0.1 (bound, read, released: good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port on loopback")
}
