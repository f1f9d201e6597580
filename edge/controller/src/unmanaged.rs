//! Every Gateway of class `d8-alb` says whether proxies serve it, in its condition
//! [`PROVISIONED`] (written with the controller's field manager, beside the control plane's
//! conditions): `True` for a Gateway an instance manages, and for one the controller
//! provisions itself (`--provision-gateways`, [`crate::provision`]); `False` with reason
//! `ProvisioningFailed` when applying that failed (the error said), and with reason
//! `NoInstance` for a Gateway that no ClusterALBInstance or ALBInstance names while the
//! controller does not provision: the control plane accepts and translates it, but nothing
//! runs Envoy for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use fairlead_key::ObjectKey;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::instances::{Instance, MANAGER};
use crate::provision::Outcome;

/// The condition type.
pub const PROVISIONED: &str = "alb.deckhouse.io/Provisioned";

/// The condition `gateway` should carry (without its transition time), given the instance
/// controlling each managed Gateway and how each Gateway the controller provisions went.
pub fn condition(
    gateway: &ObjectKey,
    controlling: &BTreeMap<ObjectKey, &Instance>,
    provisioned: &BTreeMap<ObjectKey, Outcome>,
    generation: i64,
) -> Value {
    let (status, reason, message) = match (controlling.get(gateway), provisioned.get(gateway)) {
        (Some(instance), _) => (
            "True",
            "Provisioned",
            format!(
                "the proxies of {} {} serve this Gateway",
                instance.kind, instance.key
            ),
        ),
        (None, Some(Ok(()))) => (
            "True",
            "Provisioned",
            format!(
                "the controller runs this Gateway's proxies (Deployment {}), as --provision-gateways asks",
                crate::workload::workload_name(gateway)
            ),
        ),
        (None, Some(Err(why))) => (
            "False",
            "ProvisioningFailed",
            format!("applying this Gateway's proxies failed (retried): {why}"),
        ),
        (None, None) => (
            "False",
            "NoInstance",
            format!(
                "no ClusterALBInstance or ALBInstance names this Gateway (spec.gatewayName: {}), so no proxy runs for it; create one, or run `fairlead edge proxy --gateway {gateway}` yourself",
                gateway.name()
            ),
        ),
    };
    json!({"type": PROVISIONED, "status": status, "reason": reason, "message": message,
        "observedGeneration": generation})
}

/// Writes [`PROVISIONED`] on every Gateway of class `d8-alb` of `gateways` (the
/// controller's cache) whose condition differs.
pub async fn mark(
    client: &kube::Client,
    gateways: &[Arc<DynamicObject>],
    controlling: &BTreeMap<ObjectKey, &Instance>,
    provisioned: &BTreeMap<ObjectKey, Outcome>,
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
            provisioned,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The condition says who runs the proxies: an instance, the controller, or nobody —
    /// and why not, when provisioning failed.
    #[test]
    fn the_condition_names_who_runs_the_proxies() {
        let gateway = ObjectKey::new("team", "web");
        let instance = Instance::read(
            "ALBInstance",
            &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("team".into()),
                ..Default::default()
            },
            fairlead_edge_api::InstanceSpec {
                gateway_name: "web".into(),
                ..Default::default()
            },
        );
        let reason = |controlling: &BTreeMap<ObjectKey, &Instance>,
                      provisioned: &BTreeMap<ObjectKey, Outcome>| {
            let c = condition(&gateway, controlling, provisioned, 7);
            assert_eq!(c["observedGeneration"], 7);
            (
                c["status"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        };
        let none = BTreeMap::new();
        let managed = BTreeMap::from([(gateway.clone(), &instance)]);
        let (status, why, message) = reason(&managed, &none);
        assert_eq!((status.as_str(), why.as_str()), ("True", "Provisioned"));
        assert!(message.contains("ALBInstance team/web"), "{message}");
        let applied = BTreeMap::from([(gateway.clone(), Ok(()))]);
        let (status, why, message) = reason(&BTreeMap::new(), &applied);
        assert_eq!((status.as_str(), why.as_str()), ("True", "Provisioned"));
        assert!(message.contains("Deployment d8-alb-web"), "{message}");
        let failed = BTreeMap::from([(gateway.clone(), Err("forbidden".to_owned()))]);
        let (status, why, message) = reason(&BTreeMap::new(), &failed);
        assert_eq!(
            (status.as_str(), why.as_str()),
            ("False", "ProvisioningFailed")
        );
        assert!(message.ends_with("forbidden"), "{message}");
        let (status, why, _) = reason(&BTreeMap::new(), &none);
        assert_eq!((status.as_str(), why.as_str()), ("False", "NoInstance"));
    }
}
