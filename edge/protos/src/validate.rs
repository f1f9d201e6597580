//! protoc-gen-validate checks of Envoy resources, into the messages packed in `Any` fields.

use prost::{Message, Name};
use prost_reflect::{DynamicMessage, ReflectMessage, Value};

use crate::{Error, decode, dynamic};

/// Checks a message and every message packed in its `Any` fields against Envoy's
/// protoc-gen-validate rules.
pub fn validate<M: Message + Name>(message: &M) -> Result<(), Error> {
    validate_dynamic(&dynamic(message)?, &M::full_name())
}

fn validate_dynamic(message: &DynamicMessage, path: &str) -> Result<(), Error> {
    prost_reflect_validate::validate(message).map_err(|e| Error::Invalid {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    for (field, value) in message.fields() {
        walk(value, &format!("{path}.{}", field.name()))?;
    }
    Ok(())
}

fn walk(value: &Value, path: &str) -> Result<(), Error> {
    match value {
        Value::Message(inner) if inner.descriptor().full_name() == "google.protobuf.Any" => {
            let type_url = inner
                .get_field_by_name("type_url")
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let bytes = inner
                .get_field_by_name("value")
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            let type_name = type_url.rsplit('/').next().unwrap_or_default();
            let unpacked = decode(type_name, &bytes)?;
            validate_dynamic(&unpacked, &format!("{path}({type_name})"))
        }
        Value::Message(inner) => {
            for (field, value) in inner.fields() {
                walk(value, &format!("{path}.{}", field.name()))?;
            }
            Ok(())
        }
        Value::List(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| walk(v, &format!("{path}[{i}]"))),
        Value::Map(entries) => entries.values().try_for_each(|v| walk(v, path)),
        _ => Ok(()),
    }
}
