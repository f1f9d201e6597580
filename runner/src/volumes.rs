//! A pod's volumes on this machine, as the kubelet keeps them: ConfigMaps and Secrets
//! written into `<pod>/volumes/<name>` (published together behind a `..data` link, so a
//! reader sees the old set or the new one, and files are replaced, not edited, when the
//! object changes), emptyDirs as plain directories, PersistentVolumeClaims as a directory
//! of their own that outlives the pod (once the claim is bound); and each container's view
//! of them, a directory tree of its own whose mount points link to the volumes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::Value;

/// What one volume is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    ConfigMap {
        name: String,
        mode: u32,
        items: Vec<(String, String)>,
    },
    Secret {
        name: String,
        mode: u32,
        items: Vec<(String, String)>,
    },
    EmptyDir,
    Claim(String),
    Unsupported(String),
}

/// Why a volume could not be materialized.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// The API refused a read.
    #[error("reading {what}: {source}")]
    Kube {
        /// What was read.
        what: String,
        /// The error.
        source: kube::Error,
    },
    /// The object it names does not exist (yet).
    #[error("{0} not found")]
    Missing(String),
    /// Writing the files failed.
    #[error("writing volume {volume}: {source}")]
    Io {
        /// The volume.
        volume: String,
        /// The error.
        source: std::io::Error,
    },
}

