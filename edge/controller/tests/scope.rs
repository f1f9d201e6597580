//! Attack class: an instance (or Gateway) creator making the controller write over objects
//! outside its instance's scope. The names of what the controller makes come from Gateway
//! and instance names (`d8-alb-<gateway>`, a sharing instance's `d8-alb-<gateway>-<instance>`,
//! the geoproxy's `d8-alb-<gateway>-geoproxy`), so a chosen name can spell another's: the
//! controller writes over an object only if it made it for the same Gateway and application,
//! and says in the instance's status which name is taken and by whom.

mod common;

use std::time::Duration;

use common::{eventually, resource};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_name_never_takes_over_what_the_controller_made_for_another() {
    let (_server, client) = common::cluster("example.com/controller").await;
    let stop = common::reconciling(&client);
    let instances: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "network.deckhouse.io",
            "v1alpha1",
            "ClusterALBInstance",
            "clusteralbinstances",
        ),
    );
    let create = async |name: &str, gateway: &str| {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
            "metadata": {"name": name},
            "spec": {"gatewayName": gateway, "inlet": {"type": "LoadBalancer"}}}))
        .unwrap();
        instances
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        // Creation times have a second's resolution: the next one is younger.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    };
    let ready_condition = async |name: &str| {
        let status = instances.get_status(name).await.ok()?.data["status"].clone();
        status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")
            .cloned()
    };
    let proxies: Api<DaemonSet> = Api::namespaced(client.clone(), "d8-alb");
    let gateway_of = |d: &DaemonSet| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("alb.deckhouse.io/gateway"))
            .cloned()
    };

    // `b` shares Gateway `a` with the older `a`: its own inlet (a ClusterALBInstance's proxies
    // are a DaemonSet) is `d8-alb-a-b`.
    create("a", "a").await;
    create("b", "a").await;
    let inlet = eventually("b's inlet", async || {
        proxies.get_opt("d8-alb-a-b").await.ok().flatten()
    })
    .await;
    assert_eq!(gateway_of(&inlet).as_deref(), Some("a"));

    // `c` names Gateway `a-b`, whose proxies would be `d8-alb-a-b` too.
    create("c", "a-b").await;
    let refused: Value = eventually("c's Ready condition naming the taken name", async || {
        ready_condition("c")
            .await
            .filter(|c| c["reason"] == "NameTaken")
    })
    .await;
    assert_eq!(refused["status"], "False");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("DaemonSet d8-alb/d8-alb-a-b")
            && message.contains("alb-proxy of Gateway \"a\""),
        "{message}"
    );
    // Reconciles of `c` go on being refused; `b`'s inlet stays `b`'s.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let inlet = proxies.get("d8-alb-a-b").await.unwrap();
    assert_eq!(gateway_of(&inlet).as_deref(), Some("a"));
    let labels = inlet.metadata.labels.unwrap();
    assert_eq!(
        labels["alb.deckhouse.io/instance"], "ClusterALBInstance.b",
        "{labels:?}"
    );

    // A user's own object of a name the controller would make is not the controller's.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "d8-alb");
    let own: ServiceAccount = serde_json::from_value(json!({
        "metadata": {"name": "d8-alb-mine", "labels": {"team": "platform"}}}))
    .unwrap();
    accounts.create(&PostParams::default(), &own).await.unwrap();
    create("mine", "mine").await;
    let refused = eventually("mine's Ready condition naming the taken name", async || {
        ready_condition("mine")
            .await
            .filter(|c| c["reason"] == "NameTaken")
    })
    .await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("ServiceAccount d8-alb/d8-alb-mine")
            && message.contains("not made by the ALB gateway controller"),
        "{message}"
    );
    let account = accounts.get("d8-alb-mine").await.unwrap();
    assert_eq!(
        account.metadata.labels.unwrap().len(),
        1,
        "the user's ServiceAccount is as it was"
    );
    assert!(account.metadata.owner_references.is_none());
    stop.cancel();
}
