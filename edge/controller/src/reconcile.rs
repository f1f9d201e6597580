//! The gateway controller's loop, a thin shell over `fairlead_edge_controller_plan`: while it
//! holds the Lease, one reconcile per instance on kube-runtime's `Controller` (one for each
//! instance kind) does the work of that instance's Gateway only — the instances naming it
//! planned together ([`crate::instances::plan`]), the Gateway, the proxies' client
//! certificate, the geoproxy and the workload applied, every sharing instance's status written
//! ([`crate::realize`]), the finalizer kept ([`crate::finalizer`]) — woken by the instance, by
//! the workloads, Services, Pods and Gateway its controller labels name it in, and by its
//! Gateway's certificate Secret appearing. The cluster-wide work has loops of its own
//! ([`crate::jobs`]): the CA with the xDS server's and the webhooks' certificates and the
//! webhooks' registration, the proxies' kube-rbac-proxy binding, the condition of Gateways no
//! instance names, cert-manager's HTTP-01 bridges, and the module's cleanup (while it is
//! requested, instances are left alone). A failed reconcile is retried with backoff; what was
//! made for an instance goes with its last owner (garbage collection).

use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlead_edge_api::{ALBInstance, ClusterALBInstance};
use fairlead_key::ObjectKey;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{PredicateConfig, WatchStreamExt as _, watcher};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

pub use crate::context::Config;
use crate::context::{Context, Due, ReconcileError};
use crate::instances::{INSTANCE_LABEL, Instance};

/// The Lease whose holder reconciles.
pub const LEASE: &str = "alb-gateway-controller-leader";

/// Changes arriving within this long make one reconcile.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Every instance is reconciled again this often (a certificate due sooner, sooner).
const RESYNC: Duration = Duration::from_secs(300);

/// The first retry of a failed reconcile (doubling per failure in a row, to 32 s).
const RETRY: Duration = Duration::from_secs(1);

/// Runs until `stop`; works only while `leadership` holds the Lease (always without one).
pub async fn run(
    client: kube::Client,
    leadership: Option<fairlead_kit::lease::Leadership>,
    config: Config,
    metrics: crate::metrics::ControllerMetrics,
    stop: CancellationToken,
) {
    // Instances changing wake the jobs that read every instance; the per-instance reconciles
    // have watches of their own.
    let world = Arc::new(Notify::new());
    let clusters = fairlead_kit::watch::cache(
        Api::<ClusterALBInstance>::all(client.clone()),
        watcher::Config::default(),
        fairlead_kit::watch::without_managed_fields,
        world.clone(),
        stop.clone(),
    );
    let namespaced = fairlead_kit::watch::cache(
        Api::<ALBInstance>::all(client.clone()),
        watcher::Config::default(),
        fairlead_kit::watch::without_managed_fields,
        world.clone(),
        stop.clone(),
    );
    // Instances must not look absent: wait for both lists.
    tokio::select! {
        () = stop.cancelled() => return,
        listed = async {
            clusters.wait_until_ready().await?;
            namespaced.wait_until_ready().await
        } => if let Err(e) = listed {
            tracing::error!(error = %e, "the instance watches never listed");
            return;
        },
    }
    let mut leadership = leadership;
    loop {
        if let Some(leadership) = leadership.as_mut() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = leadership.leading() => {}
            }
        }
        // Leading: reconcile until the Lease is lost (or the process stops), then wait to
        // lead again; a new term starts afresh.
        let term = CancellationToken::new();
        let (ca_tx, ca) = watch::channel(None);
        let (cleaning_tx, cleaning) = watch::channel(None);
        let context = Arc::new(Context::new(
            client.clone(),
            config.clone(),
            metrics.clone(),
            (clusters.clone(), namespaced.clone()),
            ca,
            cleaning,
        ));
        let mut lost = leadership.clone();
        let term_over = {
            let stop = stop.clone();
            async move {
                match lost.as_mut() {
                    Some(lost) => tokio::select! {
                        () = stop.cancelled() => {}
                        () = lost.lost() => {}
                    },
                    None => stop.cancelled().await,
                }
            }
        };
        tokio::select! {
            () = per_instance(context.clone(), term.clone()) => {}
            () = crate::jobs::run(context, ca_tx, cleaning_tx, world.clone(), term.clone()) => {}
            () = term_over => {}
        }
        term.cancel();
        if stop.is_cancelled() {
            return;
        }
    }
}

