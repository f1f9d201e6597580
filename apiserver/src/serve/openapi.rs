//! OpenAPI documents: `/openapi/v3` (an index of group versions) and `/openapi/v3/<gv>`, and
//! `/openapi/v2` (one Swagger document). kubectl reads them before `apply` and `create` to learn
//! that the server honours `fieldValidation` (so it leaves validation to the server), and for
//! the schemas of custom resources.
//!
//! Custom resources carry their CRD schema. Built-in kinds are described as objects that
//! preserve unknown fields: the embedded server validates the built-ins that fairlead depends
//! on in code ([`crate::objects::validation`]), not from a schema.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde_json::{Value, json};

use crate::objects::resources::ResourceType;

/// The OpenAPI definition name of a kind: reversed group, version, kind, as the real server
/// names them (`io.k8s.api.core.v1.ConfigMap`, `com.example.v1.Widget`).
pub fn definition_name(rt: &ResourceType) -> String {
    let group = if rt.custom {
        rt.group.split('.').rev().collect::<Vec<_>>().join(".")
    } else if rt.group.is_empty() {
        "io.k8s.api.core".to_owned()
    } else {
        let short = rt.group.trim_end_matches(".k8s.io");
        format!("io.k8s.api.{}", short.split('.').next().unwrap_or(short))
    };
    format!("{group}.{}.{}", rt.version, rt.kind)
}

fn gvk(rt: &ResourceType) -> Value {
    json!([{"group": rt.group, "version": rt.version, "kind": rt.kind}])
}

fn schema_of(rt: &ResourceType) -> Value {
    let mut schema = match &rt.schema {
        Some(s) => (**s).clone(),
        None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    schema["properties"]["apiVersion"] = json!({"type": "string"});
    schema["properties"]["kind"] = json!({"type": "string"});
    schema["properties"]["metadata"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    schema["x-kubernetes-group-version-kind"] = gvk(rt);
    schema
}

/// The REST paths of a type: collection and object (namespaced under `{namespace}`).
fn paths(rt: &ResourceType) -> (String, String) {
    let prefix = if rt.group.is_empty() {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{}/{}", rt.group, rt.version)
    };
    let collection = if rt.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", rt.plural)
    } else {
        format!("{prefix}/{}", rt.plural)
    };
    let object = format!("{collection}/{{name}}");
    (collection, object)
}

/// The operations of one path, in either OpenAPI version (`v3` decides how parameters and
/// responses reference schemas).
fn operations(rt: &ResourceType, verbs: &[&str], v3: bool) -> Value {
    let reference = if v3 {
        json!({"$ref": format!("#/components/schemas/{}", definition_name(rt))})
    } else {
        json!({"$ref": format!("#/definitions/{}", definition_name(rt))})
    };
    let query = |name: &str| {
        if v3 {
            json!({"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": true})
        } else {
            json!({"name": name, "in": "query", "type": "string", "uniqueItems": true})
        }
    };
    let response = if v3 {
        json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}})
    } else {
        json!({"200": {"description": "OK", "schema": reference}})
    };
    let mut ops = serde_json::Map::new();
    for verb in verbs {
        let (method, action) = match *verb {
            "list" => ("get", "list"),
            "get" => ("get", "get"),
            "create" => ("post", "post"),
            "update" => ("put", "put"),
            "patch" => ("patch", "patch"),
            "delete" => ("delete", "delete"),
            _ => continue,
        };
        let mut parameters = vec![query("dryRun"), query("fieldManager")];
        if matches!(method, "post" | "put" | "patch") {
            parameters.push(query("fieldValidation"));
        }
        if method == "patch" {
            parameters.push(query("force"));
        }
        ops.insert(
            method.to_owned(),
            json!({
                "operationId": format!("{action}{}", rt.kind),
                "parameters": parameters,
                "responses": response,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk(rt)[0],
            }),
        );
    }
    Value::Object(ops)
}

fn all_paths(types: &[&ResourceType], v3: bool) -> Value {
    let mut out = serde_json::Map::new();
    for rt in types {
        let (collection, object) = paths(rt);
        out.insert(collection, operations(rt, &["list", "create"], v3));
        out.insert(
            object,
            operations(rt, &["get", "update", "patch", "delete"], v3),
        );
    }
    Value::Object(out)
}

fn group_versions(types: &[ResourceType]) -> BTreeMap<String, Vec<&ResourceType>> {
    let mut map: BTreeMap<String, Vec<&ResourceType>> = BTreeMap::new();
    for rt in types {
        let key = if rt.group.is_empty() {
            "api/v1".to_owned()
        } else {
            format!("apis/{}/{}", rt.group, rt.version)
        };
        map.entry(key).or_default().push(rt);
    }
    map
}

/// One group version's OpenAPI v3 document.
pub fn v3_document(types: &[ResourceType], group_version: &str) -> Option<Value> {
    let groups = group_versions(types);
    let members = groups.get(group_version)?;
    let schemas: serde_json::Map<String, Value> = members
        .iter()
        .map(|rt| (definition_name(rt), schema_of(rt)))
        .collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (fairlead embedded API server)", "version": crate::serve::discovery::version()["gitVersion"]},
        "paths": all_paths(members, true),
        "components": {"schemas": schemas},
    }))
}

fn hash(value: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The `/openapi/v3` index: every group version and where its document is.
pub fn v3_index(types: &[ResourceType]) -> Value {
    let paths: serde_json::Map<String, Value> = group_versions(types)
        .keys()
        .filter_map(|gv| {
            let doc = v3_document(types, gv)?;
            Some((
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash(&doc))}),
            ))
        })
        .collect();
    json!({"paths": paths})
}

/// The `/openapi/v2` document.
pub fn v2_document(types: &[ResourceType]) -> Value {
    let all: Vec<&ResourceType> = types.iter().collect();
    let definitions: serde_json::Map<String, Value> = types
        .iter()
        .map(|rt| (definition_name(rt), schema_of(rt)))
        .collect();
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes (fairlead embedded API server)", "version": crate::serve::discovery::version()["gitVersion"]},
        "paths": all_paths(&all, false),
        "definitions": definitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::resources::builtin_types;

    #[test]
    fn names_follow_the_real_server() {
        let types = builtin_types();
        let find = |kind: &str| types.iter().find(|t| t.kind == kind).unwrap();
        assert_eq!(
            definition_name(find("ConfigMap")),
            "io.k8s.api.core.v1.ConfigMap"
        );
        assert_eq!(
            definition_name(find("Deployment")),
            "io.k8s.api.apps.v1.Deployment"
        );
        assert_eq!(
            definition_name(find("EndpointSlice")),
            "io.k8s.api.discovery.v1.EndpointSlice"
        );
    }

    #[test]
    fn patch_operations_advertise_field_validation() {
        let types = builtin_types();
        let index = v3_index(&types);
        assert!(
            index["paths"]["apis/apps/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/apis/apps/v1?hash=")
        );
        let doc = v3_document(&types, "api/v1").unwrap();
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(v3_document(&types, "apis/nope/v1").is_none());
        assert!(v2_document(&types)["definitions"]["io.k8s.api.core.v1.Namespace"].is_object());
    }
}
