//! Object metadata as the real server keeps it: names, uid, creationTimestamp, generation,
//! and what a write may and may not change.

use serde_json::{Value, json};

use crate::objects::errors::FieldCause;
use crate::objects::resources::ResourceType;

/// Kinds whose names are DNS labels (63 characters, no dots) rather than DNS subdomains.
const DNS_LABEL_KINDS: &[&str] = &["Namespace", "Service"];

/// Kinds whose names are path segments (`system:discovery`), as the real server validates
/// RBAC names.
const PATH_SEGMENT_KINDS: &[&str] = &["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// Checks `metadata.name` for its kind.
pub fn validate_name(kind: &str, name: &str) -> Option<FieldCause> {
    if PATH_SEGMENT_KINDS.contains(&kind) && !name.is_empty() {
        let bad = if name == "." || name == ".." {
            Some(format!("may not be '{name}'"))
        } else {
            ["/", "%"]
                .iter()
                .find(|c| name.contains(**c))
                .map(|c| format!("may not contain '{c}'"))
        };
        return bad.map(|why| {
            FieldCause::new(
                "FieldValueInvalid",
                "metadata.name",
                format!("Invalid value: \"{name}\": {why}"),
            )
        });
    }
    let label = DNS_LABEL_KINDS.contains(&kind);
    let max = if label { 63 } else { 253 };
    let charset_ok = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (c == '.' && !label));
    let ends_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty() {
        return Some(FieldCause::new(
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    if name.len() > max || !charset_ok || !ends_ok {
        let what = if label {
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
        } else {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        };
        return Some(FieldCause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": {what} (at most {max} characters)"),
        ));
    }
    None
}

/// A name from `generateName`: the prefix and five characters derived from the new uid, from
/// the alphabet the real server uses (no vowels, no look-alikes).
pub fn generated_name(prefix: &str, uid: &uuid::Uuid) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let suffix: String = uid.as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    let prefix: String = prefix.chars().take(253 - 5).collect();
    format!("{prefix}{suffix}")
}

/// The current time as the API writes timestamps.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Sets what the server owns on a new object: uid, creationTimestamp, generation; clears what
/// a client may not set; drops `status` when it is a separate subresource of a custom resource.
pub fn prepare_create(rt: &ResourceType, object: &mut Value, uid: &uuid::Uuid) {
    let meta = object["metadata"]
        .as_object_mut()
        .expect("metadata checked to be an object");
    meta.insert("uid".into(), json!(uid.to_string()));
    meta.insert("creationTimestamp".into(), json!(now()));
    meta.insert("generation".into(), json!(1));
    for server_owned in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(server_owned);
    }
    if rt.custom
        && rt.status_subresource
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
}

/// Merges a write to the main resource (`to_status == false`) or to `/status` into the stored
/// object: server-owned metadata is kept, and with a status subresource each endpoint changes
/// only its own half (and the field ownership the write computed).
pub fn carry_over(rt: &ResourceType, current: &Value, mut new: Value, to_status: bool) -> Value {
    if to_status {
        let mut merged = current.clone();
        merged["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        // Ownership of the write's fields (a server-side apply to /status records its
        // manager's entry), so a later apply can remove what it no longer applies.
        if let Some(managed) = new["metadata"].get("managedFields") {
            merged["metadata"]["managedFields"] = managed.clone();
        }
        if merged["status"].is_null()
            && let Some(map) = merged.as_object_mut()
        {
            map.remove("status");
        }
        return merged;
    }
    for kept in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match current["metadata"].get(kept) {
            Some(v) => new["metadata"][kept] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(kept);
                }
            }
        }
    }
    if rt.status_subresource {
        match current.get("status") {
            Some(status) => new["status"] = status.clone(),
            None => {
                if let Some(map) = new.as_object_mut() {
                    map.remove("status");
                }
            }
        }
    }
    new
}

