//! What the graph service may do, as RBAC rules (the alb chart's ClusterRole
//! `d8:alb:graph`, bound to the gateway controller's ServiceAccount, in whose pod it runs,
//! and `fairlead up --rbac`'s): watch every kind of the index and what the world reads
//! besides (ServiceWithHealthchecks, the proxies' Deployments and DaemonSets), and ask
//! SubjectAccessReviews for its users.

use fairlead_edge_model::kinds::KINDS;
use fairlead_kit::rbac::rule;
use serde_json::Value;

/// The ClusterRole's name.
pub const ROLE: &str = "d8:alb:graph";

/// The rules.
pub fn rules() -> Vec<Value> {
    let mut rules: Vec<Value> = KINDS
        .iter()
        .map(|k| rule(&[k.group], &[k.plural], &["list", "watch"]))
        .collect();
    rules.push(rule(
        &["network.deckhouse.io"],
        &["servicewithhealthchecks"],
        &["list", "watch"],
    ));
    rules.push(rule(
        &["apps"],
        &["deployments", "daemonsets"],
        &["list", "watch"],
    ));
    rules.push(rule(
        &["authorization.k8s.io"],
        &["subjectaccessreviews"],
        &["create"],
    ));
    rules
}
