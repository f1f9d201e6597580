//! The controller (`fairlead health controller`, a Deployment, leader-elected on a Lease):
//! keeps each resource's child Service, aggregates the agents' endpoint statuses into the
//! `Ready` condition and counts, prunes the entries of pods that are gone, and deletes the
//! EndpointSlices of nodes and resources that are gone, on events and on a slow resync.
//!
//! Decisions are in `fairlead_health_plan::controller`; this is the I/O around them.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
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
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
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
/// The controller's rounds: everything is reconciled again every five minutes, and half a
/// second after a failed write (doubling per failed round).
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

fn trim_node(node: &mut Node) {
    names_only(node);
    node.spec = None;
    node.status = None;
}

struct Controller {
    client: kube::Client,
    metrics: HealthMetrics,
    events: Events,
    swhs: Store<ServiceWithHealthchecks>,
    services: Store<Service>,
    nodes: Store<Node>,
    pods: Store<Pod>,
    slices: Store<EndpointSlice>,
    last_child_condition: HashMap<String, &'static str>,
    /// A write failed in this round: retry with backoff rather than wait for the resync.
    failed: bool,
}

/// Runs the controller until `stop`; `ready` is called once its watches have listed.
pub async fn run(
    client: kube::Client,
    lease: LeaseConfig,
    metrics: HealthMetrics,
    stop: CancellationToken,
    ready: impl FnOnce(),
) {
    let notify = Arc::new(Notify::new());
    let managed = format!(
        "endpointslice.kubernetes.io/managed-by={}",
        fairlead_health_api::MANAGED_BY
    );
    let mut controller = Controller {
        events: Events::new(client.clone(), MANAGER, Some(lease.identity.clone())),
        swhs: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            without_managed_fields,
            notify.clone(),
            stop.clone(),
        ),
        // The apply helper compares with the Services' managedFields: they are kept.
        services: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            keep,
            notify.clone(),
            stop.clone(),
        ),
        nodes: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_node,
            notify.clone(),
            stop.clone(),
        ),
        pods: cache(
            Api::all(client.clone()),
            watcher::Config::default(),
            trim_pod,
            notify.clone(),
            stop.clone(),
        ),
        slices: cache(
            Api::all(client.clone()),
            watcher::Config::default().labels(&managed),
            without_managed_fields,
            notify.clone(),
            stop.clone(),
        ),
        client: client.clone(),
        metrics,
        last_child_condition: HashMap::new(),
        failed: false,
    };
    let listed = async {
        controller.swhs.wait_until_ready().await.is_ok()
            && controller.services.wait_until_ready().await.is_ok()
            && controller.nodes.wait_until_ready().await.is_ok()
            && controller.pods.wait_until_ready().await.is_ok()
            && controller.slices.wait_until_ready().await.is_ok()
    };
    tokio::select! {
        () = stop.cancelled() => return,
        ok = listed => if !ok { return },
    }
    ready();
    let (mut leadership, _lease_task) = lease::spawn(client, lease, stop.clone());
    let mut rounds = Rounds::new(PACING, notify);
    loop {
        tokio::select! {
            () = leadership.leading(), if !leadership.is_leader() => {}
            wake = rounds.next(&stop) => match wake {
                None => return,
                Some(Wake::Changed) => rounds.settle().await,
                Some(Wake::Resync) => {}
            },
        }
        if leadership.is_leader() {
            controller.reconcile_all().await;
            rounds.finished(if std::mem::take(&mut controller.failed) {
                Outcome::Failed
            } else {
                Outcome::Done
            });
        }
    }
}

impl Controller {
    async fn reconcile_all(&mut self) {
        let swhs = self.swhs.state();
        for swh in &swhs {
            let started = Instant::now();
            let span = tracing::info_span!(
                "reconcile",
                swh = %format!("{}/{}", swh.metadata.namespace.as_deref().unwrap_or_default(), swh.metadata.name.as_deref().unwrap_or_default())
            );
            tracing::Instrument::instrument(self.reconcile(swh), span).await;
            self.metrics.observe_sync("controller", started.elapsed());
        }
        let resources: BTreeSet<String> = swhs
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
        for (namespace, name) in orphaned_slices(&slices, &resources, &nodes) {
            let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    self.metrics.slice_write("delete", true);
                    tracing::info!(%namespace, slice = %name, "deleted the EndpointSlice of a node or resource that is gone");
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(err) => {
                    self.metrics.slice_write("delete", false);
                    self.metrics.reconcile_error("controller", "endpointslice");
                    self.failed = true;
                    tracing::warn!(%namespace, slice = %name, error = %err, "deleting an orphaned EndpointSlice failed; retrying with backoff");
                }
            }
        }
    }

    async fn reconcile(&mut self, swh: &ServiceWithHealthchecks) {
        let namespace = swh.metadata.namespace.clone().unwrap_or_default();
        let name = swh.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
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
                    self.failed = true;
                    tracing::warn!(error = %err, "writing the child Service failed; retrying with backoff");
                }
            }
        }
        let child = child_service_condition(&decision);
        if self.last_child_condition.insert(key.clone(), child.reason) != Some(child.reason)
            && child.status == "False"
        {
            self.events
                .warning(
                    &swh.object_ref(&()),
                    child.reason,
                    "Reconcile",
                    child.message.clone(),
                )
                .await;
        }
        self.write_status(swh, &child, stored.as_ref()).await;
    }

    async fn write_status(
        &mut self,
        swh: &ServiceWithHealthchecks,
        child: &ConditionState,
        service: Option<&Service>,
    ) {
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
            return;
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
            return;
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
            Ok(_) => self.metrics.status_write("controller", true),
            Err(err) => {
                self.metrics.status_write("controller", false);
                self.metrics.reconcile_error("controller", "status");
                self.failed = true;
                tracing::warn!(error = %err, "writing the status failed; retrying with backoff");
            }
        }
    }
}