/// The per-instance reconciles of one term, one Controller per instance kind.
async fn per_instance(context: Arc<Context>, term: CancellationToken) {
    let client = context.client.clone();
    let clusters = watching(on_instances::<ClusterALBInstance>(&client), &client);
    let namespaced = watching(on_instances::<ALBInstance>(&client), &client);
    let config = || ControllerConfig::default().debounce(DEBOUNCE);
    futures::join!(
        clusters
            .with_config(config())
            .graceful_shutdown_on(term.clone().cancelled_owned())
            .run(reconcile_cluster, error_policy, context.clone())
            .for_each(|_| std::future::ready(())),
        namespaced
            .with_config(config())
            .graceful_shutdown_on(term.cancelled_owned())
            .run(reconcile_namespaced, error_policy, context)
            .for_each(|_| std::future::ready(())),
    );
}

/// A Controller of the instances of kind `K`, woken by a change of what a reconcile reads of
/// one ([`read_of`]) — not by its status alone, which the reconcile itself writes.
fn on_instances<K>(client: &kube::Client) -> Controller<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let trigger = watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .backoff(fairlead_kit::watch::backoff())
        .reflect(writer)
        .touched_objects()
        .predicate_filter(read_of::<K>, PredicateConfig::default());
    Controller::for_stream(trigger, reader)
}

/// A digest of what a reconcile reads of an instance: its spec (by its generation), whether
/// it is being deleted, its finalizers and its route-statistics annotation.
fn read_of<K: Resource>(instance: &K) -> Option<u64> {
    let meta = instance.meta();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut digest);
    meta.deletion_timestamp.is_some().hash(&mut digest);
    meta.finalizers.hash(&mut digest);
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(fairlead_edge_model::names::ROUTE_STATISTICS))
        .hash(&mut digest);
    Some(digest.finish())
}

/// The instance of kind `K` an object made for a Gateway names in its
/// [`INSTANCE_LABEL`] (`ClusterALBInstance.main`; an ALBInstance in the object's namespace).
fn labelled<K: Resource<DynamicType = ()>>(meta: &ObjectMeta) -> Option<ObjectRef<K>> {
    let label = meta.labels.as_ref()?.get(INSTANCE_LABEL)?;
    let (kind, name) = label.split_once('.')?;
    if kind != K::kind(&()) {
        return None;
    }
    Some(match meta.namespace.as_deref() {
        Some(namespace) if kind == "ALBInstance" => ObjectRef::new(name).within(namespace),
        _ => ObjectRef::new(name),
    })
}

/// `controller` woken by what is made for its instances' Gateways (their workloads,
/// Services, Pods and Gateways, by their labels), every watch retried with the shared
/// [`fairlead_kit::watch::backoff`].
fn watching<K>(controller: Controller<K>, client: &kube::Client) -> Controller<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let made = || watcher::Config::default().labels(INSTANCE_LABEL);
    let gateway = crate::crds::resource("Gateway");
    controller
        .trigger_backoff(fairlead_kit::watch::backoff())
        .watches(Api::<DaemonSet>::all(client.clone()), made(), |o| {
            labelled::<K>(&o.metadata)
        })
        .watches(Api::<Deployment>::all(client.clone()), made(), |o| {
            labelled::<K>(&o.metadata)
        })
        .watches(Api::<StatefulSet>::all(client.clone()), made(), |o| {
            labelled::<K>(&o.metadata)
        })
        .watches(Api::<Service>::all(client.clone()), made(), |o| {
            labelled::<K>(&o.metadata)
        })
        .watches(Api::<Pod>::all(client.clone()), made(), |o| {
            labelled::<K>(&o.metadata)
        })
        .watches_with(
            Api::<DynamicObject>::all_with(client.clone(), &gateway),
            gateway.clone(),
            made(),
            |o| labelled::<K>(&o.metadata),
        )
}

