//! Kubernetes Events for what a component does (`events.k8s.io/v1`). Repeats of one Event
//! (same type, reason, action, object and note) within six minutes become a series on it,
//! as the real recorders do; an Event with another note is an Event of its own, so a changed
//! reason is never folded into the count of an earlier one (kube-runtime's recorder keys
//! series without the note, which lost them). As client-go's aggregator does, an object
//! gets at most ten distinct notes of one reason per window; more are one Event "(combined
//! from similar events)" carrying the latest note and their count, so a thousand failing
//! pods of one resource neither flood the API server nor the recorder's memory. Publishing
//! is best effort: a failure is logged, never returned into the component's work.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use tokio::sync::Mutex;

/// How long an Event takes repeats into its series.
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Distinct notes of one reason on one object that get Events of their own per window.
const DISTINCT_NOTES: usize = 10;

/// The prefix of the Event that combines the notes beyond [`DISTINCT_NOTES`] (client-go's).
const COMBINED: &str = "(combined from similar events): ";

/// The object an Event regards: kind, namespace, name, uid.
type Regarding = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Events of one reason on one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Family {
    type_: &'static str,
    reason: String,
    action: String,
    regarding: Regarding,
}

/// What makes two Events the same one: their family and note (`None`: the combined one).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    family: Family,
    note: Option<String>,
}

/// The Event published for a key, and how often it happened.
struct Published {
    namespace: String,
    name: String,
    count: i32,
    last: Instant,
}

/// An Events recorder for one component.
#[derive(Clone)]
pub struct Events {
    client: kube::Client,
    controller: String,
    instance: String,
    published: Arc<Mutex<HashMap<Key, Published>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// A recorder reporting as `controller` (e.g. `fairlead-health-controller`) from
    /// `instance` (the pod or node name).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            client,
            controller: controller.to_owned(),
            instance: instance.unwrap_or_else(|| controller.to_owned()),
            published: Arc::default(),
        }
    }

    async fn publish(
        &self,
        object: &ObjectReference,
        type_: &'static str,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if let Err(err) = self.try_publish(object, type_, reason, action, note).await {
            tracing::warn!(reason, error = %err, object = ?object.name, "publishing an event");
        }
    }

    async fn try_publish(
        &self,
        object: &ObjectReference,
        type_: &'static str,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let family = Family {
            type_,
            reason: reason.to_owned(),
            action: action.to_owned(),
            regarding: (
                object.kind.clone(),
                object.namespace.clone(),
                object.name.clone(),
                object.uid.clone(),
            ),
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        // Held across the write, so two repeats never race to create one Event twice.
        let mut published = self.published.lock().await;
        published.retain(|_, p| p.last.elapsed() < SERIES_WINDOW);
        let mut key = Key {
            family,
            note: Some(note.clone()),
        };
        let distinct = published
            .keys()
            .filter(|k| k.family == key.family && k.note.is_some())
            .count();
        if !published.contains_key(&key) && distinct >= DISTINCT_NOTES {
            key.note = None;
        }
        let shown = match &key.note {
            Some(note) => note.clone(),
            None => format!("{COMBINED}{note}"),
        };
        if let Some(repeat) = published.get_mut(&key) {
            let series = EventSeries {
                count: repeat.count + 1,
                last_observed_time: MicroTime(now),
            };
            let patch = serde_json::json!({"series": series, "note": shown});
            Api::<Event>::namespaced(self.client.clone(), &repeat.namespace)
                .patch(&repeat.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            repeat.count += 1;
            repeat.last = Instant::now();
            return Ok(());
        }
        let namespace = object
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = format!(
            "{}.{:x}",
            object.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                ..Default::default()
            },
            action: Some(key.family.action.clone()),
            reason: Some(key.family.reason.clone()),
            note: Some(shown),
            type_: Some(type_.to_owned()),
            event_time: Some(MicroTime(now)),
            regarding: Some(object.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &event)
            .await?;
        published.insert(
            key,
            Published {
                namespace,
                name,
                count: 1,
                last: Instant::now(),
            },
        );
        Ok(())
    }

    /// A `Normal` event: something the component did.
    pub async fn normal(
        &self,
        object: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(object, "Normal", reason, action, note.into())
            .await;
    }

    /// A `Warning` event: something a user should look at.
    pub async fn warning(
        &self,
        object: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(object, "Warning", reason, action, note.into())
            .await;
    }
}
