//! What the graph reads besides the index: watches of ServiceWithHealthchecks, of the ALB
//! instances' statuses and of the proxy workloads (Deployments and DaemonSets labelled with
//! their Gateway), each kept as the JSON the graph's reader takes; and the statuses of the
//! Gateway API objects, which the index already keeps. A kind the cluster does not serve
//! (no health module, say) is retried with backoff by its watch and simply absent here.

use std::collections::HashMap;
use std::sync::Arc;

use fairlead_edge_index::Index;
use fairlead_edge_model::input::Input;
use fairlead_edge_model::kinds;
use fairlead_graph::NodeId;
use fairlead_graph::world::{GATEWAY_LABEL, World, read, read_status, status_of};
use fairlead_kit::watch::{Projection, project};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The watches.
#[derive(Clone)]
pub struct Sources {
    watched: Vec<Projection<serde_json::Value>>,
    /// Woken after each change of a watched object.
    pub changed: Arc<Notify>,
}

/// `(group, version, kind, plural, label selector)` of what is watched.
const WATCHED: &[(&str, &str, &str, &str, Option<&str>)] = &[
    (
        "network.deckhouse.io",
        "v1alpha1",
        "ServiceWithHealthchecks",
        "servicewithhealthchecks",
        None,
    ),
    (
        "network.deckhouse.io",
        "v1alpha1",
        "ClusterALBInstance",
        "clusteralbinstances",
        None,
    ),
    (
        "network.deckhouse.io",
        "v1alpha1",
        "ALBInstance",
        "albinstances",
        None,
    ),
    (
        "apps",
        "v1",
        "Deployment",
        "deployments",
        Some(GATEWAY_LABEL),
    ),
    ("apps", "v1", "DaemonSet", "daemonsets", Some(GATEWAY_LABEL)),
];

impl Sources {
    /// Starts the watches (until `stop`).
    pub fn start(client: &kube::Client, stop: &CancellationToken) -> Self {
        let changed = Arc::new(Notify::new());
        let watched = WATCHED
            .iter()
            .map(|(group, version, kind, plural, labels)| {
                let resource = ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(group, version, kind),
                    plural,
                );
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                let mut config = watcher::Config::default();
                if let Some(labels) = labels {
                    config = config.labels(labels);
                }
                let kind = (*kind).to_owned();
                project(
                    api,
                    config,
                    move |o: &DynamicObject| {
                        let mut value = serde_json::to_value(o).unwrap_or_default();
                        value["kind"] = kind.clone().into();
                        if let Some(meta) = value["metadata"].as_object_mut() {
                            meta.remove("managedFields");
                            meta.remove("annotations");
                        }
                        value
                    },
                    changed.clone(),
                    stop.clone(),
                )
            })
            .collect();
        Self { watched, changed }
    }

    /// The world now, with the statuses `index` keeps (each read once while it does not
    /// change: `statuses` keeps what was read).
    pub fn world(&self, index: &Index, statuses: &mut Statuses) -> World {
        let mut world = World::default();
        // The reader sorts objects into an input too; the index has those already.
        let mut scratch = Input::default();
        for projection in &self.watched {
            for object in projection.state() {
                if read_status(&mut world, &object) {
                    continue;
                }
                if let Err(e) = read(&mut scratch, &mut world, (*object).clone()) {
                    tracing::warn!(error = %e, "skipping an object the graph cannot read");
                }
            }
        }
        let mut next = HashMap::new();
        for kind in kinds::KINDS
            .iter()
            .filter(|k| kinds::status_written(k.kind))
        {
            for text in index.object_texts(kind.kind) {
                let at = text.as_ptr() as usize;
                let read = statuses.0.remove(&at).unwrap_or_else(|| {
                    let status = serde_json::from_str(&text)
                        .ok()
                        .and_then(|object| status_of(kind.kind, &object))
                        .map(|(id, status)| (id, Arc::new(status)));
                    (text, status)
                });
                if let Some((id, status)) = &read.1 {
                    world.statuses.insert(id.clone(), status.clone());
                }
                next.insert(at, read);
            }
        }
        statuses.0 = next;
        world
    }
}

/// The statuses read from the index's texts, by the text's address (each entry keeps its
/// text, so the address is not reused while it is here).
#[derive(Default)]
pub struct Statuses(HashMap<usize, StatusRead>);

/// A status text, and what was read of it.
type StatusRead = (Arc<str>, Option<(NodeId, Arc<serde_json::Value>)>);
