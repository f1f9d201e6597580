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
