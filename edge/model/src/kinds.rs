//! The one table of the kinds the ALB reads and writes: what the index watches (group, kind,
//! a field selector), and which statuses the control plane writes and how (its own status,
//! a route's shared `status.parents`, a policy's shared `status.ancestors`). The index's
//! watch list and the status writer's kinds come from it, so a new kind is one row here and
//! its model type.

use crate::input::{EXPERIMENTAL_GROUP, GATEWAY_GROUP};

/// What the control plane writes of a kind's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Nothing: the kind is only read.
    Read,
    /// Its status, whole (GatewayClass, Gateway, ListenerSet).
    Own,
    /// Its entries of `status.parents`, a list other controllers share (routes).
    Parents,
    /// Its entries of `status.ancestors`, a list other controllers share (policies).
    Ancestors,
}

/// One kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// API group (empty for the core group).
    pub group: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Its resource (plural), as RBAC rules name it.
    pub plural: &'static str,
    /// A field selector its watch uses (Secrets: not ServiceAccount tokens or Helm releases,
    /// which no route or listener names).
    pub fields: Option<&'static str>,
    /// What of its status is written.
    pub status: Status,
}

const fn kind(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    status: Status,
) -> Kind {
    Kind {
        group,
        kind,
        plural,
        fields: None,
        status,
    }
}

/// Every kind the ALB reads, in the order the index starts its watches.
pub const KINDS: &[Kind] = &[
    kind(GATEWAY_GROUP, "GatewayClass", "gatewayclasses", Status::Own),
    kind(GATEWAY_GROUP, "Gateway", "gateways", Status::Own),
    kind(GATEWAY_GROUP, "ListenerSet", "listenersets", Status::Own),
    kind(
        EXPERIMENTAL_GROUP,
        "XListenerSet",
        "xlistenersets",
        Status::Own,
    ),
    kind(GATEWAY_GROUP, "HTTPRoute", "httproutes", Status::Parents),
    kind(GATEWAY_GROUP, "GRPCRoute", "grpcroutes", Status::Parents),
    kind(GATEWAY_GROUP, "TLSRoute", "tlsroutes", Status::Parents),
    kind(GATEWAY_GROUP, "TCPRoute", "tcproutes", Status::Parents),
    kind(GATEWAY_GROUP, "UDPRoute", "udproutes", Status::Parents),
    kind(
        GATEWAY_GROUP,
        "ReferenceGrant",
        "referencegrants",
        Status::Read,
    ),
    kind(
        GATEWAY_GROUP,
        "BackendTLSPolicy",
        "backendtlspolicies",
        Status::Ancestors,
    ),
    kind("", "Service", "services", Status::Read),
    kind(
        "discovery.k8s.io",
        "EndpointSlice",
        "endpointslices",
        Status::Read,
    ),
    Kind {
        fields: Some(SECRET_FIELDS),
        ..kind("", "Secret", "secrets", Status::Read)
    },
    kind("", "Namespace", "namespaces", Status::Read),
    kind("", "ConfigMap", "configmaps", Status::Read),
    kind(
        INSTANCE_GROUP,
        "ClusterALBInstance",
        "clusteralbinstances",
        Status::Read,
    ),
    kind(INSTANCE_GROUP, "ALBInstance", "albinstances", Status::Read),
];

/// The Secrets the edge reads: TLS certificates, and the Secrets route annotations name
/// (`backend-tls-settings`, of any type); ServiceAccount tokens and Helm releases are never
/// read.
pub const SECRET_FIELDS: &str =
    "type!=kubernetes.io/service-account-token,type!=helm.sh/release.v1";

/// The group of the ALB instances.
const INSTANCE_GROUP: &str = "network.deckhouse.io";

/// The row of a kind.
pub fn of(kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// Whether the control plane writes (part of) the status of a kind.
pub fn status_written(kind: &str) -> bool {
    of(kind).is_some_and(|k| k.status != Status::Read)
}

/// The kinds whose status is written as `status`.
pub fn with_status(status: Status) -> impl Iterator<Item = &'static str> {
    KINDS
        .iter()
        .filter(move |k| k.status == status)
        .map(|k| k.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_and_routes_share_their_parents() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.kind).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
        assert_eq!(
            with_status(Status::Parents).collect::<Vec<_>>(),
            ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute"]
        );
        assert!(status_written("Gateway") && !status_written("Service"));
        assert_eq!(of("Secret").unwrap().fields, Some(SECRET_FIELDS));
    }
}
