//! What the gateway controller and the module's cleanup waiter may do, as RBAC rules: the
//! source of the alb chart's ClusterRoles and Roles and of `fairlead up --rbac`. Each rule is
//! there because the component makes that request (the tests run both with exactly these
//! rules, see nothing refused, and see each rule used). Where a name is known the rule names
//! it (the CRDs it installs, the webhook configuration, its Lease, the cleanup mark);
//! `create` cannot be narrowed by name in RBAC.

use fairlead_kit::rbac::{named_rule, rule};
use serde_json::Value;

use crate::instance::CLUSTER_NAMESPACE;

/// The gateway controller's ServiceAccount (its requests' user is
/// `system:serviceaccount:d8-alb:alb-gateway-controller`) and ClusterRole; its Role in the
/// module's namespace has the same name.
pub const CONTROLLER: (&str, &str) = ("alb-gateway-controller", "d8:alb:gateway-controller");

/// The cleanup waiter's ServiceAccount and ClusterRole (and Role in the module's namespace).
pub const CLEANUP: (&str, &str) = ("alb-cleanup", "d8:alb:cleanup");

const INSTANCE_GROUP: &str = "network.deckhouse.io";
const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
const INSTANCES: &[&str] = &["clusteralbinstances", "albinstances"];

/// The names of the Gateway API CRDs of both channels (the controller reads those it finds
/// in place, to compare their bundle and storage versions).
fn gateway_api_crds() -> Vec<&'static str> {
    let mut names: Vec<&str> = Vec::new();
    for channel in [
        crate::crds::Channel::Standard,
        crate::crds::Channel::Experimental,
    ] {
        for object in crate::crds::bundle(channel) {
            if object["kind"] == "CustomResourceDefinition"
                && let Some(name) = object["metadata"]["name"].as_str()
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
    }
    names
}

