//! What the health components may do, as RBAC rules: the one source of the chart's
//! ClusterRoles and Role and of `fairlead up --rbac`. Each rule is there because the component
//! makes that request (the tests run both components with exactly these rules, refuse nothing,
//! and see a 403 when a rule goes). RBAC cannot narrow by field selector or Secret type: the
//! agent watches only its node's pods and only typed Secrets, which saves its memory, not its
//! rights.

use serde_json::{Value, json};

/// The module's namespace.
pub const NAMESPACE: &str = "d8-service-with-healthchecks";

/// The agent's ServiceAccount and ClusterRole.
pub const AGENT: (&str, &str) = ("agent", "d8:service-with-healthchecks:agent");

/// The controller's ServiceAccount and ClusterRole (its Role for the Lease has the same name).
pub const CONTROLLER: (&str, &str) = ("controller", "d8:service-with-healthchecks:controller");

const SWH_GROUP: &str = "network.deckhouse.io";

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// What both read and write of the resources: the resources, and their status (by merge
/// patch).
fn resource_rules() -> Vec<Value> {
    vec![
        rule(
            &[SWH_GROUP],
            &["servicewithhealthchecks"],
            &["get", "list", "watch"],
        ),
        rule(
            &[SWH_GROUP],
            &["servicewithhealthchecks/status"],
            &["patch"],
        ),
    ]
}

/// The agent's cluster-wide rules: it reads resources, its node's pods and typed Secrets,
/// writes its EndpointSlices, its entries of the resources' status, and Events.
pub fn agent_rules() -> Vec<Value> {
    let mut rules = resource_rules();
    rules.extend([
        rule(&[""], &["pods"], &["list", "watch"]),
        rule(&[""], &["secrets"], &["get", "list", "watch"]),
        // Written by server-side apply: a patch, and create for the first write.
        rule(
            &["discovery.k8s.io"],
            &["endpointslices"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
    ]);
    rules
}

/// The controller's cluster-wide rules: it reads resources, pods and nodes, keeps the child
/// Services and the resources' conditions, deletes stale EndpointSlices, and writes Events.
pub fn controller_rules() -> Vec<Value> {
    let mut rules = resource_rules();
    rules.extend([
        rule(
            &[""],
            &["services"],
            &["get", "list", "watch", "create", "patch"],
        ),
        rule(&[""], &["pods", "nodes"], &["list", "watch"]),
        rule(
            &["discovery.k8s.io"],
            &["endpointslices"],
            &["list", "watch", "delete"],
        ),
        rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
    ]);
    rules
}

/// The controller's rules in the namespace of its Lease: make it, then only that one.
pub fn controller_lease_rules(lease: &str) -> Vec<Value> {
    vec![
        rule(&["coordination.k8s.io"], &["leases"], &["create"]),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": [lease], "verbs": ["get", "update", "patch"]}),
    ]
}

/// A ClusterRole.
pub fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"heritage": "deckhouse", "module": "service-with-healthchecks"}},
        "rules": rules})
}

/// A Role in `namespace`.
pub fn role(name: &str, namespace: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {"heritage": "deckhouse", "module": "service-with-healthchecks"}},
        "rules": rules})
}

/// A binding of `role` (a ClusterRole, or a Role when `namespace` is given) to the
/// ServiceAccount `account` of the module's namespace.
pub fn binding(role: &str, account: &str, namespace: Option<&str>) -> Value {
    let (kind, role_kind) = match namespace {
        Some(_) => ("RoleBinding", "Role"),
        None => ("ClusterRoleBinding", "ClusterRole"),
    };
    let mut metadata = json!({"name": role});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]})
}

/// Everything the health components need, for a controller whose Lease is in
/// `lease_namespace`: the namespace, ServiceAccounts, roles and bindings.
pub fn objects(lease_namespace: &str) -> Vec<Value> {
    let account = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": NAMESPACE}})
    };
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        account(AGENT.0),
        account(CONTROLLER.0),
        cluster_role(AGENT.1, agent_rules()),
        binding(AGENT.1, AGENT.0, None),
        cluster_role(CONTROLLER.1, controller_rules()),
        binding(CONTROLLER.1, CONTROLLER.0, None),
        role(
            CONTROLLER.1,
            lease_namespace,
            controller_lease_rules(crate::controller::LEASE),
        ),
        binding(CONTROLLER.1, CONTROLLER.0, Some(lease_namespace)),
    ]
}
