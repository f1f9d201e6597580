//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), as client-go's typed
//! clients, and so kubectl's `create …` commands, send them: the `k8s\0` magic, then a
//! `runtime.Unknown` whose `raw` holds the object. They are turned into the JSON the store
//! keeps, by a table of every built-in message ([`schema`], generated from the locked k8s-pb
//! and k8s-openapi crates): field numbers to JSON names, Time and MicroTime to RFC 3339,
//! IntOrString to a number or a string, Quantity to its string, bytes to base64,
//! RawExtension and friends to the JSON they hold, inlined Go structs flattened.
//!
//! Go writes every non-pointer field, zero or not; this mapping keeps numbers and booleans as
//! sent (a pointer's zero is meaningful, `replicas: 0`, `ready: false`) and leaves empty
//! strings and zero Times out, as the real server's JSON of a non-pointer field would.
//! Responses stay JSON: clients decode by the response's Content-Type.

#[rustfmt::skip]
mod schema;
pub mod wire;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use wire::{Reader, Wire, varint};

/// The content type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The magic that starts a Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How a message reads as JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An object of its fields.
    Object,
    /// `metav1.Time`: RFC 3339 seconds.
    Time,
    /// `metav1.MicroTime`: RFC 3339 microseconds.
    MicroTime,
    /// `metav1.Duration`: Go's duration text.
    Duration,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// Raw JSON bytes (`RawExtension`, `FieldsV1`, apiextensions `JSON`).
    RawJson,
    /// `JSONSchemaPropsOrArray`: a schema or a list of them.
    OrArray,
    /// `JSONSchemaPropsOrBool`: a schema or a boolean.
    OrBool,
    /// `JSONSchemaPropsOrStringArray`: a schema or a list of strings.
    OrStringArray,
    /// A named list (`ExtraValue`): a message of one repeated field, a plain array in JSON.
    Items,
}

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    String,
    /// An `int32` (varint).
    Int32,
    /// An `int64` (varint).
    Int64,
    /// A boolean.
    Bool,
    /// A `double` (fixed 64 bits).
    Double,
    /// Bytes, base64 in JSON.
    Bytes,
    /// A message, by index in [`schema::MESSAGES`].
    Message(usize),
    /// A map from strings to values of a kind.
    Map(&'static Kind),
}

/// One field of a message.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// Its number.
    pub number: u32,
    /// Its JSON name; `@inline` for a Go struct embedded inline.
    pub json: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// Repeated.
    pub repeated: bool,
}

/// One message.
#[derive(Debug)]
pub struct Message {
    /// Full proto name (`k8s.io.api.core.v1.Pod`).
    pub name: &'static str,
    /// How it reads as JSON.
    pub shape: Shape,
    /// Its fields.
    pub fields: &'static [Field],
}

/// Why a protobuf body could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// No `k8s\0` magic.
    #[error("the body does not start with the Kubernetes protobuf magic \"k8s\\x00\"")]
    Magic,
    /// The envelope names no apiVersion or kind.
    #[error("the protobuf envelope names no apiVersion and kind")]
    NoKind,
    /// The envelope's content is encoded (gzip…): not supported.
    #[error("protobuf content encoding {0:?} is not supported")]
    Encoding(String),
    /// No message for the kind.
    #[error("no protobuf message is known for {api_version}, Kind={kind}")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
    /// The bytes are not what the message says.
    #[error("{path}: {why}")]
    Malformed {
        /// Where: message and field.
        path: String,
        /// What is wrong.
        why: String,
    },
}

/// The message table, sorted by name.
pub fn messages() -> &'static [Message] {
    schema::MESSAGES
}

/// The index of a message by full name.
pub fn message_index(name: &str) -> Option<usize> {
    messages().binary_search_by(|m| m.name.cmp(name)).ok()
}

/// The proto package of an API group's version (`apps`, `v1` → `k8s.io.api.apps.v1`).
fn package(group: &str, version: &str) -> String {
    match group {
        "" => format!("k8s.io.api.core.{version}"),
        "apiextensions.k8s.io" => {
            format!("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.{version}")
        }
        "meta.k8s.io" => format!("k8s.io.apimachinery.pkg.apis.meta.{version}"),
        group => format!(
            "k8s.io.api.{}.{version}",
            group.split('.').next().unwrap_or(group)
        ),
    }
}

/// The message of a kind: its group's, else (options such as `DeleteOptions`, which every
/// group version carries) apimachinery's.
pub fn message_for(api_version: &str, kind: &str) -> Option<usize> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    message_index(&format!("{}.{kind}", package(group, version)))
        .or_else(|| message_index(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))
}

