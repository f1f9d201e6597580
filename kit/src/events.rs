//! Kubernetes Events for what a component does (`events.k8s.io/v1`, through kube-runtime's
//! recorder, which also aggregates repeats into series). Publishing is best effort: a failure
//! is logged and counted, never returned into the component's work.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// An Events recorder for one component.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// A recorder reporting as `controller` (e.g. `fairlead-health-controller`) from
    /// `instance` (the pod or node name).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: controller.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    async fn publish(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(err) = self.recorder.publish(&event, object).await {
            tracing::warn!(reason, error = %err, object = ?object.name, "publishing an event");
        }
    }

    /// A `Normal` event: something the component did.
    pub async fn normal(
        &self,
        object: &ObjectReference,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        self.publish(object, EventType::Normal, reason, action, note.into())
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
        self.publish(object, EventType::Warning, reason, action, note.into())
            .await;
    }
}
