//! The controller (`fairlead health controller`, a Deployment, leader-elected on a Lease):
//! keeps each resource's child Service, aggregates the agents' endpoint statuses into the
//! `Ready` condition and counts, and prunes the entries of pods that are gone — per resource,
//! on kube-runtime's `Controller` — and deletes the EndpointSlices of nodes and resources
//! that are gone, in whole-world rounds; on events and on a slow resync.
//!
//! Decisions are in `fairlead_health_plan::controller`; this is the I/O around them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlead_health_api::ServiceWithHealthchecks;
use fairlead_health_plan::controller::{
    ConditionState, child_service, child_service_condition, desired_status, orphaned_slices,
    stale_entries, status_unchanged,
};
use fairlead_kit::apply::{Applied, apply};
use fairlead_kit::events::Events;
use fairlead_kit::lease::{self, LeaseConfig};
use fairlead_kit::reconcile::{Outcome, Pacing, Rounds, Wake};
use fairlead_kit::watch::{cache, keep, without_managed_fields};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::metrics::HealthMetrics;

/// The controller's field manager.
pub const MANAGER: &str = "fairlead-health-controller";
/// The Lease name (Deckhouse's).
pub const LEASE: &str = "swh-controller-leader.deckhouse.io";

/// Brings the ServiceWithHealthchecks CRD in the cluster to this version's (Helm installs a
/// chart's `crds/` once and never upgrades them; Deckhouse applies them on every run), unless
/// a newer version wrote it. The controller may only update it: a missing CRD is the chart's
/// to install, and the refusal says so.
pub async fn ensure_crd(client: &kube::Client) -> Result<(), kube::Error> {
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = kube::Api::all(client.clone());
    fairlead_kit::crds::keep_current(&crds, MANAGER, &fairlead_health_api::crd()).await?;
    Ok(())
}
/// The controller's pace: changes arriving within 20 ms make one reconcile, every resource is
/// reconciled again every five minutes, and half a second after a failed write (doubling per
/// failure in a row, per resource; the orphan rounds likewise).
const PACING: Pacing = Pacing {
    debounce: Duration::from_millis(20),
    resync: Duration::from_secs(300),
    retry: Duration::from_millis(500),
    max_doublings: 7,
};

/// The controller reads only the names of pods and nodes.
fn names_only<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    *meta = kube::api::ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        ..Default::default()
    };
}

fn trim_pod(pod: &mut Pod) {
    names_only(pod);
    pod.spec = None;
    pod.status = None;
}

fn trim_swh(swh: &mut ServiceWithHealthchecks) {
    names_only(swh);
    swh.status = None;
}

fn trim_node(node: &mut Node) {
    names_only(node);
    node.spec = None;
    node.status = None;
}

/// What every reconcile reads and writes with.
struct Context {
    client: kube::Client,
    metrics: HealthMetrics,
    events: Events,
    services: Store<Service>,
    pods: Store<Pod>,
    /// The reason of the last `ChildServiceReady` condition per resource (a Warning Event
    /// when it turns to a new failure, not on every reconcile).
    last_child_condition: Mutex<HashMap<ObjectRef<ServiceWithHealthchecks>, &'static str>>,
    /// Failed reconciles in a row per resource: the retry backs off per resource.
    failures: Mutex<HashMap<ObjectRef<ServiceWithHealthchecks>, u32>>,
}