async fn reconcile_cluster(
    instance: Arc<ClusterALBInstance>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let mut read = Instance::read(
        "ClusterALBInstance",
        &instance.metadata,
        instance.spec.instance.clone(),
    );
    read.default = instance.spec.default_deckhouse_gateway == Some(true);
    reconcile(read, &instance.metadata, &context).await
}

async fn reconcile_namespaced(
    instance: Arc<ALBInstance>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let read = Instance::read(
        "ALBInstance",
        &instance.metadata,
        instance.spec.instance.clone(),
    );
    reconcile(read, &instance.metadata, &context).await
}

/// Reconciles `instance`'s Gateway (and, when it was renamed, the one it named before).
async fn reconcile(
    instance: Instance,
    meta: &ObjectMeta,
    context: &Context,
) -> Result<Action, ReconcileError> {
    if *context.cleaning.borrow() == Some(true) {
        // The module is going: the cleanup job removes what was made.
        return Ok(Action::await_change());
    }
    let Some(ca) = context.ca.borrow().clone() else {
        // The cleanup job has not looked yet, or the certificates job has not made or read
        // the CA yet.
        return Ok(Action::requeue(RETRY));
    };
    if !context.holds(instance.kind, &instance.key, meta) {
        // The Gateway is planned from the shared instance caches, which have not seen this
        // version yet (their watch is not the Controller's): soon.
        return Ok(Action::requeue(DEBOUNCE));
    }
    let gateway = instance.gateway();
    let before = {
        let mut named = context
            .named
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if meta.deletion_timestamp.is_some() {
            named.remove(&(instance.kind, instance.key.clone()))
        } else {
            named.insert((instance.kind, instance.key.clone()), gateway.clone())
        }
    };
    let started = Instant::now();
    let mut due = Due::default();
    let mut result = crate::realize::gateway(context, &ca, &gateway, &mut due).await;
    if let Some(before) = before.filter(|b| *b != gateway)
        && result.is_ok()
    {
        tracing::info!(instance = %instance.key, from = %before, to = %gateway, "the instance names another Gateway");
        result = crate::realize::gateway(context, &ca, &before, &mut due).await;
    }
    let metrics = &context.metrics;
    metrics
        .duration
        .with_label_values(&[] as &[&str])
        .observe(started.elapsed().as_secs_f64());
    metrics
        .reconciles
        .with_label_values(&[if result.is_ok() { "ok" } else { "error" }])
        .inc();
    result?;
    context
        .failures
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&instance.key);
    if meta.deletion_timestamp.is_none() {
        metrics
            .instance_failures
            .with_label_values(&[instance.kind, instance.key.to_string().as_str()])
            .set(0);
    }
    // Again when the next certificate is due, whatever else happens.
    let after = due
        .after()
        .map_or(RESYNC, |d| d + Duration::from_millis(100));
    Ok(Action::requeue(after.min(RESYNC)))
}

fn error_policy<K: Resource<DynamicType = ()>>(
    instance: Arc<K>,
    error: &ReconcileError,
    context: Arc<Context>,
) -> Action {
    let key = match instance.meta().namespace.as_deref() {
        Some(ns) => ObjectKey::new(ns, instance.meta().name.as_deref().unwrap_or_default()),
        None => ObjectKey::cluster(instance.meta().name.clone().unwrap_or_default()),
    };
    let failures = {
        let mut failures = context
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(key.clone()).or_default();
        *n += 1;
        *n
    };
    context
        .metrics
        .instance_failures
        .with_label_values(&[K::kind(&()).as_ref(), key.to_string().as_str()])
        .set(i64::from(failures));
    tracing::warn!(kind = %K::kind(&()), instance = %key, error = %error, failures, "reconciling the instance's Gateway failed; retrying");
    Action::requeue(RETRY * 2u32.saturating_pow((failures - 1).min(5)))
}
