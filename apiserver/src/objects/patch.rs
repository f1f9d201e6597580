//! Patches other than server-side apply: JSON merge patch (RFC 7386), JSON patch (RFC 6902),
//! and strategic merge patch.
//!
//! Strategic merge is simplified to what clients send to the kinds fairlead serves: lists
//! named in [`fairlead_kit::fieldset::merge_key`] are merged item by item on their merge key (`containers` by `name`,
//! `ports` by `containerPort`/`port`, `conditions` by `type`, …); an item carrying
//! `"$patch": "delete"` is removed, a list or map carrying `"$patch": "replace"` replaces; every
//! other list is replaced whole, and maps merge as in a JSON merge patch (null deletes).
//! `$setElementOrder`, `$retainKeys` and `$deleteFromPrimitiveList` directives are dropped.

use serde_json::{Map, Value};

use fairlead_kit::fieldset::merge_key;

use crate::objects::errors::ApiError;

/// The patch types of the `Content-Type` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchType {
    /// The patch type of a content type, if it names one.
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Applies a JSON merge patch.
pub fn merge(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    out
}

/// Applies a JSON patch; a failing operation is a 422 naming it.
pub fn json(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    let mut out = target.clone();
    json_patch::patch(&mut out, &ops).map_err(|e| ApiError {
        code: 422,
        reason: "Invalid",
        message: format!("the server rejected our request due to an error in our request: {e}"),
        details: None,
        causes: Vec::new(),
    })?;
    Ok(out)
}

fn key_of<'a>(item: &'a Value, keys: &[&'static str]) -> Option<(&'static str, &'a Value)> {
    keys.iter().find_map(|k| item.get(*k).map(|v| (*k, v)))
}

/// Applies a strategic merge patch (see the module docs for what is simplified).
pub fn strategic(target: &Value, patch: &Value) -> Value {
    strategic_value(Some(target), patch, None, None)
}

/// `patch` merged into `target`, the value of `field` in an object that is the value (or a
/// list item) of `parent` (see [`merge_key`]).
fn strategic_value(
    target: Option<&Value>,
    patch: &Value,
    field: Option<&str>,
    parent: Option<&str>,
) -> Value {
    match (target, patch) {
        (Some(Value::Object(t)), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                return strip_directives(patch);
            }
            let mut out = t.clone();
            for (k, v) in p {
                if k.starts_with('$') {
                    continue;
                }
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = strategic_value(t.get(k), v, Some(k), field);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        (Some(Value::Array(t)), Value::Array(p)) => {
            match field.and_then(|f| Some((f, merge_key(parent, f)?))) {
                Some((field, keys)) => merge_list(t, p, field, keys),
                None => strip_directives(patch),
            }
        }
        (_, patch) => strip_directives(patch),
    }
}

fn merge_list(target: &[Value], patch: &[Value], field: &str, keys: &[&'static str]) -> Value {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        );
    }
    let mut out: Vec<Value> = target.to_vec();
    for item in patch {
        let Some((key, value)) = key_of(item, keys) else {
            out.push(strip_directives(item));
            continue;
        };
        let position = out.iter().position(|t| t.get(key) == Some(value));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = strategic_value(Some(&out[i]), item, Some(field), None),
            (None, false) => out.push(strip_directives(item)),
        }
    }
    Value::Array(out)
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_deletes_with_null() {
        let out = merge(
            &json!({"a": 1, "b": {"c": 2, "d": 3}}),
            &json!({"b": {"c": null, "e": 4}}),
        );
        assert_eq!(out, json!({"a": 1, "b": {"d": 3, "e": 4}}));
    }

    #[test]
    fn json_patch_ops_and_failures() {
        let out = json(
            &json!({"spec": {"replicas": 1}}),
            &json!([{"op": "replace", "path": "/spec/replicas", "value": 3},
                    {"op": "add", "path": "/metadata", "value": {"labels": {"a": "b"}}}]),
        )
        .unwrap();
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(out["metadata"]["labels"]["a"], "b");
        let err = json(
            &json!({}),
            &json!([{"op": "test", "path": "/x", "value": 1}]),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(json(&json!({}), &json!({"op": 1})).unwrap_err().code, 400);
    }

    #[test]
    fn strategic_merges_named_lists() {
        let target = json!({"spec": {"containers": [
            {"name": "app", "image": "a:1", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "sidecar", "image": "s:1"}
        ], "args": ["x"]}});
        let patch = json!({"spec": {"containers": [
            {"name": "app", "image": "a:2", "ports": [{"containerPort": 443}]},
            {"name": "sidecar", "$patch": "delete"},
            {"name": "new", "image": "n:1"}
        ], "args": ["y"]}});
        let out = strategic(&target, &patch);
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "app", "image": "a:2", "ports": [
                    {"containerPort": 80, "name": "http"}, {"containerPort": 443}]},
                {"name": "new", "image": "n:1"}
            ], "args": ["y"]}})
        );
    }

    #[test]
    fn strategic_replaces_an_endpointslices_ports_and_merges_a_services() {
        let slice = json!({"ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.0.0.1"]}]});
        let out = strategic(&slice, &json!({"ports": [{"name": "http", "port": 9090}]}));
        assert_eq!(out["ports"], json!([{"name": "http", "port": 9090}]));
        let endpoints = json!({"subsets": [{"ports": [{"port": 1}]}]});
        let out = strategic(&endpoints, &json!({"subsets": [{"ports": [{"port": 2}]}]}));
        assert_eq!(out["subsets"], json!([{"ports": [{"port": 2}]}]));
        let service = json!({"spec": {"ports": [{"port": 80, "name": "http"}]}});
        let out = strategic(&service, &json!({"spec": {"ports": [{"port": 443}]}}));
        assert_eq!(
            out["spec"]["ports"],
            json!([{"port": 80, "name": "http"}, {"port": 443}])
        );
    }

    #[test]
    fn strategic_conditions_by_type_and_replace() {
        let target = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Synced", "status": "True"}]}});
        let out = strategic(
            &target,
            &json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert_eq!(out["status"]["conditions"][0]["status"], "True");
        assert_eq!(out["status"]["conditions"][1]["type"], "Synced");
        let out = strategic(
            &target,
            &json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "X", "status": "True"}]}}),
        );
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "X", "status": "True"}])
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }
}
