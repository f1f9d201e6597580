//! The key of a stored object: its resource's storage key, namespace and name, in a module
//! of its own because the store and its journal both hold it.

/// Where one object lives: storage key of its resource (`pods`, `leases.coordination.k8s.io`),
/// namespace (empty for cluster-scoped), name.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ObjectKey {
    /// Storage key of the resource.
    pub resource: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}
