//! One ALB instance as the controller reads it (either kind, or a Gateway the controller
//! provisions itself, standing as an instance of kind [`PROVISIONED_KIND`]), and the names
//! everything the controller makes shares.

use fairlead_edge_api::InstanceSpec;
use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

pub use fairlead_edge_model::names::CLUSTER_NAMESPACE;

/// The field manager of what the controller writes.
pub const MANAGER: &str = "alb-gateway-controller";

/// The label naming a managed Gateway's instance kind and name (`ClusterALBInstance.main`).
pub use fairlead_edge_api::INSTANCE_LABEL;

/// The kind of the instance standing for a Gateway the controller provisions.
pub const PROVISIONED_KIND: &str = "Gateway";

/// What a Gateway's `spec.infrastructure` asks of everything made for it: its labels and
/// annotations.
pub use fairlead_edge_model::input::GatewayInfrastructure as Infrastructure;

/// One instance as the planner reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// `ClusterALBInstance`, `ALBInstance`, or [`PROVISIONED_KIND`] for a Gateway the
    /// controller provisions.
    pub kind: &'static str,
    /// Its key (no namespace for a ClusterALBInstance).
    pub key: ObjectKey,
    /// Its uid (for owner references).
    pub uid: String,
    /// Its creation time, RFC 3339 (orders instances sharing a Gateway).
    pub created: String,
    /// Its generation.
    pub generation: i64,
    /// It asks to be the platform's default Gateway (`defaultDeckhouseGateway`,
    /// ClusterALBInstance only).
    pub default: bool,
    /// Its annotation `fairlead.io/route-statistics: "true"` asks for statistics per route
    /// rule on its Gateway (passed on as the Gateway's annotation).
    pub route_statistics: bool,
    /// Its proxies run under names of its own (`d8-alb-<gateway>-<name>`): it
    /// shared its Gateway with an older instance, and keeps them after taking it over (the
    /// controller's shell finds them).
    pub own_inlet: bool,
    /// Some route of its Gateway asks for the WAF (the Gateway's `WAF` condition, which the
    /// control plane writes; the controller's shell reads it): its proxy pods run the WAF
    /// beside Envoy.
    pub waf: bool,
    /// What it says.
    pub spec: InstanceSpec,
    /// The labels and annotations of everything made for its Gateway: a provisioned
    /// Gateway's `spec.infrastructure`; none for an instance, whose Gateway's spec is the
    /// controller's alone (the webhook refuses users' edits).
    pub infrastructure: Infrastructure,
}

impl Instance {
    /// The instance of `kind` with metadata `meta` saying `spec`, as the planner reads it
    /// (nothing the shell finds out besides: no own inlet, no WAF, no infrastructure).
    pub fn read(kind: &'static str, meta: &ObjectMeta, spec: InstanceSpec) -> Self {
        let name = meta.name.clone().unwrap_or_default();
        Self {
            kind,
            key: match &meta.namespace {
                Some(ns) => ObjectKey::new(ns, &name),
                None => ObjectKey::cluster(&name),
            },
            uid: meta.uid.clone().unwrap_or_default(),
            created: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
            default: false,
            route_statistics: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(fairlead_edge_model::names::ROUTE_STATISTICS))
                .is_some_and(|v| v == "true"),
            own_inlet: false,
            waf: false,
            spec,
            infrastructure: Infrastructure::default(),
        }
    }

    /// The Gateway it names.
    pub fn gateway(&self) -> ObjectKey {
        let namespace = if self.kind == "ClusterALBInstance" {
            CLUSTER_NAMESPACE
        } else {
            self.key.namespace()
        };
        ObjectKey::new(namespace, &self.spec.gateway_name)
    }

    /// `<kind>.<name>`: the value of [`INSTANCE_LABEL`] naming it.
    pub fn label(&self) -> String {
        format!("{}.{}", self.kind, self.key.name())
    }

    /// The order of instances naming one Gateway: the oldest first, then by kind and key.
    pub fn order(&self) -> (&str, &str, &str) {
        (&self.created, self.kind, self.key.as_str())
    }

    /// An owner reference to it (the controlling one's marked `controller`).
    pub fn reference(&self, controller: bool) -> OwnerReference {
        let api_version = if self.kind == PROVISIONED_KIND {
            "gateway.networking.k8s.io/v1"
        } else {
            "network.deckhouse.io/v1alpha1"
        };
        OwnerReference {
            api_version: api_version.to_owned(),
            kind: self.kind.to_owned(),
            name: self.key.name().to_owned(),
            uid: self.uid.clone(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        }
    }
}
