//! What the gateway controller makes besides the Gateway, against the embedded API server:
//! an instance's proxy workload (ServiceAccount, bootstrap ConfigMap, DaemonSet, LoadBalancer
//! Service) owned by it and gone with it; its CA kept across a restart of the controller; the
//! xDS server's and the proxy's certificates with their names and identity; a Gateway no
//! instance names told why; cert-manager's HTTP-01 solver routes bridged through Ingresses
//! that go with their route; a geoproxy the controller may not apply holds up neither the
//! proxies nor the instance's status, and is applied once it may; a Gateway no instance names
//! provisioned with its `spec.infrastructure` when the controller is asked to.

mod common;

use std::time::Duration;

use common::{eventually, resource};

use fairlead_edge_controller::metrics::ControllerMetrics;
use fairlead_edge_controller::reconcile::{Config, run};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn dynamic(
    client: &kube::Client,
    namespace: Option<&str>,
    api_version: &str,
    kind: &str,
    plural: &str,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = resource(group, version, kind, plural);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn create(api: &Api<DynamicObject>, object: Value) {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

fn text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

fn start(client: &kube::Client, config: Config) -> CancellationToken {
    start_counted(client, config, ControllerMetrics::unregistered())
}

fn start_counted(
    client: &kube::Client,
    config: Config,
    metrics: ControllerMetrics,
) -> CancellationToken {
    let stop = CancellationToken::new();
    tokio::spawn(run(client.clone(), None, config, metrics, stop.clone()));
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_becomes_its_proxies_and_certificates() {
    let (_server, client) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let stop = start(&client, Config::default());
    let instances = dynamic(
        &client,
        None,
        "network.deckhouse.io/v1alpha1",
        "ClusterALBInstance",
        "clusteralbinstances",
    );
    create(
        &instances,
        json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
        "metadata": {"name": "main"},
        "spec": {"gatewayName": "public", "envoyLogLevel": "Debug",
            "inlet": {"type": "LoadBalancer", "loadBalancer": {"httpPort": 8080,
                "serviceAnnotations": {"cloud.example.com/lb": "internal"}}}}}),
    )
    .await;
    let daemons = dynamic(
        &client,
        Some("d8-alb"),
        "apps/v1",
        "DaemonSet",
        "daemonsets",
    );
    let daemon = eventually("the proxies' DaemonSet", async || {
        daemons.get_opt("d8-alb-public").await.ok().flatten()
    })
    .await;
    let owner = &daemon.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ClusterALBInstance", "main")
    );
    let pod = &daemon.data["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"]["alb.deckhouse.io/gateway"],
        "public"
    );
    let proxy = &pod["spec"]["containers"][0];
    assert!(
        proxy["args"]
            .as_array()
            .unwrap()
            .windows(2)
            .any(|w| w[0] == "--envoy-log-level" && w[1] == "debug"),
        "{proxy}"
    );
    let services: Api<Service> = Api::namespaced(client.clone(), "d8-alb");
    // Made in the same reconcile as the proxies, but after them.
    let service = eventually("the instance's Service", async || {
        services
            .get_opt("d8-alb-public-loadbalancer")
            .await
            .ok()
            .flatten()
    })
    .await;
    let spec = service.spec.unwrap();
    assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
    let port = &spec.ports.unwrap()[0];
    assert_eq!(
        (port.port, port.target_port.clone()),
        (
            8080,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(10080))
        )
    );
    assert_eq!(
        service.metadata.annotations.unwrap()["cloud.example.com/lb"],
        "internal"
    );
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "d8-alb");
    let bootstrap = maps.get("d8-alb-public-bootstrap").await.unwrap();
    let envoy: Value = serde_yaml_ng::from_str(&bootstrap.data.unwrap()["envoy.yaml"]).unwrap();
    assert_eq!(envoy["node"]["cluster"], "d8-alb/public");
    let accounts = dynamic(
        &client,
        Some("d8-alb"),
        "v1",
        "ServiceAccount",
        "serviceaccounts",
    );
    assert!(accounts.get_opt("d8-alb-public").await.unwrap().is_some());

    // The CA, and what it issued: the xDS server's certificate for its names, the proxies'
    // naming their Gateway.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "d8-alb");
    let client_cert = eventually("the proxies' certificate", async || {
        secrets
            .get_opt("d8-alb-public-xds-client")
            .await
            .ok()
            .flatten()
    })
    .await;
    let ca = secrets.get("alb-ca").await.unwrap();
    let ca_pem = text(&ca, "tls.crt");
    assert_eq!(text(&client_cert, "ca.crt"), ca_pem);
    let der = {
        use rustls_pki_types::pem::PemObject as _;
        rustls_pki_types::CertificateDer::from_pem_slice(text(&client_cert, "tls.crt").as_bytes())
            .unwrap()
    };
    assert_eq!(
        fairlead_kit::pki::uri_sans(&der),
        ["spiffe://cluster.local/ns/d8-alb/gateway/public"]
    );
    let xds = secrets.get("alb-xds-tls").await.unwrap();
    fairlead_kit::pki::verify_server(&ca_pem, &text(&xds, "tls.crt"), "alb-xds.d8-alb.svc")
        .unwrap();

    // A restarted controller keeps the CA and the certificates it issued.
    stop.cancel();
    let stop = start(&client, Config::default());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        text(&secrets.get("alb-ca").await.unwrap(), "tls.crt"),
        ca_pem
    );
    assert_eq!(
        text(
            &secrets.get("d8-alb-public-xds-client").await.unwrap(),
            "tls.crt"
        ),
        text(&client_cert, "tls.crt"),
        "nothing is issued again"
    );

    // A Gateway of the class that no instance names is told why it has no proxy.
    let gateways = dynamic(
        &client,
        Some("default"),
        "gateway.networking.k8s.io/v1",
        "Gateway",
        "gateways",
    );
    create(&gateways, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "plain", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})).await;
    let condition = eventually("the Provisioned condition", async || {
        let g = gateways.get_status("plain").await.ok()?;
        g.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "alb.deckhouse.io/Provisioned")
            .cloned()
    })
    .await;
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("False"), Some("NoInstance"))
    );

    // Deleted, the instance takes its proxies with it.
    instances
        .delete("main", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the workload gone", async || {
        let gone = daemons.get_opt("d8-alb-public").await.ok()?.is_none()
            && services
                .get_opt("d8-alb-public-loadbalancer")
                .await
                .ok()?
                .is_none()
            && maps
                .get_opt("d8-alb-public-bootstrap")
                .await
                .ok()?
                .is_none()
            && secrets
                .get_opt("d8-alb-public-xds-client")
                .await
                .ok()?
                .is_none();
        gone.then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http01_solver_routes_are_bridged_through_an_ingress() {
    let (_server, client) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let stop = start(
        &client,
        Config {
            http01_ingress_class: Some("nginx".into()),
            ..Config::default()
        },
    );
    let routes = dynamic(
        &client,
        Some("apps"),
        "gateway.networking.k8s.io/v1",
        "HTTPRoute",
        "httproutes",
    );
    let namespaces = dynamic(&client, None, "v1", "Namespace", "namespaces");
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}),
    )
    .await;
    create(&routes, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "cm-acme-http-solver-1", "namespace": "apps",
            "labels": {"acme.cert-manager.io/http01-solver": "true"}},
        "spec": {"parentRefs": [{"name": "public", "namespace": "d8-alb"}],
            "hostnames": ["shop.example.com"],
            "rules": [{"matches": [{"path": {"type": "Exact", "value": "/.well-known/acme-challenge/t0k3n"}}],
                "backendRefs": [{"name": "cm-acme-http-solver-x", "port": 8089}]}]}})).await;
    let ingresses = dynamic(
        &client,
        Some("apps"),
        "networking.k8s.io/v1",
        "Ingress",
        "ingresses",
    );
    let ingress = eventually("the bridge", async || {
        ingresses
            .get_opt("cm-acme-http-solver-1-http01")
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(ingress.data["spec"]["ingressClassName"], "nginx");
    assert_eq!(
        ingress.data["spec"]["rules"][0]["http"]["paths"][0]["path"],
        "/.well-known/acme-challenge/t0k3n"
    );
    routes
        .delete("cm-acme-http-solver-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the bridge gone with its route", async || {
        ingresses
            .get_opt("cm-acme-http-solver-1-http01")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_wait_returns_once_the_controller_removed_what_it_made() {
    use fairlead_edge_controller::cleanup;
    let (_server, client) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let stop = start(&client, Config::default());
    let instances = dynamic(
        &client,
        None,
        "network.deckhouse.io/v1alpha1",
        "ClusterALBInstance",
        "clusteralbinstances",
    );
    create(&instances, json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
        "metadata": {"name": "main"}, "spec": {"gatewayName": "public", "inlet": {"type": "LoadBalancer"}}})).await;
    let left = eventually("the proxies and certificates made", async || {
        let left = cleanup::leftovers(&client).await.ok()?;
        (left.iter().any(|(k, _, _)| k == "DaemonSet")
            && left.iter().any(|(k, _, n)| k == "Secret" && n == "alb-ca"))
        .then_some(left)
    })
    .await;
    assert!(
        left.iter()
            .any(|(k, ns, n)| k == "Gateway" && ns == "d8-alb" && n == "public"),
        "{left:?}"
    );
    // Without a controller to clean up, the wait fails naming what is left.
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = cleanup::wait(&client, Duration::from_secs(1), Duration::from_millis(200))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("DaemonSet d8-alb/d8-alb-public")
            && refused.contains("Secret d8-alb/alb-ca"),
        "{refused}"
    );
    // With one, it returns once everything is gone; the user's instance stays.
    let stop = start(&client, Config::default());
    cleanup::wait(&client, Duration::from_secs(20), Duration::from_millis(200))
        .await
        .unwrap();
    assert!(cleanup::leftovers(&client).await.unwrap().is_empty());
    assert!(
        instances.get_opt("main").await.unwrap().is_some(),
        "users' objects stay"
    );
    // The controller makes nothing again while the module is going.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(cleanup::leftovers(&client).await.unwrap().is_empty());
    stop.cancel();
}

/// A client of the controller's ServiceAccount with what the chart binds it: its own rules
/// (cluster-wide and in `d8-alb`), and the kube-rbac-proxy role and binding whose subjects it
/// keeps (holding the role itself, as it grants it to the proxies).
async fn controller_as_the_chart_binds_it(
    server: &fairlead_apiserver::ApiServer,
    admin: &kube::Client,
) -> kube::Client {
    use fairlead_edge_controller::rbac;
    create(
        &dynamic(admin, None, "v1", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "d8-alb"}}),
    )
    .await;
    grant(admin, None, "controller", rbac::controller_rules()).await;
    grant(
        admin,
        Some("d8-alb"),
        "controller",
        rbac::controller_namespace_rules(),
    )
    .await;
    grant(
        admin,
        None,
        fairlead_edge_controller::workload::RBAC_PROXY_ROLE,
        fairlead_kit::rbac::rbac_proxy_rules(),
    )
    .await;
    let rbac = "rbac.authorization.k8s.io/v1";
    create(
        &dynamic(
            admin,
            None,
            rbac,
            "ClusterRoleBinding",
            "clusterrolebindings",
        ),
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
            "metadata": {"name": fairlead_edge_controller::workload::RBAC_PROXY_BINDING},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": fairlead_edge_controller::workload::RBAC_PROXY_ROLE}}),
    )
    .await;
    server
        .client_as(
            "system:serviceaccount:d8-alb:alb-gateway-controller",
            &["system:serviceaccounts", "system:authenticated"],
        )
        .await
        .unwrap()
}

