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

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlead_edge_api::{ALBInstance, ClusterALBInstance};
use fairlead_key::ObjectKey;
use fairlead_kit::pki::Ca;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::instances::{self, INSTANCE_LABEL, Instance};
use crate::realize::Due;

/// The Lease whose holder reconciles.
pub const LEASE: &str = "alb-gateway-controller-leader";

/// Changes arriving within this long make one reconcile.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Every instance is reconciled again this often (a certificate due sooner, sooner).
const RESYNC: Duration = Duration::from_secs(300);

/// The first retry of a failed reconcile (doubling per failure in a row, to 32 s).
const RETRY: Duration = Duration::from_secs(1);

/// What the loop is configured with (the controller's flags).
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// How proxy workloads are made.
    pub workload: crate::workload::Settings,
    /// How long issued certificates are valid (renewed at two thirds).
    pub lifetime: Option<Duration>,
    /// The ingress class of cert-manager's HTTP-01 bridges (none: no bridging).
    pub http01_ingress_class: Option<String>,
    /// Where the API server reaches the admission webhooks (none: not registered).
    pub webhook: Option<crate::webhook::WebhookService>,
}

impl Config {
    /// How long issued certificates are valid.
    pub fn lifetime(&self) -> Duration {
        self.lifetime
            .unwrap_or(crate::certificates::DEFAULT_LIFETIME)
    }
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The API refused a read or a write.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// A certificate could not be kept.
    #[error(transparent)]
    Certificate(#[from] crate::certificates::CertificateError),
    /// A workload could not be rendered.
    #[error("{0}")]
    Render(String),
}

/// How an instance is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Its Gateway is programmed and a proxy is ready.
    Ready,
    /// Not yet.
    NotReady,
    /// Another instance controls its Gateway.
    Conflict,
}

