//! Least privilege read from an API server's audit log (`audit.k8s.io/v1` Events, one per
//! request): the requests of some identities that were refused, and the rules of a module's
//! roles that no request of their subjects used. A rule's `create` is used by a create, or by
//! a server-side apply that created (201); a rule with `resourceNames` only by requests for
//! those names; a Role's only in its namespace.

use serde_json::Value;

/// The refused (403) requests of users whose name starts with `user_prefix`, as
/// `user verb resource namespace/name`.
pub fn refused(events: &[Value], user_prefix: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            e["responseStatus"]["code"] == 403
                && e["user"]["username"]
                    .as_str()
                    .is_some_and(|u| u.starts_with(user_prefix))
        })
        .map(|e| {
            let o = &e["objectRef"];
            format!(
                "{} {} {} {}/{}",
                e["user"]["username"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                resource(o),
                o["namespace"].as_str().unwrap_or_default(),
                o["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn resource(object_ref: &Value) -> String {
    let resource = object_ref["resource"].as_str().unwrap_or_default();
    match object_ref["subresource"].as_str() {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    }
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The users a role of `objects` is bound to (ServiceAccount subjects of the bindings in
/// `objects` naming it).
fn subjects(objects: &[Value], role: &Value) -> Vec<String> {
    let (kind, name) = (&role["kind"], &role["metadata"]["name"]);
    objects
        .iter()
        .filter(|b| {
            b["roleRef"]["kind"] == *kind
                && b["roleRef"]["name"] == *name
                && (kind != "Role" || b["metadata"]["namespace"] == role["metadata"]["namespace"])
        })
        .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["kind"] == "ServiceAccount")
        .map(|s| {
            format!(
                "system:serviceaccount:{}:{}",
                s["namespace"].as_str().unwrap_or_default(),
                s["name"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// Every verb of every rule of the ClusterRoles and Roles in `objects` (but those named in
/// `skip`) that no request in `events` of the role's subjects used, as
/// `Kind name: verb groups/resources [names]`.
pub fn unused_rules(objects: &[Value], events: &[Value], skip: &[&str]) -> Vec<String> {
    let mut unused = Vec::new();
    for role in objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role")
        .filter(|o| !skip.contains(&o["metadata"]["name"].as_str().unwrap_or_default()))
    {
        let users = subjects(objects, role);
        let namespace = (role["kind"] == "Role").then(|| &role["metadata"]["namespace"]);
        for rule in role["rules"].as_array().into_iter().flatten() {
            let (groups, resources, names) = (
                strings(&rule["apiGroups"]),
                strings(&rule["resources"]),
                strings(&rule["resourceNames"]),
            );
            for verb in strings(&rule["verbs"]) {
                let used = events.iter().any(|e| {
                    let o = &e["objectRef"];
                    let code = e["responseStatus"]["code"].as_u64().unwrap_or_default();
                    code != 403
                        && e["user"]["username"]
                            .as_str()
                            .is_some_and(|u| users.iter().any(|s| s == u))
                        && (e["verb"] == verb
                            || (verb == "create" && e["verb"] == "patch" && code == 201))
                        && groups.contains(&o["apiGroup"].as_str().unwrap_or_default())
                        && resources.contains(&resource(o).as_str())
                        && (names.is_empty()
                            || names.contains(&o["name"].as_str().unwrap_or_default()))
                        && namespace.is_none_or(|ns| o["namespace"] == *ns)
                });
                if !used {
                    unused.push(format!(
                        "{} {}: {verb} {groups:?}/{resources:?}{}",
                        role["kind"].as_str().unwrap_or_default(),
                        role["metadata"]["name"].as_str().unwrap_or_default(),
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!(" {names:?}")
                        }
                    ));
                }
            }
        }
    }
    unused
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(user: &str, verb: &str, resource: &str, name: &str, code: u64) -> Value {
        json!({"user": {"username": user}, "verb": verb, "responseStatus": {"code": code},
            "objectRef": {"apiGroup": "", "resource": resource, "namespace": "n", "name": name}})
    }

    #[test]
    fn a_rule_is_used_only_by_its_subjects_verbs_and_names() {
        let objects = vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["patch"]}]}),
            json!({"kind": "ClusterRoleBinding", "roleRef": {"kind": "ClusterRole", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "namespace": "n", "name": "sa"}]}),
        ];
        let sa = "system:serviceaccount:n:sa";
        let events = vec![
            event(sa, "get", "secrets", "x", 200),
            event("someone", "create", "secrets", "x", 201),
            event(sa, "patch", "configmaps", "b", 200),
        ];
        assert_eq!(
            unused_rules(&objects, &events, &[]),
            [
                r#"ClusterRole r: create [""]/["secrets"]"#,
                r#"ClusterRole r: patch [""]/["configmaps"] ["a"]"#
            ]
        );
        let applied = [
            event(sa, "patch", "secrets", "y", 201),
            event(sa, "patch", "configmaps", "a", 200),
        ];
        let all: Vec<Value> = events.into_iter().chain(applied).collect();
        assert!(unused_rules(&objects, &all, &[]).is_empty());
        assert!(unused_rules(&objects, &[], &["r"]).is_empty());
        assert_eq!(
            refused(
                &[event(sa, "get", "pods", "p", 403)],
                "system:serviceaccount:n:"
            ),
            ["system:serviceaccount:n:sa get pods n/p"]
        );
    }
}
