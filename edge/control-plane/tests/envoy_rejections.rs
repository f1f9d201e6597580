//! What a Gateway says while a real Envoy rejects its configuration: `Programmed=False`
//! (`Invalid`, with Envoy's reason) — not only a Warning Event — and `Programmed=True` again
//! once Envoy takes a later version. The rejected resource (a certificate Envoy cannot load)
//! is set in the xDS cache by hand, standing for anything the translator lets through and
//! Envoy refuses.

mod cluster;
mod proxies;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use cluster::{cluster, control_plane, create};
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use fairlead_edge_model::{Encoded, ObjectKey, Resources};
use fairlead_edge_xds::cache::{CLUSTER, Cache, ENDPOINT, LISTENER, ROUTE, SECRET, Snapshot};
use kube::api::{Api, DynamicObject};
use proxies::{serve_xds, start_envoy};
use serde_json::json;

/// The Gateway's `Programmed` condition, once it has `status` and `reason`.
async fn until_programmed(client: &kube::Client, status: &str, reason: &str) -> String {
    let gateways: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &fairlead_edge_index::api_resource("Gateway", "v1").unwrap(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let gateway = gateways.get("gw").await.unwrap();
        let programmed = gateway.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Programmed")
            .cloned();
        if let Some(c) = &programmed
            && c["status"] == status
            && c["reason"] == reason
        {
            return c["message"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Gateway is never Programmed={status} ({reason}): {programmed:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `snapshot`'s resources, with every Secret's certificate chain replaced by bytes that
/// are not one.
fn with_broken_certificates(snapshot: &Snapshot) -> Resources {
    let encoded = |type_url: &str| -> Vec<Encoded> {
        snapshot
            .all(type_url)
            .iter()
            .map(|r| Encoded {
                name: r.name.clone(),
                bytes: r.any.value.clone(),
            })
            .collect()
    };
    let broken = |name: &str| {
        let bytes = |b: &[u8]| core::DataSource {
            specifier: Some(core::data_source::Specifier::InlineBytes(b.to_vec())),
            ..Default::default()
        };
        Encoded::new(
            name.to_owned(),
            &tls::Secret {
                name: name.to_owned(),
                r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
                    certificate_chain: Some(bytes(b"not a certificate")),
                    private_key: Some(bytes(b"not a key")),
                    ..Default::default()
                })),
            },
        )
    };
    Resources {
        listeners: encoded(LISTENER),
        routes: encoded(ROUTE),
        clusters: encoded(CLUSTER),
        endpoints: encoded(ENDPOINT),
        secrets: snapshot
            .all(SECRET)
            .iter()
            .map(|r| broken(&r.name))
            .collect(),
        without_geoip: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_envoy_rejects_makes_the_gateway_not_programmed_until_one_is_taken() {
    let (_server, client) = cluster().await;
    let port = fairlead_kit::testing::free_port();
    let ca = fairlead_kit::pki::Ca::generate("rejections CA").unwrap();
    let certificate = ca.issue_server(&["a.example.com"], &[]).unwrap();
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    create(
        &client,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "cert", "namespace": "default"},
        "data": {"tls.crt": b64(&certificate.cert_pem), "tls.key": b64(&certificate.key_pem)}}),
    )
    .await;
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [
            {"name": "web", "port": port, "protocol": "HTTPS", "hostname": "a.example.com",
             "tls": {"certificateRefs": [{"name": "cert"}]}}]}}),
    )
    .await;
    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let xds_port = serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await;
    let dir = tempfile::tempdir().unwrap();
    let _envoy = start_envoy(
        &ObjectKey::new("default", "gw"),
        (xds_port, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    until_programmed(&client, "True", "Programmed").await;

    let group = ObjectKey::new("default", "gw");
    let served = cache.get(&group);
    assert_eq!(served.all(SECRET).len(), 1, "the listener's certificate");
    cache.set(
        &group,
        Snapshot::after(with_broken_certificates(&served), &served),
    );
    let message = until_programmed(&client, "False", "Invalid").await;
    assert!(
        message.contains("rejected the Gateway's latest secret configuration"),
        "{message}"
    );

    // The translation again (what the next change would publish): taken, programmed again.
    cache.set(&group, (*served).clone());
    until_programmed(&client, "True", "Programmed").await;
    stop.cancel();
}
