//! Conventions the real API server keeps that clients notice: the answer to a server-side
//! apply without a field manager, what a DELETE answers, the labels and defaults the server
//! sets on built-in kinds, the `/scale` subresource, and field ownership of status applies.

mod common;

use common::{JSON, raw, server};
use fairlead_apiserver::Config;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn an_apply_without_a_field_manager_is_422_as_the_real_server_says() {
    let (_server, client) = server(Config::default()).await;
    let body = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
    )
    .unwrap();
    let (code, _, status) = raw(
        &client,
        "PATCH",
        "application/apply-patch+yaml",
        "/api/v1/namespaces/default/configmaps/x",
        body,
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["details"],
        json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch",
             "field": "fieldManager"}]})
    );
}

#[tokio::test]
async fn deletes_answer_as_the_real_registries_do() {
    let (_server, client) = server(Config::default()).await;
    let create = |path: &'static str, body: serde_json::Value| {
        let client = client.clone();
        async move {
            let (code, _, created) = raw(
                &client,
                "POST",
                JSON,
                path,
                serde_json::to_vec(&body).unwrap(),
            )
            .await;
            assert_eq!(code, 201, "{created}");
            created
        }
    };

    // A ConfigMap (no ReturnDeletedObject): a Status naming it by plural resource and uid.
    let cm = create(
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "gone"}}),
    )
    .await;
    let (code, _, answer) = raw(
        &client,
        "DELETE",
        JSON,
        "/api/v1/namespaces/default/configmaps/gone",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        answer,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "gone", "kind": "configmaps", "uid": cm["metadata"]["uid"]}})
    );

    // A Deployment: the same, with its group.
    create(
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
    )
    .await;
    let (code, _, answer) = raw(
        &client,
        "DELETE",
        JSON,
        "/apis/apps/v1/namespaces/default/deployments/web",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            &answer["kind"],
            &answer["details"]["group"],
            &answer["details"]["kind"]
        ),
        (&json!("Status"), &json!("apps"), &json!("deployments"))
    );

    // A Service (ReturnDeletedObject): the deleted object.
    create(
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    let (code, _, answer) = raw(
        &client,
        "DELETE",
        JSON,
        "/api/v1/namespaces/default/services/svc",
        Vec::new(),
    )
    .await;
    assert_eq!((code, &answer["kind"]), (200, &json!("Service")));

    // Held by a finalizer: the object with its deletionTimestamp, 200; 202 only for the
    // deprecated orphanDependents=false.
    create(
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
    )
    .await;
    let (code, _, answer) = raw(
        &client,
        "DELETE",
        JSON,
        "/api/v1/namespaces/default/configmaps/held",
        Vec::new(),
    )
    .await;
    assert_eq!((code, &answer["kind"]), (200, &json!("ConfigMap")));
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    let (code, _, _) = raw(
        &client,
        "DELETE",
        JSON,
        "/api/v1/namespaces/default/configmaps/held",
        serde_json::to_vec(&json!({"orphanDependents": false})).unwrap(),
    )
    .await;
    assert_eq!(code, 202);
}

#[tokio::test]
async fn every_namespace_carries_its_name_label() {
    let (_server, client) = server(Config::default()).await;
    let namespaces: Api<Namespace> = Api::all(client);
    let label = |ns: &Namespace| {
        ns.metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get("kubernetes.io/metadata.name")
            .cloned()
    };
    let created = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "demo"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(label(&created).as_deref(), Some("demo"));
    let patched = namespaces
        .patch(
            "demo",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"kubernetes.io/metadata.name": "else", "team": "a"}}})),
        )
        .await
        .unwrap();
    assert_eq!(label(&patched).as_deref(), Some("demo"));
    assert_eq!(
        patched
            .metadata
            .labels
            .unwrap()
            .get("team")
            .map(String::as_str),
        Some("a")
    );
    assert_eq!(
        label(&namespaces.get("kube-system").await.unwrap()).as_deref(),
        Some("kube-system")
    );
}

