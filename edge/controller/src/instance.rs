//! One ALB instance as the controller reads it (either kind), and the names everything
//! the controller makes shares.

use fairlead_edge_api::InstanceSpec;
use fairlead_key::ObjectKey;
use serde_json::{Value, json};

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

    pub(crate) fn order(&self) -> (&str, &str, &str) {
        (&self.created, self.kind, self.key.as_str())
    }

    pub(crate) fn reference(&self, controller: bool) -> Value {
        json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": self.kind,
            "name": self.key.name(), "uid": self.uid,
            "controller": controller, "blockOwnerDeletion": true})
    }
}
