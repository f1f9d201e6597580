//! The index against the embedded API server: it publishes a listed snapshot of what exists,
//! then a new one after each change, and every subscriber reads the same snapshot.

use std::sync::Arc;
use std::time::Duration;

use fairlead_edge_index::{Index, Snapshot};
use kube::api::{Api, DeleteParams, PostParams};
use tokio_util::sync::CancellationToken;

async fn cluster() -> (fairlead_apiserver::ApiServer, kube::Client) {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    fairlead_edge_controller::crds::install(
        &client,
        fairlead_edge_model::CONTROLLER_NAME,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await
    .unwrap();
    (server, client)
}

fn service(name: &str) -> k8s_openapi::api::core::v1::Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap()
}

async fn until(
    snapshots: &mut tokio::sync::watch::Receiver<Arc<Snapshot>>,
    what: &str,
    check: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    tokio::time::timeout(Duration::from_secs(20), snapshots.wait_for(|s| check(s)))
        .await
        .unwrap_or_else(|_| panic!("no snapshot where {what}"))
        .expect("the index is running")
        .clone()
}

fn names(snapshot: &Snapshot) -> Vec<String> {
    let mut names: Vec<String> = snapshot
        .input
        .services
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_publishes_what_exists_then_every_change() {
    let (_server, client) = cluster().await;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), "default");
    services
        .create(&PostParams::default(), &service("before"))
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let index = Index::start(client.clone(), stop.clone());
    let mut first = index.subscribe();
    let mut second = index.subscribe();

    let listed = until(&mut first, "it is listed", |s| s.listed).await;
    assert!(
        names(&listed).contains(&"before".to_owned()),
        "a listed snapshot holds what existed: {:?}",
        names(&listed)
    );
    assert_eq!(listed.skipped, 0);
    assert!(
        index.kinds().contains("HTTPRoute"),
        "the Gateway API kinds are watched: {:?}",
        index.kinds()
    );

    services
        .create(&PostParams::default(), &service("after"))
        .await
        .unwrap();
    let created = until(&mut first, "the new Service is in", |s| {
        names(s).contains(&"after".to_owned())
    })
    .await;
    assert!(created.listed);
    // Another subscriber reads the very same snapshot.
    let seen = until(&mut second, "the new Service is in", |s| {
        names(s).contains(&"after".to_owned())
    })
    .await;
    assert_eq!(names(&created), names(&seen));

    services
        .delete("before", &DeleteParams::default())
        .await
        .unwrap();
    until(&mut first, "the deleted Service is gone", |s| {
        !names(s).contains(&"before".to_owned())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_write_wakes_the_readers_of_statuses_not_the_translation() {
    use kube::api::{DynamicObject, Patch, PatchParams};
    let (_server, client) = cluster().await;
    let routes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &fairlead_edge_index::api_resource("HTTPRoute", "v1").unwrap(),
    );
    let route: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.example.com"]},
    }))
    .unwrap();
    routes.create(&PostParams::default(), &route).await.unwrap();
    let stop = CancellationToken::new();
    let index = Index::start(client.clone(), stop.clone());
    let mut snapshots = index.subscribe();
    let mut statuses = index.statuses();
    let hosts = |s: &Snapshot| -> Vec<String> {
        s.input
            .http_routes
            .iter()
            .flat_map(|r| r.spec.hostnames.clone())
            .collect()
    };
    until(&mut snapshots, "the route is in", |s| {
        s.listed && hosts(s) == ["a.example.com"]
    })
    .await;
    statuses.mark_unchanged();

    let status = serde_json::json!({"status": {"parents": [{
        "parentRef": {"name": "gw"}, "controllerName": "example.com/test",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
            "message": "", "lastTransitionTime": "2026-12-07T00:00:00Z"}]}]}});
    routes
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), statuses.changed())
        .await
        .expect("the status write woke the readers of statuses")
        .unwrap();
    let written = index
        .object(
            "HTTPRoute",
            &fairlead_edge_model::ObjectKey::new("default", "web"),
        )
        .expect("the route's status is kept");
    assert_eq!(
        written["status"]["parents"][0]["controllerName"], "example.com/test",
        "{written}"
    );
    assert!(
        !snapshots.has_changed().unwrap(),
        "a status write published a snapshot: the translation would run for nothing"
    );

    // A change of the spec is published.
    let spec = serde_json::json!({"spec": {"hostnames": ["b.example.com"]}});
    routes
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec))
        .await
        .unwrap();
    until(&mut snapshots, "the new hostname is in", |s| {
        hosts(s) == ["b.example.com"]
    })
    .await;
    stop.cancel();
}
