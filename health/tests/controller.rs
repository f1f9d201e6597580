//! The controller against the embedded API server: child Services, foreign-Service conflicts,
//! the Ready condition and counts, pruning of gone pods' entries, and cleanup of slices of
//! gone nodes and resources; a refused write retried with its resource's backoff, and the other
//! replica taking over when the Lease holder stops.

mod common;

use std::time::Duration;

use fairlead_health::controller::LEASE;
use fairlead_health_api::ServiceWithHealthchecks;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn swh(name: &str) -> ServiceWithHealthchecks {
    serde_json::from_value(json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": name, "labels": {"team": "web"}},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
          "healthcheck": {"probes": [{"mode": "TCP", "tcp": {"targetPort": 8080}}]}}}))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_keeps_services_status_and_cleans_up() {
    let (_server, client) = common::cluster().await;
    let nodes: Api<Node> = Api::all(client.clone());
    for node in ["n1", "n2"] {
        nodes
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": node}})).unwrap(),
            )
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "web-a"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap(),
    )
    .await
    .unwrap();

    let stop = common::start_controller(&client, "controller-0");

    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let created = swhs
        .create(&PostParams::default(), &swh("web"))
        .await
        .unwrap();
    eventually("the child Service exists", || async {
        services.get_opt("web").await.unwrap().is_some()
    })
    .await;
    let service = services.get("web").await.unwrap();
    let spec = service.spec.clone().unwrap();
    assert_eq!(spec.selector.unwrap_or_default().len(), 0, "selector-less");
    assert_eq!(
        service.metadata.owner_references.unwrap()[0].uid,
        created.metadata.uid.clone().unwrap()
    );
    assert_eq!(service.metadata.labels.unwrap()["team"], "web");

    // An agent reports two pods; one of them does not exist.
    let agent_status = json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "web"}, "status": {"endpointStatuses": [
            {"podName": "web-a", "nodeName": "n1", "ready": true, "probesSuccessful": true},
            {"podName": "web-gone", "nodeName": "n1", "ready": true, "probesSuccessful": false}]}});
    swhs.patch_status(
        "web",
        &PatchParams::apply("fairlead-health-agent-n1").force(),
        &Patch::Apply(&agent_status),
    )
    .await
    .unwrap();
    eventually(
        "the gone pod's entry is pruned and Ready follows",
        || async {
            let status = swhs
                .get_status("web")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.clone());
            status.endpoint_statuses.len() == 1
                && ready.as_deref() == Some("True")
                && status
                    .healthcheck_condition
                    .as_ref()
                    .map(|h| (h.endpoints, h.ready_endpoints))
                    == Some((1, 1))
        },
    )
    .await;
    let status = swhs.get_status("web").await.unwrap().status.unwrap();
    let child = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ChildServiceReady")
        .unwrap();
    assert_eq!(
        (child.status.as_str(), child.reason.as_str()),
        ("True", "ChildServiceWasCreated")
    );
    let cluster_ip = services.get("web").await.unwrap().spec.unwrap().cluster_ip;
    assert!(cluster_ip.is_some(), "the API server assigns a cluster IP");
    assert_eq!(status.cluster_ip, cluster_ip, "reported in the status");

    // A slice of node n2, then n2 goes away.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice: EndpointSlice = serde_json::from_value(json!({"metadata": {"name": "web-n2-http-ipv4-0", "labels": {
        "endpointslice.kubernetes.io/managed-by": "servicewithhealthchecks", "kubernetes.io/service-name": "web",
        "service-with-healthchecks.network.deckhouse.io/node": "n2"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.9"]}], "ports": [{"port": 8080}]})).unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    nodes.delete("n2", &DeleteParams::default()).await.unwrap();
    eventually("the gone node's slice is deleted", || async {
        slices
            .get_opt("web-n2-http-ipv4-0")
            .await
            .unwrap()
            .is_none()
    })
    .await;

    // A foreign Service of the same name is never overwritten.
    let foreign: Service = serde_json::from_value(
        json!({"metadata": {"name": "db", "labels": {"owner": "someone"}},
        "spec": {"selector": {"app": "legacy"}, "ports": [{"port": 5432}]}}),
    )
    .unwrap();
    services
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap();
    swhs.create(&PostParams::default(), &swh("db"))
        .await
        .unwrap();
    eventually("the conflict is reported", || async {
        let status = swhs
            .get_status("db")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        status.conditions.iter().any(|c| {
            c.type_ == "ChildServiceReady"
                && c.status == "False"
                && c.reason == "ChildServiceConflict"
        })
    })
    .await;
    let untouched = services.get("db").await.unwrap();
    assert_eq!(untouched.spec.unwrap().selector.unwrap()["app"], "legacy");

    // The resource goes: its Service follows (owner references).
    swhs.delete("web", &DeleteParams::default()).await.unwrap();
    eventually("the child Service is deleted", || async {
        services.get_opt("web").await.unwrap().is_none()
    })
    .await;
    stop.cancel();
}

/// A write the API server refuses is retried after a backoff of its own resource, long before
/// the five-minute resync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_child_service_is_retried_with_backoff() {
    let (_server, client) = common::cluster().await;
    let refusal = common::Refusal::start(&client, "no-services", "", "services").await;
    let stop = common::start_controller(&client, "controller-0");
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    swhs.create(&PostParams::default(), &swh("web"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        services.get_opt("web").await.unwrap().is_none(),
        "the Service is refused"
    );
    refusal.lift().await;
    // Nothing about the resource changes: only the retry brings the Service.
    eventually("the refused Service is retried", || async {
        services.get_opt("web").await.unwrap().is_some()
    })
    .await;
    stop.cancel();
}

/// Only the Lease holder reconciles; when it stops, the other replica takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_other_replica_takes_over_when_the_leader_stops() {
    let (_server, client) = common::cluster().await;
    let first = common::start_controller(&client, "controller-0");
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    swhs.create(&PostParams::default(), &swh("one"))
        .await
        .unwrap();
    eventually("the leader reconciles", || async {
        services.get_opt("one").await.unwrap().is_some()
    })
    .await;
    let second = common::start_controller(&client, "controller-1");
    first.cancel();
    swhs.create(&PostParams::default(), &swh("two"))
        .await
        .unwrap();
    eventually("the new leader reconciles", || async {
        services.get_opt("two").await.unwrap().is_some()
    })
    .await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let holder = leases
        .get(LEASE)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some("controller-1"));
    second.cancel();
}
