//! The kit's Kubernetes parts against the embedded API server: leader election, the apply
//! helper that skips writes already in place, the Events recorder, and CRDs kept at their
//! version.

use std::time::Duration;

use fairlead_apiserver::{ApiServer, Config};
use fairlead_kit::apply::{Applied, apply};
use fairlead_kit::events::Events;
use fairlead_kit::lease::{self, LeaseConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn config(identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_interval: Duration::from_millis(200),
        ..LeaseConfig::new("controller", "default", identity)
    }
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get("controller")
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_and_the_other_takes_over_after_expiry_or_release() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();

    let (mut a, a_task) = lease::spawn(client.clone(), config("a"), CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(5), a.leading())
        .await
        .expect("a leads");
    let stop_b = CancellationToken::new();
    let (mut b, b_task) = lease::spawn(client.clone(), config("b"), stop_b.clone());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(a.is_leader() && !b.is_leader(), "only one leads");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // a crashes without releasing: b waits for the lease to expire.
    a_task.abort();
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(6), b.leading())
        .await
        .expect("b takes over");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "not before expiry"
    );
    assert_eq!(holder(&client).await.as_deref(), Some("b"));

    // b shuts down and releases: c takes over at once.
    stop_b.cancel();
    b_task.await.unwrap();
    assert!(!b.is_leader());
    assert_eq!(holder(&client).await, None, "released");
    let (mut c, _c_task) = lease::spawn(client.clone(), config("c"), CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(2), c.leading())
        .await
        .expect("c leads right after the release");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_loses_the_lease_is_told() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let (mut a, _task) = lease::spawn(client.clone(), config("a"), CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(5), a.leading())
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    leases
        .patch(
            "controller",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "intruder", "renewTime": now, "leaseDurationSeconds": 60}})),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), a.lost())
        .await
        .expect("a stops leading");
}

#[tokio::test]
async fn apply_skips_writes_already_in_place_and_removes_dropped_fields() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let desired = |labels: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "owned", "labels": labels}, "data": {"k": "v"}}))
        .unwrap()
    };
    let first = apply(
        &cms,
        "fairlead-test",
        &desired(json!({"a": "1", "b": "2"})),
        None,
    )
    .await
    .unwrap();
    let Applied::Written(first) = first else {
        panic!("first apply writes")
    };
    let again = apply(
        &cms,
        "fairlead-test",
        &desired(json!({"a": "1", "b": "2"})),
        Some(&first),
    )
    .await
    .unwrap();
    assert!(matches!(again, Applied::Unchanged(_)), "{again:?}");
    let fetched = apply(
        &cms,
        "fairlead-test",
        &desired(json!({"a": "1", "b": "2"})),
        None,
    )
    .await
    .unwrap();
    assert!(
        matches!(fetched, Applied::Unchanged(_)),
        "fetches and compares when no copy is given"
    );

    let dropped = apply(
        &cms,
        "fairlead-test",
        &desired(json!({"a": "1"})),
        Some(&first),
    )
    .await
    .unwrap();
    let Applied::Written(dropped) = dropped else {
        panic!("a dropped label is a change")
    };
    let labels = dropped.metadata.labels.unwrap();
    assert_eq!(labels.len(), 1);
    assert!(!labels.contains_key("b"));
    assert!(dropped.metadata.resource_version != first.metadata.resource_version);
}

#[tokio::test]
async fn events_are_published_for_an_object() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "noted"}})).unwrap();
    let cm = cms.create(&Default::default(), &cm).await.unwrap();
    let reference: ObjectReference = cm.object_ref(&());
    let events = Events::new(client.clone(), "fairlead-test", Some("node-1".into()));
    events
        .warning(
            &reference,
            "ProbeFailed",
            "Probe",
            "connection refused on port 5432",
        )
        .await;
    let listed: Api<Event> = Api::namespaced(client, "default");
    let found = listed.list(&ListParams::default()).await.unwrap();
    let event = found
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("ProbeFailed"))
        .expect("the event is stored");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.regarding.as_ref().unwrap().name.as_deref(),
        Some("noted")
    );
    assert_eq!(event.reporting_controller.as_deref(), Some("fairlead-test"));

    // The same Event again is a series on it; another note is an Event of its own.
    events
        .warning(
            &reference,
            "ProbeFailed",
            "Probe",
            "connection refused on port 5432",
        )
        .await;
    events
        .warning(&reference, "ProbeFailed", "Probe", "timed out after 1s")
        .await;
    let found = listed.list(&ListParams::default()).await.unwrap().items;
    let notes: Vec<(Option<&str>, Option<i32>)> = found
        .iter()
        .map(|e| (e.note.as_deref(), e.series.as_ref().map(|s| s.count)))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes.contains(&(Some("connection refused on port 5432"), Some(2))));
    assert!(notes.contains(&(Some("timed out after 1s"), None)));

    // Beyond ten distinct notes of one reason, the rest are one combined Event.
    for i in 0..12 {
        events
            .warning(
                &reference,
                "ProbeFailed",
                "Probe",
                format!("pod-{i} failed"),
            )
            .await;
    }
    let found = listed.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(found.len(), 11, "ten distinct notes and one combined Event");
    let combined = found
        .iter()
        .find(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.starts_with("(combined from similar events): "))
        })
        .expect("a combined Event");
    assert_eq!(
        combined.note.as_deref(),
        Some("(combined from similar events): pod-11 failed")
    );
    assert_eq!(combined.series.as_ref().map(|s| s.count), Some(4));
}

