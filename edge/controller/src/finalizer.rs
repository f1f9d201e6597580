//! The controller's finalizer on instances, so that deleting one finishes only once what it
//! made is gone or has passed to another instance: every live instance carries
//! [`FINALIZER`]; an instance being deleted keeps it until its Gateway is either planned for
//! another instance (which the round has just applied, without it among the owners) or, when
//! no instance names the Gateway any more, until the Gateway and everything made for its
//! proxies have been deleted. [`change`] decides (pure); [`apply`] does it. The module's
//! cleanup takes the finalizer off every instance ([`strip`]), so no instance outlives the
//! controller stuck in deletion.

use fairlead_key::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::instance::{CLUSTER_NAMESPACE, MANAGER};

/// The finalizer the controller keeps on instances.
pub const FINALIZER: &str = "alb.deckhouse.io/gateway-controller";

/// What an instance's finalizer needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A live instance without it: add it.
    Add(Subject),
    /// A deleting instance with it: release its Gateway, then remove it.
    Release {
        /// The instance.
        subject: Subject,
        /// The Gateway it named.
        gateway: ObjectKey,
    },
}

/// The instance a change is about, as written back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// `ClusterALBInstance` or `ALBInstance`.
    pub kind: &'static str,
    /// Its key.
    pub key: ObjectKey,
    /// Its finalizers when read.
    pub finalizers: Vec<String>,
}

/// The change an instance of `kind` with `meta`, naming `gateway_name`, needs (none when its
/// finalizer is as it should be).
pub fn change(kind: &'static str, meta: &ObjectMeta, gateway_name: &str) -> Option<Change> {
    let finalizers = meta.finalizers.clone().unwrap_or_default();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    let deleting = meta.deletion_timestamp.is_some();
    let name = meta.name.clone().unwrap_or_default();
    let (key, gateway_namespace) = match &meta.namespace {
        Some(namespace) => (ObjectKey::new(namespace, &name), namespace.as_str()),
        None => (ObjectKey::cluster(&name), CLUSTER_NAMESPACE),
    };
    let subject = Subject {
        kind,
        key,
        finalizers,
    };
    match (deleting, has) {
        (false, false) => Some(Change::Add(subject)),
        (true, true) => Some(Change::Release {
            subject,
            gateway: ObjectKey::new(gateway_namespace, gateway_name),
        }),
        _ => None,
    }
}

fn instances(client: &kube::Client, subject: &Subject) -> Api<DynamicObject> {
    let resource = crate::apply::resource(subject.kind);
    if subject.key.namespace().is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), subject.key.namespace(), &resource)
    }
}

/// Edits `subject`'s finalizers with `edit`, on the object as it is now (read again and
/// retried when another writer got in between).
async fn write(
    client: &kube::Client,
    subject: &Subject,
    edit: impl Fn(Vec<String>) -> Vec<String>,
) -> Result<(), kube::Error> {
    let api = instances(client, subject);
    let mut attempts = 0;
    loop {
        let Some(current) = api.get_opt(subject.key.name()).await? else {
            return Ok(());
        };
        let before = current.metadata.finalizers.clone().unwrap_or_default();
        let after = edit(before.clone());
        if after == before {
            return Ok(());
        }
        let patch = json!({"metadata": {"finalizers": after,
            "resourceVersion": current.metadata.resource_version}});
        match api
            .patch(
                subject.key.name(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 && attempts < 3 => attempts += 1,
            Err(e) => return Err(e),
        }
    }
}

fn without_ours(finalizers: Vec<String>) -> Vec<String> {
    finalizers.into_iter().filter(|f| f != FINALIZER).collect()
}

/// What of `gateway` the controller made is still there (`Kind name`).
async fn remains(client: &kube::Client, gateway: &ObjectKey) -> Result<Vec<String>, kube::Error> {
    let mut left = Vec::new();
    let gateways: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        gateway.namespace(),
        &crate::apply::resource("Gateway"),
    );
    if gateways
        .get_opt(gateway.name())
        .await?
        .is_some_and(|g| crate::admission::is_managed(&serde_json::to_value(g).unwrap_or_default()))
    {
        left.push(format!("Gateway {}", gateway.name()));
    }
    let selector = format!(
        "{}={},app.kubernetes.io/managed-by={MANAGER}",
        crate::pods::GATEWAY_LABEL,
        gateway.name()
    );
    for kind in crate::apply::MADE_KINDS
        .iter()
        // The Gateway is looked at above; the webhook configuration is the module's, not a
        // Gateway's.
        .filter(|k| !matches!(**k, "Gateway" | "ValidatingWebhookConfiguration"))
    {
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            gateway.namespace(),
            &crate::apply::resource(kind),
        );
        for object in api
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
        {
            left.push(format!(
                "{kind} {}",
                object.metadata.name.unwrap_or_default()
            ));
        }
    }
    Ok(left)
}