/// What the reconciles and the jobs share.
pub(crate) struct Context {
    pub(crate) client: kube::Client,
    pub(crate) config: Config,
    pub(crate) metrics: crate::metrics::ControllerMetrics,
    pub(crate) clusters: Store<ClusterALBInstance>,
    pub(crate) namespaced: Store<ALBInstance>,
    /// The CA, once the certificates job has it (none while the module is being removed).
    pub(crate) ca: watch::Receiver<Option<Arc<Ca>>>,
    /// Whether the module's cleanup is requested (`None` until the cleanup job has looked).
    pub(crate) cleaning: watch::Receiver<Option<bool>>,
    /// How each instance is counted, by kind and key.
    counted: Mutex<BTreeMap<(&'static str, ObjectKey), Counted>>,
    /// The Gateway each instance named at its last reconcile (a renamed instance's old
    /// Gateway is reconciled once more, to go).
    named: Mutex<HashMap<(&'static str, ObjectKey), ObjectKey>>,
    /// Failures in a row, by instance.
    failures: Mutex<HashMap<ObjectKey, u32>>,
}

/// An instance as read, with its metadata (finalizers, deletion).
pub(crate) struct Read {
    pub(crate) instance: Instance,
    pub(crate) meta: ObjectMeta,
}

impl Context {
    /// Every instance of both kinds, live or being deleted.
    pub(crate) fn instances(&self) -> Vec<Read> {
        let clusters = self.clusters.state().into_iter().map(|i| Read {
            instance: {
                let mut read = read("ClusterALBInstance", &i.metadata, i.spec.instance.clone());
                read.default = i.spec.default_deckhouse_gateway == Some(true);
                read
            },
            meta: i.metadata.clone(),
        });
        let namespaced = self.namespaced.state().into_iter().map(|i| Read {
            instance: read("ALBInstance", &i.metadata, i.spec.instance.clone()),
            meta: i.metadata.clone(),
        });
        clusters.chain(namespaced).collect()
    }

    /// Whether the instance caches hold `key`'s version `meta` (the one being reconciled).
    fn holds(&self, kind: &str, key: &ObjectKey, meta: &ObjectMeta) -> bool {
        let version = |m: &ObjectMeta| m.resource_version.clone();
        let cached = if kind == "ClusterALBInstance" {
            self.clusters
                .get(&ObjectRef::new(key.name()))
                .map(|i| version(&i.metadata))
        } else {
            self.namespaced
                .get(&ObjectRef::new(key.name()).within(key.namespace()))
                .map(|i| version(&i.metadata))
        };
        cached == Some(version(meta))
    }

    /// The live instances (not being deleted).
    pub(crate) fn live(&self) -> Vec<Instance> {
        self.instances()
            .into_iter()
            .filter(|r| r.meta.deletion_timestamp.is_none())
            .map(|r| r.instance)
            .collect()
    }

    /// Records how the instances of a Gateway are counted (`None`: gone) and sets the
    /// gauges.
    pub(crate) fn count(&self, counts: Vec<((&'static str, ObjectKey), Option<Counted>)>) {
        let mut counted = self
            .counted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for ((kind, key), state) in counts {
            let label = key.to_string();
            match state {
                Some(state) => {
                    if state != Counted::Conflict {
                        self.metrics
                            .instance_ready
                            .with_label_values(&[kind, label.as_str()])
                            .set(i64::from(state == Counted::Ready));
                    } else {
                        let _ = self
                            .metrics
                            .instance_ready
                            .remove_label_values(&[kind, label.as_str()]);
                    }
                    counted.insert((kind, key), state);
                }
                None => {
                    let _ = self
                        .metrics
                        .instance_ready
                        .remove_label_values(&[kind, label.as_str()]);
                    let _ = self
                        .metrics
                        .instance_failures
                        .remove_label_values(&[kind, label.as_str()]);
                    counted.remove(&(kind, key));
                }
            }
        }
        for kind in crate::metrics::KINDS {
            for (state, name) in [
                (Counted::Ready, "ready"),
                (Counted::NotReady, "not_ready"),
                (Counted::Conflict, "conflict"),
            ] {
                let n = counted
                    .iter()
                    .filter(|((k, _), s)| *k == kind && **s == state)
                    .count();
                self.metrics
                    .instances
                    .with_label_values(&[kind, name])
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
    }
}

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
        let context = Arc::new(Context {
            client: client.clone(),
            config: config.clone(),
            metrics: metrics.clone(),
            clusters: clusters.clone(),
            namespaced: namespaced.clone(),
            ca,
            cleaning,
            counted: Mutex::default(),
            named: Mutex::default(),
            failures: Mutex::default(),
        });
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
    let clusters = watching(
        Controller::new(
            Api::<ClusterALBInstance>::all(client.clone()),
            watcher::Config::default(),
        ),
        &client,
        context.clone(),
    );
    let namespaced = watching(
        Controller::new(
            Api::<ALBInstance>::all(client.clone()),
            watcher::Config::default(),
        ),
        &client,
        context.clone(),
    );
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
/// Services, Pods and Gateways, by their labels) and by a Gateway's certificate Secret.
fn watching<K>(
    controller: Controller<K>,
    client: &kube::Client,
    context: Arc<Context>,
) -> Controller<K>
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
        // A certificate Secret appearing adds a Gateway's HTTPS listener.
        .watches(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default().fields("type=kubernetes.io/tls"),
            move |secret| certificate_of::<K>(&context, &secret.metadata),
        )
}

/// The instances of kind `K` naming the Gateway whose certificate `secret` is.
fn certificate_of<K: Resource<DynamicType = ()>>(
    context: &Context,
    secret: &ObjectMeta,
) -> Vec<ObjectRef<K>> {
    let (Some(namespace), Some(name)) = (&secret.namespace, &secret.name) else {
        return Vec::new();
    };
    let kind = K::kind(&());
    context
        .live()
        .into_iter()
        .filter(|i| i.kind == kind)
        .filter(|i| {
            let gateway = i.gateway();
            gateway.namespace() == namespace && instances::certificate_secret(&gateway) == *name
        })
        .map(|i| match i.key.namespace() {
            "" => ObjectRef::new(i.key.name()),
            ns => ObjectRef::new(i.key.name()).within(ns),
        })
        .collect()
}

async fn reconcile_cluster(
    instance: Arc<ClusterALBInstance>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let mut read = read(
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
    let read = read(
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

/// One instance as the planner reads it.
pub(crate) fn read(
    kind: &'static str,
    meta: &ObjectMeta,
    spec: fairlead_edge_api::InstanceSpec,
) -> Instance {
    let name = meta.name.clone().unwrap_or_default();
    Instance {
        kind,
        key: match &meta.namespace {
            Some(ns) => ObjectKey::new(ns, &name),
            None => ObjectKey::cluster(&name),
        },
        uid: meta.uid.clone().unwrap_or_default(),
        created: meta
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        generation: meta.generation.unwrap_or_default(),
        default: false,
        route_statistics: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(fairlead_edge_model::names::ROUTE_STATISTICS))
            .is_some_and(|v| v == "true"),
        spec,
    }
}