/// Whether a write changes what `metadata.generation` counts: for custom resources anything
/// outside `metadata` (and outside `status` with the subresource), for built-ins the `spec`.
pub fn spec_changed(rt: &ResourceType, current: &Value, new: &Value) -> bool {
    if rt.custom {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("metadata");
                if rt.status_subresource {
                    map.remove("status");
                }
            }
            v
        };
        strip(current) != strip(new)
    } else {
        current.get("spec") != new.get("spec")
    }
}

/// Bumps `metadata.generation` by one.
pub fn bump_generation(object: &mut Value) {
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
    object["metadata"]["generation"] = json!(generation + 1);
}

/// Whether two versions of an object are the same but for the write times of their
/// managedFields and their resourceVersion.
pub fn same_ignoring_times(a: &Value, b: &Value) -> bool {
    let normalize = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v["metadata"].as_object_mut() {
            meta.remove("resourceVersion");
            if let Some(entries) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
                for entry in entries {
                    if let Some(e) = entry.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    };
    normalize(a) == normalize(b)
}

/// `metadata.finalizers` of an object.
pub fn finalizers(object: &Value) -> Vec<String> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the object is being deleted (has a deletionTimestamp).
pub fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::resources::Registry;

    #[test]
    fn names_by_kind() {
        assert!(validate_name("ConfigMap", "a.b-c").is_none());
        assert!(validate_name("Service", "a.b").is_some());
        assert!(validate_name("Pod", "Upper").is_some());
        assert!(validate_name("Pod", "-x").is_some());
        assert!(validate_name("Pod", "").is_some());
        assert!(validate_name("Namespace", &"a".repeat(64)).is_some());
        assert!(validate_name("ClusterRole", "system:discovery").is_none());
        assert!(validate_name("RoleBinding", "Team:Readers").is_none());
        assert!(validate_name("ClusterRole", "a/b").is_some());
        assert!(validate_name("Role", "..").is_some());
    }

    #[test]
    fn generated_names_are_prefix_plus_five() {
        let uid = uuid::Uuid::new_v4();
        let name = generated_name("web-", &uid);
        assert!(name.starts_with("web-") && name.len() == 9);
        assert!(validate_name("Pod", &name).is_none());
    }

    #[test]
    fn generation_follows_spec_for_builtins_and_everything_for_custom() {
        let registry = Registry::new();
        let deploy = registry.lookup("apps", "v1", "deployments").unwrap();
        let a = json!({"metadata": {"labels": {"x": "1"}}, "spec": {"replicas": 1}});
        let b = json!({"metadata": {"labels": {"x": "2"}}, "spec": {"replicas": 1}});
        let c = json!({"metadata": {}, "spec": {"replicas": 2}});
        assert!(!spec_changed(&deploy, &a, &b));
        assert!(spec_changed(&deploy, &a, &c));
        let mut custom = deploy.clone();
        custom.custom = true;
        let d = json!({"metadata": {}, "spec": {"replicas": 1}, "extra": true});
        assert!(spec_changed(&custom, &a, &d));
        let e = json!({"metadata": {}, "spec": {"replicas": 1}, "status": {"ready": 1}});
        assert!(
            !spec_changed(&custom, &a, &e),
            "status is its own subresource"
        );
    }

    #[test]
    fn status_writes_touch_only_status() {
        let registry = Registry::new();
        let deploy = registry.lookup("apps", "v1", "deployments").unwrap();
        let current = json!({"metadata": {"uid": "u", "generation": 2}, "spec": {"replicas": 1}});
        let new = json!({"metadata": {}, "spec": {"replicas": 9}, "status": {"ready": 1}});
        let merged = carry_over(&deploy, &current, new.clone(), true);
        assert_eq!(merged["spec"]["replicas"], 1);
        assert_eq!(merged["status"]["ready"], 1);
        let merged = carry_over(&deploy, &current, new, false);
        assert_eq!(merged["spec"]["replicas"], 9);
        assert!(
            merged.get("status").is_none(),
            "main resource ignores status"
        );
        assert_eq!(merged["metadata"]["uid"], "u");
    }
}
