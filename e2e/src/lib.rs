//! The end-to-end tier: `fairlead` as a user runs it, against the embedded API server of
//! `fairlead up`, with real peers (Envoy, k6, Prometheus, kubectl, Chromium, Helm's SDK). The
//! harness is this library — start a `fairlead up` ([`up`]), apply to it, wait for a world to
//! settle ([`wait`]), serve backends and a MaxMind mirror ([`backends`], [`geo`]), stop it —
//! and every world is one file of `tests/` (the ALB instances, GeoIP, load tests, certificate
//! rotation, RBAC, the graph, observability, kubectl, the charts, …).
//!
//! The binary under test is the one `cargo build --bin fairlead` made in this target
//! directory ([`binary`]); `scripts/test` and `cargo test --workspace` build it first, and the
//! harness refuses one older than the sources.

pub mod alb;
pub mod backends;
pub mod binary;
pub mod conformance;
pub mod echo;
pub mod geo;
pub mod https;
pub mod kubectl;
pub mod up;
pub mod wait;

pub use up::Up;

/// Taken by the tests that measure the machine (k6 and Envoy under load), so that those of one
/// test binary run one at a time: two on two cores measure each other.
pub static MEASURING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The workspace's root (the charts, dashboards, alerts, load tests and demo worlds the tests
/// read).
pub fn workspace() -> &'static std::path::Path {
    std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}
pub use wait::until;
