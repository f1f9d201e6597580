//! Least privilege for the alb module, both ways: with `--rbac` the gateway controller and
//! the xDS control plane run the ALB world (and the GeoIP world, an HTTP-01 bridge, every
//! route kind) with their chart's ServiceAccounts and rules, `fairlead edge cleanup-wait` runs
//! as the pre-delete hook's; a rule taken away is refused and named, and the audit log shows
//! nothing else refused and every verb of every rule used (so no rule grants what nothing asks
//! for).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fairlead_e2e::alb::{
    STREAMS_WORLD, alb_instances_world, cluster_instances, service_account_kubeconfig,
};
use fairlead_e2e::up::audit_events;
use fairlead_e2e::{Up, until};
use serde_json::Value;

/// The rules taken away for a while: (kind, name, resource).
const TAKEN: [(&str, &str, &str); 3] = [
    ("ClusterRole", "d8:alb:gateway-controller", "ingresses"),
    ("ClusterRole", "d8:alb:xds", "grpcroutes/status"),
    ("Role", "d8:alb:cleanup", "configmaps"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_rbac_runs_the_alb_components_with_exactly_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let up = Up::with(
        &[
            "--rbac",
            "--audit-log",
            audit.to_str().unwrap(),
            "--http01-bridging-ingress-class",
            "nginx",
            "--geo-downloader-interval",
            "10",
        ],
        &[],
    );
    alb_instances_world(&up).await;
    let _mirrors = fairlead_e2e::geo::world(&up).await;
    bridge_and_streams(&up).await;
    let objects = rbac_objects();
    let restored = take_rules_away(&up, &objects);
    let kubeconfig = service_account_kubeconfig(&up, "d8-alb", "alb-cleanup", dir.path());
    let refused = cleanup_wait(&kubeconfig).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("cannot patch resource \"configmaps\""),
        "{stderr}"
    );
    refusals_audited(&audit).await;
    up.take_over(&restored);
    let cleanup = cleanup_wait(&kubeconfig).await;
    assert!(
        cleanup.status.success(),
        "{}",
        String::from_utf8_lossy(&cleanup.stderr)
    );
    let client = up.client().await;
    let main = cluster_instances(&client).get_opt("main").await.unwrap();
    assert!(main.is_some(), "the users' instances stay");
    graph_reviews_its_users(&up).await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
    every_rule_used_and_only_the_taken_refused(&objects, &audit_events(&audit));
}

/// An HTTP-01 solver route bridged to an Ingress, and every kind the control plane writes the
/// status of, on a Gateway of the class.
async fn bridge_and_streams(up: &Up) {
    up.apply(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: cm-acme-http-solver-1
  namespace: default
  labels: {acme.cert-manager.io/http01-solver: \"true\"}
spec:
  parentRefs: [{name: public, namespace: d8-alb}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{path: {type: Exact, value: /.well-known/acme-challenge/t0k3n}}]
    backendRefs: [{name: cm-acme-http-solver-x, port: 8089}]
",
    );
    up.apply(STREAMS_WORLD);
    let ingresses = kube::Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(
        up.client().await,
        "default",
    );
    until("the HTTP-01 bridge", async || {
        ingresses
            .get_opt("cm-acme-http-solver-1-http01")
            .await
            .ok()?
    })
    .await;
}

/// The module's RBAC objects, with the geoproxy's binding, which the controller wrote (so it
/// was allowed to bind the role; the audit log shows it) and removed with the geoproxy: it
/// names whose requests use the geoproxies' role.
fn rbac_objects() -> Vec<Value> {
    let mut objects = fairlead_compose::rbac::objects("kube-system");
    let (geoproxy, lease) = geoproxy_binding();
    objects.push(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": lease.name(), "namespace": lease.namespace()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": fairlead_edge_controller::geoproxy::LEASE_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": geoproxy, "namespace": "d8-alb"}],
    }));
    objects
}

/// The GeoIP world's geoproxy and the key of its Lease (and of the binding to it).
fn geoproxy_binding() -> (String, fairlead_edge_model::ObjectKey) {
    let gateway = fairlead_edge_model::ObjectKey::new("d8-alb", "geo");
    (
        fairlead_edge_controller::geoproxy::name(&gateway),
        fairlead_edge_controller::geoproxy::lease(&gateway),
    )
}

