//! Changing an instance's inlet as Deckhouse documents it (§3.8), through real Envoys in
//! `fairlead up`: a second instance with the same `gatewayName` and a new inlet (host ports)
//! serves the Gateway's routes on its own proxies while the first still serves on its load
//! balancer, so the new path is verified first; deleting the first takes its inlet away and
//! leaves the new one serving, never interrupted.

use std::time::Duration;

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

/// The body `url` answers with (Host `files.example.com`), if it answers.
async fn body(http: &reqwest::Client, url: &str) -> Option<String> {
    let response = http
        .get(url)
        .header("host", "files.example.com")
        .send()
        .await
        .ok()?;
    response.status().is_success().then_some(())?;
    response.text().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_serves_its_inlet_before_the_old_one_goes() {
    let up = Up::start();
    up.wait_ready().await;
    let files = backends::named("files").await;
    let (lb_port, host_port, host_https) = (free_port(), free_port(), free_port());
    let mut yaml = format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: old}}
spec: {{gatewayName: shop, inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {lb_port}}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: files, namespace: default}}
spec:
  parentRefs: [{{name: shop, namespace: d8-alb}}]
  hostnames: [files.example.com]
  rules: [{{backendRefs: [{{name: files, port: 80}}]}}]
---
"
    );
    yaml += &backends::service("default", "files", 80, files);
    up.apply(&yaml);
    let client = up.client().await;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "d8-alb");
    let address = until("the old inlet's address", async || {
        services
            .get("d8-alb-shop-loadbalancer")
            .await
            .ok()?
            .status?
            .load_balancer?
            .ingress?
            .first()?
            .ip
            .clone()
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let old = format!("http://{address}:{lb_port}/");
    until("files through the old inlet", async || {
        (body(&http, &old).await? == "files").then_some(())
    })
    .await;

    // The new instance is younger (creation times have a second's resolution).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    up.apply(&format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: new}}
spec:
  gatewayName: shop
  inlet: {{type: HostPort, hostPort: {{httpPort: {host_port}, httpsPort: {host_https}}}}}
"
    ));
    let new = format!("http://127.0.0.1:{host_port}/");
    until("files through the new inlet", async || {
        (body(&http, &new).await? == "files").then_some(())
    })
    .await;
    assert_eq!(
        body(&http, &old).await.as_deref(),
        Some("files"),
        "the old inlet serves still"
    );
    let instances = fairlead_e2e::alb::cluster_instances(&client);
    let status = until("the new instance ready, sharing the Gateway", async || {
        let i = instances.get("new").await.ok()?;
        (i.data["status"]["ready"] == true).then_some(i.data["status"].clone())
    })
    .await;
    assert_eq!(status["gateway"], "shop");
    let conflict = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Conflict")
        .unwrap()
        .clone();
    assert_eq!(
        (&conflict["status"], &conflict["reason"]),
        (
            &serde_json::json!("False"),
            &serde_json::json!("GatewayShared")
        ),
        "{conflict}"
    );
    for flag in ["conflictPorts", "conflictFrontendTLS", "conflictBackendTLS"] {
        assert_eq!(status[flag], false, "{flag}: {status}");
    }

    // The old instance goes; the new inlet keeps serving, without a failed request.
    let watching = {
        let (http, new) = (http.clone(), new.clone());
        tokio::spawn(async move {
            let mut failed = 0;
            for _ in 0..60 {
                if body(&http, &new).await.as_deref() != Some("files") {
                    failed += 1;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            failed
        })
    };
    instances
        .delete("old", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    until("the old inlet gone", async || {
        services
            .get_opt("d8-alb-shop-loadbalancer")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(watching.await.unwrap(), 0, "the new inlet never failed");
    assert_eq!(body(&http, &new).await.as_deref(), Some("files"));
    let status = until("the new instance controlling", async || {
        let i = instances.get("new").await.ok()?;
        let conflict = i.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Conflict")?
            .clone();
        (conflict["reason"] == "NoConflict").then_some(i.data["status"].clone())
    })
    .await;
    assert_eq!(status["ready"], true, "{status}");
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
