//! The Gateway API status the translator decides: conditions per GatewayClass, Gateway and
//! listener, and route parent entries. Timestamps are left to the writer, which keeps a
//! condition's `lastTransitionTime` while its status does not change, so this stays pure.

use std::collections::BTreeMap;

use fairlead_key::ObjectKey;
use serde::Serialize;

use fairlead_edge_model::input::{Address, GroupKind, ParentRef};

/// One condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type (`Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// CamelCase reason defined by the spec.
    pub reason: String,
    /// For a person.
    pub message: String,
    /// The generation the condition was decided for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition of `type_` that holds (`True`) or not.
    pub fn new(
        type_: &str,
        holds: bool,
        reason: &str,
        message: impl Into<String>,
        generation: Option<i64>,
    ) -> Self {
        Self {
            type_: type_.to_owned(),
            status: if holds { "True" } else { "False" }.to_owned(),
            reason: reason.to_owned(),
            message: message.into(),
            observed_generation: generation,
        }
    }

    /// Whether the condition holds.
    pub fn holds(&self) -> bool {
        self.status == "True"
    }
}

/// A listener's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    /// Listener name.
    pub name: String,
    /// Route kinds the listener accepts.
    pub supported_kinds: Vec<GroupKind>,
    /// Routes attached.
    pub attached_routes: i32,
    /// Conditions.
    pub conditions: Vec<Condition>,
}

/// A Gateway's status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    /// Addresses the Gateway is reachable at.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Address>,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Listeners (of `spec.listeners`).
    pub listeners: Vec<ListenerStatus>,
    /// ListenerSets accepted on this Gateway.
    pub attached_listener_sets: i32,
}

/// A ListenerSet's status.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerSetStatus {
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Listeners.
    pub listeners: Vec<ListenerStatus>,
}

/// One entry of a route's `status.parents`, ours.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The parentRef as the route gave it.
    pub parent_ref: ParentRef,
    /// Our controller name.
    pub controller_name: String,
    /// `Accepted` and `ResolvedRefs`.
    pub conditions: Vec<Condition>,
}

/// One entry of a policy's `status.ancestors`, ours: the Gateway it takes effect on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    /// The Gateway.
    pub ancestor_ref: ParentRef,
    /// Our controller name.
    pub controller_name: String,
    /// `Accepted` and `ResolvedRefs`.
    pub conditions: Vec<Condition>,
}

/// A route by kind and key; its text form is `kind/namespace/name`, what it serializes as
/// and sorts by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteKey {
    /// `HTTPRoute`, `GRPCRoute`, `TLSRoute`, `TCPRoute`, `UDPRoute`.
    pub kind: &'static str,
    /// Namespace and name.
    pub key: ObjectKey,
}

impl RouteKey {
    /// The route `key` of `kind`.
    pub fn new(kind: &'static str, key: ObjectKey) -> Self {
        Self { kind, key }
    }
}

impl std::fmt::Display for RouteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.key)
    }
}

impl Ord for RouteKey {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // As the text: `kind/`, then the key's text (which sorts as its own text does).
        fairlead_key::segment_cmp(self.kind, other.kind).then_with(|| self.key.cmp(&other.key))
    }
}

impl PartialOrd for RouteKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for RouteKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Every status the translator decided, keyed by object (classes by name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Statuses {
    /// GatewayClass conditions.
    pub gateway_classes: BTreeMap<String, Vec<Condition>>,
    /// Gateways.
    pub gateways: BTreeMap<ObjectKey, GatewayStatus>,
    /// ListenerSets.
    pub listener_sets: BTreeMap<ObjectKey, ListenerSetStatus>,
    /// Routes: our entries of `status.parents`.
    pub routes: BTreeMap<RouteKey, Vec<RouteParentStatus>>,
    /// BackendTLSPolicies: our entries of `status.ancestors`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub backend_tls_policies: BTreeMap<ObjectKey, Vec<PolicyAncestorStatus>>,
    /// What a route's owner is told in a Warning Event rather than a condition.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub notices: BTreeMap<RouteKey, Vec<Notice>>,
}

/// Something a route's owner should hear of in a Warning Event (a deprecated annotation):
/// told once per generation of the route.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// The Event's reason.
    pub reason: &'static str,
    /// What it says.
    pub message: String,
    /// The route's generation it is about.
    pub generation: Option<i64>,
}