/// Takes [`TAKEN`] away and changes what needs them (a GRPCRoute's status, a bridge); the
/// roles as they were, to restore.
fn take_rules_away(up: &Up, objects: &[Value]) -> String {
    let without = |kind: &str, name: &str, resource: &str| {
        let mut role = objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap()
            .clone();
        role["rules"].as_array_mut().unwrap().retain(|r| {
            !r["resources"]
                .as_array()
                .unwrap()
                .contains(&resource.into())
        });
        format!("---\n{role}\n")
    };
    let restored: String = objects
        .iter()
        .filter(|o| {
            TAKEN
                .iter()
                .any(|(k, n, _)| o["kind"] == *k && o["metadata"]["name"] == *n)
        })
        .map(|o| format!("---\n{o}\n"))
        .collect();
    up.take_over(
        &TAKEN
            .iter()
            .map(|(kind, name, resource)| without(kind, name, resource))
            .collect::<String>(),
    );
    up.apply(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc-2, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: http}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: cm-acme-http-solver-2
  namespace: default
  labels: {acme.cert-manager.io/http01-solver: \"true\"}
spec:
  parentRefs: [{name: public, namespace: d8-alb}]
  hostnames: [blog.example.com]
  rules: [{backendRefs: [{name: cm-acme-http-solver-y, port: 8089}]}]
",
    );
    restored
}

/// `fairlead edge cleanup-wait` as the pre-delete hook's ServiceAccount (`kubeconfig`).
async fn cleanup_wait(kubeconfig: &Path) -> Output {
    let kubeconfig: PathBuf = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Command::new(fairlead_e2e::binary::path())
            .args(["edge", "cleanup-wait", "--timeout", "30"])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Waits until the controller's and the control plane's refusals are in the audit log.
async fn refusals_audited(audit: &Path) {
    let audited = |user: &str, resource: &str| {
        let events = audit_events(audit);
        let user = format!("system:serviceaccount:d8-alb:{user}");
        fairlead_kit::testing::rbac::refused(&events, &user)
            .iter()
            .any(|r| r.split_whitespace().nth(2) == Some(resource))
    };
    until(
        "the controller's and the control plane's refusals audited",
        async || {
            (audited("alb-gateway-controller", "ingresses")
                && audited("alb-xds", "grpcroutes/status"))
            .then_some(())
        },
    )
    .await;
}

/// The graph, served with the controller's identity under exactly its rules, draws the world
/// and reviews its users' access.
async fn graph_reviews_its_users(up: &Up) {
    let graph: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/graph?kinds=Gateway", up.graph_base()))
        .header("x-remote-user", "ops")
        .header("x-remote-groups", "system:masters")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        graph
            .to_string()
            .contains("gateway.networking.k8s.io/Gateway/d8-alb/public"),
        "{graph}"
    );
}

/// The controller bound the geoproxies' role; only [`TAKEN`] was refused (`user verb
/// resource …`); every rule was used, but those this world cannot make them use, each with
/// the reason it is still needed.
fn every_rule_used_and_only_the_taken_refused(objects: &[Value], events: &[Value]) {
    let (_, lease) = geoproxy_binding();
    let bound = events.iter().any(|e| {
        e["user"]["username"] == "system:serviceaccount:d8-alb:alb-gateway-controller"
            && e["objectRef"]["resource"] == "rolebindings"
            && e["objectRef"]["name"] == lease.name()
            && e["objectRef"]["namespace"] == lease.namespace()
            && e["verb"] == "patch"
            && e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
    });
    assert!(bound, "the controller bound the geoproxies' role");
    let refused: BTreeSet<(String, String)> =
        fairlead_kit::testing::rbac::refused(events, "system:serviceaccount:d8-alb:")
            .into_iter()
            .map(|r| {
                let words: Vec<&str> = r.split_whitespace().collect();
                (words[0].to_owned(), words[2].to_owned())
            })
            .collect();
    let expected: BTreeSet<(String, String)> = [
        ("alb-gateway-controller", "ingresses"),
        ("alb-xds", "grpcroutes/status"),
        ("alb-cleanup", "configmaps"),
    ]
    .map(|(user, resource)| {
        (
            format!("system:serviceaccount:d8-alb:{user}"),
            resource.to_owned(),
        )
    })
    .into();
    assert_eq!(refused, expected);
    let exempt: [(&str, &str, &str); 4] = [
        (
            "d8:alb:gateway-controller: bind ",
            "clusterroles",
            "the API server checks bind while it writes a RoleBinding, in no request of its own; the geoproxy's binding written proves it",
        ),
        (
            "xlistenersets",
            "",
            "XListenerSet is served by the experimental channel only; this world runs the standard one",
        ),
        (
            "d8:alb:xds: get ",
            "/status",
            "a shared status list is read again only when its replace meets a conflict",
        ),
        (
            "d8:alb:xds: ",
            "events.k8s.io",
            "Events are recorded when a proxy rejects a configuration, which this world never sends",
        ),
    ];
    let unused = fairlead_kit::testing::rbac::unused_rules(
        objects,
        events,
        &[fairlead_compose::rbac::RBAC_PROXY],
    );
    let unused: Vec<&String> = unused
        .iter()
        .filter(|u| {
            !exempt
                .iter()
                .any(|(a, b, _)| u.contains(a) && u.contains(b))
        })
        .collect();
    assert!(unused.is_empty(), "granted, never used: {unused:#?}");
}