/// Why a reconcile failed (logged, counted and retried with backoff where it happened).
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    /// The child Service could not be written.
    #[error("writing the child Service: {0}")]
    Service(#[source] kube::Error),
    /// The status could not be written.
    #[error("writing the status: {0}")]
    Status(#[source] kube::Error),
}

/// Runs the controller until `stop`; `ready` is called once its watches have listed.
///
/// Per resource, kube-runtime's [`Controller`] reconciles (on the resource's changes, its
/// child Service's, and its namespace's pods'; again after [`PACING`]'s resync; after a
/// failure with a per-resource backoff). The EndpointSlices of nodes and resources that are
/// gone are a whole-world question, answered in [`kit::reconcile`](fairlead_kit::reconcile)
/// rounds. Both run only on the Lease holder, and stop when it loses the Lease.
pub async fn run(
    client: kube::Client,
    lease: LeaseConfig,
    metrics: HealthMetrics,
    stop: CancellationToken,
    ready: impl FnOnce(),
) {
    // What the orphan rounds watch: nodes, our EndpointSlices, and the resources' names.
    let orphans = Arc::new(Notify::new());
    // Caches the reconciles read; their changes reach the Controller through its own watches.
    let read_only = Arc::new(Notify::new());
    let managed = format!(
        "endpointslice.kubernetes.io/managed-by={}",
        fairlead_health_api::MANAGED_BY
    );
    let context = Arc::new(Context {
        events: Events::new(client.clone(), MANAGER, Some(lease.identity.clone())),
        // The apply helper compares with the Services' managedFields: they are kept.
        services: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            keep,
            read_only.clone(),
            stop.clone(),
        ),
        pods: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_pod,
            read_only,
            stop.clone(),
        ),
        client: client.clone(),
        metrics,
        last_child_condition: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
    });
    let world = Orphans {
        swhs: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_swh,
            orphans.clone(),
            stop.clone(),
        ),
        nodes: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_node,
            orphans.clone(),
            stop.clone(),
        ),
        slices: cache(
            Api::all(client.clone()),
            watcher::Config::default().labels(&managed),
            without_managed_fields,
            orphans.clone(),
            stop.clone(),
        ),
    };
    let listed = async {
        context.services.wait_until_ready().await.is_ok()
            && context.pods.wait_until_ready().await.is_ok()
            && world.swhs.wait_until_ready().await.is_ok()
            && world.nodes.wait_until_ready().await.is_ok()
            && world.slices.wait_until_ready().await.is_ok()
    };
    tokio::select! {
        () = stop.cancelled() => return,
        ok = listed => if !ok { return },
    }
    ready();
    let (mut leadership, _lease_task) = lease::spawn(client.clone(), lease, stop.clone());
    let mut rounds = Rounds::new(PACING, orphans);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = leadership.leading() => {}
        }
        // Leading: reconcile until the Lease is lost (or the process stops), then wait to
        // lead again. A new term starts with fresh watches and a full reconcile.
        let mut lost = leadership.clone();
        let term_over = {
            let stop = stop.clone();
            async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = lost.lost() => {}
                }
            }
        };
        let term = CancellationToken::new();
        let per_resource = controller(&client, context.clone(), term.clone());
        tokio::select! {
            () = per_resource => {}
            () = world.rounds(&mut rounds, &context, &term) => {}
            () = term_over => {}
        }
        term.cancel();
    }
}

/// The per-resource reconciles of one leadership term, until `term` is cancelled.
async fn controller(client: &kube::Client, context: Arc<Context>, term: CancellationToken) {
    let controller = Controller::new(
        Api::<ServiceWithHealthchecks>::all(client.clone()),
        watcher::Config::default(),
    );
    let resources = controller.store();
    // A pod that comes or goes changes which endpoint entries of the resources of its
    // namespace are stale.
    let of_namespace = move |pod: Pod| {
        let namespace = pod.metadata.namespace.unwrap_or_default();
        resources
            .state()
            .into_iter()
            .filter(|swh| swh.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .map(|swh| ObjectRef::from_obj(&*swh))
            .collect::<Vec<_>>()
    };
    controller
        .with_config(ControllerConfig::default().debounce(PACING.debounce))
        .trigger_backoff(fairlead_kit::watch::backoff())
        .owns(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            of_namespace,
        )
        .graceful_shutdown_on(term.cancelled_owned())
        .run(reconcile, error_policy, context)
        .for_each(|_| std::future::ready(()))
        .await;
}

/// One resource's reconcile, traced and timed.
async fn reconcile(
    swh: Arc<ServiceWithHealthchecks>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let span = tracing::info_span!(
        "reconcile",
        swh = %format!("{}/{}", swh.metadata.namespace.as_deref().unwrap_or_default(), swh.metadata.name.as_deref().unwrap_or_default())
    );
    let result = tracing::Instrument::instrument(context.reconcile(&swh), span).await;
    context
        .metrics
        .observe_sync("controller", started.elapsed());
    let key = ObjectRef::from_obj(&*swh);
    let mut failures = context
        .failures
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match result {
        Ok(()) => {
            failures.remove(&key);
            Ok(Action::requeue(PACING.resync))
        }
        Err(e) => {
            *failures.entry(key).or_default() += 1;
            Err(e)
        }
    }
}

/// After a failed reconcile (already logged and counted where it failed): again after the
/// resource's backoff.
fn error_policy(
    swh: Arc<ServiceWithHealthchecks>,
    _: &ReconcileError,
    context: Arc<Context>,
) -> Action {
    let failures = context
        .failures
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&ObjectRef::from_obj(&*swh))
        .copied()
        .unwrap_or(1);
    Action::requeue(PACING.backoff(failures))
}

/// What the orphan rounds read.
struct Orphans {
    swhs: Store<ServiceWithHealthchecks>,
    nodes: Store<Node>,
    slices: Store<EndpointSlice>,
}

impl Orphans {
    /// Deletes orphaned EndpointSlices in rounds until `term` is cancelled.
    async fn rounds(&self, rounds: &mut Rounds, context: &Context, term: &CancellationToken) {
        while let Some(wake) = rounds.next(term).await {
            if wake == Wake::Changed {
                rounds.settle().await;
            }
            let outcome = self.delete_orphans(context).await;
            rounds.finished(outcome);
        }
    }

