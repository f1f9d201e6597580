//! CRD structural schemas: defaults, pruning of unknown fields, and validation with field
//! paths, as the real server applies them to custom resources (in that order).
//!
//! Validation covers `type` (with `nullable` and `x-kubernetes-int-or-string`), `required`,
//! `enum`, `minimum`/`maximum` (and exclusive), `minLength`/`maxLength`, `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, `pattern`, list-map key uniqueness, and the CEL rules of
//! `x-kubernetes-validations` (see [`crate::objects::cel`]). `allOf`/`anyOf`/`oneOf`/`not` and `format`
//! are not evaluated. `metadata` is validated by the server's own rules, not the schema.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::objects::errors::FieldCause;

/// What checking an object against a schema found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Invalid fields.
    pub causes: Vec<FieldCause>,
    /// Paths of unknown fields that were pruned.
    pub pruned: Vec<String>,
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

/// The top-level fields the server owns; the schema neither prunes nor validates them.
const SERVER_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn without_server_fields(object: &Value) -> Value {
    let mut body = object.clone();
    if let Some(map) = body.as_object_mut() {
        for field in SERVER_FIELDS {
            map.remove(field);
        }
    }
    body
}

/// Applies defaults and prunes unknown fields (both in place), then validates; `old` is the
/// stored object on updates (CEL transition rules compare with it).
pub fn check(schema: &Value, object: &mut Value, old: Option<&Value>) -> Outcome {
    let mut outcome = Outcome::default();
    let mut body = without_server_fields(object);
    default(schema, &mut body);
    prune(schema, &mut body, "", &mut outcome.pruned);
    let old_body = old.map(without_server_fields);
    validate(schema, &body, old_body.as_ref(), "", &mut outcome.causes);
    if let (Some(target), Value::Object(fields)) = (object.as_object_mut(), body) {
        target.retain(|k, _| SERVER_FIELDS.contains(&k.as_str()));
        target.extend(fields);
    }
    outcome
}

