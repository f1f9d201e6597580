//! The CRD: generated from the types, then given what the types cannot express.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::ServiceWithHealthchecks;

/// One rule per mode: the probe carries the block of its mode and no other.
const MODE_RULES: [(&str, &str, [&str; 2]); 3] = [
    ("HTTP", "http", ["tcp", "postgreSQL"]),
    ("TCP", "tcp", ["http", "postgreSQL"]),
    ("PostgreSQL", "postgreSQL", ["http", "tcp"]),
];

fn mode_rules() -> Value {
    MODE_RULES
        .iter()
        .map(|(mode, block, others)| {
            json!({
                "rule": format!("self.mode != '{mode}' || (has(self.{block}) && !has(self.{}) && !has(self.{}))", others[0], others[1]),
                "message": format!("mode {mode} needs the {block} block and no other probe block"),
                "fieldPath": format!(".{block}"),
                "reason": "FieldValueRequired",
            })
        })
        .collect()
}

/// The `servicewithhealthchecks.network.deckhouse.io` CRD.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = serde_json::to_value(ServiceWithHealthchecks::crd()).expect("the CRD serializes");
    crd["metadata"]["labels"] =
        json!({"heritage": "deckhouse", "module": "service-with-healthchecks"});
    let schema = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    let spec = &mut schema["spec"]["properties"];
    spec["ports"]["x-kubernetes-list-type"] = json!("map");
    spec["ports"]["x-kubernetes-list-map-keys"] = json!(["port", "protocol"]);
    spec["selector"]["x-kubernetes-map-type"] = json!("atomic");
    spec["healthcheck"]["properties"]["probes"]["items"]["x-kubernetes-validations"] = mode_rules();
    spec["healthcheck"]["properties"]["probes"]["minItems"] = json!(1);
    let status = &mut schema["status"]["properties"];
    status["conditions"]["x-kubernetes-list-type"] = json!("map");
    status["conditions"]["x-kubernetes-list-map-keys"] = json!(["type"]);
    status["endpointStatuses"]["x-kubernetes-list-type"] = json!("map");
    status["endpointStatuses"]["x-kubernetes-list-map-keys"] = json!(["podName"]);
    serde_json::from_value(crd).expect("the patched CRD is still a CRD")
}
