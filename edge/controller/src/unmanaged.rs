//! Every Gateway of class `d8-alb` says whether proxies serve it, in its condition
//! [`PROVISIONED`] (written with the controller's field manager, beside the control plane's
//! conditions): `True` for a Gateway an instance manages, `False` with reason `NoInstance`
//! for one that no ClusterALBInstance or ALBInstance names: the control plane accepts and
//! translates it, but nothing runs Envoy for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use fairlead_key::ObjectKey;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::instances::{Instance, MANAGER};

/// The condition type.
pub const PROVISIONED: &str = "alb.deckhouse.io/Provisioned";

/// The condition `gateway` should carry (without its transition time), given the instance
/// controlling each managed Gateway.
pub fn condition(
    gateway: &ObjectKey,
    controlling: &BTreeMap<ObjectKey, &Instance>,
    generation: i64,
) -> Value {
    match controlling.get(gateway) {
        Some(instance) => json!({"type": PROVISIONED, "status": "True", "reason": "Provisioned",
            "message": format!("the proxies of {} {} serve this Gateway", instance.kind, instance.key),
            "observedGeneration": generation}),
        None => json!({"type": PROVISIONED, "status": "False", "reason": "NoInstance",
            "message": format!("no ClusterALBInstance or ALBInstance names this Gateway (spec.gatewayName: {}), so no proxy runs for it; create one, or run `fairlead edge proxy --gateway {gateway}` yourself", gateway.name()),
            "observedGeneration": generation}),
    }
}

/// Writes [`PROVISIONED`] on every Gateway of class `d8-alb` of `gateways` (the
/// controller's cache) whose condition differs.
pub async fn mark(
    client: &kube::Client,
    gateways: &[Arc<DynamicObject>],
    controlling: &BTreeMap<ObjectKey, &Instance>,
) -> Result<(), kube::Error> {
    for gateway in gateways {
        if gateway.data["spec"]["gatewayClassName"] != crate::crds::GATEWAY_CLASS {
            continue;
        }
        let (Some(namespace), Some(name)) = (&gateway.metadata.namespace, &gateway.metadata.name)
        else {
            continue;
        };
        let key = ObjectKey::new(namespace, name);
        let wanted = condition(
            &key,
            controlling,
            gateway.metadata.generation.unwrap_or_default(),
        );
        let stored = gateway.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == PROVISIONED));
        let same = stored.is_some_and(|s| {
            ["status", "reason", "message", "observedGeneration"]
                .iter()
                .all(|f| s[f] == wanted[f])
        });
        if same {
            continue;
        }
        let mut condition = wanted;
        let since = stored
            .filter(|s| s["status"] == condition["status"])
            .and_then(|s| s["lastTransitionTime"].as_str().map(str::to_owned))
            .unwrap_or_else(fairlead_kit::conditions::now);
        condition["lastTransitionTime"] = json!(since);
        let patch = json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"conditions": [condition]},
        });
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &crate::crds::resource("Gateway"),
        )
        .patch_status(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    }
    Ok(())
}
