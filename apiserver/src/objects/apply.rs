//! Server-side apply: field ownership per manager (`metadata.managedFields`, `FieldsV1`),
//! merging an applied configuration into the live object, removing what a manager applied
//! before and no longer applies, and conflicts with other managers unless forced.
//!
//! Lists are atomic unless they are list-maps: from the CRD schema
//! (`x-kubernetes-list-type: map` with `x-kubernetes-list-map-keys`), or, for built-in kinds,
//! the strategic-merge keys of [`fairlead_kit::fieldset::merge_key`]. Ownership is recorded for apply
//! operations; other writes (update, patch) record an `Update` entry for their manager and take
//! the fields they changed from the appliers, so a later apply does not silently revert them
//! without a conflict.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use fairlead_kit::fieldset::{
    FieldPath, FieldSet, child_schema, display_path, fields_of, find_item, from_fields_v1, get,
    item_key, list_keys, parse_key, to_fields_v1,
};

/// A field another manager owns with a different value.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    /// The other manager.
    pub manager: String,
    /// The field, as `.spec.replicas`.
    pub field: String,
}

/// Removes the field at a path (a `.` path removes the whole list item).
fn remove(value: &mut Value, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            if let Some(field) = last.strip_prefix("f:")
                && let Some(map) = value.as_object_mut()
            {
                map.remove(field);
            }
        }
        [item, dot] if dot == "." => {
            if let (Some(key), Some(items)) = (parse_key(item), value.as_array_mut())
                && let Some(i) = find_item(items, &key)
            {
                items.remove(i);
            }
        }
        [head, rest @ ..] => {
            let next = if let Some(field) = head.strip_prefix("f:") {
                value.get_mut(field)
            } else {
                let key = parse_key(head);
                value.as_array_mut().and_then(|items| {
                    let i = find_item(items, key.as_ref()?)?;
                    items.get_mut(i)
                })
            };
            let Some(next) = next else {
                return;
            };
            remove(next, rest);
            // A field left empty by the removal goes too (a list whose every item the
            // manager dropped is gone, not `[]`).
            let emptied = match next {
                Value::Object(map) => map.is_empty(),
                Value::Array(items) => items.is_empty(),
                _ => false,
            };
            if emptied
                && let Some(field) = head.strip_prefix("f:")
                && let Some(map) = value.as_object_mut()
            {
                map.remove(field);
            }
        }
    }
}

/// Merges an applied configuration into the live object.
pub fn merge(live: &Value, config: &Value, schema: Option<&Value>) -> Value {
    merge_in(live, config, schema, None)
}

/// [`merge`] of an object that is the value, or a list item, of the field `parent`.
fn merge_in(live: &Value, config: &Value, schema: Option<&Value>, parent: Option<&str>) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, v) in c {
                let sub = child_schema(schema, k);
                let merged = match (l.get(k), v) {
                    (Some(lv @ Value::Object(_)), Value::Object(_)) => {
                        merge_in(lv, v, sub, Some(k))
                    }
                    (Some(Value::Array(li)), Value::Array(ci)) => {
                        match list_keys(sub, parent, k, &[li.as_slice(), ci.as_slice()].concat()) {
                            Some(keys) => {
                                let item_schema = sub.and_then(|s| s.get("items"));
                                let mut items = li.clone();
                                for item in ci {
                                    let key = item_key(item, &keys);
                                    let parsed = parse_key(&key).unwrap_or_default();
                                    match find_item(&items, &parsed) {
                                        Some(i) => {
                                            items[i] =
                                                merge_in(&items[i], item, item_schema, Some(k))
                                        }
                                        None => items.push(item.clone()),
                                    }
                                }
                                Value::Array(items)
                            }
                            None => v.clone(),
                        }
                    }
                    _ => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        _ => config.clone(),
    }
}

/// One `managedFields` entry, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// Subresource (`status`) or empty.
    pub subresource: String,
    /// API version the fields were written at.
    pub api_version: String,
    /// Owned fields.
    pub fields: FieldSet,
}

