//! ALB instances in `fairlead up`: their proxies running as real Envoys that serve each its
//! own Gateway (the README's walk, `fairlead_e2e::alb`), proxies that get only their Gateway's
//! configuration and do not hold the shutdown, and a world without Envoy that says so.

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
        logs.matches("no Envoy binary").count(),
        1,
        "said once: {logs}"
    );
}
