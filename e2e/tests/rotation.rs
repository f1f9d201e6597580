//! Certificate rotation under traffic: the CA's short-lived certificates (xDS server, proxies,
//! webhooks) renewed while requests flow through a real Envoy, none failing.

use std::time::{Duration, Instant};

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

use fairlead_e2e::alb::*;

/// Certificates that live 15 s are renewed at two thirds of their lifetime while requests
/// flow through the proxy: none fails, and Envoy presents the renewed client certificate
/// without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_rotate_under_traffic() {
    let up = Up::with(&["--certificate-lifetime", "15"], &[]);
    up.wait_ready().await;
    let backend = backends::named("rotated").await;
    let port = free_port();
    let mut yaml = format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: rotating}}
spec: {{gatewayName: rotating, inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {port}}}}}}}
---
"
    );
    yaml.push_str(&route_to("rotated", "rotating", "d8-alb", backend));
    up.apply(&yaml);
    let client = up.client().await;
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), "d8-alb");
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), "d8-alb");
    let address = until("the LoadBalancer address", async || {
        let s =
            kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), "d8-alb")
                .get_opt("d8-alb-rotating-loadbalancer")
                .await
                .ok()??;
        s.status?.load_balancer?.ingress?.first()?.ip.clone()
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let url = format!("http://{address}:{port}/");
    until("the first answer", async || {
        let r = http.get(&url).send().await.ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    let serial = async || -> Option<String> {
        let secret = secrets.get_opt("d8-alb-rotating-xds-client").await.ok()??;
        let pem = secret.data?.get("tls.crt")?.0.clone();
        let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
        Some(
            pem.parse_x509()
                .ok()?
                .raw_serial_as_string()
                .replace(':', ""),
        )
    };
    let mut serials = vec![serial().await.unwrap()];
    let (mut answered, mut failed) = (0, Vec::new());
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(25) {
        match http.get(&url).send().await {
            Ok(r) if r.status().is_success() => answered += 1,
            other => failed.push(format!("{other:?}")),
        }
        if let Some(now) = serial().await
            && serials.last() != Some(&now)
        {
            serials.push(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        failed.is_empty(),
        "{} of {answered} requests failed: {failed:?}",
        failed.len()
    );
    assert!(
        serials.len() >= 3,
        "renewed at least twice in 25 s: {serials:?}"
    );
    // Envoy holds the renewed certificate (its admin interface, on the pod's address).
    let pod_ip = pods
        .list(&kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=rotating"))
        .await
        .unwrap()
        .items[0]
        .status
        .as_ref()
        .unwrap()
        .pod_ip
        .clone()
        .unwrap();
    until("Envoy presenting the current certificate", async || {
        let certs = http
            .get(format!("http://{pod_ip}:19000/certs"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let now = serial().await?.to_ascii_lowercase();
        certs
            .to_ascii_lowercase()
            .contains(now.trim_start_matches('0'))
            .then_some(())
    })
    .await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
