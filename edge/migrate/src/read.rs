//! The converter's input: one object, a `List`, or multi-document YAML (JSON is YAML), of
//! which it keeps Ingresses (`networking.k8s.io/v1`, to convert), Services (to resolve
//! named ports) and DexAuthenticators (their application domains). Other kinds are counted,
//! not refused: `kubectl get ingress,service,dexauthenticator -A -o yaml` is the expected
//! input, and whatever else comes along is said in the output.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use serde::Deserialize as _;

/// The largest body taken (Deckhouse's limit).
pub const MAX_BODY: usize = 8 * 1024 * 1024;

/// What the converter reads.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Ingresses, in input order.
    pub ingresses: Vec<Ingress>,
    /// Services by namespace and name.
    pub services: BTreeMap<(String, String), Service>,
    /// DexAuthenticators' application domains by namespace and name.
    pub authenticators: BTreeMap<(String, String), String>,
    /// Objects of other kinds, by kind, with how many.
    pub ignored: BTreeMap<String, usize>,
}

/// Why a body cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Larger than [`MAX_BODY`].
    #[error("the body is {0} bytes; at most {MAX_BODY} are taken")]
    TooLarge(usize),
    /// Not YAML.
    #[error("document {index}: {message}")]
    Yaml {
        /// The document (from 0).
        index: usize,
        /// What the parser said.
        message: String,
    },
    /// An object of a kept kind that does not parse as that kind.
    #[error("{kind} {name}: {message}")]
    Object {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// Reads `body`.
pub fn read(body: &str) -> Result<Inputs, ReadError> {
    if body.len() > MAX_BODY {
        return Err(ReadError::TooLarge(body.len()));
    }
    let mut inputs = Inputs::default();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(body).enumerate() {
        let value = serde_json::Value::deserialize(document).map_err(|e| ReadError::Yaml {
            index,
            message: e.to_string(),
        })?;
        keep(value, &mut inputs)?;
    }
    Ok(inputs)
}

fn keep(value: serde_json::Value, inputs: &mut Inputs) -> Result<(), ReadError> {
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    if value.is_null() {
        return Ok(());
    }
    let key = || {
        (
            value["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
            value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let parse_error = |e: serde_json::Error| ReadError::Object {
        kind: kind.clone(),
        name: key().1,
        message: e.to_string(),
    };
    match kind.as_str() {
        "List" => {
            let items = value["items"].as_array().cloned().unwrap_or_default();
            for item in items {
                keep(item, inputs)?;
            }
        }
        "Ingress" => {
            let mut ingress: Ingress =
                serde_json::from_value(value.clone()).map_err(parse_error)?;
            ingress.metadata.namespace.get_or_insert_with(|| key().0);
            inputs.ingresses.push(ingress);
        }
        "Service" => {
            let service: Service = serde_json::from_value(value.clone()).map_err(parse_error)?;
            inputs.services.insert(key(), service);
        }
        "DexAuthenticator" => {
            let domain = value["spec"]["applicationDomain"]
                .as_str()
                .or_else(|| value["spec"]["applications"][0]["domain"].as_str())
                .unwrap_or_default()
                .to_owned();
            inputs.authenticators.insert(key(), domain);
        }
        other => *inputs.ignored.entry(other.to_owned()).or_default() += 1,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_object_a_list_or_many_documents() {
        let one = read(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a}\nspec: {}\n",
        )
        .unwrap();
        assert_eq!(one.ingresses.len(), 1);
        assert_eq!(
            one.ingresses[0].metadata.namespace.as_deref(),
            Some("default")
        );
        let list = read(
            r#"{"apiVersion": "v1", "kind": "List", "items": [
              {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "a", "namespace": "shop"}, "spec": {}},
              {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}, "spec": {}},
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]}"#,
        )
        .unwrap();
        assert_eq!(list.ingresses.len(), 1);
        assert!(list.services.contains_key(&("shop".into(), "web".into())));
        assert_eq!(list.ignored["ConfigMap"], 1);
        let many = read(
            "kind: DexAuthenticator\nmetadata: {name: dash, namespace: ops}\nspec: {applicationDomain: dash.example.com}\n---\n---\nkind: Ingress\nmetadata: {name: b}\nspec: {}\n",
        )
        .unwrap();
        assert_eq!(
            many.authenticators[&("ops".into(), "dash".into())],
            "dash.example.com"
        );
        assert_eq!(many.ingresses.len(), 1);
    }

    #[test]
    fn what_cannot_be_read_is_named() {
        assert!(matches!(
            read(": : :"),
            Err(ReadError::Yaml { index: 0, .. })
        ));
        let e = read("kind: Ingress\nmetadata: {name: broken}\nspec: {rules: 3}\n").unwrap_err();
        assert!(e.to_string().starts_with("Ingress broken:"), "{e}");
        let big = "#".repeat(MAX_BODY + 1);
        assert!(matches!(read(&big), Err(ReadError::TooLarge(_))));
    }
}