#[tokio::test]
async fn services_are_defaulted_and_keep_their_allocations_across_updates() {
    let (_server, client) = server(Config::default()).await;
    let services: Api<Service> = Api::namespaced(client, "default");
    let created = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "web"},
                "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let spec = created.spec.clone().unwrap();
    assert_eq!(spec.ip_families, Some(vec!["IPv4".to_owned()]));
    assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
    assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    assert_eq!(
        spec.cluster_ips,
        Some(vec![spec.cluster_ip.clone().unwrap()])
    );
    let port = &spec.ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );

    // A replace that leaves the allocated values out keeps them.
    let mut replaced: Service = serde_json::from_value(json!({"metadata": {"name": "web",
        "resourceVersion": created.metadata.resource_version},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}}))
    .unwrap();
    replaced = services
        .replace("web", &PostParams::default(), &replaced)
        .await
        .unwrap();
    let kept = replaced.spec.unwrap();
    assert_eq!(kept.cluster_ip, spec.cluster_ip);
    assert_eq!(
        kept.ports.unwrap()[0].node_port,
        spec.ports.unwrap()[0].node_port
    );
}

#[tokio::test]
async fn deployments_scale_through_their_scale_subresource() {
    let (_server, client) = server(Config::default()).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "web"},
                "spec": {"selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    let (code, _, scale) = raw(&client, "GET", JSON, path, Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            &scale["apiVersion"],
            &scale["kind"],
            &scale["spec"]["replicas"]
        ),
        (&json!("autoscaling/v1"), &json!("Scale"), &json!(1))
    );
    assert_eq!(
        scale["status"],
        json!({"replicas": 0, "selector": "app=web"})
    );

    // What `kubectl scale` sends.
    let (code, _, scaled) = raw(
        &client,
        "PATCH",
        "application/merge-patch+json",
        path,
        br#"{"spec":{"replicas":3}}"#.to_vec(),
    )
    .await;
    assert_eq!((code, &scaled["spec"]["replicas"]), (200, &json!(3)));
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(3));

    // A replace with a stale resourceVersion conflicts; a negative count names the field.
    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": scale["metadata"]["resourceVersion"]},
        "spec": {"replicas": 5}});
    let (code, _, _) = raw(
        &client,
        "PUT",
        JSON,
        path,
        serde_json::to_vec(&stale).unwrap(),
    )
    .await;
    assert_eq!(code, 409);
    let negative = json!({"kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": -1}});
    let (code, _, status) = raw(
        &client,
        "PUT",
        JSON,
        path,
        serde_json::to_vec(&negative).unwrap(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(status["details"]["causes"][0]["field"], "spec.replicas");
    let (code, _, _) = raw(
        &client,
        "GET",
        JSON,
        "/api/v1/namespaces/default/configmaps/x/scale",
        Vec::new(),
    )
    .await;
    assert_eq!(code, 404, "ConfigMaps have no scale subresource");
}

#[tokio::test]
async fn a_status_apply_owns_its_fields_and_drops_what_it_no_longer_applies() {
    let (_server, client) = server(Config::default()).await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let apply = |status: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb"}, "status": status}),
        )
    };
    let params = PatchParams::apply("lb-controller").force();
    services
        .patch_status(
            "lb",
            &params,
            &apply(
                json!({"conditions": [{"type": "Ready", "status": "False", "reason": "Pending",
                "message": "waiting", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}),
            ),
        )
        .await
        .unwrap();
    let after = services
        .patch_status(
            "lb",
            &params,
            &apply(json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}})),
        )
        .await
        .unwrap();
    let status = after.status.unwrap();
    assert!(
        status.conditions.is_none(),
        "the conditions it stopped applying are gone: {status:?}"
    );
    assert!(
        after
            .metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(|m| m.manager.as_deref() == Some("lb-controller")
                && m.subresource.as_deref() == Some("status")),
        "the status apply is recorded with its subresource"
    );
}
