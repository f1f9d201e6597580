//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}` and the resource lists of
//! each group version, built from the served types (so CRD kinds appear as soon as they are
//! established). This is what `kubectl api-resources` and kube's discovery read.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::objects::resources::ResourceType;

/// The Kubernetes version the server reports being compatible with.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "36");

/// `/version`
pub fn version() -> Value {
    json!({
        "major": KUBERNETES_VERSION.0,
        "minor": KUBERNETES_VERSION.1,
        "gitVersion": format!("v{}.{}.0-fairlead.{}", KUBERNETES_VERSION.0, KUBERNETES_VERSION.1, env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/api`
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}

/// Versions of each non-core group, newest registration first as the preferred version.
fn groups(types: &[ResourceType]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        let versions = groups.entry(t.group.clone()).or_default();
        if !versions.contains(&t.version) {
            versions.push(t.version.clone());
        }
    }
    for versions in groups.values_mut() {
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    groups
}

/// Kubernetes version ordering: GA > beta > alpha, then by number.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let rest = version.trim_start_matches('v');
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n.parse().unwrap_or(0))
    } else {
        (2, 0)
    };
    (level, major, minor)
}

fn group_document(name: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": entries,
        "preferredVersion": entries.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`
pub fn group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .iter()
        .map(|(name, versions)| group_document(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`
pub fn group(types: &[ResourceType], name: &str) -> Option<Value> {
    groups(types).get(name).map(|versions| {
        let mut doc = group_document(name, versions);
        doc["kind"] = json!("APIGroup");
        doc["apiVersion"] = json!("v1");
        doc
    })
}

/// The preferred (served) version of a group.
pub fn preferred_version(types: &[ResourceType], group: &str) -> Option<String> {
    groups(types).get(group).and_then(|v| v.first().cloned())
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/api/v1` or `/apis/{group}/{version}`
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = types
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for t in &served {
        let mut entry = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": if t.is_review() { json!(["create"]) } else { json!(VERBS) },
        });
        if !t.short_names.is_empty() {
            entry["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            entry["categories"] = json!(t.categories);
        }
        resources.push(entry);
        if t.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if t.kind == "ServiceAccount" {
            resources.push(json!({
                "name": "serviceaccounts/token",
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if crate::objects::scale::serves(&t.kind) {
            resources.push(json!({
                "name": format!("{}/scale", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = served[0].api_version();
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::resources::builtin_types;

    #[test]
    fn versions_order_ga_beta_alpha() {
        let mut v = vec!["v1alpha1", "v1", "v2beta1", "v1beta2", "v2"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, vec!["v2", "v1", "v2beta1", "v1beta2", "v1alpha1"]);
    }

    #[test]
    fn documents_list_the_builtins() {
        let types = builtin_types();
        let list = resource_list(&types, "", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"pods") && names.contains(&"pods/status"));
        let apps = resource_list(&builtin_types(), "apps", "v1").unwrap();
        let scale = apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .expect("deployments/scale is discovered");
        assert_eq!(
            (&scale["group"], &scale["version"], &scale["kind"]),
            (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
        );
        let groups = group_list(&types);
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "discovery.k8s.io")
        );
        assert_eq!(
            group(&types, "apps").unwrap()["preferredVersion"]["version"],
            "v1"
        );
        assert!(resource_list(&types, "nope", "v1").is_none());
    }
}
