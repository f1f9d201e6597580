//! `apiserver/src/serve/protobuf/schema.rs`, the table the server decodes protobuf request bodies
//! with, is what this generator makes from the locked crates: field numbers and wire types
//! from k8s-pb (prost's code of Kubernetes' `generated.proto` files), JSON names from
//! k8s-openapi (its serde code holds every key). `UPDATE_PROTOBUF_SCHEMA=1` writes it anew
//! (after a version bump of either crate); otherwise the test fails when it is stale.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fairlead_kit::testing::crates::{crate_source, locked_version};

/// The k8s-pb modules whose messages the server decodes: every GA API group, the
/// apimachinery types they use, and CustomResourceDefinitions.
const MODULES: &[&str] = &[
    "apimachinery/pkg/apis/meta/v1",
    "apimachinery/pkg/api/resource",
    "apimachinery/pkg/runtime",
    "apimachinery/pkg/util/intstr",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1",
    "api/admissionregistration/v1",
    "api/apps/v1",
    "api/authentication/v1",
    "api/authorization/v1",
    "api/autoscaling/v1",
    "api/autoscaling/v2",
    "api/batch/v1",
    "api/certificates/v1",
    "api/coordination/v1",
    "api/core/v1",
    "api/discovery/v1",
    "api/events/v1",
    "api/flowcontrol/v1",
    "api/networking/v1",
    "api/node/v1",
    "api/policy/v1",
    "api/rbac/v1",
    "api/scheduling/v1",
    "api/storage/v1",
];

/// Messages whose JSON is not an object of their fields.
const SHAPES: &[(&str, &str)] = &[
    ("k8s.io.apimachinery.pkg.apis.meta.v1.Time", "Time"),
    (
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
        "MicroTime",
    ),
    ("k8s.io.apimachinery.pkg.apis.meta.v1.Duration", "Duration"),
    ("k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1", "RawJson"),
    ("k8s.io.apimachinery.pkg.runtime.RawExtension", "RawJson"),
    ("k8s.io.apimachinery.pkg.api.resource.Quantity", "Quantity"),
    (
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
        "IntOrString",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
        "RawJson",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "OrArray",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "OrBool",
    ),
    (
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
        "OrStringArray",
    ),
];

/// One field of a k8s-pb struct.
#[derive(Debug)]
struct PbField {
    rust: String,
    number: u32,
    /// `string`, `int32`, `int64`, `bool`, `double`, `bytes`, `message`, or `map`.
    kind: String,
    repeated: bool,
    /// The message type (of the field, or of a map's values), as a proto full name.
    message: Option<String>,
    /// A map's value kind.
    map_value: Option<String>,
}

/// One k8s-pb struct.
#[derive(Debug)]
struct PbMessage {
    module: String,
    rust: String,
    fields: Vec<PbField>,
}

fn package_of(module: &str) -> String {
    format!("k8s.io.{}", module.replace('/', "."))
}

/// The full proto name of a k8s-pb struct; k8s-pb camel-cases acronyms (`JsonSchemaProps`)
/// where the `.proto` files keep Go's names (`JSONSchemaProps`), so k8s-openapi's spelling is
/// taken when it has the type.
fn full_name(module: &str, rust: &str, openapi: &OpenApi) -> String {
    let name = openapi
        .get(&(module.to_owned(), rust.to_lowercase()))
        .map_or(rust, |s| s.name.as_str());
    format!("{}.{name}", package_of(module))
}

/// The innermost type of a field (inside `Option`, `Vec`, `Box`; a map's value type), as
/// path segments.
fn inner_type(ty: &syn::Type) -> Vec<String> {
    let syn::Type::Path(path) = ty else {
        panic!("unexpected field type {}", quote_type(ty));
    };
    let last = path.path.segments.last().expect("a segment");
    let args: Vec<&syn::Type> = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    match last.ident.to_string().as_str() {
        "Option" | "Vec" | "Box" => inner_type(args[0]),
        "BTreeMap" => inner_type(args[1]),
        _ => path
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect(),
    }
}

fn quote_type(ty: &syn::Type) -> String {
    format!("{}", quote::ToTokens::to_token_stream(ty))
}

/// Resolves `super::…::Type` from `module` to (module, type).
fn resolve(module: &str, segments: &[String]) -> (String, String) {
    let mut path: Vec<&str> = module.split('/').collect();
    let (ty, prefix) = segments.split_last().expect("a type");
    for segment in prefix {
        match segment.as_str() {
            "super" => {
                path.pop();
            }
            "crate" => path.clear(),
            "self" => {}
            other => path.push(other),
        }
    }
    (path.join("/"), ty.clone())
}

