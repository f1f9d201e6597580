//! CustomResourceDefinitions: checking one, and the types it serves.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::objects::errors::FieldCause;
use crate::objects::resources::{PrinterColumn, ResourceType};

/// Checks the parts of a CRD the server relies on; returns the causes found.
pub fn validate(crd: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let required = |causes: &mut Vec<FieldCause>, path: &str, value: &Value| {
        if value.as_str().is_none_or(str::is_empty) {
            causes.push(FieldCause::new(
                "FieldValueRequired",
                path,
                "Required value",
            ));
        }
    };
    required(&mut causes, "spec.group", &spec["group"]);
    required(&mut causes, "spec.names.plural", &spec["names"]["plural"]);
    required(&mut causes, "spec.names.kind", &spec["names"]["kind"]);
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        other => causes.push(FieldCause::new(
            "FieldValueNotSupported",
            "spec.scope",
            format!("Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""),
        )),
    }
    let expected_name = format!(
        "{}.{}",
        spec["names"]["plural"].as_str().unwrap_or_default(),
        spec["group"].as_str().unwrap_or_default()
    );
    if crd["metadata"]["name"].as_str() != Some(expected_name.as_str()) {
        causes.push(FieldCause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!(
                "Invalid value: {}: must be spec.names.plural+\".\"+spec.group",
                crd["metadata"]["name"]
            ),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(FieldCause::new(
            "FieldValueRequired",
            "spec.versions",
            "Required value: must have exactly one version marked as storage version",
        ));
    }
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if !versions.is_empty() && storage != 1 {
        causes.push(FieldCause::new(
            "FieldValueInvalid",
            "spec.versions",
            format!(
                "Invalid value: {storage}: must have exactly one version marked as storage version"
            ),
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        required(&mut causes, &format!("spec.versions[{i}].name"), &v["name"]);
        let schema = &v["schema"]["openAPIV3Schema"];
        if !schema.is_null() && schema["type"] != "object" {
            causes.push(FieldCause::new(
                "FieldValueInvalid",
                format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                "Invalid value: must be object at the root",
            ));
        }
    }
    causes
}

/// The served types of a valid CRD.
pub fn served_types(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default()
        .to_owned();
    let kind = names["kind"].as_str().unwrap_or_default().to_owned();
    versions
        .iter()
        .filter(|v| v["served"] != false)
        .map(|v| ResourceType {
            group: spec["group"].as_str().unwrap_or_default().into(),
            version: v["name"].as_str().unwrap_or_default().into(),
            kind: kind.clone(),
            plural: names["plural"].as_str().unwrap_or_default().into(),
            singular: names["singular"]
                .as_str()
                .map_or_else(|| kind.to_ascii_lowercase(), str::to_owned),
            namespaced: spec["scope"] == "Namespaced",
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            status_subresource: v["subresources"]["status"].is_object(),
            custom: true,
            storage_version: storage_version.clone(),
            schema: v["schema"]["openAPIV3Schema"]
                .is_object()
                .then(|| Arc::new(v["schema"]["openAPIV3Schema"].clone())),
            printer_columns: v["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| PrinterColumn {
                    name: c["name"].as_str().unwrap_or_default().into(),
                    type_: c["type"].as_str().unwrap_or("string").into(),
                    json_path: c["jsonPath"].as_str().unwrap_or_default().into(),
                    priority: c["priority"].as_i64().unwrap_or(0),
                })
                .collect(),
        })
        .collect()
}

/// The status the server gives an accepted CRD: `NamesAccepted` and `Established`.
pub fn established_status(crd: &Value) -> Value {
    let now = crate::objects::meta::now();
    let condition = |type_: &str, reason: &str, message: &str| {
        json!({"type": type_, "status": "True", "lastTransitionTime": now,
               "reason": reason, "message": message})
    };
    let versions: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1alpha1", "served": false, "storage": false}]}
        })
    }

    #[test]
    fn a_valid_crd_serves_its_served_versions() {
        assert!(validate(&crd()).is_empty());
        let types = served_types(&crd());
        assert_eq!(types.len(), 2);
        assert_eq!(types[0].storage_version, "v1");
        assert_eq!(types[1].storage_key(), "widgets.example.com");
        assert!(types[0].status_subresource && !types[1].status_subresource);
        assert_eq!(types[0].printer_columns[0].json_path, ".spec.size");
        assert_eq!(types[0].short_names, vec!["wd"]);
    }

    #[test]
    fn invalid_crds_name_their_fields() {
        let mut bad = crd();
        bad["spec"]["scope"] = json!("Galaxy");
        bad["metadata"]["name"] = json!("wrong");
        bad["spec"]["versions"][1]["storage"] = json!(true);
        let fields: Vec<String> = validate(&bad).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, vec!["spec.scope", "metadata.name", "spec.versions"]);
    }
}
