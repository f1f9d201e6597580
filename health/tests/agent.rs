//! The agent against the embedded API server, with real TCP backends on loopback addresses
//! standing in for pods: per-port withdrawal and recovery, endpoint statuses, and cleanup
//! with the resource.

mod common;

use std::time::{Duration, Instant};

use common::{addresses, cluster, free_port_on, listen, pod, start_agent, wait_for};
use fairlead_health_api::ServiceWithHealthchecks;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_port_is_withdrawn_alone_and_comes_back() {
    let (_server, client) = cluster().await;
    let (a, b) = ("127.0.0.2", "127.0.0.3");
    let (http_port, admin_port) = (free_port_on(a), free_port_on(a));
    let _a_http = listen(a, http_port);
    let a_admin = listen(a, admin_port);
    let _b_http = listen(b, http_port);
    let _b_admin = listen(b, admin_port);
    pod(&client, "web-a", "web", "n1", a).await;
    pod(&client, "web-b", "web", "n1", b).await;

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
    let stop = start_agent(&client, "n1");

    wait_for(
        &client,
        "web-n1-http-ipv4-0",
        &[a, b],
        Duration::from_secs(5),
    )
    .await;
    wait_for(
        &client,
        "web-n1-admin-ipv4-0",
        &[a, b],
        Duration::from_secs(5),
    )
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let slice = slices.get("web-n1-admin-ipv4-0").await.unwrap();
    assert_eq!(slice.ports.unwrap()[0].port, Some(i32::from(admin_port)));

    // Pod a's admin port goes away: withdrawn within failureThreshold x periodSeconds + 1 s,
    // from that port only.
    drop(a_admin);
    let took = wait_for(&client, "web-n1-admin-ipv4-0", &[b], Duration::from_secs(3)).await;
    assert_eq!(
        addresses(&client, "web-n1-http-ipv4-0").await.len(),
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
        match status
            .endpoint_statuses
            .into_iter()
            .find(|e| e.pod_name == "web-a")
        {
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
        &client,
        "web-n1-admin-ipv4-0",
        &[a, b],
        Duration::from_secs(3),
    )
    .await;

    // The resource goes: its slices follow.
    swhs.delete("web", &Default::default()).await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while slices
            .get_opt("web-n1-admin-ipv4-0")
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
