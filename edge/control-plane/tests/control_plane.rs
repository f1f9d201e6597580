//! The control plane against the embedded API server: the Gateway API CRDs and the `d8-alb`
//! class installed, objects applied, the index → translate → snapshot loop publishing, and the
//! statuses written back — a route's parent entries of another controller kept.

mod cluster;

use std::sync::Arc;
use std::time::Duration;

use cluster::{cluster, control_plane, create};

use fairlead_edge_xds::cache::{Cache, LISTENER, ROUTE};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

/// A CA certificate (self-signed, P-256) for the BackendTLSPolicy's ConfigMap.
const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIBkjCCATegAwIBAgIUV3PFwYZZGixuFSESY9DQBA7Mb9YwCgYIKoZIzj0EAwIw\nHTEbMBkGA1UEAwwSZmFpcmxlYWQgZ29sZGVuIENBMCAXDTI2MTEzMDE1NTExNFoY\nDzIxMjYxMTA2MTU1MTE0WjAdMRswGQYDVQQDDBJmYWlybGVhZCBnb2xkZW4gQ0Ew\nWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAR5TL9ZoWZTgpNUX7hiyPG1eC4ypa3U\ni1kvFyzsV6ElfyWHYRrPa9ZcGibwhmxfK+XX/gKkssFdK0cViXkMNiqRo1MwUTAd\nBgNVHQ4EFgQUD6DeTkpyPl3vv+17NoWYF/IAe50wHwYDVR0jBBgwFoAUD6DeTkpy\nPl3vv+17NoWYF/IAe50wDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBG\nAiEAtlrnYOQHIrhJ97uDju/pUw1aNEagKXbE8UxNXEV2G+kCIQDd1MLfQZK7lFRW\nIxAIce1IID8IMPU9zTjB3p11rVgeMw==\n-----END CERTIFICATE-----\n";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // Generous: the machine may be running other suites beside this one.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen within 20 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_become_snapshots_and_statuses() {
    let (_server, client) = cluster().await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})).await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}, {"name": "elsewhere"}], "hostnames": ["shop.example.com"],
                 "rules": [{"backendRefs": [{"name": "shop", "port": 8080}]}]}})).await;
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 8080}]}}),
    )
    .await;
    create(&client, json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "shop-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "shop"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"]}]})).await;
    // Another controller's entry for its own parent: must survive our writes.
    let routes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &resource("HTTPRoute", "httproutes"),
    );
    let theirs = json!({"parentRef": {"name": "elsewhere"}, "controllerName": "example.com/other",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    routes
        .patch_status(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"parents": [theirs]}})),
        )
        .await
        .unwrap();

    let cache = Arc::new(Cache::new());
    let (stop, forwarder) = control_plane(&client, &cache);

    eventually("the snapshot", || {
        let cache = cache.clone();
        async move {
            let snapshot = cache.get(&gw());
            snapshot.get(LISTENER, "http-80").is_some() && snapshot.get(ROUTE, "http-80").is_some()
        }
    })
    .await;
    let gateways: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource("Gateway", "gateways"));
    eventually("the Gateway's status", || {
        let gateways = gateways.clone();
        async move {
            let gw = gateways.get("gw").await.unwrap();
            let status = &gw.data["status"];
            status["conditions"].as_array().is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "Programmed"
                        && c["status"] == "True"
                        && c["lastTransitionTime"].is_string()
                })
            }) && status["listeners"][0]["attachedRoutes"] == 1
        }
    })
    .await;
    eventually("the route's parents", || {
        let routes = routes.clone();
        async move {
            let route = routes.get("shop").await.unwrap();
            let parents = route.data["status"]["parents"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let ours = parents.iter().any(|p| {
                p["controllerName"] == fairlead_edge_model::CONTROLLER_NAME
                    && p["parentRef"]["name"] == "gw"
                    && p["conditions"][0]["type"] == "Accepted"
                    && p["conditions"][0]["status"] == "True"
            });
            let kept = parents
                .iter()
                .any(|p| p["controllerName"] == "example.com/other");
            ours && kept && parents.len() == 2
        }
    })
    .await;

    // Statuses are written once: another translation (any change) writes nothing new.
    // Settled: no write still in flight from the rounds before (a slow machine may be one
    // round behind), then the unrelated change.
    let mut before = gateways.get("gw").await.unwrap();
    for round in 0.. {
        assert!(round < 20, "the Gateway's status never settles");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let again = gateways.get("gw").await.unwrap();
        if again.metadata.resource_version == before.metadata.resource_version {
            break;
        }
        before = again;
    }
    let settled = before.metadata.resource_version.clone();
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "unrelated", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = gateways.get("gw").await.unwrap();
    assert_eq!(
        after.metadata.resource_version, settled,
        "an unchanged status is not written again: {:#} became {:#}",
        before.data["status"], after.data["status"]
    );

    // A ListenerSet the Gateway does not admit (no allowedListeners) says so.
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
        "metadata": {"name": "extra", "namespace": "default"},
        "spec": {"parentRef": {"name": "gw"}, "listeners": [{"name": "alt", "port": 8080, "protocol": "HTTP"}]}})).await;
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &resource("ListenerSet", "listenersets"),
    );
    eventually("the ListenerSet's status", || {
        let sets = sets.clone();
        async move {
            let set = sets.get("extra").await.unwrap();
            set.data["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["type"] == "Accepted"
                            && c["status"] == "False"
                            && c["reason"] == "NotAllowed"
                    })
                })
        }
    })
    .await;

    // Proxies rejecting a version: one Warning Event on the Gateway per version, however many
    // proxies say so.
    use fairlead_edge_xds::server::Observer as _;
    for _ in 0..3 {
        forwarder.verdict(
            &gw(),
            &fairlead_edge_xds::sotw::Verdict::Nack {
                type_url: fairlead_edge_xds::cache::ROUTE.into(),
                version: "v1".into(),
                message: "route: invalid regex".into(),
            },
        );
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    eventually("the ConfigurationRejected Event", || {
        let events = events.clone();
        async move {
            let list = events.list(&Default::default()).await.unwrap();
            let rejected: Vec<_> = list
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some("ConfigurationRejected"))
                .collect();
            rejected.len() == 1
                && rejected[0]
                    .regarding
                    .as_ref()
                    .and_then(|r| r.name.as_deref())
                    == Some("gw")
                && rejected[0]
                    .note
                    .as_deref()
                    .is_some_and(|n| n.contains("invalid regex"))
        }
    })
    .await;

    // A BackendTLSPolicy on the route's Service: the cluster speaks TLS, and the policy's
    // ancestors gain our entry for the Gateway next to another controller's.
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shop-ca", "namespace": "default"},
        "data": {"ca.crt": CA}}),
    )
    .await;
    create(&client, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "BackendTLSPolicy",
        "metadata": {"name": "shop-tls", "namespace": "default"},
        "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "shop"}],
                 "validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "shop-ca"}],
                                "hostname": "shop.default.svc"}}}))
    .await;
    let policies: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &resource("BackendTLSPolicy", "backendtlspolicies"),
    );
    let theirs = json!({"ancestorRef": {"name": "other-gw"}, "controllerName": "example.com/other",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    policies
        .patch_status(
            "shop-tls",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ancestors": [theirs]}})),
        )
        .await
        .unwrap();
    eventually("the TLS cluster", || {
        let cache = cache.clone();
        async move {
            cache
                .get(&gw())
                .get(fairlead_edge_xds::cache::CLUSTER, "default/shop/8080")
                .is_some_and(|c| {
                    use prost::Message as _;
                    envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(
                        c.any.value.as_slice(),
                    )
                    .is_ok_and(|c| c.transport_socket.is_some())
                })
        }
    })
    .await;
    eventually("the policy's ancestors", || {
        let policies = policies.clone();
        async move {
            let policy = policies.get("shop-tls").await.unwrap();
            let ancestors = policy.data["status"]["ancestors"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let ours = ancestors.iter().any(|a| {
                a["controllerName"] == fairlead_edge_model::CONTROLLER_NAME
                    && a["ancestorRef"]["name"] == "gw"
                    && a["ancestorRef"]["kind"] == "Gateway"
                    && a["conditions"][0]["type"] == "Accepted"
                    && a["conditions"][0]["status"] == "True"
            });
            let kept = ancestors
                .iter()
                .any(|a| a["controllerName"] == "example.com/other");
            ours && kept && ancestors.len() == 2
        }
    })
    .await;

    // A change to the route is published.
    let before = cache.get(&gw()).version(ROUTE);
    routes
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"hostnames": ["shop.example.com", "www.example.com"]}})),
        )
        .await
        .unwrap();
    eventually("the new route configuration", || {
        let cache = cache.clone();
        let before = before.clone();
        async move { cache.get(&gw()).version(ROUTE) != before }
    })
    .await;
    stop.cancel();
}

/// The Gateway the tests configure.
fn gw() -> fairlead_edge_model::ObjectKey {
    fairlead_edge_model::ObjectKey::new("default", "gw")
}
