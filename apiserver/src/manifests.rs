//! `fairlead up -f DIR`: applies the manifests of a directory after start, so a demo world can
//! be declared in files. Every document is server-side applied under the manager
//! `fairlead-up`; a `status` in a document is written through the status subresource where the
//! kind has one. CRDs and Namespaces go first, so the objects that need them follow.

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde::Deserialize;
use serde_json::Value;

use crate::objects::resources::{Registry, split_api_version};

/// The field manager of applied manifests.
pub const MANAGER: &str = "fairlead-up";

/// Manifest failures, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A document does not parse, or lacks apiVersion/kind/name.
    #[error("{path}: document {index}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based document number.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// The server refused a document.
    #[error("{path}: {kind} {name}: {source}")]
    Refused {
        /// The file.
        path: PathBuf,
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

#[derive(Debug)]
struct Document {
    path: PathBuf,
    value: Value,
}

fn priority(kind: &str) -> u8 {
    match kind {
        "CustomResourceDefinition" => 0,
        "Namespace" => 1,
        _ => 2,
    }
}

/// Reads every `.yaml`, `.yml` and `.json` file of `dir` (sorted by name), one or more
/// documents each.
fn read_dir(dir: &Path) -> Result<Vec<Document>, ManifestError> {
    let read_err = |path: &Path, source| ManifestError::Read {
        path: path.to_owned(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    let mut documents = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| read_err(&path, e))?;
        for (index, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let value = Value::deserialize(doc).map_err(|e| ManifestError::Invalid {
                path: path.clone(),
                index: index + 1,
                message: e.to_string(),
            })?;
            if value.is_null() {
                continue;
            }
            let complete = value["apiVersion"].is_string()
                && value["kind"].is_string()
                && value["metadata"]["name"].is_string();
            if !complete {
                return Err(ManifestError::Invalid {
                    path,
                    index: index + 1,
                    message: "every document needs apiVersion, kind and metadata.name".into(),
                });
            }
            documents.push(Document {
                path: path.clone(),
                value,
            });
        }
    }
    documents.sort_by_key(|d| priority(d.value["kind"].as_str().unwrap_or_default()));
    Ok(documents)
}

/// Why one object could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Its kind is not served.
    #[error("{kind} {name}: no such kind is served at {api_version}")]
    NotServed {
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// The server refused it.
    #[error("{kind} {name}: {source}")]
    Refused {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// Server-side applies `object` (manager [`MANAGER`]), its `status` through the status
/// subresource where the kind has one; returns `kind/name`.
pub async fn apply_value(
    client: &kube::Client,
    registry: &Registry,
    object: &Value,
) -> Result<String, ApplyError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let refused = |source| ApplyError::Refused {
        kind: kind.clone(),
        name: name.clone(),
        source: Box::new(source),
    };
    let Some(rt) = registry.lookup_kind(api_version, &kind) else {
        return Err(ApplyError::NotServed {
            api_version: api_version.to_owned(),
            kind,
            name,
        });
    };
    let (group, version) = split_api_version(api_version);
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &kind),
        &rt.plural,
    );
    let api: Api<DynamicObject> = if rt.namespaced {
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let params = PatchParams::apply(MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map_err(refused)?;
    if rt.status_subresource && object.get("status").is_some() {
        api.patch_status(&name, &params, &Patch::Apply(object))
            .await
            .map_err(refused)?;
    }
    Ok(format!("{kind}/{name}"))
}

/// Applies the manifests of `dir`; returns `kind/name` of each object applied.
pub async fn apply_dir(
    client: &kube::Client,
    registry: &Registry,
    dir: &Path,
) -> Result<Vec<String>, ManifestError> {
    let mut applied = Vec::new();
    for doc in read_dir(dir)? {
        match apply_value(client, registry, &doc.value).await {
            Ok(done) => applied.push(done),
            Err(e @ ApplyError::NotServed { .. }) => {
                return Err(ManifestError::Invalid {
                    path: doc.path.clone(),
                    index: 0,
                    message: e.to_string(),
                });
            }
            Err(ApplyError::Refused { kind, name, source }) => {
                return Err(ManifestError::Refused {
                    path: doc.path.clone(),
                    kind,
                    name,
                    source,
                });
            }
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_read_in_order_with_crds_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.json"),
            r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.y"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let kinds: Vec<String> = read_dir(dir.path())
            .unwrap()
            .iter()
            .map(|d| d.value["kind"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            kinds,
            vec!["CustomResourceDefinition", "Namespace", "ConfigMap"]
        );
    }

    #[test]
    fn incomplete_documents_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.yaml"), "kind: ConfigMap\n").unwrap();
        let err = read_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("bad.yaml") && err.contains("apiVersion"),
            "{err}"
        );
    }
}