/// A request body: the object as JSON, with the envelope's `apiVersion` and `kind`.
pub fn decode_body(bytes: &[u8]) -> Result<Value, DecodeError> {
    let body = bytes.strip_prefix(MAGIC).ok_or(DecodeError::Magic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut encoding = String::new();
    let envelope = "runtime.Unknown";
    for item in Reader::new(body, envelope) {
        let (number, value) = item?;
        match (number, value) {
            (1, Wire::Len(type_meta)) => {
                for item in Reader::new(type_meta, "runtime.TypeMeta") {
                    match item? {
                        (1, Wire::Len(v)) => api_version = utf8(v, "runtime.TypeMeta.apiVersion")?,
                        (2, Wire::Len(v)) => kind = utf8(v, "runtime.TypeMeta.kind")?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(bytes)) => raw = bytes,
            (3, Wire::Len(v)) => encoding = utf8(v, "runtime.Unknown.contentEncoding")?,
            _ => {}
        }
    }
    if api_version.is_empty() || kind.is_empty() {
        return Err(DecodeError::NoKind);
    }
    if !encoding.is_empty() {
        return Err(DecodeError::Encoding(encoding));
    }
    let index = message_for(&api_version, &kind).ok_or_else(|| DecodeError::UnknownKind {
        api_version: api_version.clone(),
        kind: kind.clone(),
    })?;
    let mut object = decode(raw, index)?;
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(kind));
    }
    Ok(object)
}

/// A message's bytes as JSON.
pub fn decode(bytes: &[u8], index: usize) -> Result<Value, DecodeError> {
    let message = &messages()[index];
    if message.shape == Shape::RawJson {
        return raw_json(bytes, message.name);
    }
    let mut fields: Map<String, Value> = Map::new();
    let mut by_number: Vec<(u32, Value)> = Vec::new();
    for item in Reader::new(bytes, message.name) {
        let (number, wire) = item?;
        let Some(field) = message.fields.iter().find(|f| f.number == number) else {
            continue;
        };
        let path = || format!("{}.{}", message.name, field.json);
        let values = field_values(field, wire, &path)?;
        if message.shape != Shape::Object {
            by_number.extend(values.into_iter().map(|v| (number, v)));
            continue;
        }
        for value in values {
            match (field.kind, field.repeated) {
                (Kind::Map(_), _) => {
                    let (key, value) = value_pair(value);
                    let entry = fields
                        .entry(field.json)
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(map) = entry.as_object_mut() {
                        map.insert(key, value);
                    }
                }
                (_, true) => {
                    let entry = fields
                        .entry(field.json)
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Some(items) = entry.as_array_mut() {
                        items.push(value);
                    }
                }
                _ if field.json == "@inline" => {
                    if let Value::Object(inner) = value {
                        fields.extend(inner);
                    }
                }
                // Go writes every non-pointer string; an empty one reads as absent.
                _ if value.is_null() || value.as_str() == Some("") => {
                    fields.remove(field.json);
                }
                _ => {
                    fields.insert(field.json.to_owned(), value);
                }
            }
        }
    }
    shaped(message, fields, by_number)
}

/// What a message of a special shape reads as, from its fields by number.
fn shaped(
    message: &Message,
    fields: Map<String, Value>,
    by_number: Vec<(u32, Value)>,
) -> Result<Value, DecodeError> {
    let first = |n: u32| {
        by_number
            .iter()
            .find(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
    };
    let all = |n: u32| -> Vec<Value> {
        by_number
            .iter()
            .filter(|(k, _)| *k == n)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let malformed = |why: String| DecodeError::Malformed {
        path: message.name.to_owned(),
        why,
    };
    Ok(match message.shape {
        Shape::Object => Value::Object(fields),
        Shape::Time | Shape::MicroTime => {
            if by_number.is_empty() {
                // A zero Time is written as an empty message: JSON null.
                return Ok(Value::Null);
            }
            let seconds = first(1).and_then(|v| v.as_i64()).unwrap_or(0);
            let nanos = first(2).and_then(|v| v.as_i64()).unwrap_or(0);
            let at = k8s_openapi::jiff::Timestamp::new(seconds, i32::try_from(nanos).unwrap_or(0))
                .map_err(|e| malformed(e.to_string()))?;
            let format = if message.shape == Shape::Time {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            json!(at.strftime(format).to_string())
        }
        Shape::Duration => json!(go_duration(first(1).and_then(|v| v.as_i64()).unwrap_or(0))),
        Shape::Quantity => first(1).unwrap_or_else(|| json!("0")),
        Shape::IntOrString => match first(1).and_then(|v| v.as_i64()) {
            Some(1) => first(3).unwrap_or_else(|| json!("")),
            _ => first(2).unwrap_or_else(|| json!(0)),
        },
        Shape::RawJson => unreachable!("read by raw_json"),
        Shape::OrArray => first(1).unwrap_or_else(|| Value::Array(all(2))),
        Shape::OrBool => first(2).unwrap_or_else(|| first(1).unwrap_or(json!(false))),
        Shape::OrStringArray => first(1).unwrap_or_else(|| Value::Array(all(2))),
        Shape::Items => Value::Array(all(1)),
    })
}

/// The JSON a raw-JSON message (`RawExtension`, `FieldsV1`, apiextensions `JSON`) holds in
/// its field 1, read from the bytes as they are; none is JSON null.
fn raw_json(bytes: &[u8], name: &'static str) -> Result<Value, DecodeError> {
    let mut raw: &[u8] = &[];
    for item in Reader::new(bytes, name) {
        if let (1, Wire::Len(value)) = item? {
            raw = value;
        }
    }
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(raw).map_err(|e| DecodeError::Malformed {
        path: name.to_owned(),
        why: format!("raw JSON: {e}"),
    })
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `150ms`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = if n < 1_000 {
            ("ns", 1)
        } else if n < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", trim_fraction(n, div));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let seconds = trim_fraction(n % 60_000_000_000, 1_000_000_000);
    let mut out = sign.to_owned();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}

/// `value / div` with its fraction, trailing zeros trimmed.
fn trim_fraction(value: u64, div: u64) -> String {
    let whole = value / div;
    let fraction = value % div;
    if fraction == 0 {
        return whole.to_string();
    }
    let digits = div.ilog10() as usize;
    let text = format!("{fraction:0digits$}");
    format!("{whole}.{}", text.trim_end_matches('0'))
}

/// A map entry (a message of key 1 and value 2) as (key, value).
fn value_pair(entry: Value) -> (String, Value) {
    match entry {
        Value::Array(mut pair) if pair.len() == 2 => {
            let value = pair.pop().unwrap_or(Value::Null);
            let key = pair.pop().and_then(|k| k.as_str().map(str::to_owned));
            (key.unwrap_or_default(), value)
        }
        _ => (String::new(), Value::Null),
    }
}

/// The JSON values one occurrence of a field holds (several for a packed repeated scalar).
fn field_values(
    field: &Field,
    wire: Wire<'_>,
    path: &dyn Fn() -> String,
) -> Result<Vec<Value>, DecodeError> {
    let malformed = |why: &str| DecodeError::Malformed {
        path: path(),
        why: why.to_owned(),
    };
    match (field.kind, wire) {
        (Kind::Map(value_kind), Wire::Len(entry)) => {
            let mut key = String::new();
            let value_field = Field {
                number: 2,
                json: field.json,
                kind: *value_kind,
                repeated: false,
            };
            let mut value = default_of(*value_kind)?;
            for item in Reader::new(entry, field.json) {
                match item? {
                    (1, Wire::Len(k)) => key = utf8(k, field.json)?,
                    (2, wire) => {
                        value = field_values(&value_field, wire, path)?
                            .pop()
                            .unwrap_or(Value::Null);
                    }
                    _ => {}
                }
            }
            Ok(vec![Value::Array(vec![json!(key), value])])
        }
        (Kind::Message(index), Wire::Len(bytes)) => Ok(vec![decode(bytes, index)?]),
        (Kind::String, Wire::Len(bytes)) => Ok(vec![json!(utf8(bytes, &path())?)]),
        (Kind::Bytes, Wire::Len(bytes)) => Ok(vec![json!(
            base64::engine::general_purpose::STANDARD.encode(bytes)
        )]),
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Wire::Varint(v)) => {
            Ok(vec![scalar(field.kind, v)])
        }
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Wire::Len(packed)) => {
            let mut out = Vec::new();
            let mut rest = packed;
            while !rest.is_empty() {
                let (v, used) = varint(rest).ok_or_else(|| malformed("a truncated varint"))?;
                out.push(scalar(field.kind, v));
                rest = &rest[used..];
            }
            Ok(out)
        }
        (Kind::Double, Wire::Fixed64(bits)) => Ok(vec![double(f64::from_bits(bits))]),
        _ => Err(malformed("the wire type does not match the field")),
    }
}

/// A map value that the encoder left out (Go omits an empty value).
fn default_of(kind: Kind) -> Result<Value, DecodeError> {
    Ok(match kind {
        Kind::String | Kind::Bytes => json!(""),
        Kind::Int32 | Kind::Int64 => json!(0),
        Kind::Bool => json!(false),
        Kind::Double => json!(0.0),
        Kind::Message(index) => decode(&[], index)?,
        Kind::Map(_) => json!({}),
    })
}

/// A double as Go's JSON writes it: a whole number without a fraction (`minimum: 1`).
fn double(x: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if x.fract() == 0.0 && x.abs() < EXACT {
        json!(x as i64)
    } else {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    }
}

fn scalar(kind: Kind, v: u64) -> Value {
    match kind {
        Kind::Bool => json!(v != 0),
        // int32 and int64 negatives are ten-byte two's complement varints.
        Kind::Int32 => json!(v as i64 as i32),
        _ => json!(v as i64),
    }
}

fn utf8(bytes: &[u8], path: &str) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Malformed {
        path: path.to_owned(),
        why: "a string that is not UTF-8".into(),
    })
}
