//! The `/scale` subresource of Deployments and StatefulSets, as an `autoscaling/v1` `Scale`:
//! `spec.replicas` is the object's, `status` its observed replicas and its selector printed
//! as a label selector string (what `kubectl scale` and autoscalers read and write).

use serde_json::{Value, json};

use crate::objects::errors::{ApiError, FieldCause};
use crate::objects::selectors::LabelSelector;

/// Whether objects of `kind` have a `/scale` subresource.
pub fn serves(kind: &str) -> bool {
    matches!(kind, "Deployment" | "StatefulSet")
}

/// The `Scale` of an object.
pub fn of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector = LabelSelector::from_object(&object["spec"]["selector"])
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut scale = json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {},
        "spec": {},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0)},
    });
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if !meta[field].is_null() {
            scale["metadata"][field] = meta[field].clone();
        }
    }
    if let Some(replicas) = object["spec"]["replicas"].as_i64().filter(|r| *r != 0) {
        scale["spec"]["replicas"] = json!(replicas);
    }
    if !selector.is_empty() {
        scale["status"]["selector"] = json!(selector);
    }
    scale
}

/// The object with the replicas a `Scale` asks for; a malformed or negative count is
/// rejected with the field named.
pub fn apply(object: &Value, scale: &Value) -> Result<Value, ApiError> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(kind) = scale["kind"].as_str().filter(|k| *k != "Scale") {
        return Err(ApiError::bad_request(format!(
            "the kind of the body ({kind}) does not match the subresource (Scale)"
        )));
    }
    let replicas = &scale["spec"]["replicas"];
    let count = match replicas {
        Value::Null => 0,
        value => value.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: spec.replicas: {value} is not an integer"
            ))
        })?,
    };
    if count < 0 {
        return Err(ApiError::invalid(
            "Scale.autoscaling",
            name,
            vec![FieldCause::new(
                "FieldValueInvalid",
                "spec.replicas",
                format!("Invalid value: {count}: must be greater than or equal to 0"),
            )],
        ));
    }
    let mut scaled = object.clone();
    scaled["spec"]["replicas"] = json!(count);
    Ok(scaled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"x": "y"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": 2}})
    }

    #[test]
    fn a_scale_shows_replicas_and_the_selector_as_text() {
        assert_eq!(
            of(&deployment()),
            json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"replicas": 2}, "status": {"replicas": 2, "selector": "app=web"}})
        );
        let mut new = deployment();
        new["status"] = json!({});
        new["spec"]["replicas"] = json!(0);
        assert_eq!(of(&new)["spec"], json!({}));
        assert_eq!(of(&new)["status"]["replicas"], 0);
    }

    #[test]
    fn a_scale_sets_the_replicas_and_refuses_negative_ones() {
        let scaled = apply(&deployment(), &json!({"spec": {"replicas": 5}})).unwrap();
        assert_eq!(scaled["spec"]["replicas"], 5);
        assert_eq!(scaled["spec"]["selector"], deployment()["spec"]["selector"]);
        let err = apply(&deployment(), &json!({"spec": {"replicas": -1}})).unwrap_err();
        assert_eq!(
            (err.code, err.causes[0].field.as_str()),
            (422, "spec.replicas")
        );
        let err = apply(&deployment(), &json!({"kind": "Pod"})).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(serves("StatefulSet") && !serves("Pod"));
    }
}