/// Parses `metadata.managedFields`.
pub fn entries(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: e["manager"].as_str().unwrap_or_default().into(),
            operation: e["operation"].as_str().unwrap_or("Update").into(),
            subresource: e["subresource"].as_str().unwrap_or_default().into(),
            api_version: e["apiVersion"].as_str().unwrap_or_default().into(),
            fields: from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

/// Writes entries back as `metadata.managedFields` (empty entries are dropped).
pub fn set_entries(object: &mut Value, entries: &[Entry]) {
    let time = crate::objects::meta::now();
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if list.is_empty() {
        if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
    } else {
        object["metadata"]["managedFields"] = Value::Array(list);
    }
}

/// What an apply asks for.
#[derive(Clone, Debug)]
pub struct ApplyRequest<'a> {
    /// The field manager.
    pub manager: &'a str,
    /// Take fields from other managers instead of reporting conflicts.
    pub force: bool,
    /// `status` for the status subresource, empty for the main resource.
    pub subresource: &'a str,
    /// The API version of the request.
    pub api_version: &'a str,
    /// The schema (CRDs), for list-map keys.
    pub schema: Option<&'a Value>,
}

/// Applies `config` to `live` (an empty object for a create): the merged object with its
/// managedFields, or the conflicts.
pub fn apply(
    live: &Value,
    config: &Value,
    request: &ApplyRequest<'_>,
) -> Result<Value, Vec<Conflict>> {
    let mut managed = entries(live);
    let mine = |e: &Entry| {
        e.manager == request.manager
            && e.operation == "Apply"
            && e.subresource == request.subresource
    };
    let new_set = fields_of(config, request.schema);
    let old_set = managed
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();

    let mut conflicts = Vec::new();
    for path in new_set.iter().filter(|p| p.last().is_none_or(|l| l != ".")) {
        if get(live, path) == get(config, path) {
            continue;
        }
        for other in managed
            .iter()
            .filter(|e| !mine(e) && e.fields.contains(path))
        {
            conflicts.push(Conflict {
                manager: other.manager.clone(),
                field: display_path(path),
            });
        }
    }
    if !conflicts.is_empty() && !request.force {
        conflicts.sort_by(|a, b| (&a.manager, &a.field).cmp(&(&b.manager, &b.field)));
        conflicts.dedup();
        return Err(conflicts);
    }
    let mut merged = merge(live, config, request.schema);
    let others: BTreeSet<&FieldPath> = managed
        .iter()
        .filter(|e| !mine(e))
        .flat_map(|e| e.fields.iter())
        .collect();
    for path in old_set.difference(&new_set) {
        if !others.contains(path) {
            remove(&mut merged, path);
        }
    }
    if request.force {
        for entry in managed.iter_mut().filter(|e| !mine(e)) {
            entry
                .fields
                .retain(|p| !(new_set.contains(p) && get(live, p) != get(config, p)));
        }
    }
    managed.retain(|e| !mine(e));
    managed.push(Entry {
        manager: request.manager.into(),
        operation: "Apply".into(),
        subresource: request.subresource.into(),
        api_version: request.api_version.into(),
        fields: new_set,
    });
    set_entries(&mut merged, &managed);
    Ok(merged)
}

