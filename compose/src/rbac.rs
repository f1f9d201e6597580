//! The alb module's RBAC objects: the ServiceAccounts of the gateway
//! controller, the xDS control plane and the cleanup waiter, their roles (the rules each
//! component's crate lists: [`fairlead_edge_controller::rbac`],
//! [`fairlead_edge_control_plane::rbac`]) and bindings, and the kube-rbac-proxy sidecars'
//! rights. `fairlead edge rbac` prints them as the chart's `templates/rbac.yaml`; `fairlead up
//! --rbac` applies them. The cleanup waiter's objects are the pre-delete hook's, so they carry
//! the hook's annotations with a lower weight than its Job.

use fairlead_edge_controller::instance::CLUSTER_NAMESPACE;
use fairlead_edge_controller::rbac::{self as controller, CLEANUP, CONTROLLER};
use fairlead_kit::rbac::{Module, annotated, rbac_proxy_rules};
use serde_json::Value;

/// The module, as its objects are labelled.
pub const MODULE: Module = Module {
    name: "alb",
    namespace: CLUSTER_NAMESPACE,
};

/// The xDS control plane's ServiceAccount and ClusterRole (and Role for its Lease).
pub const XDS: (&str, &str) = ("alb-xds", "d8:alb:xds");

/// The ClusterRole of the kube-rbac-proxy sidecars: the controller's, the control plane's,
/// and the proxies' (the controller binds their ServiceAccounts to it).
pub const RBAC_PROXY: &str = fairlead_edge_controller::workload::RBAC_PROXY_ROLE;

/// The pre-delete hook's annotations of the cleanup waiter's RBAC (its Job has weight 0).
const HOOK: &[(&str, &str)] = &[
    ("helm.sh/hook", "pre-delete"),
    ("helm.sh/hook-weight", "-10"),
    (
        "helm.sh/hook-delete-policy",
        "before-hook-creation,hook-succeeded",
    ),
];

/// What the controller's workloads are bound to: the geoproxies' ClusterRole (their Lease),
/// and the namespace of their Leases (the chart makes it, as it makes the module's).
/// `fairlead up` applies them whether or not its components run under RBAC: the pods it
/// runs always do.
pub fn workload_objects() -> Vec<Value> {
    use fairlead_edge_controller::geoproxy::{LEASE_NAMESPACE, LEASE_ROLE};
    vec![
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": LEASE_NAMESPACE,
                "labels": {"heritage": "deckhouse", "module": MODULE.name}}}),
        MODULE.cluster_role(LEASE_ROLE, controller::geoproxy_rules()),
    ]
}

/// Everything the alb components need in the module's namespace (which the chart makes),
/// the xDS status writer's Lease being in `lease_namespace` (the gateway controller's is in
/// the module's namespace).
pub fn objects(lease_namespace: &str) -> Vec<Value> {
    let ns = CLUSTER_NAMESPACE;
    let mut objects = vec![
        MODULE.service_account(CONTROLLER.0),
        MODULE.cluster_role(CONTROLLER.1, controller::controller_rules()),
        MODULE.binding(CONTROLLER.1, CONTROLLER.1, CONTROLLER.0, None),
        MODULE.role(CONTROLLER.1, ns, controller::controller_namespace_rules()),
        MODULE.binding(CONTROLLER.1, CONTROLLER.1, CONTROLLER.0, Some(ns)),
        MODULE.service_account(XDS.0),
        MODULE.cluster_role(XDS.1, fairlead_edge_control_plane::rbac::rules()),
        MODULE.binding(XDS.1, XDS.1, XDS.0, None),
        MODULE.role(
            XDS.1,
            lease_namespace,
            fairlead_edge_control_plane::rbac::lease_rules(),
        ),
        MODULE.binding(XDS.1, XDS.1, XDS.0, Some(lease_namespace)),
        MODULE.cluster_role(RBAC_PROXY, rbac_proxy_rules()),
        // The relationship graph, served from the controller's pod.
        MODULE.cluster_role(
            fairlead_graph_service::rbac::ROLE,
            fairlead_graph_service::rbac::rules(),
        ),
        MODULE.binding(
            &format!("{}:graph", CONTROLLER.1),
            fairlead_graph_service::rbac::ROLE,
            CONTROLLER.0,
            None,
        ),
        MODULE.cluster_role(
            fairlead_edge_controller::geoproxy::LEASE_ROLE,
            controller::geoproxy_rules(),
        ),
        MODULE.role(
            CONTROLLER.1,
            fairlead_edge_controller::geoproxy::LEASE_NAMESPACE,
            controller::controller_geoip_rules(),
        ),
        MODULE.binding(
            CONTROLLER.1,
            CONTROLLER.1,
            CONTROLLER.0,
            Some(fairlead_edge_controller::geoproxy::LEASE_NAMESPACE),
        ),
    ];
    // The proxies' binding, its subjects the controller's to keep.
    objects.push(serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": fairlead_edge_controller::workload::RBAC_PROXY_BINDING,
            "labels": {"heritage": "deckhouse", "module": MODULE.name}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RBAC_PROXY}}));
    for (account, role) in [CONTROLLER, XDS] {
        objects.push(MODULE.binding(&format!("{role}:rbac-proxy"), RBAC_PROXY, account, None));
    }
    objects.extend(
        [
            MODULE.service_account(CLEANUP.0),
            MODULE.cluster_role(CLEANUP.1, controller::cleanup_rules()),
            MODULE.binding(CLEANUP.1, CLEANUP.1, CLEANUP.0, None),
            MODULE.role(CLEANUP.1, ns, controller::cleanup_namespace_rules()),
            MODULE.binding(CLEANUP.1, CLEANUP.1, CLEANUP.0, Some(ns)),
        ]
        .into_iter()
        .map(|object| annotated(object, HOOK)),
    );
    objects
}