/// Fills in `default` values of missing properties, recursively.
fn default(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema["properties"].as_object() {
                for (field, sub) in properties {
                    if !map.contains_key(field)
                        && let Some(d) = sub.get("default")
                    {
                        map.insert(field.clone(), d.clone());
                    }
                }
                for (field, v) in map.iter_mut() {
                    if let Some(sub) = properties.get(field) {
                        default(sub, v);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for v in map.values_mut() {
                    default(additional, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// Removes fields the schema does not declare, unless it preserves unknown fields.
fn prune(schema: &Value, value: &mut Value, path: &str, pruned: &mut Vec<String>) {
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
    let embedded = schema["x-kubernetes-embedded-resource"] == true;
    match value {
        Value::Object(map) => {
            if let Some(properties) = schema["properties"].as_object() {
                if !preserve {
                    let unknown: Vec<String> = map
                        .keys()
                        .filter(|k| !properties.contains_key(*k))
                        .filter(|k| {
                            !(embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                        })
                        .cloned()
                        .collect();
                    for key in unknown {
                        map.remove(&key);
                        pruned.push(join(path, &key));
                    }
                }
                for (field, v) in map.iter_mut() {
                    if let Some(sub) = properties.get(field) {
                        prune(sub, v, &join(path, field), pruned);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in map.iter_mut() {
                    prune(additional, v, &format!("{path}[{k}]"), pruned);
                }
            } else if !preserve && schema["type"] == "object" && !embedded {
                for key in map.keys().cloned().collect::<Vec<_>>() {
                    pruned.push(join(path, &key));
                }
                map.clear();
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item_schema, item, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => {
            let text = other.to_string();
            if text.len() > 64 {
                format!("{}...", &text[..61])
            } else {
                text
            }
        }
    }
}

/// A value as the real server quotes it in messages: strings quoted, numbers bare.
fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        Value::Number(_) | Value::Bool(_) => value.to_string(),
        other => format!("\"{}\"", short(other)),
    }
}

fn invalid(causes: &mut Vec<FieldCause>, path: &str, value: &Value, message: String) {
    causes.push(FieldCause::new(
        "FieldValueInvalid",
        path,
        format!("Invalid value: {}: {message}", quoted(value)),
    ));
}

/// Validates a value against its schema node, recursively.
pub fn validate(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    if value.is_null() {
        if schema["nullable"] != true {
            let expected = schema["type"].as_str().unwrap_or("value");
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type {expected}: \"null\""),
            );
        }
        return;
    }
    let actual = type_name(value);
    let int_or_string = schema["x-kubernetes-int-or-string"] == true;
    if int_or_string {
        if !matches!(actual, "integer" | "string") {
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type integer or string: \"{actual}\""),
            );
            return;
        }
    } else if let Some(expected) = schema["type"].as_str() {
        let ok = expected == actual || (expected == "number" && actual == "integer");
        if !ok {
            invalid(
                causes,
                path,
                value,
                format!("{path} in body must be of type {expected}: \"{actual}\""),
            );
            return;
        }
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(value)
    {
        let list: Vec<String> = options
            .iter()
            .map(|o| format!("\"{}\"", short(o)))
            .collect();
        causes.push(FieldCause::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: \"{}\": supported values: {}",
                short(value),
                list.join(", ")
            ),
        ));
    }
    if let Some(n) = value.as_f64().filter(|_| value.is_number()) {
        let exclusive_min = schema["exclusiveMinimum"] == true;
        let exclusive_max = schema["exclusiveMaximum"] == true;
        if let Some(min) = schema["minimum"].as_f64()
            && (n < min || (exclusive_min && n == min))
        {
            let op = if exclusive_min {
                "greater than"
            } else {
                "greater than or equal to"
            };
            invalid(
                causes,
                path,
                value,
                format!("{path} in body should be {op} {min}"),
            );
        }
        if let Some(max) = schema["maximum"].as_f64()
            && (n > max || (exclusive_max && n == max))
        {
            let op = if exclusive_max {
                "less than"
            } else {
                "less than or equal to"
            };
            invalid(
                causes,
                path,
                value,
                format!("{path} in body should be {op} {max}"),
            );
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(max) = schema["maxLength"].as_u64()
            && len > max
        {
            causes.push(FieldCause::new(
                "FieldValueTooLong",
                path,
                format!("Too long: may not be more than {max} bytes"),
            ));
        }
        if let Some(min) = schema["minLength"].as_u64()
            && len < min
        {
            invalid(
                causes,
                path,
                value,
                format!("{path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema["pattern"].as_str() {
            static PATTERNS: crate::objects::compiled::Compiled<Result<regex::Regex, ()>> =
                crate::objects::compiled::Compiled::new();
            match PATTERNS.get(pattern, |p| regex::Regex::new(p).map_err(|_| ())) {
                Ok(re) if !re.is_match(s) => {
                    invalid(
                        causes,
                        path,
                        value,
                        format!("{path} in body should match '{pattern}'"),
                    );
                }
                Ok(_) => {}
                Err(_) => invalid(
                    causes,
                    path,
                    value,
                    format!("the schema's pattern '{pattern}' does not compile"),
                ),
            }
        }
    }
    match value {
        Value::Object(map) => validate_map(schema, map, old, path, causes),
        Value::Array(items) => validate_list(schema, items, old, path, causes),
        _ => {}
    }
    crate::objects::cel::check_rules(schema, value, old, path, causes);
}

fn validate_map(
    schema: &Value,
    map: &Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    if let Some(required) = schema["required"].as_array() {
        for field in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(field) {
                causes.push(FieldCause::new(
                    "FieldValueRequired",
                    join(path, field),
                    "Required value",
                ));
            }
        }
    }
    let count = map.len() as u64;
    if let Some(max) = schema["maxProperties"].as_u64()
        && count > max
    {
        causes.push(FieldCause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema["minProperties"].as_u64()
        && count < min
    {
        causes.push(FieldCause::new(
            "FieldValueInvalid",
            path,
            format!("Invalid value: {count}: should have at least {min} properties"),
        ));
    }
    if let Some(properties) = schema["properties"].as_object() {
        for (field, v) in map {
            if let Some(sub) = properties.get(field) {
                validate(
                    sub,
                    v,
                    old.and_then(|o| o.get(field)),
                    &join(path, field),
                    causes,
                );
            }
        }
    } else if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        for (k, v) in map {
            validate(
                additional,
                v,
                old.and_then(|o| o.get(k)),
                &format!("{path}[{k}]"),
                causes,
            );
        }
    }
}

fn validate_list(
    schema: &Value,
    items: &[Value],
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    let count = items.len() as u64;
    if let Some(max) = schema["maxItems"].as_u64()
        && count > max
    {
        causes.push(FieldCause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = schema["minItems"].as_u64()
        && count < min
    {
        causes.push(FieldCause::new(
            "FieldValueInvalid",
            path,
            format!("Invalid value: {count}: {path} in body should have at least {min} items"),
        ));
    }
    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let list_type = schema["x-kubernetes-list-type"].as_str();
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let identity = match list_type {
            Some("map") => Some(
                keys.iter()
                    .map(|k| item.get(*k).cloned().unwrap_or(Value::Null).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            Some("set") => Some(item.to_string()),
            _ => None,
        };
        if let Some(identity) = identity
            && !seen.insert(identity.clone())
        {
            causes.push(FieldCause::new(
                "FieldValueDuplicate",
                format!("{path}[{i}]"),
                format!("Duplicate value: {identity}"),
            ));
        }
        if let Some(item_schema) = schema.get("items") {
            let old_item = match (list_type, old.and_then(Value::as_array)) {
                (Some("map"), Some(old_items)) => old_items
                    .iter()
                    .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k))),
                _ => None,
            };
            validate(item_schema, item, old_item, &format!("{path}[{i}]"), causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["mode"], "properties": {
                "mode": {"type": "string", "enum": ["HTTP", "TCP"]},
                "port": {"x-kubernetes-int-or-string": true},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "probes": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {"name": {"type": "string"},
                        "timeout": {"type": "integer", "default": 1}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn defaults_and_pruning() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"},
            "spec": {"mode": "TCP", "unknown": 1, "probes": [{"name": "p", "extra": true}],
                     "free": {"anything": {"goes": 1}}},
            "junk": true});
        let outcome = check(&schema(), &mut obj, None);
        assert!(outcome.causes.is_empty(), "{:?}", outcome.causes);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["probes"][0]["timeout"], 1);
        assert!(obj["spec"]["free"]["anything"]["goes"] == 1);
        assert!(obj.get("junk").is_none() && obj["spec"].get("unknown").is_none());
        let mut pruned = outcome.pruned;
        pruned.sort();
        assert_eq!(pruned, vec!["junk", "spec.probes[0].extra", "spec.unknown"]);
    }

    #[test]
    fn violations_name_their_field_paths() {
        let mut obj = json!({"spec": {"mode": "UDP", "port": true, "replicas": 0, "name": "ABCDEFG",
            "probes": [{"name": "a"}, {"name": "a"}, {"name": "b"}]}});
        let outcome = check(&schema(), &mut obj, None);
        let fields: Vec<&str> = outcome.causes.iter().map(|c| c.field.as_str()).collect();
        for expected in [
            "spec.mode",
            "spec.port",
            "spec.replicas",
            "spec.name",
            "spec.probes",
            "spec.probes[1]",
        ] {
            assert!(
                fields.contains(&expected),
                "{expected} missing from {fields:?}"
            );
        }
        let mut missing = json!({"metadata": {}});
        let outcome = check(&schema(), &mut missing, None);
        assert_eq!(outcome.causes[0].field, "spec");
        let mut no_mode = json!({"spec": {}});
        let outcome = check(&schema(), &mut no_mode, None);
        assert_eq!(outcome.causes[0].field, "spec.mode");
        assert_eq!(outcome.causes[0].reason, "FieldValueRequired");
    }

    #[test]
    fn int_or_string_accepts_both() {
        for port in [json!(80), json!("http")] {
            let mut obj = json!({"spec": {"mode": "HTTP", "port": port}});
            assert!(check(&schema(), &mut obj, None).causes.is_empty());
        }
    }
}