fn parse_pb(root: &Path, module: &str) -> Vec<PbMessage> {
    let file = root.join("src").join(module).join("mod.rs");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut out = Vec::new();
    for item in parsed.items {
        let syn::Item::Struct(item) = item else {
            continue;
        };
        let is_message = item.attrs.iter().any(|a| {
            a.path().is_ident("derive")
                && quote::ToTokens::to_token_stream(a)
                    .to_string()
                    .contains("Message")
        });
        if !is_message {
            continue;
        }
        let mut fields = Vec::new();
        for field in &item.fields {
            let Some(attr) = field.attrs.iter().find(|a| a.path().is_ident("prost")) else {
                continue;
            };
            let mut pb = PbField {
                rust: field
                    .ident
                    .as_ref()
                    .expect("named")
                    .to_string()
                    .trim_start_matches("r#")
                    .to_owned(),
                number: 0,
                kind: String::new(),
                repeated: false,
                message: None,
                map_value: None,
            };
            attr.parse_nested_meta(|meta| {
                let key = meta
                    .path
                    .get_ident()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match key.as_str() {
                    "tag" => {
                        let value: syn::LitStr = meta.value()?.parse()?;
                        pb.number = value.value().parse().expect("a number");
                    }
                    "btree_map" | "map" => {
                        let value: syn::LitStr = meta.value()?.parse()?;
                        let spec = value.value();
                        let (k, v) = spec.split_once(',').expect("key, value");
                        assert_eq!(k.trim(), "string", "map keys are strings");
                        pb.kind = "map".into();
                        pb.map_value = Some(v.trim().to_owned());
                    }
                    "bytes" => {
                        let _: syn::LitStr = meta.value()?.parse()?;
                        pb.kind = "bytes".into();
                    }
                    "packed" => {
                        let _: syn::LitStr = meta.value()?.parse()?;
                    }
                    "repeated" => pb.repeated = true,
                    "optional" | "required" | "boxed" => {}
                    kind => pb.kind = kind.to_owned(),
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{module}::{}: {e}", item.ident));
            let message_typed = pb.kind == "message" || pb.map_value.as_deref() == Some("message");
            if message_typed {
                let (m, t) = resolve(module, &inner_type(&field.ty));
                pb.message = Some(format!("{m}|{t}"));
            }
            fields.push(pb);
        }
        out.push(PbMessage {
            module: module.to_owned(),
            rust: item.ident.to_string(),
            fields,
        });
    }
    out
}

/// A k8s-openapi struct: its name and JSON keys.
struct OpenApiStruct {
    name: String,
    keys: Vec<String>,
}

/// k8s-openapi structs by (module, lower-case name).
type OpenApi = BTreeMap<(String, String), OpenApiStruct>;

fn parse_openapi(root: &Path) -> OpenApi {
    let mut out = OpenApi::new();
    let mut stack = vec![root.to_path_buf()];
    let key = regex::Regex::new(r#""([^"]+)" => Field::Key_"#).expect("a regex");
    let name = regex::Regex::new(r"pub (?:struct|enum) (\w+)").expect("a regex");
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.file_name().is_some_and(|n| n == "mod.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let Some(found) = name.captures(&text) else {
                continue;
            };
            let module = path
                .parent()
                .expect("a parent")
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            let keys = key.captures_iter(&text).map(|c| c[1].to_owned()).collect();
            out.insert(
                (module, found[1].to_lowercase()),
                OpenApiStruct {
                    name: found[1].to_owned(),
                    keys,
                },
            );
        }
    }
    out
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn camel(rust: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in rust.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn scalar(kind: &str) -> &'static str {
    match kind {
        "string" => "String",
        "int32" => "Int32",
        "int64" => "Int64",
        "bool" => "Bool",
        "double" => "Double",
        "bytes" => "Bytes",
        other => panic!("unexpected kind {other}"),
    }
}

/// The generated table, and notes on what was matched by fallback.
fn generate() -> (String, Vec<String>) {
    let pb_root = crate_source("k8s-pb");
    let openapi_root: PathBuf = crate_source("k8s-openapi").join("src/v1_36");
    let openapi = parse_openapi(&openapi_root);
    let messages: Vec<PbMessage> = MODULES.iter().flat_map(|m| parse_pb(&pb_root, m)).collect();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_pb: BTreeMap<(String, String), String> = BTreeMap::new();
    for m in &messages {
        let full = full_name(&m.module, &m.rust, &openapi);
        by_pb.insert((m.module.clone(), m.rust.clone()), full.clone());
        names.insert(full, 0);
    }
    for (i, value) in names.values_mut().enumerate() {
        *value = i;
    }
    let index_of = |message: &str| -> usize {
        let (module, rust) = message.split_once('|').expect("module|type");
        let full = by_pb
            .get(&(module.to_owned(), rust.to_owned()))
            .unwrap_or_else(|| panic!("{module}::{rust} is in no listed module"));
        names[full]
    };
    let keys_of = |m: &PbMessage| -> Option<BTreeSet<String>> {
        openapi
            .get(&(m.module.clone(), m.rust.to_lowercase()))
            .map(|s| s.keys.iter().map(|k| normalize(k)).collect())
    };
    let by_full: BTreeMap<String, &PbMessage> = messages
        .iter()
        .map(|m| (by_pb[&(m.module.clone(), m.rust.clone())].clone(), m))
        .collect();
    let mut notes = Vec::new();
    let mut out = String::new();
    writeln!(
        out,
        "//! Generated by `apiserver/tests/protobuf_schema.rs` (`UPDATE_PROTOBUF_SCHEMA=1`) from\n\
         //! k8s-pb {} (field numbers and types) and k8s-openapi {} (JSON names, Kubernetes\n\
         //! 1.36). Do not edit.\n\n\
         use super::{{Field, Kind::*, Message, Shape::*}};\n\n\
         /// Every message, sorted by name.\n\
         pub static MESSAGES: &[Message] = &[",
        locked_version("k8s-pb"),
        locked_version("k8s-openapi")
    )
    .unwrap();
    for (full, m) in &by_full {
        let shape = SHAPES
            .iter()
            .find(|(n, _)| n == full)
            .map(|(_, s)| *s)
            .unwrap_or_else(|| {
                let items = m.fields.len() == 1
                    && m.fields[0].rust == "items"
                    && m.fields[0].repeated
                    && keys_of(m).is_none();
                if items { "Items" } else { "Object" }
            });
        let own = keys_of(m);
        let openapi_keys: BTreeMap<String, String> = openapi
            .get(&(m.module.clone(), m.rust.to_lowercase()))
            .map(|s| s.keys.iter().map(|k| (normalize(k), k.clone())).collect())
            .unwrap_or_default();
        if own.is_none() && shape == "Object" {
            notes.push(format!(
                "{full}: not in k8s-openapi, JSON names camel-cased"
            ));
        }
        writeln!(
            out,
            "    Message {{\n        name: {full:?},\n        shape: {shape},\n        fields: &["
        )
        .unwrap();
        for f in &m.fields {
            let kind = match f.kind.as_str() {
                "message" => format!("Message({})", index_of(f.message.as_ref().expect("a type"))),
                "map" => match f.map_value.as_deref() {
                    Some("message") => format!(
                        "Map(&Message({}))",
                        index_of(f.message.as_ref().expect("a type"))
                    ),
                    Some(v) => format!("Map(&{})", scalar(v)),
                    None => unreachable!(),
                },
                other => scalar(other).to_owned(),
            };
            let json = match openapi_keys.get(&normalize(&f.rust)) {
                Some(key) => key.clone(),
                None if shape != "Object" || own.is_none() => camel(&f.rust),
                None => {
                    // A field k8s-openapi does not name: a Go struct embedded inline (its
                    // fields are the parent's in JSON), or a field of another version.
                    let inline = f.kind == "message"
                        && f.message.as_ref().is_some_and(|t| {
                            let (module, rust) = t.split_once('|').expect("module|type");
                            let child = &by_full[&by_pb[&(module.to_owned(), rust.to_owned())]];
                            // Its fields by k8s-openapi's names, or (a type OpenAPI only
                            // knows inlined: ProbeHandler, VolumeSource) by its own.
                            let keys = keys_of(child).unwrap_or_else(|| {
                                child.fields.iter().map(|f| normalize(&f.rust)).collect()
                            });
                            !keys.is_empty() && own.as_ref().is_some_and(|o| keys.is_subset(o))
                        });
                    if inline {
                        "@inline".to_owned()
                    } else {
                        notes.push(format!(
                            "{full}.{}: not in k8s-openapi, camel-cased",
                            f.rust
                        ));
                        camel(&f.rust)
                    }
                }
            };
            writeln!(
                out,
                "            Field {{ number: {}, json: {json:?}, kind: {kind}, repeated: {} }},",
                f.number, f.repeated
            )
            .unwrap();
        }
        writeln!(out, "        ],\n    }},").unwrap();
    }
    writeln!(out, "];").unwrap();
    (out, notes)
}

#[test]
fn the_protobuf_schema_is_generated_from_the_locked_crates() {
    let (generated, notes) = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve/protobuf/schema.rs");
    for note in &notes {
        eprintln!("note: {note}");
    }
    if std::env::var_os("UPDATE_PROTOBUF_SCHEMA").is_some() {
        std::fs::write(&path, &generated).expect("writable");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: run UPDATE_PROTOBUF_SCHEMA=1 cargo test -p fairlead-apiserver --test protobuf_schema",
        path.display()
    );
}
