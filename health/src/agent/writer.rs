//! The agent's writes: its node's EndpointSlices (server-side apply, nothing sent when already
//! in place; stale ones deleted) and its node's `endpointStatuses` entries (server-side apply
//! on the status list-map keyed by `podName` under a per-node field manager, forced, since a
//! StatefulSet pod keeps its name when it moves to another node).

use std::collections::BTreeMap;

use fairlead_health_api::{EndpointStatus, ServiceWithHealthchecks};
use fairlead_health_plan::Planned;
use fairlead_key::ObjectKey;
use fairlead_kit::apply::{Applied, apply};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use serde_json::json;

use crate::metrics::HealthMetrics;

/// Writes for one node.
pub struct Writer {
    client: kube::Client,
    manager: String,
    metrics: HealthMetrics,
    /// Set by any failed write; the engine takes it to schedule a retry with backoff.
    failed: std::sync::atomic::AtomicBool,
}

fn service_name(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get("kubernetes.io/service-name")
        .map(String::as_str)
}

impl Writer {
    /// A writer whose field manager names the node.
    pub fn new(client: kube::Client, node: &str, metrics: HealthMetrics) -> Self {
        Self {
            client,
            manager: format!("fairlead-health-agent-{node}"),
            metrics,
            failed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether a write failed since the last call (and clears it).
    pub fn take_failed(&self) -> bool {
        self.failed
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }

    fn fail(&self) {
        self.failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every resource this node has slices for.
    pub fn resources_with_slices(&self, slices: &Store<EndpointSlice>) -> Vec<ObjectKey> {
        slices
            .state()
            .iter()
            .filter_map(|s| {
                Some(ObjectKey::new(
                    s.metadata.namespace.as_deref()?,
                    service_name(s)?,
                ))
            })
            .collect()
    }

    fn existing(&self, key: &ObjectKey, slices: &Store<EndpointSlice>) -> Vec<EndpointSlice> {
        let (namespace, name) = (key.namespace(), key.name());
        slices
            .state()
            .iter()
            .filter(|s| {
                s.metadata.namespace.as_deref() == Some(namespace) && service_name(s) == Some(name)
            })
            .map(|s| (**s).clone())
            .collect()
    }

    /// Makes this node's slices of a resource the planned ones.
    pub async fn write_slices(
        &self,
        key: &ObjectKey,
        planned: &Planned,
        slices: &Store<EndpointSlice>,
    ) {
        let namespace = key.namespace();
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        let existing = self.existing(key, slices);
        for (name, slice) in planned {
            let current = existing
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
            match apply(&api, &self.manager, slice, current).await {
                Ok(Applied::Written(_)) => self.metrics.slice_write("apply", true),
                Ok(Applied::Unchanged(_)) => {}
                Err(err) => {
                    self.metrics.slice_write("apply", false);
                    self.metrics.reconcile_error("agent", "endpointslice");
                    self.fail();
                    tracing::warn!(slice = %name, error = %err, "writing an EndpointSlice failed; retrying with backoff");
                }
            }
        }
        for stale in existing.iter().filter(|s| {
            s.metadata
                .name
                .as_ref()
                .is_none_or(|n| !planned.contains_key(n))
        }) {
            self.delete(&api, stale).await;
        }
    }

    async fn delete(&self, api: &Api<EndpointSlice>, slice: &EndpointSlice) {
        let name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => self.metrics.slice_write("delete", true),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(err) => {
                self.metrics.slice_write("delete", false);
                self.metrics.reconcile_error("agent", "endpointslice");
                self.fail();
                tracing::warn!(slice = %name, error = %err, "deleting an EndpointSlice failed; retrying with backoff");
            }
        }
    }

    /// Deletes this node's slices of a resource that is gone.
    pub async fn remove_resource(&self, key: &ObjectKey, slices: &Store<EndpointSlice>) {
        let namespace = key.namespace();
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        for slice in self.existing(key, slices) {
            self.delete(&api, &slice).await;
        }
    }

    /// Writes this node's endpoint statuses when they changed; returns what is now stored.
    /// Times move only on transitions, unless `verbose`.
    pub async fn write_status(
        &self,
        swh: &ServiceWithHealthchecks,
        previous: &BTreeMap<String, EndpointStatus>,
        mut entries: BTreeMap<String, EndpointStatus>,
        verbose: bool,
    ) -> Option<BTreeMap<String, EndpointStatus>> {
        let now = fairlead_kit::conditions::now();
        for (pod, entry) in &mut entries {
            match previous.get(pod) {
                Some(old) if same_result(old, entry) => {
                    entry.last_transition_time = old.last_transition_time.clone();
                    entry.last_probe_time = if verbose {
                        Some(now.clone())
                    } else {
                        old.last_probe_time.clone()
                    };
                }
                _ => {
                    entry.last_transition_time = Some(now.clone());
                    entry.last_probe_time = Some(now.clone());
                }
            }
        }
        if (!verbose || entries.is_empty()) && &entries == previous {
            return None;
        }
        let name = swh.metadata.name.clone().unwrap_or_default();
        let namespace = swh.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ServiceWithHealthchecks> = Api::namespaced(self.client.clone(), &namespace);
        let body = json!({
            "apiVersion": "network.deckhouse.io/v1alpha1",
            "kind": "ServiceWithHealthchecks",
            "metadata": {"name": name, "namespace": namespace},
            "status": {"endpointStatuses": entries.values().collect::<Vec<_>>()},
        });
        match api
            .patch_status(
                &name,
                &PatchParams::apply(&self.manager).force(),
                &Patch::Apply(&body),
            )
            .await
        {
            Ok(_) => {
                self.metrics.status_write("agent", true);
                Some(entries)
            }
            Err(err) => {
                self.metrics.status_write("agent", false);
                self.metrics.reconcile_error("agent", "status");
                self.fail();
                tracing::warn!(swh = %name, error = %err, "writing endpoint statuses failed; retrying with backoff");
                None
            }
        }
    }
}

fn same_result(a: &EndpointStatus, b: &EndpointStatus) -> bool {
    a.ready == b.ready
        && a.probes_successful == b.probes_successful
        && a.failed_probes == b.failed_probes
        && a.failure_reasons == b.failure_reasons
        && a.node_name == b.node_name
}