/// Records a non-apply write by `manager`: the fields it changed become its own (an `Update`
/// entry) and leave every other manager.
pub fn record_update(
    before: &Value,
    after: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
    schema: Option<&Value>,
) {
    let mut managed = entries(before);
    let old = fields_of(before, schema);
    let new = fields_of(after, schema);
    let changed: FieldSet = new
        .iter()
        .filter(|p| !old.contains(*p) || get(before, p) != get(after, p))
        .cloned()
        .collect();
    for entry in &mut managed {
        entry
            .fields
            .retain(|p| new.contains(p) && !changed.contains(p));
    }
    if !changed.is_empty() {
        match managed.iter_mut().find(|e| {
            e.manager == manager && e.operation == "Update" && e.subresource == subresource
        }) {
            Some(entry) => entry.fields.extend(changed),
            None => managed.push(Entry {
                manager: manager.into(),
                operation: "Update".into(),
                subresource: subresource.into(),
                api_version: api_version.into(),
                fields: changed,
            }),
        }
    }
    set_entries(after, &managed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(manager: &str, force: bool) -> ApplyRequest<'_> {
        ApplyRequest {
            manager,
            force,
            subresource: "",
            api_version: "v1",
            schema: None,
        }
    }

    #[test]
    fn fields_v1_round_trips() {
        let config = json!({"metadata": {"name": "x", "labels": {"a": "1"}},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let set = fields_of(&config, None);
        assert!(set.contains(&vec!["f:spec".to_string(), "f:replicas".into()]));
        assert!(
            !set.iter()
                .any(|p| p.contains(&"f:name".to_string()) && p.len() == 2)
        );
        let tree = to_fields_v1(&set);
        assert!(
            tree["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."]
                .is_object()
        );
        assert_eq!(from_fields_v1(&tree), set);
    }

    #[test]
    fn a_manager_removes_what_it_no_longer_applies() {
        let first = apply(
            &json!({"metadata": {"name": "x"}}),
            &json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}}),
            &request("ctl", false),
        )
        .unwrap();
        let second = apply(
            &first,
            &json!({"metadata": {"labels": {"a": "1"}}}),
            &request("ctl", false),
        )
        .unwrap();
        assert_eq!(second["metadata"]["labels"], json!({"a": "1"}));
        assert!(second.get("data").is_none() || second["data"].get("k").is_none());
    }

    #[test]
    fn conflicts_unless_forced_and_shared_values_do_not_conflict() {
        let a = apply(
            &json!({"metadata": {"name": "x"}}),
            &json!({"spec": {"replicas": 1}}),
            &request("a", false),
        )
        .unwrap();
        let same = apply(&a, &json!({"spec": {"replicas": 1}}), &request("b", false));
        assert!(same.is_ok(), "same value is shared ownership");
        let err = apply(&a, &json!({"spec": {"replicas": 3}}), &request("b", false)).unwrap_err();
        assert_eq!(
            err,
            vec![Conflict {
                manager: "a".into(),
                field: ".spec.replicas".into()
            }]
        );
        let forced = apply(&a, &json!({"spec": {"replicas": 3}}), &request("b", true)).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        let owners = entries(&forced);
        assert!(
            owners.iter().all(|e| e.manager == "b"),
            "a lost its only field: {owners:?}"
        );
    }

    #[test]
    fn list_maps_from_the_schema_merge_by_key() {
        let schema = json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "endpoints": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["podName"], "items": {"type": "object"}}}}}});
        let req = |m| ApplyRequest {
            schema: Some(&schema),
            ..request(m, true)
        };
        let one = apply(
            &json!({}),
            &json!({"status": {"endpoints": [{"podName": "p1", "ready": true}]}}),
            &req("node-a"),
        )
        .unwrap();
        let two = apply(
            &one,
            &json!({"status": {"endpoints": [{"podName": "p2", "ready": false}]}}),
            &req("node-b"),
        )
        .unwrap();
        assert_eq!(two["status"]["endpoints"].as_array().unwrap().len(), 2);
        let three = apply(&two, &json!({"status": {"endpoints": []}}), &req("node-a")).unwrap();
        assert_eq!(
            three["status"]["endpoints"],
            json!([{"podName": "p2", "ready": false}])
        );
    }

    #[test]
    fn an_endpointslices_ports_are_atomic() {
        let one = apply(
            &json!({}),
            &json!({"ports": [{"name": "http", "port": 8080}]}),
            &request("a", true),
        )
        .unwrap();
        let two = apply(
            &one,
            &json!({"ports": [{"name": "http", "port": 9090}]}),
            &request("b", true),
        )
        .unwrap();
        assert_eq!(two["ports"], json!([{"name": "http", "port": 9090}]));
        let service = apply(
            &json!({}),
            &json!({"spec": {"ports": [{"port": 80}]}}),
            &request("a", true),
        )
        .unwrap();
        let service = apply(
            &service,
            &json!({"spec": {"ports": [{"port": 443}]}}),
            &request("b", true),
        )
        .unwrap();
        assert_eq!(
            service["spec"]["ports"].as_array().map(Vec::len),
            Some(2),
            "a Service's ports merge by port: {service}"
        );
    }

    #[test]
    fn updates_take_fields_from_appliers() {
        let applied = apply(
            &json!({}),
            &json!({"spec": {"replicas": 1}}),
            &request("ctl", false),
        )
        .unwrap();
        let mut edited = applied.clone();
        edited["spec"]["replicas"] = json!(5);
        record_update(&applied, &mut edited, "kubectl-edit", "", "v1", None);
        let err = apply(
            &edited,
            &json!({"spec": {"replicas": 2}}),
            &request("ctl", false),
        )
        .unwrap_err();
        assert_eq!(err[0].manager, "kubectl-edit");
    }
}
