//! `/openapi/v2` in the protobuf form kubectl asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): gnostic's `openapi.v2`
//! messages, written from the JSON document [`crate::serve::openapi::v2_document`]. kubectl reads it
//! to validate the items of a `kind: List` on the client.
//!
//! What OpenAPI v2 cannot say is left out so that kubectl never refuses a valid object: an
//! object that preserves unknown fields is written without its properties (kubectl takes it
//! as a map of anything), `anyOf`/`oneOf`/`not`/`nullable` are dropped, an array without
//! `items` gets an empty item schema. Vendor extensions (`x-…`) are written as gnostic's
//! `Any` with the value as YAML (JSON text is YAML).

use serde_json::{Map, Value};

use crate::serve::protobuf::wire::{put_bytes, put_double, put_varint_field};

/// The content type of the answer.
pub const CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header asks for this form.
pub fn wanted(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let media = media.split(';').next().unwrap_or("").trim();
        media == "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            || media == CONTENT_TYPE
    })
}

/// The document as an `openapi.v2.Document`.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, &doc["swagger"]);
    let mut info = Vec::new();
    string(&mut info, 1, &doc["info"]["title"]);
    string(&mut info, 2, &doc["info"]["version"]);
    put_bytes(&mut out, 2, &info);
    let mut paths = Vec::new();
    for (path, item) in entries(&doc["paths"]) {
        let mut named = Vec::new();
        put_bytes(&mut named, 1, path.as_bytes());
        put_bytes(&mut named, 2, &path_item(item));
        put_bytes(&mut paths, 2, &named);
    }
    put_bytes(&mut out, 8, &paths);
    let mut definitions = Vec::new();
    for (name, definition) in entries(&doc["definitions"]) {
        put_bytes(&mut definitions, 1, &named_schema(name, definition));
    }
    put_bytes(&mut out, 9, &definitions);
    out
}

fn entries(value: &Value) -> impl Iterator<Item = (&String, &Value)> {
    value.as_object().into_iter().flatten()
}

fn path_item(item: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for (method, number) in [
        ("get", 2),
        ("put", 3),
        ("post", 4),
        ("delete", 5),
        ("patch", 8),
    ] {
        if item[method].is_object() {
            put_bytes(&mut out, number, &operation(&item[method]));
        }
    }
    out
}

fn operation(op: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 5, &op["operationId"]);
    for parameter in op["parameters"].as_array().into_iter().flatten() {
        // ParametersItem { parameter: Parameter { non_body_parameter: NonBodyParameter {
        //   query_parameter_sub_schema } } }
        let mut query = Vec::new();
        boolean(&mut query, 1, &parameter["required"]);
        string(&mut query, 2, &parameter["in"]);
        string(&mut query, 3, &parameter["description"]);
        string(&mut query, 4, &parameter["name"]);
        string(&mut query, 6, &parameter["type"]);
        let mut non_body = Vec::new();
        put_bytes(&mut non_body, 3, &query);
        let mut parameter = Vec::new();
        put_bytes(&mut parameter, 2, &non_body);
        let mut item = Vec::new();
        put_bytes(&mut item, 1, &parameter);
        put_bytes(&mut out, 8, &item);
    }
    let mut responses = Vec::new();
    for (code, response) in entries(&op["responses"]) {
        let mut body = Vec::new();
        string(&mut body, 1, &response["description"]);
        if response["schema"].is_object() {
            let mut item = Vec::new();
            put_bytes(&mut item, 1, &schema(&response["schema"]));
            put_bytes(&mut body, 2, &item);
        }
        let mut value = Vec::new();
        put_bytes(&mut value, 1, &body);
        let mut named = Vec::new();
        put_bytes(&mut named, 1, code.as_bytes());
        put_bytes(&mut named, 2, &value);
        put_bytes(&mut responses, 1, &named);
    }
    put_bytes(&mut out, 9, &responses);
    extensions(&mut out, 13, op);
    out
}

fn named_schema(name: &str, value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, 1, name.as_bytes());
    put_bytes(&mut out, 2, &schema(value));
    out
}