    /// Deletes the EndpointSlices of nodes and resources that are gone.
    async fn delete_orphans(&self, context: &Context) -> Outcome {
        let resources: BTreeSet<String> = self
            .swhs
            .state()
            .iter()
            .map(|s| {
                format!(
                    "{}/{}",
                    s.metadata.namespace.as_deref().unwrap_or_default(),
                    s.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        let nodes: BTreeSet<String> = self
            .nodes
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let slices: Vec<EndpointSlice> =
            self.slices.state().iter().map(|s| (**s).clone()).collect();
        let mut outcome = Outcome::Done;
        for (namespace, name) in orphaned_slices(&slices, &resources, &nodes) {
            let api: Api<EndpointSlice> = Api::namespaced(context.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    context.metrics.slice_write("delete", true);
                    tracing::info!(%namespace, slice = %name, "deleted the EndpointSlice of a node or resource that is gone");
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(err) => {
                    context.metrics.slice_write("delete", false);
                    context
                        .metrics
                        .reconcile_error("controller", "endpointslice");
                    outcome = Outcome::Failed;
                    tracing::warn!(%namespace, slice = %name, error = %err, "deleting an orphaned EndpointSlice failed; retrying with backoff");
                }
            }
        }
        outcome
    }
}

impl Context {
    async fn reconcile(&self, swh: &ServiceWithHealthchecks) -> Result<(), ReconcileError> {
        let namespace = swh.metadata.namespace.clone().unwrap_or_default();
        let name = swh.metadata.name.clone().unwrap_or_default();
        let mut failed = None;
        let existing = self.services.get(&ObjectRef::new(&name).within(&namespace));
        let decision = child_service(swh, existing.as_deref());
        let mut stored = existing.as_deref().cloned();
        if let Ok(service) = &decision {
            let api: Api<Service> = Api::namespaced(self.client.clone(), &namespace);
            match apply(&api, MANAGER, service, existing.as_deref()).await {
                Ok(Applied::Written(written)) => {
                    if existing.is_none() {
                        self.events
                            .normal(
                                &swh.object_ref(&()),
                                "ChildServiceCreated",
                                "Create",
                                format!("created Service {name}"),
                            )
                            .await;
                    }
                    stored = Some(written);
                }
                Ok(Applied::Unchanged(_)) => {}
                Err(err) => {
                    self.metrics.reconcile_error("controller", "service");
                    tracing::warn!(error = %err, "writing the child Service failed; retrying with backoff");
                    failed = Some(ReconcileError::Service(err));
                }
            }
        }
        let child = child_service_condition(&decision);
        let previous = self
            .last_child_condition
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(ObjectRef::from_obj(swh), child.reason);
        if previous != Some(child.reason) && child.status == "False" {
            self.events
                .warning(
                    &swh.object_ref(&()),
                    child.reason,
                    "Reconcile",
                    child.message.clone(),
                )
                .await;
        }
        // The status is written even when the Service was not: it reports why.
        self.write_status(swh, &child, stored.as_ref()).await?;
        failed.map_or(Ok(()), Err)
    }

    async fn write_status(
        &self,
        swh: &ServiceWithHealthchecks,
        child: &ConditionState,
        service: Option<&Service>,
    ) -> Result<(), ReconcileError> {
        let namespace = swh.metadata.namespace.clone().unwrap_or_default();
        let name = swh.metadata.name.clone().unwrap_or_default();
        let api: Api<ServiceWithHealthchecks> = Api::namespaced(self.client.clone(), &namespace);
        let live: BTreeSet<String> = self
            .pods
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let stale = stale_entries(swh, &live);
        if !stale.is_empty() {
            let rv = swh.metadata.resource_version.clone().unwrap_or_default();
            let mut ops =
                vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv})];
            for index in stale.iter().rev() {
                ops.push(
                    json!({"op": "remove", "path": format!("/status/endpointStatuses/{index}")}),
                );
            }
            let patch =
                Patch::Json::<()>(serde_json::from_value(json!(ops)).expect("a valid JSON patch"));
            if let Err(err) = api
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
            {
                tracing::debug!(error = %err, "pruning endpoint statuses raced a write; retried on the next event");
            }
            return Ok(());
        }
        let mut status = desired_status(swh, child, service);
        let current =
            serde_json::to_value(swh.status.clone().unwrap_or_default()).unwrap_or_default();
        status["conditions"] = fairlead_kit::conditions::merge(
            status["conditions"].as_array().cloned().unwrap_or_default(),
            current.get("conditions"),
            &fairlead_kit::conditions::now(),
        );
        if status_unchanged(&status, &current) {
            return Ok(());
        }
        let body = json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
            "metadata": {"name": name, "namespace": namespace}, "status": status});
        match api
            .patch_status(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => {
                self.metrics.status_write("controller", true);
                Ok(())
            }
            Err(err) => {
                self.metrics.status_write("controller", false);
                self.metrics.reconcile_error("controller", "status");
                tracing::warn!(error = %err, "writing the status failed; retrying with backoff");
                Err(ReconcileError::Status(err))
            }
        }
    }
}
