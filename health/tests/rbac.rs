//! Least privilege, both ways: the agent and the controller run their scenario (pods probed,
//! slices published, the child Service made, statuses written, the Lease held) with their
//! ServiceAccounts' tokens and exactly the rules of `fairlead_health::rbac`, and the audit log
//! shows no request of theirs refused; take a rule away and the refusal names it.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{free_port_on, listen, pod};
use fairlead_apiserver::{ApiServer, Config};
use fairlead_health::rbac;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Applies `object` (a built-in kind whose plural is its kind's lower case plus `s`, or a
/// ServiceWithHealthchecks).
async fn apply(client: &kube::Client, object: &Value) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        &match kind {
            "ServiceWithHealthchecks" => "servicewithhealthchecks".to_owned(),
            other => format!("{}s", other.to_ascii_lowercase()),
        },
    );
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        object["metadata"]["name"].as_str().unwrap(),
        &PatchParams::apply("test").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap();
}

async fn client_of(server: &ApiServer, admin: &kube::Client, account: &str) -> kube::Client {
    let issued: TokenRequest = Api::<ServiceAccount>::namespaced(admin.clone(), rbac::NAMESPACE)
        .create_subresource(
            "token",
            account,
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        )
        .await
        .unwrap();
    server
        .client_with_token(&issued.status.unwrap().token.unwrap())
        .await
        .unwrap()
}

/// The audited requests of the health ServiceAccounts: (user, verb, resource, code).
fn requests(audit: &std::path::Path) -> BTreeSet<(String, String, String, u64)> {
    let log = std::fs::read_to_string(audit).unwrap();
    // The server may be writing a line as the file is read: whole lines only.
    let whole = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    whole
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["user"]["username"].as_str().is_some_and(|u| {
                u.starts_with(&format!("system:serviceaccount:{}:", rbac::NAMESPACE))
            })
        })
        .map(|e| {
            let object = &e["objectRef"];
            let resource = match object["subresource"].as_str() {
                Some(sub) => format!("{}/{sub}", object["resource"].as_str().unwrap_or_default()),
                None => object["resource"].as_str().unwrap_or_default().to_owned(),
            };
            (
                e["user"]["username"].as_str().unwrap().to_owned(),
                e["verb"].as_str().unwrap().to_owned(),
                resource,
                e["responseStatus"]["code"].as_u64().unwrap(),
            )
        })
        .collect()
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn swh(name: &str, port: u16) -> Value {
    json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": port}],
          "healthcheck": {"initialDelaySeconds": 0, "periodSeconds": 1, "probes": [
            {"mode": "TCP", "tcp": {"targetPort": port}}]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_components_need_exactly_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let server = ApiServer::start(Config {
        allow_loopback_endpoints: true,
        audit_log: Some(audit.clone()),
        ..Config::default()
    })
    .await
    .unwrap();
    let admin = server.client().await.unwrap();
    apply(
        &admin,
        &serde_json::to_value(fairlead_health_api::crd()).unwrap(),
    )
    .await;
    apply(&admin, &rbac::MODULE.namespace_object()).await;
    for object in rbac::objects("default") {
        apply(&admin, &object).await;
    }
    let agent = client_of(&server, &admin, rbac::AGENT.0).await;
    let controller = client_of(&server, &admin, rbac::CONTROLLER.0).await;

    let ip = "127.0.0.4";
    let port = free_port_on(ip);
    let _web = listen(ip, port);
    pod(&admin, "web-a", "web", "n1", ip).await;
    apply(&admin, &swh("web", port)).await;
    let _agent = common::start_agent(&agent, "n1");
    let _controller = common::start_controller(&controller, "c1");
    let slices: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &ApiResource::erase::<k8s_openapi::api::discovery::v1::EndpointSlice>(&()),
    );
    until("the slice published", async || {
        slices
            .get_opt("web-n1-http-ipv4-0")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    let services: Api<Service> = Api::namespaced(admin.clone(), "default");
    until("the child Service", async || {
        services.get_opt("web").await.unwrap().is_some()
    })
    .await;
    let swhs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "network.deckhouse.io",
                "v1alpha1",
                "ServiceWithHealthchecks",
            ),
            "servicewithhealthchecks",
        ),
    );
    until("both statuses written", async || {
        let status = &swhs.get_status("web").await.unwrap().data["status"];
        status["endpointStatuses"].is_array() && status["conditions"].is_array()
    })
    .await;
    // A moment more, for the periodic work (resync, Lease renewals, Events).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = requests(&audit);
    let refused: Vec<_> = seen.iter().filter(|r| r.3 == 403).collect();
    assert!(refused.is_empty(), "refused: {refused:?}\nall: {seen:#?}");
    let used: BTreeSet<(&str, &str)> = seen
        .iter()
        .map(|(_, verb, resource, _)| (verb.as_str(), resource.as_str()))
        .collect();
    for needed in [
        ("patch", "endpointslices"),
        ("patch", "servicewithhealthchecks/status"),
        ("patch", "services"),
        ("watch", "pods"),
    ] {
        assert!(
            used.contains(&needed),
            "{needed:?} was never asked: {used:?}"
        );
    }

    // Take a rule away from each, and the refusal names what it no longer may do.
    let mut agent_rules = rbac::agent_rules();
    agent_rules.retain(|r| r["resources"][0] != "endpointslices");
    apply(
        &admin,
        &rbac::MODULE.cluster_role(rbac::AGENT.1, agent_rules),
    )
    .await;
    let mut controller_rules = rbac::controller_rules();
    controller_rules.retain(|r| r["resources"][0] != "services");
    apply(
        &admin,
        &rbac::MODULE.cluster_role(rbac::CONTROLLER.1, controller_rules),
    )
    .await;
    apply(&admin, &swh("shop", port)).await;
    until("both refusals audited", async || {
        let refused: Vec<_> = requests(&audit)
            .into_iter()
            .filter(|r| r.3 == 403)
            .collect();
        let named = |user: &str, resource: &str| {
            refused
                .iter()
                .any(|r| r.0.ends_with(&format!(":{user}")) && r.2 == resource)
        };
        named(rbac::AGENT.0, "endpointslices") && named(rbac::CONTROLLER.0, "services")
    })
    .await;
}
