//! The ALB's index: watches of every kind the edge reads (the kinds table,
//! [`fairlead_edge_model::kinds`]), each at the version the API server serves (found by
//! discovery, so `ListenerSet` is read from `gateway.networking.k8s.io/v1` or as
//! `XListenerSet` from `gateway.networking.x-k8s.io`, and `TCPRoute`/`UDPRoute` at whichever
//! version is served). A kind that is not served is a warning, looked for again later, never a
//! failure.
//!
//! The index **publishes**: once a change has settled (a change alone at once, a burst at
//! most a window after its first change: [`settle`]) it builds one
//! immutable [`Snapshot`] (the translator's [`Input`]) and sends it on a watch channel, so
//! every consumer — the translation loop, the status writer, and next the graph and the
//! gateway controller — reads the same world without watching anything itself
//! ([`Index::subscribe`]). A change that leaves the input as it was — the control plane's
//! own status writes — publishes no snapshot (the translation would run for nothing) and
//! wakes the readers of statuses instead ([`Index::statuses`]). The wiring starts one index per process ([`Index::start`]) and
//! hands it to its consumers.
//!
//! Each object is read into the translator's types when its watch event arrives, not on
//! every snapshot, and every snapshot shares it until the next event for it (so a translator
//! that remembers sees the same object and reuses its work; an event that leaves an object as
//! it was yields an equal object, which it recognizes by value). Beside it the index keeps,
//! for the kinds whose status the control plane writes, the object's metadata and status as
//! JSON (what the status writer compares with); specs are not kept twice. An object the
//! input cannot read is logged, counted in the snapshot, and skipped.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairlead_edge_model::ObjectKey;
use fairlead_edge_model::input::{Input, Object};
use fairlead_edge_model::kinds;
use fairlead_kit::watch::{Projection, project};
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiResource, Discovery};
use kube::runtime::watcher;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// The prefixes of the annotations the edge reads (fairlead's own, and the ALB's route
/// annotations); others are dropped from the index.
const READ_ANNOTATIONS: &[&str] = &["fairlead.io/", fairlead_edge_model::annotations::PREFIX];

/// How often kinds that are not served yet are looked for again.
const REDISCOVER: Duration = Duration::from_secs(15);

pub mod settle;

pub use settle::{QUIET, SETTLE};

/// What the index publishes: the world as the translator reads it, at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every object read.
    pub input: Input,
    /// How many objects could not be read (logged and skipped).
    pub skipped: usize,
    /// Whether discovery has run and every kind watched has had its first list: before,
    /// the input may lack objects that exist.
    pub listed: bool,
}

/// One watched kind.
#[derive(Clone)]
pub struct Watched {
    /// The resource as served.
    pub resource: ApiResource,
    objects: Projection<Stored>,
}

/// One object as the index keeps it.
#[derive(Debug, PartialEq)]
struct Stored {
    /// The object read into the translator's types, or why it could not be.
    object: Result<Option<Object>, String>,
    /// apiVersion, kind, metadata and status, for kinds whose status is written: JSON text,
    /// read when the status writer asks, once per round of writes (a `serde_json::Value`
    /// tree of a route's status takes several times its text, and is held only while read).
    status: Option<Arc<str>>,
}

impl Stored {
    /// Reads `value` (a whole object, with its `kind`). The translator's object is read
    /// without its `resourceVersion`, which every write changes (the control plane's own
    /// status writes among them): an object whose status alone changed reads as the object
    /// it was. The status part keeps it (the status writer's precondition).
    fn new(kind: &str, mut value: serde_json::Value) -> Self {
        let metadata = |value: &mut serde_json::Value| {
            value
                .get_mut("metadata")
                .and_then(serde_json::Value::as_object_mut)
                .map(std::mem::take)
        };
        let mut meta = metadata(&mut value).unwrap_or_default();
        let version = meta.remove("resourceVersion");
        if let Some(map) = value.as_object_mut() {
            map.insert("metadata".into(), meta.into());
        }
        let object = Object::read(&value).map_err(|e| e.to_string());
        let status = kinds::status_written(kind).then(|| {
            if let (Some(version), Some(mut meta)) = (version, metadata(&mut value)) {
                meta.insert("resourceVersion".into(), version);
                value["metadata"] = meta.into();
            }
            if let Some(map) = value.as_object_mut() {
                map.remove("spec");
            }
            Arc::from(value.to_string())
        });
        Self { object, status }
    }

