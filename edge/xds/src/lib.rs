//! The ALB's xDS server: a snapshot cache of translated resources per Gateway (`cache`), the
//! protocol state of each stream (`sotw`, `delta`: subscriptions, nonces, ACK/NACK, what to
//! send), which streams run their group's latest snapshot (`progress`), the gRPC services (`server`, `services`: ADS in both variants and the per-type
//! services), their metrics, and the server on a TLS listener (`serve`) whose certificate is
//! read again when it changes and whose clients may ask only for the Gateway their
//! certificate names (`tls`).
//!
//! It knows the translator's resources and nothing of Kubernetes: what fills the cache (the
//! translation loop over the index) is `fairlead-edge-control-plane`'s. The protocol state
//! machines are plain structs fed requests and snapshots and returning the responses to
//! send, so every protocol rule is tested without a network; the server only moves messages
//! between them and the streams.

pub mod cache;
pub mod client;
pub mod delta;
pub mod metrics;
pub mod node;
pub mod progress;
pub mod serve;
pub mod server;
pub mod services;
pub mod sotw;
pub mod tls;

/// A nonce: unique per stream and type, increasing.
#[derive(Debug, Default)]
pub struct Nonces(u64);

impl Nonces {
    /// The next nonce.
    pub fn issue(&mut self) -> String {
        self.0 += 1;
        self.0.to_string()
    }
}
