//! The key of a stored object: its resource's storage key and the object's own key
//! (fairlead-key's [`ObjectKey`]: namespace, empty for cluster-scoped objects, and name), in a
//! module of its own because the store and its journal both hold it. Keys sort by resource,
//! then by the object key's text (`namespace/name`), as etcd orders
//! `/registry/<resource>/<namespace>/<name>`.

use fairlead_key::ObjectKey;

/// Where one object lives: the storage key of its resource (`pods`,
/// `leases.coordination.k8s.io`) and the object's key.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(from = "Stored", into = "Stored")]
pub struct StoreKey {
    /// Storage key of the resource.
    pub resource: String,
    /// The object's namespace (empty for cluster-scoped objects) and name.
    pub object: ObjectKey,
}

impl StoreKey {
    /// The key of `name` in `namespace` (empty for cluster-scoped objects) of `resource`.
    pub fn new(resource: impl Into<String>, namespace: &str, name: &str) -> Self {
        Self {
            resource: resource.into(),
            object: ObjectKey::new(namespace, name),
        }
    }

    /// The namespace; empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.object.namespace()
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        self.object.name()
    }
}

/// A key as the journal writes it (the form data directories of earlier versions hold).
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Stored {
    resource: String,
    namespace: String,
    name: String,
}

impl From<Stored> for StoreKey {
    fn from(stored: Stored) -> Self {
        Self::new(stored.resource, &stored.namespace, &stored.name)
    }
}

impl From<StoreKey> for Stored {
    fn from(key: StoreKey) -> Self {
        Self {
            namespace: key.namespace().to_owned(),
            name: key.name().to_owned(),
            resource: key.resource,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_written_as_resource_namespace_and_name() {
        let key = StoreKey::new("pods", "default", "web");
        let text = serde_json::to_string(&key).unwrap();
        assert_eq!(
            text,
            r#"{"resource":"pods","namespace":"default","name":"web"}"#
        );
        assert_eq!(serde_json::from_str::<StoreKey>(&text).unwrap(), key);
        let cluster = StoreKey::new("nodes", "", "local");
        assert_eq!(cluster.namespace(), "");
        assert_eq!(cluster.name(), "local");
    }

    #[test]
    fn keys_sort_as_etcd_orders_their_paths() {
        let mut keys = [
            StoreKey::new("pods", "a", "x"),
            StoreKey::new("configmaps", "z", "z"),
            StoreKey::new("pods", "a-b", "y"),
        ];
        keys.sort();
        let paths: Vec<String> = keys
            .iter()
            .map(|k| format!("{}/{}", k.resource, k.object))
            .collect();
        assert_eq!(paths, ["configmaps/z/z", "pods/a-b/y", "pods/a/x"]);
    }
}
