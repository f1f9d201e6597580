//! `meta.k8s.io/v1` Tables, which `kubectl get` asks for: the name, the printer columns of a
//! CRD (evaluated with the JSONPath subset CRDs use: `.a.b`, `[n]`, `[?(@.k=="v")]`), and the
//! age; for the built-in kinds kubectl users read most, the columns a real API server prints
//! ([`printers`]).

mod printers;

use serde_json::{Value, json};

use crate::objects::resources::ResourceType;

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Evaluates a printer-column JSONPath against an object: every value it selects (`[*]` and
/// `[]` select all items of a list).
pub fn json_path<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![object];
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let field = &after[..end];
            if !field.is_empty() {
                current = current.into_iter().filter_map(|v| v.get(field)).collect();
            }
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else {
                return Vec::new();
            };
            let inner = after[..end].trim();
            rest = &after[end + 1..];
            current = if inner.is_empty() || inner == "*" {
                current
                    .into_iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .collect()
            } else if let Some(filter) =
                inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let Some((key, value)) = filter.split_once("==") else {
                    return Vec::new();
                };
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                current
                    .into_iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .filter(|item| item.get(key.trim()).and_then(Value::as_str) == Some(value))
                    .collect()
            } else {
                let Ok(index) = inner.parse::<usize>() else {
                    return Vec::new();
                };
                current.into_iter().filter_map(|v| v.get(index)).collect()
            };
        } else {
            return Vec::new();
        }
    }
    current
}

/// A duration as kubectl prints ages (`42s`, `5m`, `3h`, `2d`).
pub fn human_age(seconds: i64) -> String {
    match seconds.max(0) {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn age_of(timestamp: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> String {
    timestamp
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or_else(
            || "<unknown>".to_owned(),
            |t| human_age((now - t.with_timezone(&chrono::Utc)).num_seconds()),
        )
}

fn cell(values: &[&Value], type_: &str, now: chrono::DateTime<chrono::Utc>) -> Value {
    match (values, type_) {
        ([] | [Value::Null], _) => Value::Null,
        ([Value::String(s)], "date") => json!(age_of(Some(s), now)),
        ([v], _) => (*v).clone(),
        (many, _) => json!(
            many.iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// A Table of objects (already presented at the requested version).
pub fn table(rt: &ResourceType, objects: &[Value], resource_version: &str) -> Value {
    let now = chrono::Utc::now();
    if let Some(printer) = printers::printer(&rt.group, &rt.plural).filter(|_| !rt.custom) {
        let columns: Vec<Value> = printer
            .columns
            .iter()
            .map(|c| {
                let format = if c.name == "Name" { "name" } else { "" };
                json!({"name": c.name, "type": c.type_, "format": format, "description": "",
                    "priority": c.priority})
            })
            .collect();
        let rows: Vec<Value> = objects
            .iter()
            .map(|o| json!({"cells": (printer.row)(o, now), "object": o}))
            .collect();
        return json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": columns,
            "rows": rows,
        });
    }
    let mut columns = vec![json!({"name": "Name", "type": "string", "format": "name",
        "description": "Name must be unique within a namespace.", "priority": 0})];
    for c in &rt.printer_columns {
        columns.push(json!({"name": c.name, "type": c.type_, "format": "", "description": "", "priority": c.priority}));
    }
    // Custom resources show their printer columns (a CRD without any gets an Age column, as
    // the real server defaults it); other built-ins show the name and the age.
    let age_by_default = !rt.custom || rt.printer_columns.is_empty();
    if age_by_default {
        columns.push(json!({"name": "Age", "type": "date", "format": "",
            "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0}));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            for c in &rt.printer_columns {
                cells.push(cell(&json_path(o, &c.json_path), &c.type_, now));
            }
            if age_by_default {
                let created = o["metadata"]["creationTimestamp"].as_str();
                cells.push(json!(age_of(created, now)));
            }
            json!({"cells": cells, "object": o})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_of_printer_columns() {
        let o = json!({"spec": {"ports": [{"port": 80}]}, "status": {"conditions": [
            {"type": "Synced", "status": "True"}, {"type": "Ready", "status": "False"}]}});
        assert_eq!(json_path(&o, ".spec.ports[0].port"), vec![&json!(80)]);
        assert_eq!(
            json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("False")]
        );
        assert!(json_path(&o, ".status.missing").is_empty());
        let types = json_path(&o, ".status.conditions[*].type");
        assert_eq!(types, vec![&json!("Synced"), &json!("Ready")]);
        let now = chrono::Utc::now();
        let joined = cell(&json_path(&o, ".status.conditions[].type"), "string", now);
        assert_eq!(joined, json!("Synced,Ready"));
    }

    #[test]
    fn custom_resources_show_their_columns_and_builtins_their_age() {
        let registry = crate::objects::resources::Registry::new();
        let config_maps = registry.lookup("", "v1", "configmaps").unwrap();
        let object =
            json!({"metadata": {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        let names = |t: &Value| -> Vec<String> {
            t["columnDefinitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            names(&table(&config_maps, std::slice::from_ref(&object), "1")),
            vec!["Name", "Age"]
        );
        let mut custom = config_maps.clone();
        custom.custom = true;
        custom.printer_columns = vec![crate::objects::resources::PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            priority: 0,
        }];
        let t = table(&custom, &[object], "1");
        assert_eq!(names(&t), vec!["Name", "Age"], "no second Age column");
        assert_eq!(t["rows"][0]["cells"].as_array().unwrap().len(), 2);
        // Deployments as a real server prints them.
        let deployments = registry.lookup("apps", "v1", "deployments").unwrap();
        let t = table(&deployments, &[json!({"metadata": {"name": "d"}})], "1");
        assert_eq!(
            names(&t)[..5],
            ["Name", "Ready", "Up-to-date", "Available", "Age"]
        );
        assert_eq!(t["rows"][0]["cells"][1], json!("0/0"));
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_age(42), "42s");
        assert_eq!(human_age(300), "5m");
        assert_eq!(human_age(3 * 3600), "3h");
        assert_eq!(human_age(3 * 86400), "3d");
    }

    #[test]
    fn only_a_first_choice_of_table_is_a_table() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}
