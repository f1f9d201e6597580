//! One ALB instance as the controller reads it (either kind), and the names everything
//! the controller makes shares.

use fairlead_edge_api::InstanceSpec;
use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

pub use fairlead_edge_model::names::CLUSTER_NAMESPACE;

/// The field manager of what the controller writes.
pub const MANAGER: &str = "alb-gateway-controller";

/// The label naming a managed Gateway's instance kind and name (`ClusterALBInstance.main`).
pub use fairlead_edge_api::INSTANCE_LABEL;

/// One instance as the planner reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// `ClusterALBInstance` or `ALBInstance`.
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
}

impl Instance {
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
        OwnerReference {
            api_version: "network.deckhouse.io/v1alpha1".to_owned(),
            kind: self.kind.to_owned(),
            name: self.key.name().to_owned(),
            uid: self.uid.clone(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        }
    }
}