/// Deletes `gateway` (when managed) and everything made for its proxies.
pub async fn remove_made(client: &kube::Client, gateway: &ObjectKey) -> Result<(), kube::Error> {
    for what in remains(client, gateway).await? {
        let (kind, name) = what.split_once(' ').unwrap_or((&what, ""));
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            gateway.namespace(),
            &crate::apply::resource(kind),
        );
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => tracing::info!(%gateway, %kind, %name, "deleted with its last instance"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Does `change`; `planned` says whether a Gateway is still planned for some instance.
pub async fn apply(
    client: &kube::Client,
    change: &Change,
    planned: impl Fn(&ObjectKey) -> bool,
) -> Result<(), kube::Error> {
    match change {
        Change::Add(subject) => {
            write(client, subject, |mut finalizers| {
                if !finalizers.iter().any(|f| f == FINALIZER) {
                    finalizers.push(FINALIZER.to_owned());
                }
                finalizers
            })
            .await
        }
        Change::Release { subject, gateway } => {
            if !planned(gateway) {
                remove_made(client, gateway).await?;
                let left = remains(client, gateway).await?;
                if !left.is_empty() {
                    tracing::info!(instance = %subject.key, %gateway, left = ?left, "waiting for the Gateway's objects to go before the instance does");
                    return Ok(());
                }
            }
            write(client, subject, without_ours).await?;
            tracing::info!(instance = %subject.key, kind = subject.kind, "finalizer released");
            Ok(())
        }
    }
}

/// The instances carrying the finalizer, as subjects.
async fn carrying(client: &kube::Client) -> Result<Vec<Subject>, kube::Error> {
    let mut found = Vec::new();
    for kind in crate::metrics::KINDS {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::apply::resource(kind));
        for object in api.list(&ListParams::default()).await?.items {
            let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == FINALIZER) {
                continue;
            }
            let name = object.metadata.name.clone().unwrap_or_default();
            found.push(Subject {
                kind,
                key: match &object.metadata.namespace {
                    Some(ns) => ObjectKey::new(ns, &name),
                    None => ObjectKey::cluster(&name),
                },
                finalizers,
            });
        }
    }
    Ok(found)
}

/// The instances still carrying the finalizer: their kind and key.
pub async fn holding(client: &kube::Client) -> Result<Vec<(&'static str, ObjectKey)>, kube::Error> {
    Ok(carrying(client)
        .await?
        .into_iter()
        .map(|s| (s.kind, s.key))
        .collect())
}

/// Takes the finalizer off every instance (the module is going); how many it released.
pub async fn strip(client: &kube::Client) -> Result<usize, kube::Error> {
    let subjects = carrying(client).await?;
    for subject in &subjects {
        write(client, subject, without_ours).await?;
    }
    Ok(subjects.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: Option<&str>, finalizers: &[&str], deleting: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("shop".into()),
            namespace: namespace.map(str::to_owned),
            finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
            deletion_timestamp: deleting
                .then(|| k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default())),
            resource_version: Some("7".into()),
            ..Default::default()
        }
    }

    #[test]
    fn live_instances_get_it_and_deleting_ones_release_their_gateway() {
        let Some(Change::Add(subject)) =
            change("ALBInstance", &meta(Some("team"), &[], false), "gw")
        else {
            panic!("a live instance without the finalizer gets it");
        };
        assert_eq!(subject.key, ObjectKey::new("team", "shop"));
        assert_eq!(
            change(
                "ALBInstance",
                &meta(Some("team"), &[FINALIZER], false),
                "gw"
            ),
            None
        );
        let Some(Change::Release { gateway, subject }) = change(
            "ClusterALBInstance",
            &meta(None, &["x.io/keep", FINALIZER], true),
            "public",
        ) else {
            panic!("a deleting instance releases");
        };
        assert_eq!(gateway, ObjectKey::new(CLUSTER_NAMESPACE, "public"));
        assert_eq!(subject.finalizers, ["x.io/keep", FINALIZER]);
        assert_eq!(
            change(
                "ClusterALBInstance",
                &meta(None, &["x.io/keep"], true),
                "public"
            ),
            None,
            "released already: another finalizer is not ours"
        );
    }
}
