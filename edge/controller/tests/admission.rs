//! The admission webhooks through the embedded API server: the controller registers them
//! (its CA in `caBundle`), the API server reaches them over TLS through the webhook Service,
//! and each rule refuses what it must with a message naming the field, while the
//! controller's own writes pass; with the server gone, the webhooks that fail closed refuse
//! and the others let requests through.

mod common;

use std::time::Duration;

use common::{eventually, resource};
use fairlead_edge_controller::webhook::{self, CONTROLLER_USER, WebhookService};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn refusal(result: Result<DynamicObject, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        Err(other) => panic!("not an API error: {other}"),
        Ok(object) => panic!("admitted: {:?}", object.metadata.name),
    }
}

/// Creates `object` at `path` (a collection) and returns the warnings it was admitted with.
async fn created_with_warnings(
    admin: &kube::Client,
    path: &str,
    object: &impl serde::Serialize,
) -> Vec<String> {
    let request = http::Request::post(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(object).unwrap())
        .unwrap();
    let response = admin.send(request.map(Into::into)).await.unwrap();
    assert_eq!(response.status(), 201);
    response
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhooks_refuse_what_they_must_and_name_the_field() {
    let (server, admin) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let controller = server
        .client_as(CONTROLLER_USER, &["system:masters"])
        .await
        .unwrap();
    let namespaces: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &resource("", "v1", "Namespace", "namespaces"),
    );
    for name in ["d8-alb", "team", "guests"] {
        namespaces
            .create(
                &PostParams::default(),
                &object(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                ),
            )
            .await
            .unwrap();
    }
    // The webhook server, and the Service in front of it (the chart's, in a cluster).
    let metrics = fairlead_edge_controller::metrics::ControllerMetrics::unregistered();
    let stop_webhooks = tokio_util::sync::CancellationToken::new();
    let tls = fairlead_kit::tls::watch_secret(
        controller.clone(),
        fairlead_key::ObjectKey::new("d8-alb", webhook::SECRET),
        false,
        stop_webhooks.clone(),
    );
    let bound = webhook::serve(
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        tls,
        controller.clone(),
        vec![CONTROLLER_USER.to_owned()],
        metrics.clone(),
        stop_webhooks.clone(),
    )
    .unwrap();
    let service = WebhookService::default();
    let (svc, slice) = fairlead_kit::local::service(&fairlead_kit::local::LocalService {
        namespace: service.service.namespace(),
        name: service.service.name(),
        port_name: "webhook",
        port: service.port,
        addr: bound,
        udp: false,
        managed_by: "test",
    });
    let (svc, slice) = (
        serde_json::to_value(svc).unwrap(),
        serde_json::to_value(slice).unwrap(),
    );
    for (value, r) in [
        (svc, resource("", "v1", "Service", "services")),
        (
            slice,
            resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"),
        ),
    ] {
        Api::<DynamicObject>::namespaced_with(admin.clone(), "d8-alb", &r)
            .create(&PostParams::default(), &object(value))
            .await
            .unwrap();
    }
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(fairlead_edge_controller::reconcile::run(
        controller.clone(),
        None,
        fairlead_edge_controller::reconcile::Config {
            webhook: Some(service),
            ..Default::default()
        },
        metrics.clone(),
        stop.clone(),
    ));
    let configurations: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &resource(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    let registered = eventually("the webhook configuration", async || {
        configurations
            .get_opt(webhook::CONFIGURATION)
            .await
            .unwrap()
    })
    .await;
    let ca = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        "d8-alb",
        &resource("", "v1", "Secret", "secrets"),
    )
    .get("alb-ca")
    .await
    .unwrap();
    assert_eq!(
        registered.data["webhooks"][0]["clientConfig"]["caBundle"], ca.data["data"]["tls.crt"],
        "the API server trusts the controller's CA"
    );

    // The controller's own Gateway passes its webhook.
    let clusters: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &resource(
            "network.deckhouse.io",
            "v1alpha1",
            "ClusterALBInstance",
            "clusteralbinstances",
        ),
    );
    clusters
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
                "metadata": {"name": "main"}, "spec": {"gatewayName": "public", "inlet": {"type": "LoadBalancer"}}})),
        )
        .await
        .unwrap();
    let gateway_resource = resource("gateway.networking.k8s.io", "v1", "Gateway", "gateways");
    let d8_gateways: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), "d8-alb", &gateway_resource);
    eventually("the managed Gateway", async || {
        d8_gateways.get_opt("public").await.unwrap()
    })
    .await;

    // A user's edit, and a user's deletion, of a managed Gateway.
    let (code, message) = refusal(
        d8_gateways
            .patch(
                "public",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})),
            )
            .await,
    );
    assert_eq!(code, 403, "{message}");
    assert!(
        message.contains(
            "metadata.labels.team: Gateway d8-alb/public is managed by ClusterALBInstance main"
        ),
        "{message}"
    );
    let deleted = d8_gateways
        .delete("public", &DeleteParams::default())
        .await
        .map(|_| ());
    let Err(kube::Error::Api(status)) = deleted else {
        panic!("a user's deletion is refused: {deleted:?}");
    };
    assert!(
        status
            .message
            .contains("metadata.labels[alb.deckhouse.io/instance]"),
        "{}",
        status.message
    );
    // Finalizers stay anyone's (or deletions could deadlock).
    for finalizers in [json!(["example.com/hold"]), json!(null)] {
        d8_gateways
            .patch(
                "public",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": finalizers}})),
            )
            .await
            .expect("a finalizer change is admitted");
    }

    // An ALBInstance may not take over a Gateway of its namespace.
    let team_gateways: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), "team", &gateway_resource);
    team_gateways
        .create(
            &PostParams::default(),
            &object(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "own", "namespace": "team"},
                "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})),
        )
        .await
        .unwrap();
    let albs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "team",
        &resource(
            "network.deckhouse.io",
            "v1alpha1",
            "ALBInstance",
            "albinstances",
        ),
    );
    let alb = |name: &str, gateway: &str| {
        object(
            json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ALBInstance",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"gatewayName": gateway, "inlet": {"type": "LoadBalancer"}}}),
        )
    };
    let (code, message) = refusal(
        albs.create(&PostParams::default(), &alb("takeover", "own"))
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains("spec.gatewayName: Gateway team/own already exists and is not managed by an ALB instance"),
        "{message}"
    );
    albs.create(&PostParams::default(), &alb("shop", "shop"))
        .await
        .unwrap();
    eventually("the ALBInstance's Gateway", async || {
        team_gateways.get_opt("shop").await.unwrap()
    })
    .await;

    // ListenerSets: from the Gateway's namespace only; a port and hostname twice is warned of.
    let listener_set = |namespace: &str, name: &str, hostname: &str| {
        object(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"parentRef": {"name": "shop", "namespace": "team"},
                "listeners": [{"name": "web", "port": 8080, "protocol": "HTTP", "hostname": hostname}]}}),
        )
    };
    let sets = |namespace: &str| {
        Api::<DynamicObject>::namespaced_with(
            admin.clone(),
            namespace,
            &resource(
                "gateway.networking.k8s.io",
                "v1",
                "ListenerSet",
                "listenersets",
            ),
        )
    };
    let (code, message) = refusal(
        sets("guests")
            .create(
                &PostParams::default(),
                &listener_set("guests", "visit", "a.example.com"),
            )
            .await,
    );
    assert_eq!(code, 422, "{message}");
    assert!(
        message.contains(
            "spec.parentRef.namespace: Gateway team/shop belongs to ALBInstance team/shop"
        ),
        "{message}"
    );
    sets("team")
        .create(
            &PostParams::default(),
            &listener_set("team", "first", "a.example.com"),
        )
        .await
        .unwrap();
    // A second ListenerSet claiming the same port and hostname is admitted with a warning:
    // the conflict is reported in its status (the translator's), not refused.
    let warnings = created_with_warnings(
        &admin,
        "/apis/gateway.networking.k8s.io/v1/namespaces/team/listenersets",
        &listener_set("team", "second", "a.example.com"),
    )
    .await;
    assert!(
        warnings.iter().any(|w| w.contains("spec.listeners[0]: port 8080 with hostname a.example.com is already claimed on Gateway team/shop by ListenerSet team/first (listener web)")),
        "{warnings:?}"
    );
    sets("team")
        .create(
            &PostParams::default(),
            &listener_set("team", "third", "b.example.com"),
        )
        .await
        .expect("another hostname is free");

    // A route naming a listener that is not there is admitted, with a warning.
    let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "app", "namespace": "team"},
        "spec": {"parentRefs": [{"name": "public", "namespace": "d8-alb", "sectionName": "d8-htps"}]}});
    let warnings = created_with_warnings(
        &admin,
        "/apis/gateway.networking.k8s.io/v1/namespaces/team/httproutes",
        &route,
    )
    .await;
    assert!(
        warnings.iter().any(|w| w
            .contains("spec.parentRefs[0].sectionName: Gateway d8-alb/public has no listener")
            && w.contains("d8-htps")),
        "{warnings:?}"
    );
    let denied = |hook: &str| {
        metrics
            .webhook_requests
            .with_label_values(&[hook, "denied"])
            .get()
    };
    assert_eq!(
        (
            denied("gateways"),
            denied("instances"),
            denied("listenersets")
        ),
        (2, 1, 1),
        "a ListenerSet from another namespace refused; a claimed port only warned of"
    );

    // The server gone: instances and managed Gateways are refused, ListenerSets admitted.
    stop.cancel();
    stop_webhooks.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (code, message) = refusal(
        albs.create(&PostParams::default(), &alb("late", "late"))
            .await,
    );
    assert_eq!(code, 500, "{message}");
    assert!(
        message.contains("failed calling webhook \"instances.alb.deckhouse.io\""),
        "{message}"
    );
    sets("team")
        .create(
            &PostParams::default(),
            &listener_set("team", "fourth", "c.example.com"),
        )
        .await
        .expect("failurePolicy Ignore lets ListenerSets through");
}