    /// The status part, read.
    fn status(&self) -> Option<Arc<serde_json::Value>> {
        let text = self.status.as_deref()?;
        serde_json::from_str(text).ok().map(Arc::new)
    }
}

/// The watched objects, and the channel their snapshots are published on.
pub struct Index {
    watched: Mutex<Vec<Watched>>,
    /// Whether discovery has completed a pass.
    discovered: std::sync::atomic::AtomicBool,
    changed: Arc<Notify>,
    published: watch::Sender<Arc<Snapshot>>,
    /// Bumped when a settled change left the input as it was: statuses changed (or nothing
    /// the translator reads did).
    statuses: watch::Sender<u64>,
}

impl Index {
    /// Starts discovery, the watches and the publisher (until `stop`).
    pub fn start(client: kube::Client, stop: CancellationToken) -> Arc<Self> {
        let index = Arc::new(Self {
            watched: Mutex::new(Vec::new()),
            discovered: std::sync::atomic::AtomicBool::new(false),
            changed: Arc::new(Notify::new()),
            published: watch::Sender::new(Arc::new(Snapshot::default())),
            statuses: watch::Sender::new(0),
        });
        tokio::spawn(discover(index.clone(), client, stop.clone()));
        tokio::spawn(publish(index.clone(), stop));
        index
    }

    /// The published snapshots: the latest now, and each new one as it is published. A
    /// change that leaves the input as it was (a status written, an update of a field the
    /// translator does not read) publishes none: it wakes [`Self::statuses`] instead.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.published.subscribe()
    }

    /// Changes that left the input as it was (for readers of statuses, [`Self::object`]:
    /// the graph), counted.
    pub fn statuses(&self) -> watch::Receiver<u64> {
        self.statuses.subscribe()
    }

    fn watched(&self) -> Vec<Watched> {
        self.watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The served resource of a kind, when it is watched.
    pub fn resource(&self, kind: &str) -> Option<ApiResource> {
        self.watched()
            .into_iter()
            .find(|w| w.resource.kind == kind)
            .map(|w| w.resource)
    }

    /// The metadata and status of an object of a kind whose status is written (as JSON).
    pub fn object(&self, kind: &str, key: &ObjectKey) -> Option<Arc<serde_json::Value>> {
        self.watched()
            .into_iter()
            .find(|w| w.resource.kind == kind)
            .and_then(|w| w.objects.get(key.namespace(), key.name()))
            .and_then(|stored| stored.status())
    }

    /// The metadata and status of every object of a kind whose status is written.
    pub fn objects(&self, kind: &str) -> Vec<Arc<serde_json::Value>> {
        self.object_texts(kind)
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok().map(Arc::new))
            .collect()
    }

    /// What [`Self::objects`] reads, as the index keeps it: JSON text, shared with the
    /// index for as long as the object does not change (so a reader can keep what it read
    /// of it by the text's address).
    pub fn object_texts(&self, kind: &str) -> Vec<Arc<str>> {
        self.watched()
            .into_iter()
            .find(|w| w.resource.kind == kind)
            .map(|w| w.objects.state())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|stored| stored.status.clone())
            .collect()
    }

    /// Kinds watched.
    pub fn kinds(&self) -> BTreeSet<String> {
        self.watched()
            .into_iter()
            .map(|w| w.resource.kind)
            .collect()
    }

    /// The world now.
    fn snapshot(&self) -> Snapshot {
        let watched = self.watched();
        let listed = self.discovered.load(std::sync::atomic::Ordering::Acquire)
            && watched.iter().all(|w| w.objects.is_ready());
        let mut input = Input::default();
        let mut skipped = 0;
        for w in watched {
            for stored in w.objects.state() {
                match &stored.object {
                    Ok(Some(object)) => input.push(object.clone()),
                    Ok(None) => {}
                    Err(e) => {
                        skipped += 1;
                        tracing::warn!(error = %e, "skipping an object the translator cannot read");
                    }
                }
            }
        }
        Snapshot {
            input,
            skipped,
            listed,
        }
    }
}

