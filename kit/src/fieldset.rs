//! Field sets of server-side apply: the `FieldsV1` notation of `metadata.managedFields`
//! (`f:spec`, `k:{"name":"a"}`, `.`), the leaf paths of a configuration, and the list-map keys
//! that decide whether a list is merged by item or replaced whole.
//!
//! Shared by the embedded API server (which records ownership) and the apply helper of the
//! components (which skips writes whose fields and values are already in place).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// A path through an object in `FieldsV1` notation (`f:spec`, `k:{"name":"a"}`, `.`).
pub type FieldPath = Vec<String>;

/// The leaf paths a manager owns.
pub type FieldSet = std::collections::BTreeSet<FieldPath>;

/// The merge key of a list field of a built-in kind in strategic merge patches, by the field's
/// name and its `parent`: the field holding the object the list is in, or the list that object
/// is an item of (`None` at the object's root). `ports` is keyed in a Service's `spec` and a
/// container, and atomic at an EndpointSlice's root and in an Endpoints' `subsets`, as there.
pub fn merge_key(parent: Option<&str>, field: &str) -> Option<&'static [&'static str]> {
    if field == "ports" && matches!(parent, None | Some("subsets")) {
        return None;
    }
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => &["name"],
        "volumeMounts" => &["mountPath"],
        "ports" => &["containerPort", "port"],
        "conditions" => &["type"],
        "tolerations" => &["key"],
        "hostAliases" => &["ip"],
        "ownerReferences" => &["uid"],
        _ => return None,
    })
}

/// Top-level and metadata fields the server owns and ownership does not track.
pub fn untracked(path: &[String]) -> bool {
    matches!(
        path,
        [a] if a == "f:apiVersion" || a == "f:kind"
    ) || matches!(
        path,
        [m, f, ..] if m == "f:metadata" && matches!(f.as_str(),
            "f:name" | "f:namespace" | "f:uid" | "f:resourceVersion" | "f:generation"
            | "f:creationTimestamp" | "f:managedFields" | "f:deletionTimestamp"
            | "f:deletionGracePeriodSeconds" | "f:selfLink" | "f:generateName")
    ) || matches!(path, [a] if a == "f:status")
}

/// The schema of a child field (a property, or `additionalProperties`).
pub fn child_schema<'a>(schema: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    let schema = schema?;
    schema["properties"]
        .get(field)
        .or_else(|| schema.get("additionalProperties").filter(|v| v.is_object()))
}

/// The keys of a list-map field, from its schema or the built-in merge keys (`parent` as for
/// [`merge_key`]).
pub fn list_keys(
    schema: Option<&Value>,
    parent: Option<&str>,
    field: &str,
    items: &[Value],
) -> Option<Vec<String>> {
    if let Some(s) = schema {
        if s["x-kubernetes-list-type"] == "map" {
            return s["x-kubernetes-list-map-keys"].as_array().map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_owned))
                    .collect()
            });
        }
        if s["x-kubernetes-list-type"].is_string() {
            return None;
        }
    }
    let candidates = merge_key(parent, field)?;
    let key = candidates
        .iter()
        .find(|k| items.iter().all(|i| i.get(**k).is_some()))?;
    Some(vec![(*key).to_owned()])
}

/// The `k:{...}` path element of a list-map item.
pub fn item_key(item: &Value, keys: &[String]) -> String {
    let key: Map<String, Value> = keys
        .iter()
        .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
        .collect();
    format!("k:{}", Value::Object(key))
}

/// The leaf paths of a configuration.
pub fn fields_of(value: &Value, schema: Option<&Value>) -> FieldSet {
    let mut set = FieldSet::new();
    walk(value, schema, &mut Vec::new(), &mut set);
    set.retain(|p| !untracked(p));
    set
}

/// The field an object at `path` (ending in the field `f:<list>` being walked) sits in: the
/// field before the last, skipping list-item keys.
fn parent(path: &[String]) -> Option<&str> {
    path[..path.len().saturating_sub(1)]
        .iter()
        .rev()
        .find_map(|e| e.strip_prefix("f:"))
}