/// Polls `check` until it holds (each watch event is applied asynchronously).
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen");
}

#[tokio::test]
async fn projections_follow_creates_updates_and_deletes() {
    use fairlead_kit::watch::project;
    use kube::api::PostParams;
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let map = |name: &str, value: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"v": value}})).unwrap()
    };
    maps.create(&PostParams::default(), &map("a", "1"))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let notify = std::sync::Arc::new(tokio::sync::Notify::new());
    let values = project(
        Api::<ConfigMap>::all(client.clone()),
        Default::default(),
        |m: &ConfigMap| m.data.clone().unwrap_or_default().remove("v"),
        notify.clone(),
        stop.clone(),
    );
    values.wait_until_ready().await.unwrap();
    assert_eq!(
        values.get("default", "a").as_deref(),
        Some(&Some("1".into()))
    );

    maps.create(&PostParams::default(), &map("b", "2"))
        .await
        .unwrap();
    maps.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "3"}})),
    )
    .await
    .unwrap();
    eventually("the create and the update", || {
        values.get("default", "b").as_deref() == Some(&Some("2".into()))
            && values.get("default", "a").as_deref() == Some(&Some("3".into()))
    })
    .await;
    maps.delete("a", &Default::default()).await.unwrap();
    eventually("the delete", || values.get("default", "a").is_none()).await;
    assert_eq!(values.state().len(), 1);

    // A change the projection drops (another key) wakes nobody; one it keeps does.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let woken = || async {
        tokio::time::timeout(Duration::from_millis(300), notify.notified())
            .await
            .is_ok()
    };
    // Consume a wake-up left over from the changes above.
    let _ = woken().await;
    maps.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "x"}})),
    )
    .await
    .unwrap();
    assert!(!woken().await, "an unchanged projection woke the component");
    maps.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "4"}})),
    )
    .await
    .unwrap();
    assert!(
        woken().await,
        "a changed projection did not wake the component"
    );
    stop.cancel();
}

#[tokio::test]
async fn a_crd_is_kept_at_this_version_and_never_taken_back_from_a_newer_one() {
    use fairlead_kit::crds::{Kept, VERSION_ANNOTATION, keep_current};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let crd = |description: &str| -> CustomResourceDefinition {
        serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": description}}}]}}))
        .unwrap()
    };
    assert_eq!(
        keep_current(&crds, "c", &crd("first")).await.unwrap(),
        Kept::Current
    );
    let stored = crds.get("widgets.example.com").await.unwrap();
    assert_eq!(
        stored.metadata.annotations.unwrap()[VERSION_ANNOTATION],
        fairlead_kit::crds::VERSION
    );
    // An upgrade brings the new schema.
    keep_current(&crds, "c", &crd("second")).await.unwrap();
    let described = |c: CustomResourceDefinition| {
        c.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| s.description.clone())
    };
    assert_eq!(
        described(crds.get("widgets.example.com").await.unwrap()).as_deref(),
        Some("second")
    );
    // A newer version wrote it: an older replica leaves it.
    crds.patch(
        "widgets.example.com",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {VERSION_ANNOTATION: "99.0.0"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        keep_current(&crds, "c", &crd("older")).await.unwrap(),
        Kept::Newer("99.0.0".into())
    );
    assert_eq!(
        described(crds.get("widgets.example.com").await.unwrap()).as_deref(),
        Some("second")
    );
}
