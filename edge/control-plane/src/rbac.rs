//! What the control plane may do, as RBAC rules, from the kinds table it works from
//! ([`fairlead_edge_model::kinds`]): watch every kind the index reads, write the statuses
//! the status writer writes (merge patches of its own kinds' status, read-modify-replace of
//! the lists routes and policies share), record Events, and hold its status writer's Lease.
//! A kind added to the table is a rule added here.

use fairlead_edge_model::kinds::{KINDS, Status};
use fairlead_kit::rbac::rule;
use serde_json::Value;

/// The control plane's cluster-wide rules.
pub fn rules() -> Vec<Value> {
    let mut rules: Vec<Value> = KINDS
        .iter()
        .map(|k| rule(&[k.group], &[k.plural], &["list", "watch"]))
        .collect();
    for k in KINDS {
        let status = format!("{}/status", k.plural);
        let verbs: &[&str] = match k.status {
            Status::Read => continue,
            Status::Own => &["patch"],
            Status::Parents | Status::Ancestors => &["get", "update"],
        };
        rules.push(rule(&[k.group], &[&status], verbs));
    }
    rules.push(rule(&["events.k8s.io"], &["events"], &["create", "patch"]));
    rules
}

/// The rules in the namespace of the status writer's Lease: make it, then only that one.
pub fn lease_rules() -> Vec<Value> {
    fairlead_kit::rbac::lease_rules(crate::run::LEASE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_watched_and_shared_statuses_are_replaced() {
        let rules = rules();
        let granted = |resource: &str, verb: &str| {
            rules.iter().any(|r| {
                r["resources"][0] == resource
                    && r["verbs"].as_array().unwrap().contains(&verb.into())
            })
        };
        assert!(KINDS.iter().all(|k| granted(k.plural, "watch")));
        assert!(granted("gateways/status", "patch"));
        assert!(granted("httproutes/status", "update"));
        assert!(granted("backendtlspolicies/status", "get"));
        assert!(!granted("services/status", "patch"));
        assert!(
            !granted("secrets", "get"),
            "Secrets are listed, never got by name"
        );
    }
}
