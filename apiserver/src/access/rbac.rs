//! Authorization as the real server's RBAC authorizer decides it: a request (verb, API group,
//! resource and subresource, namespace, name — or a non-resource path) is allowed when a rule
//! of a role bound to the user, one of its groups, or its ServiceAccount covers it: the
//! ClusterRoles of ClusterRoleBindings everywhere, and the Roles and ClusterRoles of
//! RoleBindings in the request's namespace. `system:masters` may do anything. A refusal reads
//! as the real server's 403. Writing a role with rules the writer does not hold needs
//! `escalate`, binding a role whose rules it does not hold needs `bind` ([`escalation`]), so a
//! chart whose RBAC works here works in a cluster. The bootstrap roles are written at start
//! ([`bootstrap`]): `cluster-admin` (for `system:masters`), `system:discovery`,
//! `system:basic-user` and `system:public-info-viewer`, bound as upstream binds them.

use serde_json::{Value, json};

use crate::access::user::UserInfo;
use crate::objects::errors::ApiError;
use crate::storage::store::{Store, StoreKey, Write};

const ROLES: &str = "roles.rbac.authorization.k8s.io";
const ROLE_BINDINGS: &str = "rolebindings.rbac.authorization.k8s.io";
const CLUSTER_ROLES: &str = "clusterroles.rbac.authorization.k8s.io";
const CLUSTER_ROLE_BINDINGS: &str = "clusterrolebindings.rbac.authorization.k8s.io";

/// What a request asks to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// `impersonate`, `bind`, `escalate`.
    pub verb: String,
    /// The API group (`""` for the core group).
    pub api_group: String,
    /// The resource (`pods`), empty for a non-resource request.
    pub resource: String,
    /// The subresource (`status`), or empty.
    pub subresource: String,
    /// The namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// The object's name, empty for collections.
    pub name: String,
    /// The path of a non-resource request (`/apis`).
    pub path: Option<String>,
}