fn sources(pod_spec: &Value) -> Vec<(String, Source)> {
    pod_spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let name = v["name"].as_str()?.to_owned();
            let mode = |field: &Value| {
                field["defaultMode"]
                    .as_u64()
                    .and_then(|m| u32::try_from(m).ok())
                    .unwrap_or(0o644)
            };
            // `items`: only these keys, each at its path.
            let items = |field: &Value| -> Vec<(String, String)> {
                field["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| {
                        Some((
                            i["key"].as_str()?.to_owned(),
                            i["path"].as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            };
            let source = if let Some(cm) = v.get("configMap") {
                Source::ConfigMap {
                    name: cm["name"].as_str()?.to_owned(),
                    mode: mode(cm),
                    items: items(cm),
                }
            } else if let Some(secret) = v.get("secret") {
                Source::Secret {
                    name: secret["secretName"].as_str()?.to_owned(),
                    mode: mode(secret),
                    items: items(secret),
                }
            } else if v.get("emptyDir").is_some() {
                Source::EmptyDir
            } else if let Some(claim) = v.get("persistentVolumeClaim") {
                Source::Claim(claim["claimName"].as_str()?.to_owned())
            } else {
                let kind = v
                    .as_object()
                    .and_then(|o| o.keys().find(|k| *k != "name").cloned())
                    .unwrap_or_default();
                Source::Unsupported(kind)
            };
            Some((name, source))
        })
        .collect()
}

/// The files of `items` (each key at its path), or all of them without items; a key the
/// object lacks is named in the error (missing, as the kubelet says).
fn select(
    mut files: BTreeMap<String, Vec<u8>>,
    items: &[(String, String)],
    kind: &str,
    object: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    if items.is_empty() {
        return Ok(files);
    }
    items
        .iter()
        .map(|(key, path)| {
            files
                .remove(key)
                .map(|bytes| (path.clone(), bytes))
                .ok_or_else(|| format!("key {key} of {kind} {object}"))
        })
        .collect()
}

/// The volumes of one pod, kept current by [`Volumes::refresh`].
pub struct Volumes {
    root: PathBuf,
    claims: PathBuf,
    namespace: String,
    sources: Vec<(String, Source)>,
    /// What was last published per volume, to write only changes.
    published: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

impl Volumes {
    /// The volumes of `pod_spec` in the namespace `namespace`, under `root/volumes`; the
    /// directories of its claims under `claims` ([`claim_dir`]).
    pub fn new(root: &Path, claims: &Path, namespace: &str, pod_spec: &Value) -> Self {
        Self {
            root: root.join("volumes"),
            claims: claims.to_owned(),
            namespace: namespace.to_owned(),
            sources: sources(pod_spec),
            published: BTreeMap::new(),
        }
    }

    /// The directory of volume `name`.
    pub fn dir(&self, name: &str) -> PathBuf {
        match self.sources.iter().find(|(n, _)| n == name) {
            Some((_, Source::Claim(claim))) => claim_dir(&self.claims, &self.namespace, claim),
            _ => self.root.join(name),
        }
    }

    /// The kinds of volume that are not made here (said once by the caller).
    pub fn unsupported(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter_map(|(name, s)| match s {
                Source::Unsupported(kind) => Some(format!("{name} ({kind})")),
                _ => None,
            })
            .collect()
    }

    /// Writes every volume whose source changed since the last call; the first error stops
    /// nothing else (the others are still written) and is returned.
    pub async fn refresh(&mut self, client: &kube::Client) -> Result<(), VolumeError> {
        let mut first = None;
        for (name, source) in self.sources.clone() {
            let outcome = self.refresh_one(client, &name, &source).await;
            if let Err(e) = outcome {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The object `kind` `name` of the pod's namespace; missing is an error naming it.
    async fn fetch<K>(
        &self,
        client: &kube::Client,
        kind: &str,
        name: &str,
    ) -> Result<K, VolumeError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + k8s_openapi::serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(client.clone(), &self.namespace);
        let what = format!("{kind} {}/{name}", self.namespace);
        api.get_opt(name)
            .await
            .map_err(|source| VolumeError::Kube {
                what: what.clone(),
                source,
            })?
            .ok_or(VolumeError::Missing(what))
    }

    async fn refresh_one(
        &mut self,
        client: &kube::Client,
        name: &str,
        source: &Source,
    ) -> Result<(), VolumeError> {
        let dir = self.dir(name);
        let io = |source| VolumeError::Io {
            volume: name.to_owned(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let (files, mode): (BTreeMap<String, Vec<u8>>, u32) = match source {
            Source::EmptyDir | Source::Unsupported(_) => return Ok(()),
            Source::Claim(claim) => {
                // Its files are the pod's; the runner binds the claim first.
                let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim =
                    self.fetch(client, "PersistentVolumeClaim", claim).await?;
                let bound = pvc.status.and_then(|s| s.phase).as_deref() == Some("Bound");
                return if bound {
                    Ok(())
                } else {
                    Err(VolumeError::Missing(format!(
                        "a bound PersistentVolumeClaim {}/{claim}",
                        self.namespace
                    )))
                };
            }
            Source::ConfigMap {
                name: object,
                mode,
                items,
            } => {
                let cm: ConfigMap = self.fetch(client, "ConfigMap", object).await?;
                let mut files: BTreeMap<String, Vec<u8>> = cm
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                files.extend(
                    cm.binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0)),
                );
                (
                    select(files, items, "ConfigMap", object).map_err(VolumeError::Missing)?,
                    *mode,
                )
            }
            Source::Secret {
                name: object,
                mode,
                items,
            } => {
                let secret: Secret = self.fetch(client, "Secret", object).await?;
                let mut files: BTreeMap<String, Vec<u8>> = secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                files.extend(
                    secret
                        .string_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.into_bytes())),
                );
                // Private: the pod's user alone reads a Secret's files here.
                (
                    select(files, items, "Secret", object).map_err(VolumeError::Missing)?,
                    mode & 0o700,
                )
            }
        };
        if self.published.get(name) == Some(&files) {
            return Ok(());
        }
        let list: Vec<(&str, &[u8], u32)> = files
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice(), mode))
            .collect();
        fairlead_kit::files::publish(&dir, &list).map_err(io)?;
        self.published.insert(name.to_owned(), files);
        Ok(())
    }
}

/// The directory standing in for the volume of claim `claim` in `namespace`, under
/// `claims`: it outlives the pods that mount it.
pub fn claim_dir(claims: &Path, namespace: &str, claim: &str) -> PathBuf {
    claims.join(format!("{namespace}_{claim}"))
}

