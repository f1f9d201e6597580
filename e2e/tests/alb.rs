//! ALB instances in `fairlead up`: their proxies running as real Envoys that serve each its
//! own Gateway (the README's walk, `fairlead_e2e::alb`), proxies that get only their Gateway's
//! configuration and do not hold the shutdown, a world without Envoy that says so, and
//! Gateways no instance names provisioned the Gateway API's way when `up` is asked to.

use std::time::{Duration, Instant};

use fairlead_e2e::{Up, until};
use fairlead_kit::testing::free_port;

use fairlead_e2e::alb::*;

/// A proxy's certificate names the one Gateway it may ask for; a proxy connected over xDS
/// does not hold the shutdown: its stream ends when the drain starts, and `fairlead up`
/// exits long before its drain deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_get_only_their_gateway_and_do_not_hold_the_shutdown() {
    let up = Up::start();
    up.wait_ready().await;
    let web = certificate(&up, "default/web");
    let (refused, _) = ads(&up, web.path(), "default/other").await;
    let status = refused.expect_err("another Gateway's configuration is refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("names Gateway default/web")
            && status.message().contains("default/other"),
        "{status:?}"
    );
    let (answered, tx) = ads(&up, web.path(), "default/web").await;
    answered
        .expect("its own Gateway's listeners")
        .expect("an answer");
    let started = Instant::now();
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fairlead up took {:?} to stop with a proxy connected (its drain deadline is 25 s)",
        started.elapsed()
    );
    drop(tx);
}

/// The README's walk, as a test: ALB instances become running proxies on this machine —
/// a ClusterALBInstance behind a LoadBalancer Service (its own loopback address), another
/// on host ports, an ALBInstance of two replicas sharing its Gateway's address — each
/// serving its routes through a real Envoy; a proxy that dies is restarted (its pod counts
/// it); a Gateway no instance names says why it has no proxy; a Service port another
/// program holds is named in the Service's status; deleting an instance stops its proxies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_the_proxies_of_alb_instances() {
    let up = Up::start();
    alb_instances_world(&up).await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_envoy_proxies_say_so_and_the_rest_runs() {
    let up = Up::with(&[], &[("FAIRLEAD_ENVOY", "/nonexistent/envoy")]);
    up.wait_ready().await;
    let port = free_port();
    up.apply(&format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: lonely}}
spec: {{gatewayName: lonely, inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {port}}}}}}}
"
    ));
    let client = up.client().await;
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "d8-alb");
    let status = until("the proxy failing, counted", async || {
        let pod = pods
            .list(&kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=lonely"))
            .await
            .ok()?
            .items
            .into_iter()
            .next()?;
        let status = pod
            .status?
            .container_statuses?
            .into_iter()
            .find(|c| c.name == "proxy")?;
        (status.restart_count >= 1).then_some(status)
    })
    .await;
    assert!(!status.ready);
    let instances = cluster_instances(&client);
    let ready = until("the instance's Ready condition", async || {
        let i = instances.get("lonely").await.ok()?;
        i.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")
            .cloned()
    })
    .await;
    assert_eq!(ready["status"], "False");
    // No proxy connected: the Gateway's Synced says so, and the instance is not synced.
    let gateways = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "d8-alb",
        &fairlead_edge_controller::crds::resource("Gateway"),
    );
    let synced = until("the Gateway's Synced condition", async || {
        let g = gateways.get("lonely").await.ok()?;
        g.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Synced")
            .cloned()
    })
    .await;
    assert_eq!(
        (&synced["status"], &synced["reason"]),
        (&serde_json::json!("False"), &serde_json::json!("NoProxies"))
    );
    let lonely = instances.get("lonely").await.unwrap();
    assert_eq!(lonely.data["status"]["synced"], false);
    let output = up.stopped().await;
    assert!(output.status.success());
    let logs = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        logs.matches("FAIRLEAD_ENVOY names /nonexistent/envoy, which is not a file")
            .count(),
        1,
        "said once: {logs}"
    );
}

/// With `--provision-gateways`, a Gateway no instance names gets proxies of its own: a
/// Deployment of two real Envoys behind a LoadBalancer Service, serving its routes on its
/// own listener port, its pods carrying its `spec.infrastructure`; deleted, the Gateway takes
/// them with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_provisions_a_gateway_no_instance_names_when_asked() {
    let up = Up::builder().flag("--provision-gateways").start();
    up.wait_ready().await;
    let backend = fairlead_e2e::backends::named("web").await;
    let port = free_port();
    up.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: web, namespace: default}}
spec:
  gatewayClassName: d8-alb
  infrastructure:
    labels: {{team: web}}
    annotations: {{example.com/owner: web-team}}
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
{}",
        route_to("web", "web", "default", backend)
    ));
    let client = up.client().await;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "default");
    let address = until("the provisioned LoadBalancer's address", async || {
        let s = services.get_opt("d8-alb-web-loadbalancer").await.ok()??;
        s.status?.load_balancer?.ingress?.first()?.ip.clone()
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let url = format!("http://{address}:{port}/");
    let answer = until("the backend through the provisioned proxies", async || {
        let r = http.get(&url).send().await.ok()?;
        r.status().is_success().then_some(())?;
        r.text().await.ok()
    })
    .await;
    assert_eq!(answer, "web");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "default");
    let by_gateway =
        kube::api::ListParams::default().labels("gateway.networking.k8s.io/gateway-name=web");
    let running = until("two ready proxies", async || {
        let list = pods.list(&by_gateway).await.ok()?;
        let ready = list.items.iter().filter(|p| pod_ready(p)).count();
        (ready == 2).then_some(list.items)
    })
    .await;
    for pod in &running {
        assert_eq!(pod.metadata.labels.as_ref().unwrap()["team"], "web");
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()["example.com/owner"],
            "web-team"
        );
    }
    let gateways = gateways_of(client.clone());
    let provisioned = until("the Gateway's Provisioned condition", async || {
        let g = gateways.get("web").await.ok()?;
        g.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "alb.deckhouse.io/Provisioned" && c["status"] == "True")
            .cloned()
    })
    .await;
    assert_eq!(provisioned["reason"], "Provisioned");

    // Deleted, the Gateway takes its proxies with it.
    gateways
        .delete("web", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    until("the provisioned proxies gone", async || {
        pods.list(&by_gateway)
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
