//! The module's cleanup, as Deckhouse's module-cleanup waiter runs it before the module goes:
//! [`wait`] (`fairlead edge cleanup-wait`, the pre-delete hook) marks the controller's ConfigMap
//! `d8-alb/alb-gateway-controller` with `alb.deckhouse.io/cleanup: requested`; the controller,
//! seeing the mark, stops making things and deletes everything it made (every object labelled
//! `app.kubernetes.io/managed-by: alb-gateway-controller`: managed Gateways, proxy workloads, their
//! Services, ConfigMaps and ServiceAccounts, the CA and certificate Secrets, HTTP-01 bridges, the
//! webhook configuration), leaving users' objects (instances, routes, their Secrets) in place;
//! [`wait`] returns once nothing of it is left, or fails after its timeout naming what is.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};

use crate::instance::{CLUSTER_NAMESPACE, MANAGER};

/// The controller's ConfigMap, which carries the cleanup mark.
pub const MARKER: &str = "alb-gateway-controller";

/// The annotation of the mark.
pub const CLEANUP_ANNOTATION: &str = "alb.deckhouse.io/cleanup";

/// Why the cleanup did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CleanupError {
    /// The API refused a read or a write.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Objects were still there when the time was up.
    #[error("the gateway controller did not remove everything within {seconds} s; left: {}", left.join(", "))]
    Timeout {
        /// The timeout.
        seconds: u64,
        /// What is left (`Kind namespace/name`).
        left: Vec<String>,
    },
}

fn selector() -> String {
    format!("app.kubernetes.io/managed-by={MANAGER}")
}

/// Whether the module is going (the mark is on the controller's ConfigMap).
pub async fn requested(client: &kube::Client) -> Result<bool, kube::Error> {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), CLUSTER_NAMESPACE);
    Ok(maps.get_opt(MARKER).await?.is_some_and(|cm| {
        cm.metadata
            .annotations
            .is_some_and(|a| a.get(CLEANUP_ANNOTATION).is_some_and(|v| v == "requested"))
    }))
}

/// Puts the mark on the controller's ConfigMap (made when missing).
pub async fn request(client: &kube::Client) -> Result<(), kube::Error> {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), CLUSTER_NAMESPACE);
    let marked = k8s_openapi::api::core::v1::ConfigMap {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(MARKER.to_owned()),
            namespace: Some(CLUSTER_NAMESPACE.to_owned()),
            annotations: Some([(CLEANUP_ANNOTATION.to_owned(), "requested".to_owned())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    maps.patch(
        MARKER,
        &PatchParams::apply("alb-cleanup-waiter").force(),
        &Patch::Apply(&marked),
    )
    .await?;
    Ok(())
}

/// Everything the controller made that is still there, as `(kind, namespace, name)`.
pub async fn leftovers(
    client: &kube::Client,
) -> Result<Vec<(String, String, String)>, kube::Error> {
    let mut left = Vec::new();
    for kind in crate::apply::MADE_KINDS {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &crate::apply::resource(kind));
        for object in api
            .list(&ListParams::default().labels(&selector()))
            .await?
            .items
        {
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            let name = object.metadata.name.clone().unwrap_or_default();
            left.push(((*kind).to_owned(), namespace, name));
        }
    }
    for (kind, key) in crate::finalizer::holding(client).await? {
        left.push((
            format!("{} finalizer on {kind}", crate::finalizer::FINALIZER),
            key.namespace().to_owned(),
            key.name().to_owned(),
        ));
    }
    Ok(left)
}

/// Deletes everything the controller made, and takes its finalizer off the instances; how
/// many objects it asked to delete or release.
pub async fn remove_all(client: &kube::Client) -> Result<usize, kube::Error> {
    let released = crate::finalizer::strip(client).await?;
    let left = leftovers(client).await?;
    for (kind, namespace, name) in &left {
        let resource = crate::apply::resource(kind);
        let api: Api<DynamicObject> = if namespace.is_empty() {
            Api::all_with(client.clone(), &resource)
        } else {
            Api::namespaced_with(client.clone(), namespace, &resource)
        };
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(%kind, object = %format!("{namespace}/{name}"), "module cleanup: deleted")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(released + left.len())
}

/// Marks the module as going and waits (checking every `every`) until the controller has
/// removed everything it made, or `timeout` passes.
pub async fn wait(
    client: &kube::Client,
    timeout: Duration,
    every: Duration,
) -> Result<(), CleanupError> {
    request(client).await?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = leftovers(client).await?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CleanupError::Timeout {
                seconds: timeout.as_secs(),
                left: left
                    .into_iter()
                    .map(|(kind, namespace, name)| format!("{kind} {namespace}/{name}"))
                    .collect(),
            });
        }
        tracing::info!(
            left = left.len(),
            "waiting for the gateway controller's cleanup"
        );
        tokio::time::sleep(every).await;
    }
}
