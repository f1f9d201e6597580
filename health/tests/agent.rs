//! The agent against the embedded API server, with real TCP backends on loopback addresses
//! standing in for pods: per-port withdrawal and recovery, and the endpoint statuses.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use fairlead_apiserver::{ApiServer, Config};
use fairlead_health::agent::{self, Settings};
use fairlead_health::metrics::HealthMetrics;
use fairlead_health_api::{ServiceWithHealthchecks, crd};
use fairlead_kit::Metrics;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A listener standing in for one container port of a pod; dropped to make its probe fail.
fn listen(ip: &str, port: u16) -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind((ip.parse::<IpAddr>().unwrap(), port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

fn free_port_on(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn pod(client: &kube::Client, name: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "app"}]}}))
        .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running",
        "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}})))
        .await
        .unwrap();
}

async fn addresses(slices: &Api<EndpointSlice>, name: &str) -> Vec<String> {
    slices
        .get_opt(name)
        .await
        .unwrap()
        .map(|s| {
            s.endpoints
                .into_iter()
                .flatten()
                .map(|e| e.addresses[0].clone())
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_for(
    slices: &Api<EndpointSlice>,
    name: &str,
    expected: &[&str],
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let mut got = addresses(slices, name).await;
        got.sort();
        if got == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{name}: {got:?} is not {expected:?} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_port_is_withdrawn_alone_and_comes_back() {
    let server = ApiServer::start(Config {
        allow_loopback_endpoints: true,
        ..Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()).await.unwrap();

    let (a, b) = ("127.0.0.2", "127.0.0.3");
    let (http_port, admin_port) = (free_port_on(a), free_port_on(a));
    let _a_http = listen(a, http_port);
    let a_admin = listen(a, admin_port);
    let _b_http = listen(b, http_port);
    let _b_admin = listen(b, admin_port);
    pod(&client, "web-a", a).await;
    pod(&client, "web-b", b).await;

    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let swh: ServiceWithHealthchecks = serde_json::from_value(json!({
        "apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [
            {"name": "http", "port": 80, "targetPort": http_port},
            {"name": "admin", "port": 9000, "targetPort": admin_port}],
          "healthcheck": {"initialDelaySeconds": 0, "periodSeconds": 1, "probes": [
            {"mode": "TCP", "tcp": {"targetPort": http_port}, "failureThreshold": 2},
            {"mode": "TCP", "tcp": {"targetPort": admin_port}, "failureThreshold": 2}]}}}))
    .unwrap();
    swhs.create(&PostParams::default(), &swh).await.unwrap();

    let stop = CancellationToken::new();
    let metrics = HealthMetrics::new(&Metrics::new("test").unwrap()).unwrap();
    let settings = Settings {
        node: "n1".into(),
        concurrency: 16,
        verbose_status: false,
    };
    tokio::spawn(agent::run(
        client.clone(),
        settings,
        metrics,
        stop.clone(),
        || {},
    ));

    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    wait_for(
        &slices,
        "web-n1-http-ipv4-0",
        &[a, b],
        Duration::from_secs(5),
    )
    .await;
    wait_for(
        &slices,
        "web-n1-admin-ipv4-0",
        &[a, b],
        Duration::from_secs(5),
    )
    .await;
    let slice = slices.get("web-n1-admin-ipv4-0").await.unwrap();
    assert_eq!(slice.ports.unwrap()[0].port, Some(i32::from(admin_port)));

    // Pod a's admin port goes away: withdrawn within failureThreshold x periodSeconds + 1 s,
    // from that port only.
    drop(a_admin);
    let took = wait_for(&slices, "web-n1-admin-ipv4-0", &[b], Duration::from_secs(3)).await;
    assert_eq!(
        addresses(&slices, "web-n1-http-ipv4-0").await.len(),
        2,
        "the other port keeps the pod"
    );
    assert!(took <= Duration::from_secs(3), "{took:?}");

    // The status follows the slices (written right after them).
    let deadline = Instant::now() + Duration::from_secs(3);
    let entry = loop {
        let status = swhs
            .get_status("web")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let entry = status
            .endpoint_statuses
            .into_iter()
            .find(|e| e.pod_name == "web-a");
        match entry {
            Some(e) if !e.failed_probes.is_empty() => break e,
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "the failing probe reaches the status"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(entry.failed_probes, vec![format!("tcp:{a}:{admin_port}")]);
    assert!(
        entry.failure_reasons[0].contains("connection failed"),
        "{:?}",
        entry.failure_reasons
    );
    assert!(!entry.probes_successful);
    assert_eq!(entry.node_name.as_deref(), Some("n1"));

    // The port comes back: published again after successThreshold (1) probe.
    let _a_admin = listen(a, admin_port);
    wait_for(
        &slices,
        "web-n1-admin-ipv4-0",
        &[a, b],
        Duration::from_secs(3),
    )
    .await;

    // The controller reports a foreign Service of the same name: the agent withdraws.
    let conflict = json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "web"}, "status": {"conditions": [{"type": "ChildServiceReady", "status": "False",
            "reason": "ChildServiceConflict", "message": "foreign", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    swhs.patch_status(
        "web",
        &PatchParams::apply("fairlead-health-controller").force(),
        &Patch::Apply(&conflict),
    )
    .await
    .unwrap();
    wait_for(&slices, "web-n1-http-ipv4-0", &[], Duration::from_secs(3)).await;

    // The resource goes: its slices follow (owner references, or the agent).
    swhs.delete("web", &Default::default()).await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while slices
            .get_opt("web-n1-http-ipv4-0")
            .await
            .unwrap()
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "slices removed with the resource");
    stop.cancel();
}
