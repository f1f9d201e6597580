//! What the gateway controller's per-instance reconciles (`reconcile`, `realize`) and its
//! cluster-wide jobs (`jobs`) share: the configuration, the instance caches, the CA and
//! whether the module is going, how each instance is counted and failing, and the errors a
//! reconcile retries.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairlead_edge_api::{ALBInstance, ClusterALBInstance};
use fairlead_key::ObjectKey;
use fairlead_kit::pki::Ca;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;

use crate::instances::Instance;

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
    /// Gateways of the class that no instance names get proxies of their own (the
    /// `provision` module); off, they are accepted and translated but nothing runs them.
    pub provision_gateways: bool,
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
    /// An object the proxies need has a name another Gateway's object, or a user's, holds
    /// (what holds it, and why it is not written over).
    #[error("{0}")]
    Taken(String),
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
    pub(crate) named: Mutex<HashMap<(&'static str, ObjectKey), ObjectKey>>,
    /// Failures in a row, by instance.
    pub(crate) failures: Mutex<HashMap<ObjectKey, u32>>,
}

/// An instance as read, with its metadata (finalizers, deletion).
pub(crate) struct Read {
    pub(crate) instance: Instance,
    pub(crate) meta: ObjectMeta,
}

impl Context {
    /// A term's context: nothing counted yet.
    pub(crate) fn new(
        client: kube::Client,
        config: Config,
        metrics: crate::metrics::ControllerMetrics,
        (clusters, namespaced): (Store<ClusterALBInstance>, Store<ALBInstance>),
        ca: watch::Receiver<Option<Arc<Ca>>>,
        cleaning: watch::Receiver<Option<bool>>,
    ) -> Self {
        Self {
            client,
            config,
            metrics,
            clusters,
            namespaced,
            ca,
            cleaning,
            counted: Mutex::default(),
            named: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    /// Every instance of both kinds, live or being deleted.
    pub(crate) fn instances(&self) -> Vec<Read> {
        let clusters = self.clusters.state().into_iter().map(|i| Read {
            instance: {
                let mut read =
                    Instance::read("ClusterALBInstance", &i.metadata, i.spec.instance.clone());
                read.default = i.spec.default_deckhouse_gateway == Some(true);
                read
            },
            meta: i.metadata.clone(),
        });
        let namespaced = self.namespaced.state().into_iter().map(|i| Read {
            instance: Instance::read("ALBInstance", &i.metadata, i.spec.instance.clone()),
            meta: i.metadata.clone(),
        });
        clusters.chain(namespaced).collect()
    }

    /// Whether the instance caches hold `key`'s version `meta` (the one being reconciled).
    pub(crate) fn holds(&self, kind: &str, key: &ObjectKey, meta: &ObjectMeta) -> bool {
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

/// The earliest time a certificate the controller keeps is due for renewal.
#[derive(Clone, Copy, Debug, Default)]
pub struct Due(Option<std::time::SystemTime>);

impl Due {
    /// Adds a certificate due `at`.
    pub fn add(&mut self, at: Option<std::time::SystemTime>) {
        self.0 = match (self.0, at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// How long from now until then (`None` when nothing is due).
    pub fn after(self) -> Option<Duration> {
        self.0.map(|at| {
            at.duration_since(std::time::SystemTime::now())
                .unwrap_or_default()
        })
    }
}
