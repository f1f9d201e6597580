//! The kinds the server serves: the built-in table and the kinds CustomResourceDefinitions add.
//!
//! A [`ResourceType`] is one served group/version/resource. Objects are stored once per
//! group/resource ([`ResourceType::storage_key`]) whatever version a client used, as the real
//! server stores one version of a CRD and serves the others (fairlead converts only
//! `apiVersion`, the `None` conversion strategy).

use std::sync::{Arc, RwLock};

use serde_json::Value;

/// A column `kubectl get` prints (CRD `additionalPrinterColumns`).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type of the value (`string`, `integer`, `date`, …).
    pub type_: String,
    /// Simple JSONPath into the object (`.spec.replicas`).
    pub json_path: String,
    /// Priority: 0 shows by default, more only with `-o wide`.
    pub priority: i64,
}

/// One served group/version/resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: String,
    /// Version (`v1`, `v1alpha1`).
    pub version: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Resource name in URLs (`pods`).
    pub plural: String,
    /// Lower-case singular (`pod`).
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`po`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether `/status` is a separate subresource (spec and status written separately).
    pub status_subresource: bool,
    /// Defined by a CustomResourceDefinition (generation bumps on any non-metadata change).
    pub custom: bool,
    /// The version objects are stored in (CRDs); equal to `version` for built-ins.
    pub storage_version: String,
    /// The structural schema (CRDs), validated and defaulted against on writes.
    pub schema: Option<Arc<Value>>,
    /// Columns for `kubectl get`.
    pub printer_columns: Vec<PrinterColumn>,
}

impl ResourceType {
    /// Whether it is a review kind (answered, never stored; [`REVIEW_KINDS`]).
    pub fn is_review(&self) -> bool {
        REVIEW_KINDS
            .iter()
            .any(|(group, kind, _, _)| self.group == *group && self.kind == *kind)
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `apiVersion` objects are stored with.
    pub fn storage_api_version(&self) -> String {
        if self.group.is_empty() {
            self.storage_version.clone()
        } else {
            format!("{}/{}", self.group, self.storage_version)
        }
    }

    /// Where objects of this resource live in the store, whatever the version.
    pub fn storage_key(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `plural.group`, the name a CRD carries.
    pub fn group_resource(&self) -> String {
        self.storage_key()
    }

    fn builtin(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        short_names: &[&str],
        status: bool,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: short_names.iter().map(|s| (*s).into()).collect(),
            categories: Vec::new(),
            status_subresource: status,
            custom: false,
            storage_version: version.into(),
            schema: None,
            printer_columns: Vec::new(),
        }
    }
}

/// The review kinds (group, kind, plural, namespaced).
pub const REVIEW_KINDS: &[(&str, &str, &str, bool)] = &[
    (
        "authentication.k8s.io",
        "TokenReview",
        "tokenreviews",
        false,
    ),
    (
        "authentication.k8s.io",
        "SelfSubjectReview",
        "selfsubjectreviews",
        false,
    ),
    (
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
    ),
    (
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        true,
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
    ),
    (
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
    ),
];

/// Sets `apiVersion`/`kind` of a stored object to the version a client asked for.
pub fn present(rt: &ResourceType, object: &Value) -> Value {
    let mut object = object.clone();
    object["apiVersion"] = serde_json::json!(rt.api_version());
    object["kind"] = serde_json::json!(rt.kind);
    object
}

/// Whether a DELETE that removes an object answers with the object (the real registries'
/// `ReturnDeletedObject`), rather than a `Status`. Custom resources never do.
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    !rt.custom && RETURN_DELETED_OBJECT.contains(&rt.kind.as_str())
}

/// The built-in kinds whose registry sets `ReturnDeletedObject`.
const RETURN_DELETED_OBJECT: &[&str] = &["Namespace", "Pod", "Service", "ServiceAccount"];

