//! The gateway controller against the embedded API server: an instance becomes its Gateway
//! (listeners from the inlet, `d8-http` and `d8-https` whatever the certificate's state,
//! owner references, the namespace `d8-alb`), a second instance naming it serves it on an
//! inlet of its own and names its settings the Gateway does not follow (with the first as
//! their owner), takes over when the first is deleted (the first's inlet going with it), and
//! the Gateway goes with the last of them, each instance held by the controller's finalizer
//! until what it made is released.

mod common;

use std::time::{Duration, Instant};

use common::{eventually, resource};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_become_gateways() {
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
    let gateways: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "d8-alb",
        &resource("gateway.networking.k8s.io", "v1", "Gateway", "gateways"),
    );
    let create = |name: &str, spec: Value| {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
            "metadata": {"name": name}, "spec": spec}))
        .unwrap();
        let instances = instances.clone();
        async move {
            instances
                .create(&PostParams::default(), &object)
                .await
                .unwrap()
        }
    };
    create(
        "main",
        json!({"gatewayName": "public", "inlet": {"type": "LoadBalancer",
        "additionalPorts": [{"port": 5432, "protocol": "TCP"}]}}),
    )
    .await;
    let gateway = eventually("the Gateway of main", async || {
        gateways.get_opt("public").await.ok().flatten()
    })
    .await;
    let listeners: Vec<&str> = gateway.data["spec"]["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listeners,
        ["d8-http", "d8-https", "tcp-port-5432"],
        "HTTPS before the platform certificate exists: ListenerSets' own certificates serve on it"
    );
    assert_eq!(gateway.data["spec"]["gatewayClassName"], "d8-alb");
    let owners = gateway.metadata.owner_references.clone().unwrap();
    assert_eq!(
        (owners[0].name.as_str(), owners[0].controller),
        ("main", Some(true))
    );
    let status = eventually("main's status", async || {
        let i = instances.get_status("main").await.ok()?;
        (i.data["status"]["gateway"] == "public").then_some(i.data["status"].clone())
    })
    .await;
    let condition = |status: &Value, kind: &str| {
        status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == kind)
            .cloned()
            .unwrap()
    };
    assert_eq!(condition(&status, "Conflict")["status"], "False");
    for flag in ["conflictPorts", "conflictFrontendTLS", "conflictBackendTLS"] {
        assert_eq!(status[flag], false, "{flag}");
        assert!(status[format!("{flag}Owner")].is_null(), "{status}");
    }
    assert_eq!(
        status["synced"], false,
        "no control plane, no proxy runs it"
    );
    assert_eq!(
        status["ready"],
        condition(&status, "Ready")["status"] == "True",
        "status.ready is the Ready condition"
    );
    assert_eq!(
        condition(&status, "Ready")["status"],
        "False",
        "no control plane programs it here"
    );

    // A younger instance naming the same Gateway is in conflict, naming main.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Its own additional port and HTTP/3 are not the Gateway's: conflictPorts and
    // conflictFrontendTLS, owned by main.
    create(
        "second",
        json!({"gatewayName": "public", "istioSidecar": true, "enableHTTP3": true,
               "inlet": {"type": "LoadBalancer", "additionalPorts": [{"port": 6379, "protocol": "TCP"}]}}),
    )
    .await;
    let status = eventually("second's conflict", async || {
        let i = instances.get_status("second").await.ok()?;
        i.data["status"]["conditions"]
            .is_array()
            .then_some(i.data["status"].clone())
    })
    .await;
    assert_eq!(condition(&status, "IstioSidecar")["reason"], "Unsupported");
    assert_eq!(status["defaultDeckhouseGateway"], false);
    let conflict = condition(&status, "Conflict");
    assert_eq!(conflict["status"], "True");
    assert!(
        conflict["message"]
            .as_str()
            .unwrap()
            .contains("ClusterALBInstance main"),
        "{conflict}"
    );
    assert!(
        conflict["message"]
            .as_str()
            .unwrap()
            .ends_with("its own inlet.additionalPorts, enableHTTP3 differ and are ignored"),
        "{conflict}"
    );
    assert_eq!(
        (&status["conflictPorts"], &status["conflictPortsOwner"]),
        (&json!(true), &json!("main"))
    );
    assert_eq!(
        (
            &status["conflictFrontendTLS"],
            &status["conflictFrontendTLSOwner"]
        ),
        (&json!(true), &json!("main"))
    );
    assert_eq!(status["conflictBackendTLS"], false);
    assert!(status["conflictBackendTLSOwner"].is_null());
    // It serves the Gateway on an inlet of its own, beside main's.
    let proxies: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "d8-alb",
        &resource("apps", "v1", "DaemonSet", "daemonsets"),
    );
    let own = eventually("second's own proxies", async || {
        proxies.get_opt("d8-alb-public-second").await.ok().flatten()
    })
    .await;
    assert_eq!(
        own.data["spec"]["selector"]["matchLabels"]["alb.deckhouse.io/instance"],
        "ClusterALBInstance.second"
    );
    assert!(proxies.get_opt("d8-alb-public").await.unwrap().is_some());

    // A third one names the Gateway, then another: its inlet for this one goes, though
    // the instance stays.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create("third", json!({"gatewayName": "public"})).await;
    eventually("third's own proxies", async || {
        proxies.get_opt("d8-alb-public-third").await.ok().flatten()
    })
    .await;
    instances
        .patch(
            "third",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"gatewayName": "elsewhere"}})),
        )
        .await
        .unwrap();
    eventually(
        "third's inlet of public gone, its new Gateway's there",
        async || {
            let old = proxies.get_opt("d8-alb-public-third").await.ok()?;
            let new = proxies.get_opt("d8-alb-elsewhere").await.ok()?;
            (old.is_none() && new.is_some()).then_some(())
        },
    )
    .await;
    instances
        .delete("third", &DeleteParams::default())
        .await
        .unwrap();

    // Instances carry the controller's finalizer.
    let finalizer = fairlead_edge_controller::finalizer::FINALIZER;
    eventually("the finalizers", async || {
        let all = [
            instances.get("main").await.ok()?,
            instances.get("second").await.ok()?,
        ];
        all.iter()
            .all(|i| {
                i.metadata
                    .finalizers
                    .iter()
                    .flatten()
                    .any(|f| f == finalizer)
            })
            .then_some(())
    })
    .await;

    // main goes: second takes over, and the Gateway stays.
    instances
        .delete("main", &DeleteParams::default())
        .await
        .unwrap();
    eventually("main released and gone", async || {
        instances
            .get_opt("main")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    eventually("second in control", async || {
        let g = gateways.get("public").await.ok()?;
        let owners = g.metadata.owner_references?;
        (owners.len() == 1 && owners[0].name == "second" && owners[0].controller == Some(true))
            .then_some(())
    })
    .await;
    let status = eventually("second without conflict", async || {
        let i = instances.get_status("second").await.ok()?;
        (condition(&i.data["status"], "Conflict")["status"] == "False")
            .then_some(i.data["status"].clone())
    })
    .await;
    assert_eq!(status["conflictPorts"], false);
    assert!(
        status["conflictPortsOwner"].is_null(),
        "the owner goes with the conflict: {status}"
    );
    // main's inlet went with it; second's stays, under its own name.
    eventually("main's proxies gone, second's kept", async || {
        let main = proxies.get_opt("d8-alb-public").await.ok()?;
        let second = proxies.get_opt("d8-alb-public-second").await.ok()?;
        (main.is_none() && second.is_some()).then_some(())
    })
    .await;

    // The last owner goes: its finalizer holds it until the Gateway and the proxies' objects
    // are deleted, then it goes too.
    instances
        .delete("second", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Gateway and its proxies deleted", async || {
        let gateway = gateways.get_opt("public").await.ok()?;
        let daemon_set = proxies.get_opt("d8-alb-public-second").await.ok()?;
        (gateway.is_none() && daemon_set.is_none()).then_some(())
    })
    .await;
    eventually("second released and gone", async || {
        instances
            .get_opt("second")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    stop.cancel();
}

/// A cluster whose ReferenceGrant CRD stores another version is refused, naming it; the
/// bundle fairlead installs passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_versions_are_checked_against_the_cluster() {
    use fairlead_edge_controller::crds;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    let mut grants = crds::gateway_api(crds::Channel::Standard)
        .into_iter()
        .find(|c| c.spec.names.plural == "referencegrants")
        .unwrap();
    for v in &mut grants.spec.versions {
        v.storage = v.name == "v1";
    }
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.create(&PostParams::default(), &grants).await.unwrap();
    crds::install(&client, "example.com/c", crds::Channel::Standard)
        .await
        .unwrap();
    let refused = crds::check_storage_versions(&client)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("referencegrants.gateway.networking.k8s.io stores v1"),
        "{refused}"
    );
    api.delete(
        "referencegrants.gateway.networking.k8s.io",
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while api
        .get_opt("referencegrants.gateway.networking.k8s.io")
        .await
        .unwrap()
        .is_some()
    {
        assert!(Instant::now() < deadline, "the CRD was never deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    crds::install(&client, "example.com/c", crds::Channel::Standard)
        .await
        .unwrap();
    crds::check_storage_versions(&client).await.unwrap();
}