/// The resource of `kind` (a row of the kinds table) at `version`: what discovery finds when
/// that version is served, for a client writing objects of a kind the index reads.
pub fn api_resource(kind: &str, version: &str) -> Option<ApiResource> {
    let row = kinds::KINDS.iter().find(|k| k.kind == kind)?;
    let api_version = if row.group.is_empty() {
        version.to_owned()
    } else {
        format!("{}/{version}", row.group)
    };
    Some(ApiResource {
        group: row.group.to_owned(),
        version: version.to_owned(),
        api_version,
        kind: row.kind.to_owned(),
        plural: row.plural.to_owned(),
    })
}

/// Publishes a snapshot after each settled change or burst of changes ([`settle`]), unless
/// the input is the one last published (statuses alone changed): then the translation has
/// nothing to do, and only the readers of statuses are woken.
async fn publish(index: Arc<Index>, stop: CancellationToken) {
    let mut pace = settle::Pace::default();
    while pace.settled(&index.changed, &stop).await {
        let snapshot = index.snapshot();
        let unchanged = {
            let last = index.published.borrow();
            last.listed == snapshot.listed
                && last.skipped == snapshot.skipped
                && last.input.same_objects(&snapshot.input)
        };
        if unchanged {
            index.statuses.send_modify(|n| *n += 1);
        } else {
            index.published.send_replace(Arc::new(snapshot));
        }
    }
}