fn walk(value: &Value, schema: Option<&Value>, path: &mut FieldPath, set: &mut FieldSet) {
    let Some(map) = value.as_object().filter(|m| !m.is_empty()) else {
        set.insert(path.clone());
        return;
    };
    for (k, v) in map {
        let sub = child_schema(schema, k);
        path.push(format!("f:{k}"));
        match v {
            Value::Object(m) if !m.is_empty() => walk(v, sub, path, set),
            Value::Array(items) => match list_keys(sub, parent(path), k, items) {
                Some(keys) if !items.is_empty() => {
                    let item_schema = sub.and_then(|s| s.get("items"));
                    for item in items {
                        path.push(item_key(item, &keys));
                        path.push(".".into());
                        set.insert(path.clone());
                        path.pop();
                        walk(item, item_schema, path, set);
                        path.pop();
                    }
                }
                _ => {
                    set.insert(path.clone());
                }
            },
            _ => {
                set.insert(path.clone());
            }
        }
        path.pop();
    }
}

/// Parses the `k:{...}` path element into its key fields.
pub fn parse_key(element: &str) -> Option<Map<String, Value>> {
    serde_json::from_str(element.strip_prefix("k:")?).ok()
}

/// The index of the list-map item with the given key.
pub fn find_item(items: &[Value], key: &Map<String, Value>) -> Option<usize> {
    items
        .iter()
        .position(|i| key.iter().all(|(k, v)| i.get(k) == Some(v)))
}

/// The value at a path.
pub fn get<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let Some((head, rest)) = path.split_first() else {
        return Some(value);
    };
    if head == "." {
        return Some(value);
    }
    if let Some(field) = head.strip_prefix("f:") {
        return get(value.get(field)?, rest);
    }
    let key = parse_key(head)?;
    let items = value.as_array()?;
    get(&items[find_item(items, &key)?], rest)
}

/// Builds the `FieldsV1` tree of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = node
                .entry(element.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("field trees hold objects");
        }
    }
    Value::Object(root)
}

/// Reads a `FieldsV1` tree back into leaf paths.
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    fn go(node: &Value, path: &mut FieldPath, set: &mut FieldSet) {
        match node.as_object().filter(|m| !m.is_empty()) {
            None => {
                if !path.is_empty() {
                    set.insert(path.clone());
                }
            }
            Some(map) => {
                for (k, v) in map {
                    path.push(k.clone());
                    go(v, path, set);
                    path.pop();
                }
            }
        }
    }
    let mut set = FieldSet::new();
    go(tree, &mut Vec::new(), &mut set);
    set
}

/// `.spec.ports[port=80]` style rendering of a path, as conflict messages show it.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(field) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = parse_key(element) {
            let parts: BTreeMap<&String, String> =
                key.iter().map(|(k, v)| (k, v.to_string())).collect();
            let text: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", text.join(",")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_maps_by_schema_or_builtin_keys() {
        let items = vec![json!({"name": "a"}), json!({"name": "b"})];
        assert_eq!(
            list_keys(None, Some("spec"), "containers", &items),
            Some(vec!["name".into()])
        );
        assert_eq!(list_keys(None, Some("containers"), "args", &items), None);
        let atomic = json!({"x-kubernetes-list-type": "atomic"});
        assert_eq!(
            list_keys(Some(&atomic), Some("spec"), "containers", &items),
            None
        );
        let ports = vec![json!({"port": 80})];
        assert_eq!(
            list_keys(None, Some("spec"), "ports", &ports),
            Some(vec!["port".into()]),
            "a Service's ports"
        );
        assert_eq!(
            list_keys(None, None, "ports", &ports),
            None,
            "an EndpointSlice's ports are atomic"
        );
        let set = fields_of(&json!({"spec": {"containers": items}}), None);
        let path = vec![
            "f:spec".to_string(),
            "k:{\"name\":\"b\"}".into(),
            "f:name".into(),
        ];
        assert!(!set.contains(&path), "paths start at the list field");
        let path = vec![
            "f:spec".to_string(),
            "f:containers".into(),
            "k:{\"name\":\"b\"}".into(),
            ".".into(),
        ];
        assert!(set.contains(&path));
        assert_eq!(display_path(&path), ".spec.containers[name=\"b\"]");
        assert_eq!(
            get(&json!({"spec": {"containers": [{"name": "b"}]}}), &path),
            Some(&json!({"name": "b"}))
        );
    }
}
