//! State-of-the-world xDS on one stream: per type, what the client subscribed to, the nonce
//! and version last sent, and a NACKed version to keep out of the stream until the next
//! change.
//!
//! Rules (from the xDS protocol): a request whose `response_nonce` is not the last one sent
//! for its type is stale and ignored; a request with `error_detail` is a NACK of the last
//! response; otherwise it is an ACK or a subscription change. The first request of a type,
//! and any change of its subscription, is answered at once; a new snapshot sends each
//! subscribed type whose version changed, in [`crate::cache::ORDER`]. Clusters and listeners
//! are sent whole; other types only the named resources that exist.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use crate::Nonces;
use crate::cache::{ORDER, Snapshot, wildcard_type};

#[derive(Debug, Default)]
struct TypeState {
    /// `None`: everything (wildcard).
    names: Option<BTreeSet<String>>,
    nonce: String,
    version: String,
    /// The version the client last ACKed.
    acked: String,
    nacked: Option<String>,
}

/// What happened to the last response of a type, as the client reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The client applied the version.
    Ack {
        /// Type URL.
        type_url: String,
        /// Version.
        version: String,
    },
    /// The client rejected the version.
    Nack {
        /// Type URL.
        type_url: String,
        /// Version rejected.
        version: String,
        /// The client's reason.
        message: String,
    },
}

/// One stream's state.
#[derive(Debug, Default)]
pub struct Sotw {
    types: BTreeMap<String, TypeState>,
    nonces: Nonces,
}

impl Sotw {
    /// A new stream.
    pub fn new() -> Self {
        Self::default()
    }

    fn respond(&mut self, type_url: &str, snapshot: &Snapshot) -> DiscoveryResponse {
        let nonce = self.nonces.issue();
        let state = self.types.entry(type_url.to_owned()).or_default();
        let version = snapshot.version(type_url);
        let resources = snapshot
            .select(type_url, state.names.as_ref())
            .into_iter()
            .map(|r| r.any.clone())
            .collect();
        state.nonce = nonce.clone();
        state.version = version.clone();
        DiscoveryResponse {
            version_info: version,
            resources,
            type_url: type_url.to_owned(),
            nonce,
            ..Default::default()
        }
    }

    /// Handles a request; returns the response to send now (if any) and the client's verdict
    /// on the previous response (if the request carries one).
    pub fn on_request(
        &mut self,
        request: &DiscoveryRequest,
        snapshot: &Snapshot,
    ) -> (Option<DiscoveryResponse>, Option<Verdict>) {
        let type_url = request.type_url.as_str();
        let names = if request.resource_names.is_empty() && wildcard_type(type_url) {
            None
        } else {
            Some(
                request
                    .resource_names
                    .iter()
                    .cloned()
                    .collect::<BTreeSet<_>>(),
            )
        };
        let state = self.types.entry(type_url.to_owned()).or_default();
        let first = request.response_nonce.is_empty();
        if !first && request.response_nonce != state.nonce {
            return (None, None);
        }
        let verdict = if first {
            None
        } else if let Some(error) = &request.error_detail {
            state.nacked = Some(state.version.clone());
            Some(Verdict::Nack {
                type_url: type_url.to_owned(),
                version: state.version.clone(),
                message: error.message.clone(),
            })
        } else {
            state.acked = request.version_info.clone();
            Some(Verdict::Ack {
                type_url: type_url.to_owned(),
                version: request.version_info.clone(),
            })
        };
        let changed_subscription = names != state.names;
        state.names = names;
        let current = snapshot.version(type_url);
        let newer = current != state.version && state.nacked.as_deref() != Some(current.as_str());
        let answer = first
            || changed_subscription
            || (newer && !matches!(verdict, Some(Verdict::Nack { .. })));
        let response = answer.then(|| self.respond(type_url, snapshot));
        (response, verdict)
    }

    /// Whether the client runs `snapshot`: every type it asked for is ACKed at the
    /// snapshot's version (a NACKed or unanswered version is not).
    pub fn settled(&self, snapshot: &Snapshot) -> bool {
        self.types
            .iter()
            .all(|(t, s)| s.acked == s.version && s.version == snapshot.version(t))
    }

    /// Handles a new snapshot: the responses to send, in push order.
    pub fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DiscoveryResponse> {
        let due: Vec<&str> = ORDER
            .iter()
            .copied()
            .filter(|t| {
                self.types
                    .get(*t)
                    .is_some_and(|s| s.version != snapshot.version(t))
            })
            .collect();
        due.into_iter()
            .map(|t| {
                if let Some(state) = self.types.get_mut(t) {
                    state.nacked = None;
                }
                self.respond(t, snapshot)
            })
            .collect()
    }
}