/// A container's file tree under `root/containers/<name>`: each of its `volumeMounts`
/// linked to its volume's directory. Returns the mounts (path in the container, path here)
/// and the directory its `workingDir` is.
pub fn container_tree(
    root: &Path,
    volumes: &Volumes,
    container: &Value,
) -> std::io::Result<(Vec<(String, PathBuf)>, PathBuf)> {
    let name = container["name"].as_str().unwrap_or("container");
    let tree = root.join("containers").join(name);
    let inside = |path: &str| tree.join(path.trim_start_matches('/'));
    let mut mounts = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let (Some(path), Some(volume)) = (mount["mountPath"].as_str(), mount["name"].as_str())
        else {
            continue;
        };
        let at = inside(path);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let target = volumes.dir(volume);
        std::fs::create_dir_all(&target)?;
        match std::fs::read_link(&at) {
            Ok(existing) if existing == target => {}
            _ => {
                let _ = std::fs::remove_file(&at);
                std::os::unix::fs::symlink(&target, &at)?;
            }
        }
        mounts.push((path.to_owned(), at));
    }
    let working = container["workingDir"]
        .as_str()
        .map_or_else(|| tree.clone(), inside);
    std::fs::create_dir_all(&working)?;
    Ok((mounts, working))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn items_pick_keys_and_name_the_missing() {
        let files: BTreeMap<String, Vec<u8>> = [
            ("cacert".to_owned(), b"ca".to_vec()),
            ("other".to_owned(), b"x".to_vec()),
        ]
        .into();
        let picked = select(
            files.clone(),
            &[("cacert".into(), "ca.pem".into())],
            "Secret",
            "otel-ca",
        )
        .unwrap();
        assert_eq!(picked, [("ca.pem".to_owned(), b"ca".to_vec())].into());
        assert_eq!(select(files.clone(), &[], "Secret", "s").unwrap(), files);
        let missing = select(
            files,
            &[("tls.crt".into(), "tls.crt".into())],
            "Secret",
            "otel-ca",
        )
        .unwrap_err();
        assert_eq!(
            VolumeError::Missing(missing).to_string(),
            "key tls.crt of Secret otel-ca not found"
        );
        let spec = json!({"volumes": [{"name": "ca", "secret": {"secretName": "otel-ca",
            "items": [{"key": "cacert", "path": "cacert"}]}}]});
        assert_eq!(
            sources(&spec)[0].1,
            Source::Secret {
                name: "otel-ca".into(),
                mode: 0o644,
                items: vec![("cacert".into(), "cacert".into())],
            }
        );
    }

    #[test]
    fn volumes_are_read_from_the_pod_spec_and_mounted_per_container() {
        let spec = json!({"volumes": [
            {"name": "bootstrap", "configMap": {"name": "cm"}},
            {"name": "tls", "secret": {"secretName": "s", "defaultMode": 0o440}},
            {"name": "run", "emptyDir": {}},
            {"name": "disk", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "nfs", "nfs": {"server": "x", "path": "/"}},
        ]});
        assert_eq!(
            sources(&spec)[1],
            (
                "tls".to_owned(),
                Source::Secret {
                    name: "s".into(),
                    mode: 0o440,
                    items: Vec::new(),
                }
            )
        );
        let dir = tempfile::tempdir().unwrap();
        let volumes = Volumes::new(dir.path(), &dir.path().join("claims"), "ns", &spec);
        assert_eq!(volumes.unsupported(), ["nfs (nfs)"]);
        assert_eq!(
            volumes.dir("disk"),
            dir.path().join("claims/ns_c"),
            "a claim's directory is the claim's, not the pod's"
        );
        let container = json!({"name": "proxy", "workingDir": "/etc/fairlead", "volumeMounts": [
            {"name": "bootstrap", "mountPath": "/etc/fairlead/bootstrap"},
            {"name": "run", "mountPath": "/var/run/fairlead"}]});
        let (mounts, working) = container_tree(dir.path(), &volumes, &container).unwrap();
        std::fs::write(volumes.dir("bootstrap").join("envoy.yaml"), "x").unwrap();
        // The container's relative paths resolve from its working directory.
        assert_eq!(
            std::fs::read_to_string(working.join("bootstrap/envoy.yaml")).unwrap(),
            "x"
        );
        assert_eq!(mounts[1].0, "/var/run/fairlead");
        assert!(mounts[1].1.ends_with("containers/proxy/var/run/fairlead"));
        // Made again (a restart), the tree is the same.
        assert_eq!(
            container_tree(dir.path(), &volumes, &container).unwrap().1,
            working
        );
    }
}
