//! RBAC objects of a module, as the manifests its chart installs: the module's namespace,
//! its components' ServiceAccounts, their ClusterRoles and Roles, and the bindings. Each
//! module lists its components' rules (the one source of its chart's `templates/rbac.yaml`
//! and of `fairlead up --rbac`); this is how they become objects.

use serde_json::{Map, Value, json};

/// A rule: `verbs` on `resources` (with subresources as `resource/sub`) of `groups`.
pub fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// A rule limited to the objects named `names`.
pub fn named_rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "resourceNames": names, "verbs": verbs})
}

/// The rules of a leader-elected component in the namespace of its Lease `lease`: make it
/// (`create` cannot be narrowed by name), then read and renew only that one.
pub fn lease_rules(lease: &str) -> Vec<Value> {
    vec![
        rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        named_rule(
            &["coordination.k8s.io"],
            &["leases"],
            &[lease],
            &["get", "update"],
        ),
    ]
}

/// What kube-rbac-proxy does with a ServiceAccount's rights: it reviews the caller's token
/// and asks whether the caller may read what it guards.
pub fn rbac_proxy_rules() -> Vec<Value> {
    vec![
        rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"],
        ),
    ]
}

/// A module: the label its objects carry and the namespace of its ServiceAccounts.
#[derive(Debug, Clone, Copy)]
pub struct Module {
    /// The module's name (label `module`, Deckhouse's convention).
    pub name: &'static str,
    /// The namespace of its components.
    pub namespace: &'static str,
}

impl Module {
    fn metadata(&self, name: &str, namespace: Option<&str>) -> Value {
        let mut metadata = json!({"name": name,
            "labels": {"heritage": "deckhouse", "module": self.name}});
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        metadata
    }

    /// The module's namespace.
    pub fn namespace_object(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": self.metadata(self.namespace, None)})
    }

    /// A ServiceAccount of the module's namespace.
    pub fn service_account(&self, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": self.metadata(name, Some(self.namespace))})
    }

    /// A ClusterRole.
    pub fn cluster_role(&self, name: &str, rules: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": self.metadata(name, None), "rules": rules})
    }

    /// A Role in `namespace`.
    pub fn role(&self, name: &str, namespace: &str, rules: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": self.metadata(name, Some(namespace)), "rules": rules})
    }

    /// A binding named `name` of `role` (a ClusterRole, or a Role when `namespace` is given)
    /// to the module's ServiceAccount `account`.
    pub fn binding(&self, name: &str, role: &str, account: &str, namespace: Option<&str>) -> Value {
        let (kind, role_kind) = match namespace {
            Some(_) => ("RoleBinding", "Role"),
            None => ("ClusterRoleBinding", "ClusterRole"),
        };
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": self.metadata(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}]})
    }
}

/// `object` with `annotations` added (e.g. Helm's hook annotations).
pub fn annotated(mut object: Value, annotations: &[(&str, &str)]) -> Value {
    let map: Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    object["metadata"]["annotations"] = Value::Object(map);
    object
}

/// `objects` as one YAML stream (`---` before each), for a chart's `templates/`.
pub fn yaml_stream(objects: &[Value]) -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(object)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: Module = Module {
        name: "m",
        namespace: "d8-m",
    };

    #[test]
    fn a_binding_names_its_role_kind_and_subject() {
        let cluster = MODULE.binding("b", "r", "sa", None);
        assert_eq!(cluster["kind"], "ClusterRoleBinding");
        assert_eq!(cluster["roleRef"]["kind"], "ClusterRole");
        assert!(cluster["metadata"].get("namespace").is_none());
        let local = MODULE.binding("b", "r", "sa", Some("other"));
        assert_eq!(local["kind"], "RoleBinding");
        assert_eq!(local["roleRef"]["kind"], "Role");
        assert_eq!(local["metadata"]["namespace"], "other");
        assert_eq!(local["subjects"][0]["namespace"], "d8-m");
        assert_eq!(local["metadata"]["labels"]["module"], "m");
    }

    #[test]
    fn a_stream_separates_its_documents() {
        let text =
            yaml_stream(&[MODULE.service_account("a"), MODULE.service_account("b")]).unwrap();
        assert_eq!(text.matches("---\n").count(), 2);
        assert!(text.contains("name: b"));
    }
}
