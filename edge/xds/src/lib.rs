//! The ALB's xDS control plane: a snapshot cache of translated resources per Gateway
//! (`cache`), the protocol state of each stream (`sotw`, `delta`: subscriptions, nonces,
//! ACK/NACK, what to send), and the gRPC services (`server`: ADS in both variants).
//!
//! The protocol state machines are plain structs fed requests and snapshots and returning the
//! responses to send, so every protocol rule is tested without a network; the server only
//! moves messages between them and the streams.

pub mod cache;
pub mod client;
pub mod control_plane;
pub mod delta;
pub mod index;
pub mod metrics;
pub mod node;
pub mod run;
pub mod server;
pub mod services;
pub mod sotw;
pub mod status;

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