/// A JSON schema as an `openapi.v2.Schema`.
fn schema(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let empty = Map::new();
    let s = value.as_object().unwrap_or(&empty);
    let field = |name: &str| s.get(name).unwrap_or(&Value::Null);
    string(&mut out, 1, field("$ref"));
    string(&mut out, 2, field("format"));
    string(&mut out, 3, field("title"));
    string(&mut out, 4, field("description"));
    any(&mut out, 5, field("default"));
    double(&mut out, 6, field("multipleOf"));
    double(&mut out, 7, field("maximum"));
    boolean(&mut out, 8, field("exclusiveMaximum"));
    double(&mut out, 9, field("minimum"));
    boolean(&mut out, 10, field("exclusiveMinimum"));
    int(&mut out, 11, field("maxLength"));
    int(&mut out, 12, field("minLength"));
    string(&mut out, 13, field("pattern"));
    int(&mut out, 14, field("maxItems"));
    int(&mut out, 15, field("minItems"));
    boolean(&mut out, 16, field("uniqueItems"));
    int(&mut out, 17, field("maxProperties"));
    int(&mut out, 18, field("minProperties"));
    for required in field("required").as_array().into_iter().flatten() {
        string(&mut out, 19, required);
    }
    for value in field("enum").as_array().into_iter().flatten() {
        any(&mut out, 20, value);
    }
    let preserve = field("x-kubernetes-preserve-unknown-fields") == &Value::Bool(true);
    match field("additionalProperties") {
        Value::Object(_) if !preserve => {
            let mut item = Vec::new();
            put_bytes(&mut item, 1, &schema(field("additionalProperties")));
            put_bytes(&mut out, 21, &item);
        }
        Value::Bool(allowed) if !preserve => {
            let mut item = Vec::new();
            boolean(&mut item, 2, &Value::Bool(*allowed));
            put_bytes(&mut out, 21, &item);
        }
        _ => {}
    }
    if let Some(type_) = field("type").as_str() {
        let mut item = Vec::new();
        put_bytes(&mut item, 1, type_.as_bytes());
        put_bytes(&mut out, 22, &item);
        if type_ == "array" {
            let mut items = Vec::new();
            put_bytes(&mut items, 1, &schema(field("items")));
            put_bytes(&mut out, 23, &items);
        }
    }
    for part in field("allOf").as_array().into_iter().flatten() {
        put_bytes(&mut out, 24, &schema(part));
    }
    if !preserve && let Some(properties) = field("properties").as_object() {
        let mut named = Vec::new();
        for (name, property) in properties {
            put_bytes(&mut named, 1, &named_schema(name, property));
        }
        put_bytes(&mut out, 25, &named);
    }
    boolean(&mut out, 27, field("readOnly"));
    any(&mut out, 30, field("example"));
    extensions(&mut out, 31, value);
    out
}

/// The `x-…` keys of an object as gnostic `NamedAny`s (name 1, value 2).
fn extensions(out: &mut Vec<u8>, number: u32, value: &Value) {
    for (name, value) in entries(value).filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Vec::new();
        put_bytes(&mut named, 1, name.as_bytes());
        any(&mut named, 2, value);
        put_bytes(out, number, &named);
    }
}

/// A gnostic `Any`: its `yaml` (2), the value's JSON text.
fn any(out: &mut Vec<u8>, number: u32, value: &Value) {
    if value.is_null() {
        return;
    }
    let mut body = Vec::new();
    put_bytes(&mut body, 2, value.to_string().as_bytes());
    put_bytes(out, number, &body);
}

fn string(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(text) = value.as_str().filter(|t| !t.is_empty()) {
        put_bytes(out, number, text.as_bytes());
    }
}

fn boolean(out: &mut Vec<u8>, number: u32, value: &Value) {
    if value.as_bool() == Some(true) {
        put_varint_field(out, number, 1);
    }
}

fn int(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(n) = value.as_i64() {
        put_varint_field(out, number, n as u64);
    }
}

fn double(out: &mut Vec<u8>, number: u32, value: &Value) {
    if let Some(x) = value.as_f64() {
        put_double(out, number, x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_are_written_with_gnostics_field_numbers() {
        // type (22) → TypeItem { value (1) }.
        assert_eq!(
            schema(&json!({"type": "string"})),
            [&[0xb2, 0x01, 8, 0x0a, 6][..], b"string"].concat()
        );
        // properties (25) → Properties { additional_properties (1) → NamedSchema
        // { name (1), value (2) } }.
        let named = [&[0x0a, 1][..], b"a", &[0x12, 0]].concat();
        let properties = [&[0x0a, named.len() as u8][..], &named].concat();
        assert_eq!(
            schema(&json!({"properties": {"a": {}}})),
            [&[0xca, 0x01, properties.len() as u8][..], &properties].concat()
        );
        // An object that preserves unknown fields is written without its properties.
        let preserved = schema(
            &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"a": {"type": "string"}}}),
        );
        assert!(!preserved.windows(2).any(|w| w == [0xca, 0x01]));
        // An array always has one item schema (23).
        let array = schema(&json!({"type": "array"}));
        assert!(array.windows(2).any(|w| w == [0xba, 0x01]));
    }

    #[test]
    fn the_protobuf_form_is_asked_for_by_kubectls_accept_header() {
        assert!(wanted(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(wanted(
            "application/json, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        ));
        assert!(!wanted("application/json"));
    }
}
