//! The health module in `fairlead up`: a ServiceWithHealthchecks over a local pod published by
//! the agent of the local node, its child Service made by the controller, a failing probe
//! reported, and everything gone with the resource; with `--rbac` under the chart's
//! ServiceAccounts, every rule used and none refused.

use std::process::Command;
use std::time::{Duration, Instant};

use fairlead_e2e::up::audit_events;
use fairlead_e2e::{Up, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_the_health_module_on_a_local_node() {
    health_module_on_a_local_node(&[]).await;
}

/// With `--rbac`, the health components run with their chart's ServiceAccounts and rules:
/// the same world comes up, and the audit log shows their requests, none refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_rbac_runs_the_health_module_with_its_service_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    health_module_on_a_local_node(&["--rbac", "--audit-log", audit.to_str().unwrap()]).await;
    let events: Vec<serde_json::Value> = audit_events(&audit);
    let of = |account: &str| {
        let user = format!("system:serviceaccount:d8-service-with-healthchecks:{account}");
        events
            .iter()
            .filter(|e| e["user"]["username"] == user.as_str())
            .collect::<Vec<_>>()
    };
    for account in ["agent", "controller"] {
        let requests = of(account);
        assert!(!requests.is_empty(), "{account} made no request as itself");
        let refused: Vec<_> = requests
            .iter()
            .filter(|e| e["responseStatus"]["code"] == 403)
            .collect();
        assert!(refused.is_empty(), "{account} was refused: {refused:?}");
    }
    let unused = fairlead_kit::testing::rbac::unused_rules(
        &fairlead_health::rbac::objects("kube-system"),
        &events,
        &[fairlead_health::rbac::RBAC_PROXY],
    );
    // What this world cannot make them do, each with the reason the rule is still needed.
    let exempt: [(&str, &str, &str); 4] = [
        (
            "controller: delete ",
            "endpointslices",
            "the slices of a node whose agent is gone are the controller's to delete; here the agent deletes its own",
        ),
        (
            "agent: get ",
            "secrets",
            "a PostgreSQL probe's Secret missing from the cache of typed Secrets is read to say why",
        ),
        (
            ": patch ",
            "events.k8s.io",
            "repeats of one Event are counted by patching it",
        ),
        (
            ": update ",
            "leases",
            "the Lease is renewed after two thirds of its duration, longer than this world",
        ),
    ];
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

async fn health_module_on_a_local_node(args: &[&str]) {
    let backend = std::net::TcpListener::bind("127.0.0.4:0").unwrap();
    let port = backend.local_addr().unwrap().port();
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(
        manifests.path().join("web.yaml"),
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: web-a, labels: {{app: web}}}}
spec: {{nodeName: local, containers: [{{name: app, image: app}}]}}
status:
  phase: Running
  podIP: 127.0.0.4
  podIPs: [{{ip: 127.0.0.4}}]
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: web, port: 80, targetPort: {port}}}]
  healthcheck:
    initialDelaySeconds: 0
    periodSeconds: 1
    probes: [{{mode: TCP, tcp: {{targetPort: {port}}}}}]
"#
        ),
    )
    .unwrap();
    let mut all = vec!["-f", manifests.path().to_str().unwrap()];
    all.extend(args);
    let up = Up::with(&all, &[]);
    up.wait_ready().await;
    let client = up.client().await;
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(slice) = slices.get_opt("web-local-web-ipv4-0").await.unwrap() {
            let endpoints = slice.endpoints.unwrap_or_default();
            assert_eq!(endpoints[0].addresses, vec!["127.0.0.4"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the local agent published the pod"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "default");
    assert!(
        services.get_opt("web").await.unwrap().is_some(),
        "the controller made the child Service"
    );
    let metrics = reqwest::get(format!("{}/metrics", up.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("swh_probe_duration_seconds_bucket"),
        "probe histograms are exported"
    );
    // The backend goes: the probe fails, and a Warning Event on the resource says so.
    drop(backend);
    fairlead_e2e::wait::event(
        &client,
        "default",
        "web",
        "a Warning Event of the failing probe",
        |e| e.type_.as_deref() == Some("Warning"),
    )
    .await;
    // The resource goes, and its slices with it.
    let deleted = Command::new("kubectl")
        .args(["delete", "servicewithhealthchecks", "web"])
        .env("KUBECONFIG", &up.kubeconfig)
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    until("the slices gone with their resource", async || {
        slices
            .list(&kube::api::ListParams::default().labels("kubernetes.io/service-name=web"))
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    assert!(up.stop().status.success());
}