/// The rules of `role` (a Role in `namespace`, or a ClusterRole) bound to the controller's
/// ServiceAccount.
async fn grant(client: &kube::Client, namespace: Option<&str>, name: &str, rules: Vec<Value>) {
    let (role_kind, binding_kind, plural, binding_plural) = match namespace {
        Some(_) => ("Role", "RoleBinding", "roles", "rolebindings"),
        None => (
            "ClusterRole",
            "ClusterRoleBinding",
            "clusterroles",
            "clusterrolebindings",
        ),
    };
    let api_version = "rbac.authorization.k8s.io/v1";
    create(
        &dynamic(client, namespace, api_version, role_kind, plural),
        json!({"apiVersion": api_version, "kind": role_kind,
            "metadata": {"name": name}, "rules": rules}),
    )
    .await;
    create(
        &dynamic(client, namespace, api_version, binding_kind, binding_plural),
        json!({"apiVersion": api_version, "kind": binding_kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "alb-gateway-controller",
                "namespace": "d8-alb"}]}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_geoproxy_that_cannot_be_applied_holds_up_neither_the_proxies_nor_the_status() {
    use fairlead_edge_controller::rbac;
    let (server, admin) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let controller = controller_as_the_chart_binds_it(&server, &admin).await;
    // And the role it binds to geoproxies; the chart's Role in the geoproxies' Lease
    // namespace is missing.
    let rbac = "rbac.authorization.k8s.io/v1";
    create(
        &dynamic(&admin, None, rbac, "ClusterRole", "clusterroles"),
        json!({"apiVersion": rbac, "kind": "ClusterRole",
            "metadata": {"name": fairlead_edge_controller::geoproxy::LEASE_ROLE},
            "rules": rbac::geoproxy_rules()}),
    )
    .await;
    let metrics = ControllerMetrics::unregistered();
    let stop = start_counted(&controller, Config::default(), metrics.clone());
    let failures = || {
        metrics
            .instance_failures
            .with_label_values(&["ClusterALBInstance", "main"])
            .get()
    };
    create(
        &dynamic(&admin, Some("d8-alb"), "v1", "Secret", "secrets"),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "maxmind"},
            "stringData": {"licenseKey": "k"}}),
    )
    .await;
    let instances = dynamic(
        &admin,
        None,
        "network.deckhouse.io/v1alpha1",
        "ClusterALBInstance",
        "clusteralbinstances",
    );
    create(
        &instances,
        json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ClusterALBInstance",
        "metadata": {"name": "main"},
        "spec": {"gatewayName": "public", "geoIP": {
            "licenseKeySecretRef": {"name": "maxmind"},
            "maxmindEditionIDs": ["GeoLite2-City"], "headers": {"city": "x-city"}}}}),
    )
    .await;
    let geoip = async |reason: &str| {
        eventually(&format!("the GeoIP condition {reason}"), async || {
            let status = instances.get_status("main").await.ok()?.data["status"].clone();
            status["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "GeoIP" && c["reason"] == reason)
                .cloned()
        })
        .await
    };
    let failed = geoip("GeoproxyNotApplied").await;
    assert_eq!(failed["status"], "False");
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("forbidden"), "{message}");
    eventually("the failed reconciles counted", async || {
        (failures() >= 1).then_some(())
    })
    .await;
    let daemons = dynamic(&admin, Some("d8-alb"), "apps/v1", "DaemonSet", "daemonsets");
    let daemon = daemons.get_opt("d8-alb-public").await.unwrap();
    assert!(daemon.is_some(), "the proxies are applied all the same");
    let sets = dynamic(
        &admin,
        Some("d8-alb"),
        "apps/v1",
        "StatefulSet",
        "statefulsets",
    );
    assert!(
        sets.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // The Role appears: the retried round applies the geoproxy.
    create(
        &dynamic(&admin, None, "v1", "Namespace", "namespaces"),
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": fairlead_edge_controller::geoproxy::LEASE_NAMESPACE}}),
    )
    .await;
    grant(
        &admin,
        Some(fairlead_edge_controller::geoproxy::LEASE_NAMESPACE),
        "controller",
        rbac::controller_geoip_rules(),
    )
    .await;
    geoip("GeoproxyNotReady").await;
    let set = sets.get_opt("d8-alb-public-geoproxy").await.unwrap();
    assert!(set.is_some(), "{:?}", sets.list(&Default::default()).await);
    eventually("the instance no longer failing", async || {
        (failures() == 0).then_some(())
    })
    .await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_no_instance_names_is_provisioned_when_asked_with_its_infrastructure() {
    let (server, admin) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let controller = controller_as_the_chart_binds_it(&server, &admin).await;
    let stop = start(
        &controller,
        Config {
            provision_gateways: true,
            ..Config::default()
        },
    );
    let gateways = dynamic(
        &admin,
        Some("default"),
        "gateway.networking.k8s.io/v1",
        "Gateway",
        "gateways",
    );
    create(
        &gateways,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb",
            "infrastructure": {"labels": {"team": "shop"},
                "annotations": {"example.com/owner": "shop-team"}},
            "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}),
    )
    .await;
    let deployments = dynamic(
        &admin,
        Some("default"),
        "apps/v1",
        "Deployment",
        "deployments",
    );
    let deployment = eventually("the provisioned proxies' Deployment", async || {
        deployments.get_opt("d8-alb-shop").await.ok().flatten()
    })
    .await;
    let uid = gateways.get("shop").await.unwrap().metadata.uid.unwrap();
    let owner = &deployment.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Gateway", "shop", uid.as_str())
    );
    let pod = &deployment.data["spec"]["template"]["metadata"];
    assert_eq!(
        pod["labels"]["gateway.networking.k8s.io/gateway-name"],
        "shop"
    );
    assert_eq!(pod["labels"]["team"], "shop");
    assert_eq!(pod["annotations"]["example.com/owner"], "shop-team");
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    // Made in the same reconcile as the Deployment, but after it.
    let service = eventually("the provisioned proxies' Service", async || {
        services
            .get_opt("d8-alb-shop-loadbalancer")
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(service.metadata.labels.as_ref().unwrap()["team"], "shop");
    assert_eq!(
        service.metadata.annotations.as_ref().unwrap()["example.com/owner"],
        "shop-team"
    );
    let ports: Vec<(i32, Option<_>)> = service
        .spec
        .unwrap()
        .ports
        .unwrap()
        .into_iter()
        .map(|p| (p.port, p.target_port))
        .collect();
    assert_eq!(
        ports,
        [(
            8080,
            Some(
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i32::from(
                    fairlead_edge_model::names::container_port(8080)
                ))
            )
        )]
    );
    let accounts = dynamic(
        &admin,
        Some("default"),
        "v1",
        "ServiceAccount",
        "serviceaccounts",
    );
    let labelled = accounts
        .list(
            &kube::api::ListParams::default().labels("gateway.networking.k8s.io/gateway-name=shop"),
        )
        .await
        .unwrap();
    assert_eq!(labelled.items.len(), 1);
    assert_eq!(
        labelled.items[0].metadata.annotations.as_ref().unwrap()["example.com/owner"],
        "shop-team"
    );
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
    let client_cert = eventually("the proxies' certificate", async || {
        secrets
            .get_opt("d8-alb-shop-xds-client")
            .await
            .ok()
            .flatten()
    })
    .await;
    let der = {
        use rustls_pki_types::pem::PemObject as _;
        rustls_pki_types::CertificateDer::from_pem_slice(text(&client_cert, "tls.crt").as_bytes())
            .unwrap()
    };
    assert_eq!(
        fairlead_kit::pki::uri_sans(&der),
        ["spiffe://cluster.local/ns/default/gateway/shop"]
    );
    let provisioned = async |status: &str, reason: &str| {
        eventually(&format!("Provisioned={status}/{reason}"), async || {
            let g = gateways.get_status("shop").await.ok()?;
            g.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["type"] == "alb.deckhouse.io/Provisioned"
                        && c["status"] == status
                        && c["reason"] == reason
                })
                .cloned()
        })
        .await
    };
    provisioned("True", "Provisioned").await;

    // The infrastructure changed: the proxies follow.
    gateways
        .patch(
            "shop",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"infrastructure": {"labels": {"team": "shop-2"}}}}),
            ),
        )
        .await
        .unwrap();
    eventually("the new label on the pods", async || {
        let d = deployments.get("d8-alb-shop").await.ok()?;
        (d.data["spec"]["template"]["metadata"]["labels"]["team"] == "shop-2").then_some(())
    })
    .await;

    // Deleted, the Gateway takes its proxies with it.
    gateways
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the provisioned workload gone", async || {
        let gone = deployments.get_opt("d8-alb-shop").await.ok()?.is_none()
            && services
                .get_opt("d8-alb-shop-loadbalancer")
                .await
                .ok()?
                .is_none()
            && secrets
                .get_opt("d8-alb-shop-xds-client")
                .await
                .ok()?
                .is_none();
        gone.then_some(())
    })
    .await;
    stop.cancel();
}
