//! Deletion, finalizers and garbage collection.
//!
//! - An object with finalizers is not removed: it gets a `deletionTimestamp` (and a generation
//!   bump) and is removed when its last finalizer goes.
//! - `propagationPolicy`: `Background` removes the owner now and its dependents afterwards;
//!   `Foreground` adds the `foregroundDeletion` finalizer, removes the dependents, then the
//!   owner; `Orphan` removes the owner references from the dependents first.
//! - A namespace being deleted is `Terminating` until its content is gone.
//!
//! The collector runs after every deletion (and on a slow timer as a safety net), scanning the
//! store: simple and correct at the sizes a development server holds.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::objects::meta;
use crate::storage::store::{Commit, Store, StoreError, StoreKey, Write, resource_version};

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// What a delete did.
#[derive(Debug)]
pub struct Deleted {
    /// The object as removed, or as marked for deletion.
    pub object: Value,
    /// Removed now (`false`: finalizers hold it).
    pub removed: bool,
}

/// Deletes one object under a propagation policy; a dry run (`commit`) answers what the
/// deletion would do and changes nothing, its dependents included.
pub fn delete_object(
    store: &Store,
    key: &StoreKey,
    policy: &str,
    (expect_rv, expect_uid): (Option<u64>, Option<String>),
    commit: Commit,
) -> Result<Deleted, StoreError> {
    let current = store.get(key).ok_or(StoreError::NotFound)?;
    if expect_rv.is_some_and(|rv| rv != resource_version(&current))
        || expect_uid
            .as_deref()
            .is_some_and(|uid| current["metadata"]["uid"].as_str() != Some(uid))
    {
        return Err(StoreError::Conflict);
    }
    if policy == "Orphan" && commit == Commit::Store {
        orphan_dependents(store, &current);
    }
    let mut finalizers = meta::finalizers(&current);
    if policy == "Foreground" && !finalizers.iter().any(|f| f == FOREGROUND) {
        finalizers.push(FOREGROUND.into());
    }
    let namespace_content = key.resource == "namespaces";
    if finalizers.is_empty() && !namespace_content {
        let object = store.write_as(
            commit,
            key,
            Write::Delete {
                expect_rv: Some(resource_version(&current)),
                expect_uid: None,
            },
        )?;
        return Ok(Deleted {
            object: (*object).clone(),
            removed: true,
        });
    }
    if meta::is_deleting(&current) && meta::finalizers(&current) == finalizers {
        return Ok(Deleted {
            object: (*current).clone(),
            removed: false,
        });
    }
    let mut marked = (*current).clone();
    if !meta::is_deleting(&marked) {
        marked["metadata"]["deletionTimestamp"] = json!(meta::now());
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        meta::bump_generation(&mut marked);
    }
    marked["metadata"]["finalizers"] = json!(finalizers);
    if namespace_content {
        marked["status"]["phase"] = json!("Terminating");
    }
    let object = store.write_as(
        commit,
        key,
        Write::Update {
            object: marked,
            expect_rv: Some(resource_version(&current)),
        },
    )?;
    Ok(Deleted {
        object: (*object).clone(),
        removed: false,
    })
}

fn owner_uids(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_owned))
        .collect()
}

fn orphan_dependents(store: &Store, owner: &Value) {
    let Some(uid) = owner["metadata"]["uid"].as_str() else {
        return;
    };
    for (key, object) in store.all() {
        if owner_uids(&object).iter().any(|u| u == uid) {
            let mut freed = (*object).clone();
            if let Some(refs) = freed["metadata"]["ownerReferences"].as_array_mut() {
                refs.retain(|r| r["uid"].as_str() != Some(uid));
            }
            let _ = store.write(
                &key,
                Write::Update {
                    object: freed,
                    expect_rv: Some(resource_version(&object)),
                },
            );
        }
    }
}

fn remove_finalizer(store: &Store, key: &StoreKey, object: &Value, finalizer: &str) {
    let mut updated = object.clone();
    let rest: Vec<String> = meta::finalizers(object)
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    updated["metadata"]["finalizers"] = json!(rest);
    let expect_rv = Some(resource_version(object));
    if rest.is_empty() {
        if store
            .write(
                key,
                Write::Update {
                    object: updated,
                    expect_rv,
                },
            )
            .is_ok()
            && let Some(latest) = store.get(key)
        {
            let _ = store.write(
                key,
                Write::Delete {
                    expect_rv: Some(resource_version(&latest)),
                    expect_uid: None,
                },
            );
        }
    } else {
        let _ = store.write(
            key,
            Write::Update {
                object: updated,
                expect_rv,
            },
        );
    }
}