impl Attributes {
    /// A resource request.
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        Self {
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: name.into(),
            path: None,
        }
    }

    /// A request of `path` (`get` for reads).
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.into(),
            api_group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: Some(path.into()),
        }
    }

    fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Whether `rule` (a PolicyRule) allows `attrs`.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    let verb_ok = strings(&rule["verbs"]).any(|v| v == "*" || v == attrs.verb);
    if !verb_ok {
        return false;
    }
    if let Some(path) = &attrs.path {
        return strings(&rule["nonResourceURLs"]).any(|url| {
            url == "*"
                || url == path
                || url
                    .strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    let group_ok = strings(&rule["apiGroups"]).any(|g| g == "*" || g == attrs.api_group);
    let combined = attrs.combined_resource();
    let resource_ok = strings(&rule["resources"]).any(|r| {
        r == "*"
            || r == combined
            || (!attrs.subresource.is_empty()
                && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
    let name_ok = names.is_empty() || names.contains(&attrs.name.as_str());
    group_ok && resource_ok && name_ok
}

/// Whether a binding's `subjects` include `user` (`namespace` is the binding's, the default of
/// a ServiceAccount subject's).
fn binds(binding: &Value, user: &UserInfo, namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            match s["kind"].as_str().unwrap_or_default() {
                "User" => name == user.username,
                "Group" => user.groups.iter().any(|g| g == name),
                "ServiceAccount" => {
                    let ns = s["namespace"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(namespace);
                    user.username == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

fn get(
    store: &Store,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Option<std::sync::Arc<Value>> {
    store.get(&StoreKey::new(resource, namespace, name))
}

/// The rules of the role a binding in `namespace` (empty: a ClusterRoleBinding) refers to.
fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Vec<Value> {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str() {
        Some("ClusterRole") => get(store, CLUSTER_ROLES, "", name),
        Some("Role") if !namespace.is_empty() => get(store, ROLES, namespace, name),
        _ => None,
    };
    role.and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// Every rule that applies to `user` in `namespace` (cluster-wide rules only when empty).
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Vec<Value> {
    let mut rules = Vec::new();
    let (cluster_bindings, _) = store.list(CLUSTER_ROLE_BINDINGS, None);
    for binding in cluster_bindings.iter().filter(|b| binds(b, user, "")) {
        rules.extend(role_rules(store, &binding["roleRef"], ""));
    }
    if !namespace.is_empty() {
        let (bindings, _) = store.list(ROLE_BINDINGS, Some(namespace));
        for binding in bindings.iter().filter(|b| binds(b, user, namespace)) {
            rules.extend(role_rules(store, &binding["roleRef"], namespace));
        }
    }
    rules
}

fn is_master(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == "system:masters")
}

/// Whether `user` may do `attrs`.
pub fn allowed(store: &Store, user: &UserInfo, attrs: &Attributes) -> bool {
    is_master(user)
        || rules_for(store, user, &attrs.namespace)
            .iter()
            .any(|rule| rule_allows(rule, attrs))
}

/// What the real authorizer says when it refuses `attrs` to `user`.
pub fn reason(user: &UserInfo, attrs: &Attributes) -> String {
    let username = &user.username;
    let verb = &attrs.verb;
    if let Some(path) = &attrs.path {
        return format!("User {username:?} cannot {verb} path {path:?}");
    }
    let resource = attrs.combined_resource();
    let group = &attrs.api_group;
    if attrs.namespace.is_empty() {
        format!(
            "User {username:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
        )
    } else {
        format!(
            "User {username:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {:?}",
            attrs.namespace
        )
    }
}

/// The 403 the real server answers.
pub fn forbidden(user: &UserInfo, attrs: &Attributes) -> ApiError {
    let why = reason(user, attrs);
    if attrs.path.is_some() {
        return ApiError::forbidden(format!("forbidden: {why}"));
    }
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let message = if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", attrs.name)
    };
    let mut error = ApiError::forbidden(message);
    error.details = Some(Box::new((qualified, attrs.name.clone(), String::new())));
    error
}

/// Checks `attrs` for `user`: the 403 when refused.
pub fn authorize(store: &Store, user: &UserInfo, attrs: &Attributes) -> Result<(), ApiError> {
    if allowed(store, user, attrs) {
        Ok(())
    } else {
        Err(forbidden(user, attrs))
    }
}

/// Each single permission a rule grants: (verb, group, resource, name) with `*` kept, or
/// (verb, path).
fn atoms(rule: &Value) -> Vec<Attributes> {
    let verbs: Vec<&str> = strings(&rule["verbs"]).collect();
    let mut out = Vec::new();
    for verb in &verbs {
        for url in strings(&rule["nonResourceURLs"]) {
            out.push(Attributes::non_resource(verb, url));
        }
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
                let names = if names.is_empty() { vec![""] } else { names };
                for name in names {
                    let (resource, subresource) =
                        resource.split_once('/').unwrap_or((resource, ""));
                    let mut atom = Attributes::resource(verb, group, resource, "", name);
                    atom.subresource = subresource.into();
                    out.push(atom);
                }
            }
        }
    }
    out
}

/// Whether `owner` holds the single permission `atom` (a `*` in it is held only by a `*`; a
/// permission on every name only by a rule without names).
fn covers(owner: &Value, atom: &Attributes) -> bool {
    let has = |field: &str, wanted: &str| strings(&owner[field]).any(|v| v == "*" || v == wanted);
    if !has("verbs", &atom.verb) {
        return false;
    }
    if let Some(path) = &atom.path {
        return strings(&owner["nonResourceURLs"]).any(|url| {
            url == "*" || url == path || url.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    let resource = atom.combined_resource();
    let resource_ok = strings(&owner["resources"]).any(|r| {
        r == "*"
            || r == resource
            || (!atom.subresource.is_empty()
                && r.strip_prefix("*/") == Some(atom.subresource.as_str()))
    });
    let names: Vec<&str> = strings(&owner["resourceNames"]).collect();
    let name_ok =
        names.is_empty() || (!atom.name.is_empty() && names.contains(&atom.name.as_str()));
    has("apiGroups", &atom.api_group) && resource_ok && name_ok
}

/// The rules of `rules` that `held` does not cover, as the real server lists them.
fn uncovered(held: &[Value], rules: &[Value]) -> Vec<Value> {
    rules
        .iter()
        .filter(|rule| {
            !atoms(rule)
                .iter()
                .all(|atom| held.iter().any(|owner| covers(owner, atom)))
        })
        .cloned()
        .collect()
}

/// Refuses a Role or ClusterRole with rules `user` does not hold (unless it may `escalate`),
/// and a binding to a role whose rules it does not hold (unless it may `bind` that role): the
/// real server's privilege-escalation prevention. `kind` is the written object's.
pub fn escalation(
    store: &Store,
    user: &UserInfo,
    kind: &str,
    namespace: &str,
    object: &Value,
) -> Result<(), ApiError> {
    if is_master(user) {
        return Ok(());
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let held = rules_for(store, user, namespace);
    let (rules, may, what) = match kind {
        "Role" | "ClusterRole" => {
            let resource = if kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let rules = object["rules"].as_array().cloned().unwrap_or_default();
            let may = Attributes::resource(
                "escalate",
                "rbac.authorization.k8s.io",
                resource,
                namespace,
                name,
            );
            (rules, may, format!("{} {name:?}", resource))
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref = &object["roleRef"];
            let role = role_ref["name"].as_str().unwrap_or_default();
            let resource = if role_ref["kind"] == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let rules = role_rules(store, role_ref, namespace);
            let may = Attributes::resource(
                "bind",
                "rbac.authorization.k8s.io",
                resource,
                namespace,
                role,
            );
            (rules, may, format!("{kind} {name:?}"))
        }
        _ => return Ok(()),
    };
    let missing = uncovered(&held, &rules);
    if missing.is_empty() || allowed(store, user, &may) {
        return Ok(());
    }
    let listed: Vec<String> = missing.iter().map(describe).collect();
    Err(ApiError::forbidden(format!(
        "{what} is forbidden: user {:?} (groups={:?}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        user.groups,
        listed.join("\n")
    )))
}

/// A rule as the real server prints it in escalation errors.
fn describe(rule: &Value) -> String {
    let list = |field: &str| {
        strings(&rule[field])
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut parts = Vec::new();
    for (label, field) in [
        ("APIGroups", "apiGroups"),
        ("Resources", "resources"),
        ("ResourceNames", "resourceNames"),
        ("NonResourceURLs", "nonResourceURLs"),
        ("Verbs", "verbs"),
    ] {
        if rule[field].as_array().is_some_and(|a| !a.is_empty()) {
            parts.push(format!("{label}:[{}]", list(field)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// The roles and bindings every cluster starts with.
fn bootstrap_objects() -> Vec<(&'static str, Value)> {
    let meta = |name: &str| {
        json!({"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta(name), "rules": rules})
    };
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects})
    };
    vec![
        (
            CLUSTER_ROLES,
            role(
                "cluster-admin",
                json!([
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
        ),
        (
            CLUSTER_ROLES,
            role(
                "system:discovery",
                json!([{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
            "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ),
        (
            CLUSTER_ROLES,
            role(
                "system:basic-user",
                json!([{"apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            ),
        ),
        (
            CLUSTER_ROLES,
            role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": [
            "/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
            ),
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            binding("cluster-admin", &["system:masters"]),
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            binding("system:discovery", &["system:authenticated"]),
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            binding("system:basic-user", &["system:authenticated"]),
        ),
        (
            CLUSTER_ROLE_BINDINGS,
            binding(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
    ]
}

/// Writes the bootstrap roles and bindings that are missing.
pub fn bootstrap(
    store: &Store,
    registry: &crate::objects::resources::Registry,
) -> Result<(), String> {
    for (resource, mut object) in bootstrap_objects() {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = StoreKey::new(resource, "", &name);
        if store.get(&key).is_some() {
            continue;
        }
        let plural = resource.split('.').next().unwrap_or_default();
        let rt = registry
            .lookup("rbac.authorization.k8s.io", "v1", plural)
            .ok_or("the RBAC kinds are served")?;
        crate::objects::meta::prepare_create(&rt, &mut object, &uuid::Uuid::new_v4());
        store
            .write(&key, Write::Create(object))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }

    #[test]
    fn rules_match_as_the_real_authorizer_matches() {
        let rule = json!({"apiGroups": [""], "resources": ["pods", "pods/status", "*/scale"],
            "verbs": ["get", "list"], "resourceNames": []});
        let mut attrs = Attributes::resource("get", "", "pods", "default", "web");
        assert!(rule_allows(&rule, &attrs));
        attrs.verb = "delete".into();
        assert!(!rule_allows(&rule, &attrs));
        attrs.verb = "get".into();
        attrs.subresource = "log".into();
        assert!(
            !rule_allows(&rule, &attrs),
            "a subresource needs its own rule"
        );
        attrs.subresource = "status".into();
        assert!(rule_allows(&rule, &attrs));
        let mut scale = Attributes::resource("get", "", "deployments", "default", "web");
        scale.subresource = "scale".into();
        assert!(rule_allows(&rule, &scale));
        let named = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "resourceNames": ["leader"], "verbs": ["get", "update"]});
        assert!(rule_allows(
            &named,
            &Attributes::resource("get", "coordination.k8s.io", "leases", "x", "leader")
        ));
        assert!(!rule_allows(
            &named,
            &Attributes::resource("get", "coordination.k8s.io", "leases", "x", "other")
        ));
        assert!(
            !rule_allows(
                &named,
                &Attributes::resource("list", "coordination.k8s.io", "leases", "x", "")
            ),
            "names do not allow lists"
        );
        let urls = json!({"nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"]});
        assert!(rule_allows(
            &urls,
            &Attributes::non_resource("get", "/apis/apps/v1")
        ));
        assert!(!rule_allows(
            &urls,
            &Attributes::non_resource("get", "/metrics")
        ));
    }

    #[test]
    fn refusals_read_as_the_real_servers() {
        let bot = user(
            "system:serviceaccount:team:bot",
            &["system:serviceaccounts"],
        );
        let error = forbidden(
            &bot,
            &Attributes::resource("list", "", "pods", "default", ""),
        );
        assert_eq!(
            error.message,
            "pods is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let mut attrs = Attributes::resource("patch", "apps", "deployments", "", "web");
        attrs.subresource = "scale".into();
        assert_eq!(
            forbidden(&bot, &attrs).message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:team:bot\" cannot patch resource \"deployments/scale\" in API group \"apps\" at the cluster scope"
        );
        assert_eq!(
            forbidden(&bot, &Attributes::non_resource("get", "/metrics")).message,
            "forbidden: User \"system:serviceaccount:team:bot\" cannot get path \"/metrics\""
        );
    }

    #[test]
    fn granting_needs_holding_or_escalate_and_bind() {
        let registry = crate::objects::resources::Registry::new();
        let store = Store::new(100);
        bootstrap(&store, &registry).unwrap();
        let write = |resource: &str, namespace: &str, object: Value| {
            let key = StoreKey::new(
                resource,
                namespace,
                object["metadata"]["name"].as_str().unwrap(),
            );
            store.write(&key, Write::Create(object)).unwrap();
        };
        // The bot may manage roles in team, and read pods there.
        write(
            ROLES,
            "team",
            json!({"metadata": {"name": "manager", "namespace": "team"}, "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        );
        write(
            ROLE_BINDINGS,
            "team",
            json!({"metadata": {"name": "bot", "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "manager"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}),
        );
        let bot = UserInfo::service_account("team", "bot", "u");
        assert!(allowed(
            &store,
            &bot,
            &Attributes::resource("list", "", "pods", "team", "")
        ));
        assert!(!allowed(
            &store,
            &bot,
            &Attributes::resource("list", "", "pods", "other", "")
        ));
        assert!(
            allowed(&store, &bot, &Attributes::non_resource("get", "/apis")),
            "discovery for everyone authenticated"
        );
        let reader = json!({"metadata": {"name": "reader"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        assert!(escalation(&store, &bot, "Role", "team", &reader).is_ok());
        let writer = json!({"metadata": {"name": "writer"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]});
        let refused = escalation(&store, &bot, "Role", "team", &writer).unwrap_err();
        assert!(
            refused.message.contains("is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"),
            "{}",
            refused.message
        );
        let to_admin = json!({"metadata": {"name": "admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "User", "name": "mallory"}]});
        assert!(escalation(&store, &bot, "RoleBinding", "team", &to_admin).is_err());
        // `bind` on the role lets it through.
        write(
            ROLES,
            "team",
            json!({"metadata": {"name": "binder", "namespace": "team"}, "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]}]}),
        );
        write(
            ROLE_BINDINGS,
            "team",
            json!({"metadata": {"name": "binder", "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "binder"},
            "subjects": [{"kind": "User", "name": "system:serviceaccount:team:bot"}]}),
        );
        assert!(escalation(&store, &bot, "RoleBinding", "team", &to_admin).is_ok());
        assert!(
            escalation(
                &store,
                &user("root", &["system:masters"]),
                "ClusterRole",
                "",
                &writer
            )
            .is_ok()
        );
    }
}
