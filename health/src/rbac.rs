//! What the health components may do, as RBAC rules: the one source of the chart's
//! ClusterRoles and Role and of `fairlead up --rbac`. Each rule is there because the component
//! makes that request (the tests run both components with exactly these rules, refuse nothing,
//! and see a 403 when a rule goes). RBAC cannot narrow by field selector or Secret type: the
//! agent watches only its node's pods and only typed Secrets, which saves its memory, not its
//! rights.

use fairlead_kit::rbac::{Module, lease_rules, named_rule, rbac_proxy_rules, rule};
use serde_json::Value;

/// The module's namespace.
pub const NAMESPACE: &str = "d8-service-with-healthchecks";

/// The agent's ServiceAccount and ClusterRole.
pub const AGENT: (&str, &str) = ("agent", "d8:service-with-healthchecks:agent");

/// The controller's ServiceAccount and ClusterRole (its Role for the Lease has the same name).
pub const CONTROLLER: (&str, &str) = ("controller", "d8:service-with-healthchecks:controller");

const SWH_GROUP: &str = "network.deckhouse.io";

/// The module, as its objects are labelled.
pub const MODULE: Module = Module {
    name: "service-with-healthchecks",
    namespace: NAMESPACE,
};

/// The CRD of the resources.
const CRD: &str = "servicewithhealthchecks.network.deckhouse.io";

/// The ClusterRole of the kube-rbac-proxy sidecars in front of both components' metrics.
pub const RBAC_PROXY: &str = "d8:service-with-healthchecks:rbac-proxy";

/// What both read and write of the resources: the resources, and their status (by merge
/// patch).
fn resource_rules() -> Vec<Value> {
    vec![
        rule(
            &[SWH_GROUP],
            &["servicewithhealthchecks"],
            &["list", "watch"],
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
/// Services and the resources' conditions, deletes stale EndpointSlices, writes Events, and
/// keeps its CRD up to date.
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
        // Its CRD brought to this version at start (installing it is the chart's).
        named_rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &[CRD],
            &["get", "patch"],
        ),
    ]);
    rules
}

/// The controller's rules in the namespace of its Lease: make it, then only that one.
pub fn controller_lease_rules(lease: &str) -> Vec<Value> {
    lease_rules(lease)
}

/// Everything the health components need in the module's namespace (which the chart
/// makes), for a controller whose Lease is in `lease_namespace`: ServiceAccounts, roles and
/// bindings (the kube-rbac-proxy sidecars run with their pod's ServiceAccount).
pub fn objects(lease_namespace: &str) -> Vec<Value> {
    let mut objects = vec![
        MODULE.service_account(AGENT.0),
        MODULE.service_account(CONTROLLER.0),
        MODULE.cluster_role(AGENT.1, agent_rules()),
        MODULE.binding(AGENT.1, AGENT.1, AGENT.0, None),
        MODULE.cluster_role(CONTROLLER.1, controller_rules()),
        MODULE.binding(CONTROLLER.1, CONTROLLER.1, CONTROLLER.0, None),
        MODULE.role(
            CONTROLLER.1,
            lease_namespace,
            controller_lease_rules(crate::controller::LEASE),
        ),
        MODULE.binding(
            CONTROLLER.1,
            CONTROLLER.1,
            CONTROLLER.0,
            Some(lease_namespace),
        ),
        MODULE.cluster_role(RBAC_PROXY, rbac_proxy_rules()),
    ];
    for (account, role) in [AGENT, CONTROLLER] {
        objects.push(MODULE.binding(&format!("{role}:rbac-proxy"), RBAC_PROXY, account, None));
    }
    objects
}