/// One pass of the collector; returns whether it changed anything.
pub fn collect(store: &Store) -> bool {
    let all = store.all();
    let live: HashSet<String> = all
        .iter()
        .filter_map(|(_, o)| o["metadata"]["uid"].as_str().map(str::to_owned))
        .collect();
    let mut changed = false;
    for (key, object) in &all {
        let owners = owner_uids(object);
        if owners.is_empty() || meta::is_deleting(object) {
            continue;
        }
        let foreground_owner = owners.iter().any(|uid| {
            all.iter().any(|(_, o)| {
                o["metadata"]["uid"].as_str() == Some(uid)
                    && meta::is_deleting(o)
                    && meta::finalizers(o).iter().any(|f| f == FOREGROUND)
            })
        });
        if owners.iter().all(|uid| !live.contains(uid)) || foreground_owner {
            changed |= delete_object(store, key, "Background", (None, None), Commit::Store).is_ok();
        }
    }
    for (key, object) in &all {
        if !meta::is_deleting(object) {
            continue;
        }
        let finalizers = meta::finalizers(object);
        let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
        let has_dependents = || {
            store
                .all()
                .iter()
                .any(|(_, o)| owner_uids(o).iter().any(|u| u == uid))
        };
        if finalizers.iter().any(|f| f == FOREGROUND) && !has_dependents() {
            remove_finalizer(store, key, object, FOREGROUND);
            changed = true;
        }
        if finalizers.iter().any(|f| f == ORPHAN) {
            orphan_dependents(store, object);
            remove_finalizer(store, key, object, ORPHAN);
            changed = true;
        }
        if key.resource == "namespaces" {
            changed |= finish_namespace(store, key, object);
        }
    }
    changed
}

/// Deletes a terminating namespace's content; removes the namespace once it is empty and no
/// finalizer of its own holds it.
fn finish_namespace(store: &Store, key: &StoreKey, namespace: &Value) -> bool {
    let content = store.keys(None, Some(key.name()));
    if !content.is_empty() {
        for item in &content {
            let _ = delete_object(store, item, "Background", (None, None), Commit::Store);
        }
        return true;
    }
    if meta::finalizers(namespace).is_empty() {
        return store
            .write(
                key,
                Write::Delete {
                    expect_rv: Some(resource_version(namespace)),
                    expect_uid: None,
                },
            )
            .is_ok();
    }
    false
}

/// Runs the collector whenever `kick` fires, and every `resync` as a safety net, until the
/// token is cancelled.
pub async fn run(
    store: Arc<Store>,
    kick: Arc<tokio::sync::Notify>,
    resync: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = kick.notified() => {}
            () = tokio::time::sleep(resync) => {}
        }
        // A pass can unblock another (dependents gone -> owner's finalizer removed).
        for _ in 0..8 {
            if !collect(&store) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(resource: &str, ns: &str, name: &str) -> StoreKey {
        StoreKey::new(resource, ns, name)
    }

    fn obj(name: &str, uid: &str, owner: Option<&str>) -> Value {
        let mut o = json!({"metadata": {"name": name, "namespace": "ns", "uid": uid}});
        if let Some(owner) = owner {
            o["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner}]);
        }
        o
    }

    fn setup() -> Store {
        let store = Store::new(100);
        store
            .write(
                &key("configmaps", "ns", "owner"),
                Write::Create(obj("owner", "u1", None)),
            )
            .unwrap();
        store
            .write(
                &key("secrets", "ns", "child"),
                Write::Create(obj("child", "u2", Some("u1"))),
            )
            .unwrap();
        store
    }

    #[test]
    fn background_removes_dependents_after_the_owner() {
        let store = setup();
        let d = delete_object(
            &store,
            &key("configmaps", "ns", "owner"),
            "Background",
            (None, None),
            Commit::Store,
        )
        .unwrap();
        assert!(d.removed);
        assert!(store.get(&key("secrets", "ns", "child")).is_some());
        collect(&store);
        assert!(store.get(&key("secrets", "ns", "child")).is_none());
    }

    #[test]
    fn foreground_removes_dependents_first() {
        let store = setup();
        let d = delete_object(
            &store,
            &key("configmaps", "ns", "owner"),
            "Foreground",
            (None, None),
            Commit::Store,
        )
        .unwrap();
        assert!(!d.removed);
        assert_eq!(d.object["metadata"]["generation"], 1, "bumped from none");
        while collect(&store) {}
        assert!(store.get(&key("secrets", "ns", "child")).is_none());
        assert!(store.get(&key("configmaps", "ns", "owner")).is_none());
    }

    #[test]
    fn orphan_keeps_dependents_without_the_reference() {
        let store = setup();
        delete_object(
            &store,
            &key("configmaps", "ns", "owner"),
            "Orphan",
            (None, None),
            Commit::Store,
        )
        .unwrap();
        while collect(&store) {}
        let child = store.get(&key("secrets", "ns", "child")).unwrap();
        assert_eq!(child["metadata"]["ownerReferences"], json!([]));
    }

    #[test]
    fn a_dry_run_deletion_changes_nothing() {
        for policy in ["Background", "Foreground", "Orphan"] {
            let store = setup();
            let before = store.all();
            let d = delete_object(
                &store,
                &key("configmaps", "ns", "owner"),
                policy,
                (None, None),
                Commit::DryRun,
            )
            .unwrap();
            assert_eq!(d.object["metadata"]["name"], "owner", "{policy}");
            while collect(&store) {}
            assert_eq!(store.all(), before, "{policy}: a dry run changed the store");
        }
    }

    #[test]
    fn finalizers_hold_an_object() {
        let store = Store::new(10);
        let mut o = obj("f", "u", None);
        o["metadata"]["finalizers"] = json!(["example.com/hold"]);
        let k = key("configmaps", "ns", "f");
        store.write(&k, Write::Create(o)).unwrap();
        let d = delete_object(&store, &k, "Background", (None, None), Commit::Store).unwrap();
        assert!(!d.removed);
        assert!(d.object["metadata"]["deletionTimestamp"].is_string());
        assert!(matches!(
            delete_object(&store, &k, "Background", (Some(999), None), Commit::Store),
            Err(StoreError::Conflict)
        ));
    }
}