/// The gateway controller's cluster-wide rules.
pub fn controller_rules() -> Vec<Value> {
    let every = ["list", "watch", "create", "patch", "delete"];
    let instance_crds: Vec<String> = fairlead_edge_api::crd::crds()
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    vec![
        // Installs the CRDs and the bundle's admission policy when missing, and reads the
        // Gateway API CRDs in place.
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["create"],
        ),
        named_rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &gateway_api_crds(),
            &["get"],
        ),
        // The instances' CRDs, brought to this version.
        named_rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &instance_crds.iter().map(String::as_str).collect::<Vec<_>>(),
            &["get", "patch"],
        ),
        rule(
            &["admissionregistration.k8s.io"],
            &[
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
            ],
            &["create"],
        ),
        // The webhook configuration it registers (and removes at cleanup).
        rule(
            &["admissionregistration.k8s.io"],
            &["validatingwebhookconfigurations"],
            &["list", "create"],
        ),
        named_rule(
            &["admissionregistration.k8s.io"],
            &["validatingwebhookconfigurations"],
            &[crate::webhook::CONFIGURATION],
            &["patch", "delete"],
        ),
        // Instances: watched, their finalizer and status written.
        rule(
            &[INSTANCE_GROUP],
            INSTANCES,
            &["get", "list", "watch", "patch"],
        ),
        rule(
            &[INSTANCE_GROUP],
            &["clusteralbinstances/status", "albinstances/status"],
            &["get", "patch"],
        ),
        // The d8-alb GatewayClass, the managed Gateways, and why the others are not served.
        rule(&[GATEWAY_GROUP], &["gatewayclasses"], &["create"]),
        rule(
            &[GATEWAY_GROUP],
            &["gateways"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(&[GATEWAY_GROUP], &["gateways/status"], &["patch"]),
        rule(&[GATEWAY_GROUP], &["httproutes"], &["list", "watch"]),
        // The ListenerSet webhook compares a ListenerSet with its siblings.
        rule(&[GATEWAY_GROUP], &["listenersets"], &["list"]),
        rule(
            &["gateway.networking.x-k8s.io"],
            &["xlistenersets"],
            &["list"],
        ),
        // The proxies' workloads and what they mount.
        rule(&[""], &["services", "configmaps"], &every),
        rule(
            &[""],
            &["serviceaccounts"],
            &["list", "create", "patch", "delete"],
        ),
        rule(
            &[""],
            &["secrets"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(
            &["apps"],
            &["daemonsets", "deployments", "statefulsets"],
            &every,
        ),
        // Geoproxies' Lease bindings: listed (the cleanup finds what it made), written in
        // the Leases' namespace only (`controller_geoip_rules`), naming the chart's role and
        // no other.
        rule(&["rbac.authorization.k8s.io"], &["rolebindings"], &["list"]),
        named_rule(
            &["rbac.authorization.k8s.io"],
            &["clusterroles"],
            &[crate::geoproxy::LEASE_ROLE],
            &["bind"],
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets"],
            &["list", "create", "patch", "delete"],
        ),
        // Ready proxies, and a HostPort inlet's node addresses.
        rule(&[""], &["pods"], &["list", "watch"]),
        named_rule(&[""], &["namespaces"], &[CLUSTER_NAMESPACE], &["get"]),
        // The subjects of the chart's binding that lets every proxy's kube-rbac-proxy review
        // its callers (the controller holds that role itself, so binding it is no
        // escalation), and no other binding.
        named_rule(
            &["rbac.authorization.k8s.io"],
            &["clusterrolebindings"],
            &[crate::workload::RBAC_PROXY_BINDING],
            &["get", "patch"],
        ),
        // cert-manager's HTTP-01 bridges (deleted with their route, by the garbage
        // collector or by the controller when it is first).
        rule(
            &["networking.k8s.io"],
            &["ingresses"],
            &["list", "create", "patch", "delete"],
        ),
    ]
}

/// The gateway controller's rules in the module's namespace: the cleanup mark, and its
/// Lease.
pub fn controller_namespace_rules() -> Vec<Value> {
    let mut rules = vec![
        // The cleanup mark.
        named_rule(&[""], &["configmaps"], &[crate::cleanup::MARKER], &["get"]),
    ];
    rules.extend(fairlead_kit::rbac::lease_rules(crate::reconcile::LEASE));
    rules
}

/// The gateway controller's rules in the geoproxies' Leases' namespace
/// ([`crate::geoproxy::LEASE_NAMESPACE`]): each geoproxy's binding there.
pub fn controller_geoip_rules() -> Vec<Value> {
    vec![rule(
        &["rbac.authorization.k8s.io"],
        &["rolebindings"],
        &["create", "patch", "delete"],
    )]
}

/// What a geoproxy may do (the chart's ClusterRole [`crate::geoproxy::LEASE_ROLE`], which
/// the controller binds in [`crate::geoproxy::LEASE_NAMESPACE`] only): hold its Lease. RBAC
/// cannot name a Lease that each geoproxy names after its Gateway, so the namespace, which
/// holds geoproxies' Leases and nothing else, is the bound.
pub fn geoproxy_rules() -> Vec<Value> {
    vec![rule(
        &["coordination.k8s.io"],
        &["leases"],
        &["create", "get", "update"],
    )]
}

/// The cleanup waiter's cluster-wide rules: it lists what the controller made and the
/// instances holding its finalizer.
pub fn cleanup_rules() -> Vec<Value> {
    let mut rules: Vec<Value> = crate::apply::MADE_KINDS
        .iter()
        .map(|kind| {
            let resource = crate::apply::resource(kind);
            rule(
                &[resource.group.as_str()],
                &[resource.plural.as_str()],
                &["list"],
            )
        })
        .collect();
    rules.push(rule(&[INSTANCE_GROUP], INSTANCES, &["list"]));
    rules
}

/// The cleanup waiter's rules in the module's namespace: it marks the controller's
/// ConfigMap (server-side apply: create when missing, else patch that one).
pub fn cleanup_namespace_rules() -> Vec<Value> {
    vec![
        rule(&[""], &["configmaps"], &["create"]),
        named_rule(
            &[""],
            &["configmaps"],
            &[crate::cleanup::MARKER],
            &["patch"],
        ),
    ]
}