async fn discover(index: Arc<Index>, client: kube::Client, stop: CancellationToken) {
    let mut started: BTreeSet<&'static str> = BTreeSet::new();
    let mut warned: BTreeSet<&'static str> = BTreeSet::new();
    loop {
        let groups: Vec<&str> = kinds::KINDS.iter().map(|w| w.group).collect();
        match Discovery::new(client.clone()).filter(&groups).run().await {
            Ok(discovery) => {
                for wanted in kinds::KINDS {
                    if started.contains(wanted.kind) {
                        continue;
                    }
                    let found = discovery
                        .get(wanted.group)
                        .and_then(|g| g.recommended_kind(wanted.kind));
                    let Some((resource, _)) = found else {
                        if warned.insert(wanted.kind) {
                            tracing::warn!(
                                group = wanted.group,
                                kind = wanted.kind,
                                "kind not served; looking again every {}s",
                                REDISCOVER.as_secs()
                            );
                        }
                        continue;
                    };
                    tracing::info!(kind = wanted.kind, version = %resource.version, "watching");
                    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
                    let mut config = watcher::Config::default();
                    if let Some(fields) = wanted.fields {
                        config = config.fields(fields);
                    }
                    let kind = wanted.kind;
                    let objects = project(
                        api,
                        config,
                        move |o: &DynamicObject| {
                            // A ConfigMap matters only as a CA bundle or as WAF rules: kept
                            // as its name, `ca.crt` and the keys holding SecLang directives,
                            // so the cluster's other ConfigMaps (and their churn) neither
                            // take memory nor wake the translation.
                            if kind == "ConfigMap" {
                                let mut data = serde_json::Map::new();
                                for (key, value) in o.data["data"].as_object().into_iter().flatten()
                                {
                                    let text = value.as_str().unwrap_or_default();
                                    if key == "ca.crt"
                                        || fairlead_edge_model::annotations::waf::holds_directives(
                                            text,
                                        )
                                    {
                                        data.insert(key.clone(), value.clone());
                                    }
                                }
                                return Stored::new(
                                    kind,
                                    serde_json::json!({
                                        "apiVersion": "v1",
                                        "kind": "ConfigMap",
                                        "metadata": {"name": o.metadata.name, "namespace": o.metadata.namespace},
                                        "data": data,
                                    }),
                                );
                            }
                            let mut value = serde_json::to_value(o).unwrap_or_default();
                            if let Some(map) = value.as_object_mut() {
                                map.insert("kind".into(), kind.into());
                                if let Some(meta) =
                                    map.get_mut("metadata").and_then(|m| m.as_object_mut())
                                {
                                    // Neither the translator nor the status writer
                                    // reads these (`kubectl apply` keeps a copy of the
                                    // whole object in an annotation), but for fairlead's
                                    // own annotations (`fairlead.io/listen-address`) and
                                    // the ALB's route annotations.
                                    meta.remove("managedFields");
                                    if let Some(annotations) =
                                        meta.get_mut("annotations").and_then(|a| a.as_object_mut())
                                    {
                                        annotations.retain(|k, _| {
                                            READ_ANNOTATIONS.iter().any(|p| k.starts_with(p))
                                        });
                                        if annotations.is_empty() {
                                            meta.remove("annotations");
                                        }
                                    }
                                }
                            }
                            Stored::new(kind, value)
                        },
                        index.changed.clone(),
                        stop.clone(),
                    );
                    index
                        .watched
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(Watched { resource, objects });
                    started.insert(wanted.kind);
                }
                if !index
                    .discovered
                    .swap(true, std::sync::atomic::Ordering::AcqRel)
                {
                    // Which kinds are served is known now: a snapshot may count as listed.
                    index.changed.notify_one();
                }
            }
            Err(e) => tracing::warn!(error = %e, "API discovery failed; retrying"),
        }
        if started.len() == kinds::KINDS.len() {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(REDISCOVER) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_read_once_and_only_its_status_part_is_kept_as_json() {
        let route = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"]},
            "status": {"parents": []},
        });
        let stored = Stored::new("HTTPRoute", route);
        let Ok(Some(Object::HttpRoute(read))) = &stored.object else {
            panic!("not read: {:?}", stored.object);
        };
        assert_eq!(read.spec.hostnames, ["a.example.com"]);
        let status = stored.status().expect("kept for the status writer");
        assert_eq!(status["metadata"]["resourceVersion"], "7");
        assert_eq!(
            read.metadata.resource_version, None,
            "every write changes it: the translator's object is read without it"
        );
        let again = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "8"},
            "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"]},
            "status": {"parents": [{"parentRef": {"name": "gw"}}]},
        });
        let again = Stored::new("HTTPRoute", again);
        assert_eq!(
            again.object, stored.object,
            "a status write reads as the same route"
        );
        assert_ne!(again.status, stored.status);
        assert_eq!(status["status"]["parents"], serde_json::json!([]));
        assert!(status.get("spec").is_none(), "the spec is not kept twice");
    }

    #[test]
    fn a_malformed_object_is_kept_as_the_reason_it_cannot_be_read() {
        let route = serde_json::json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "broken", "namespace": "default"},
            "spec": {"rules": "not a list"},
        });
        let stored = Stored::new("HTTPRoute", route);
        let Err(reason) = &stored.object else {
            panic!("read: {:?}", stored.object);
        };
        assert!(reason.contains("HTTPRoute broken"), "{reason}");
        // Its status can still be written.
        assert!(stored.status().is_some());
    }

    #[test]
    fn kinds_whose_status_is_not_written_keep_no_json() {
        let service = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s", "namespace": "default"},
            "spec": {"ports": [{"port": 80}]},
        });
        let stored = Stored::new("Service", service);
        assert!(matches!(stored.object, Ok(Some(Object::Service(_)))));
        assert!(stored.status.is_none());
    }
}