/// The built-in kinds of the embedded server.
pub fn builtin_types() -> Vec<ResourceType> {
    use ResourceType as R;
    let mut types = vec![
        R::builtin("", "v1", "Namespace", "namespaces", false, &["ns"], true),
        R::builtin("", "v1", "Node", "nodes", false, &["no"], true),
        R::builtin("", "v1", "Pod", "pods", true, &["po"], true),
        R::builtin("", "v1", "Service", "services", true, &["svc"], true),
        R::builtin("", "v1", "Secret", "secrets", true, &[], false),
        R::builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"], false),
        R::builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            false,
        ),
        R::builtin("", "v1", "Event", "events", true, &["ev"], false),
        R::builtin("", "v1", "Endpoints", "endpoints", true, &["ep"], false),
        R::builtin(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            true,
            &[],
            false,
        ),
        R::builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            false,
        ),
        R::builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            true,
        ),
        R::builtin("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"], true),
        R::builtin(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            true,
            &["sts"],
            true,
        ),
        R::builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &["pvc"],
            true,
        ),
        R::builtin("batch", "v1", "Job", "jobs", true, &[], true),
        R::builtin(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            &["pdb"],
            true,
        ),
        R::builtin(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            true,
            &["ing"],
            true,
        ),
        R::builtin(
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            false,
            &[],
            false,
        ),
        R::builtin(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            true,
            &["netpol"],
            false,
        ),
        R::builtin(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
            &["pc"],
            false,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            &[],
            false,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            false,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            false,
        ),
        R::builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            false,
        ),
        R::builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &[],
            false,
        ),
        R::builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            false,
            &[],
            true,
        ),
        R::builtin(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            false,
            &[],
            false,
        ),
        R::builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            true,
        ),
        R::builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
        ),
    ];
    types.extend(
        REVIEW_KINDS
            .iter()
            .map(|(group, kind, plural, namespaced)| {
                R::builtin(group, "v1", kind, plural, *namespaced, &[], false)
            }),
    );
    for t in &mut types {
        if matches!(
            t.kind.as_str(),
            "Pod" | "Service" | "Deployment" | "DaemonSet" | "StatefulSet" | "Job"
        ) {
            t.categories = vec!["all".into()];
        }
    }
    types
}

/// The served kinds: built-ins plus whatever the established CRDs define. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Registry {
    types: Arc<RwLock<Vec<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            types: Arc::new(RwLock::new(builtin_types())),
        }
    }
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every served type, in registration order.
    pub fn all(&self) -> Vec<ResourceType> {
        self.types.read().expect("registry lock").clone()
    }

    /// The type served at `group/version/plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .read()
            .expect("registry lock")
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// The type of `apiVersion`/`kind` (as written in a manifest).
    pub fn lookup_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        let (group, version) = split_api_version(api_version);
        self.types
            .read()
            .expect("registry lock")
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    /// Any served version of `group/plural` (for the garbage collector and namespace deletion,
    /// which address objects by storage key).
    pub fn by_storage_key(&self, storage_key: &str) -> Option<ResourceType> {
        self.types
            .read()
            .expect("registry lock")
            .iter()
            .find(|t| t.storage_key() == storage_key && t.version == t.storage_version)
            .cloned()
    }

    /// Replaces the types a CRD (named `plural.group`) serves; an empty list removes them.
    pub fn set_custom(&self, group_resource: &str, served: Vec<ResourceType>) {
        let mut types = self.types.write().expect("registry lock");
        types.retain(|t| !(t.custom && t.group_resource() == group_resource));
        types.extend(served);
    }
}

/// Splits `group/version` (or the core `v1`) into its parts.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_by_path_and_kind() {
        let registry = Registry::new();
        let pods = registry.lookup("", "v1", "pods").unwrap();
        assert_eq!(pods.kind, "Pod");
        assert_eq!(pods.api_version(), "v1");
        let slices = registry
            .lookup_kind("discovery.k8s.io/v1", "EndpointSlice")
            .unwrap();
        assert_eq!(slices.storage_key(), "endpointslices.discovery.k8s.io");
        assert!(registry.lookup("", "v1", "nothing").is_none());
    }

    #[test]
    fn custom_types_come_and_go() {
        let registry = Registry::new();
        let mut swh = ResourceType::builtin(
            "network.deckhouse.io",
            "v1alpha1",
            "ServiceWithHealthchecks",
            "servicewithhealthchecks",
            true,
            &["swh"],
            true,
        );
        swh.custom = true;
        registry.set_custom(
            "servicewithhealthchecks.network.deckhouse.io",
            vec![swh.clone()],
        );
        assert_eq!(
            registry.lookup(
                "network.deckhouse.io",
                "v1alpha1",
                "servicewithhealthchecks"
            ),
            Some(swh)
        );
        registry.set_custom("servicewithhealthchecks.network.deckhouse.io", vec![]);
        assert!(
            registry
                .lookup(
                    "network.deckhouse.io",
                    "v1alpha1",
                    "servicewithhealthchecks"
                )
                .is_none()
        );
    }
}
