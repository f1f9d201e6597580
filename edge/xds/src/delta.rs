//! Delta (incremental) xDS on one stream: per type, the subscription (wildcard or names) and
//! the version of each resource the client holds; a response carries the resources whose
//! hash differs from what the client holds and the names it holds that are gone.
//!
//! A reconnecting client reports what it holds (`initial_resource_versions`) and receives only
//! the difference. A NACK leaves the client's versions as they were sent, so the rejected
//! resources are not sent again until they change. A request answering a superseded response
//! (a stale nonce) gives no verdict, but its subscription changes are taken: Envoy sends them
//! with whatever nonce it last saw.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};

use crate::Nonces;
use crate::cache::{ORDER, Snapshot, wildcard_type};
use crate::sotw::Verdict;

#[derive(Debug, Default)]
struct TypeState {
    wildcard: bool,
    names: BTreeSet<String>,
    /// Name → version the client holds.
    held: BTreeMap<String, String>,
    nonce: String,
    /// The client ACKed the last response (not yet when none was sent).
    acked: bool,
}

/// One stream's state.
#[derive(Debug, Default)]
pub struct Delta {
    types: BTreeMap<String, TypeState>,
    nonces: Nonces,
}

impl Delta {
    /// A new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// The difference between what the client holds of a type and the snapshot, as a
    /// response (`None` when there is none).
    fn diff(
        &mut self,
        type_url: &str,
        snapshot: &Snapshot,
        always: bool,
    ) -> Option<DeltaDiscoveryResponse> {
        let state = self.types.get_mut(type_url)?;
        let wanted: Vec<_> = if state.wildcard {
            let mut all = snapshot.all(type_url);
            all.extend(state.names.iter().filter_map(|n| snapshot.get(type_url, n)));
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.dedup_by(|a, b| a.name == b.name);
            all
        } else {
            state
                .names
                .iter()
                .filter_map(|n| snapshot.get(type_url, n))
                .collect()
        };
        let present: BTreeSet<&str> = wanted.iter().map(|r| r.name.as_str()).collect();
        let removed: Vec<String> = state
            .held
            .keys()
            .filter(|n| !present.contains(n.as_str()))
            .cloned()
            .collect();
        let changed: Vec<Resource> = wanted
            .iter()
            .filter(|r| state.held.get(&r.name) != Some(&r.hash))
            .map(|r| Resource {
                name: r.name.clone(),
                version: r.hash.clone(),
                resource: Some(r.any.clone()),
                ..Default::default()
            })
            .collect();
        if changed.is_empty() && removed.is_empty() && !always {
            return None;
        }
        for n in &removed {
            state.held.remove(n);
        }
        for r in &changed {
            state.held.insert(r.name.clone(), r.version.clone());
        }
        let nonce = self.nonces.issue();
        let state = self.types.get_mut(type_url)?;
        state.nonce = nonce.clone();
        state.acked = false;
        Some(DeltaDiscoveryResponse {
            system_version_info: snapshot.version(type_url),
            resources: changed,
            type_url: type_url.to_owned(),
            removed_resources: removed,
            nonce,
            ..Default::default()
        })
    }

    /// Handles a request; returns the response to send now (if any) and the client's verdict
    /// on the previous response (if the request carries one).
    pub fn on_request(
        &mut self,
        request: &DeltaDiscoveryRequest,
        snapshot: &Snapshot,
    ) -> (Option<DeltaDiscoveryResponse>, Option<Verdict>) {
        let type_url = request.type_url.clone();
        let first = !self.types.contains_key(&type_url);
        let state = self.types.entry(type_url.clone()).or_default();
        let mut verdict = None;
        if first {
            state.wildcard = wildcard_type(&type_url)
                && (request.resource_names_subscribe.is_empty()
                    || request.resource_names_subscribe.iter().any(|n| n == "*"));
            state.held = request
                .initial_resource_versions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        } else if !request.response_nonce.is_empty() && request.response_nonce == state.nonce {
            // (A stale nonce answers a response already superseded: its verdict is moot,
            // but the subscription changes it carries hold all the same.)
            verdict = Some(match &request.error_detail {
                Some(error) => Verdict::Nack {
                    type_url: type_url.clone(),
                    version: snapshot.version(&type_url),
                    message: error.message.clone(),
                },
                None => {
                    state.acked = true;
                    Verdict::Ack {
                        type_url: type_url.clone(),
                        version: snapshot.version(&type_url),
                    }
                }
            });
        }
        for name in &request.resource_names_subscribe {
            if name == "*" {
                state.wildcard = true;
            } else {
                state.names.insert(name.clone());
            }
        }
        for name in &request.resource_names_unsubscribe {
            if name == "*" {
                state.wildcard = false;
            } else {
                state.names.remove(name);
            }
            state.held.remove(name);
        }
        let response = self.diff(&type_url, snapshot, first);
        (response, verdict)
    }

    /// Whether the client runs the last snapshot handed to the stream: every type's last
    /// response is ACKed (responses follow each snapshot at once, so what the client holds is
    /// the snapshot's, except what it rejected — and a NACK leaves the type unsettled).
    pub fn settled(&self) -> bool {
        self.types.values().all(|s| s.acked)
    }

    /// Handles a new snapshot: the responses to send, in push order.
    pub fn on_snapshot(&mut self, snapshot: &Snapshot) -> Vec<DeltaDiscoveryResponse> {
        ORDER
            .iter()
            .filter_map(|t| self.diff(t, snapshot, false))
            .collect()
    }
}
