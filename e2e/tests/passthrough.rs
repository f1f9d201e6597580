//! TLS passthrough published the way Deckhouse's documentation shows it (§3.5), through a
//! real Envoy in `fairlead up`: the instance opens an additional port, a ListenerSet puts a
//! TLS passthrough listener for `db.example.com` on it, and a TLSRoute sends those
//! connections — still encrypted — to a backend that alone holds the name's certificate;
//! the Gateway's own `tcp-port-N` listener keeps the port's other connections (a TCPRoute,
//! plain, written at `v1alpha2` as Deckhouse's documentation writes it: the default install
//! serves that version). The HTTPS-listener-in-Passthrough-mode variant is refused by the upstream CRDs the
//! default install serves, with their message (the README says to write `protocol: TLS`).

use std::sync::Arc;

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A TLS-only backend on loopback presenting a certificate for `db.example.com` (of a CA
/// nobody else has) and answering every request with `db over tls`; its port.
async fn tls_backend() -> u16 {
    let ca = fairlead_kit::pki::Ca::generate("db-ca").unwrap();
    let pair = ca.issue_server(&["db.example.com"], &[]).unwrap();
    let config = fairlead_kit::pki::server_config(&pair, &[b"http/1.1"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut buf = vec![0u8; 4096];
                let _ = tls.read(&mut buf).await;
                let body = "db over tls";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

/// The certificate subject names the server at `127.0.0.1:port` presents for `name`.
async fn presented(port: u16, name: &str) -> Option<Vec<String>> {
    let config = fairlead_kit::pki::insecure_client_config(&[b"http/1.1"]).ok()?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let server = rustls_pki_types::ServerName::try_from(name.to_owned()).ok()?;
    let tls = connector.connect(server, tcp).await.ok()?;
    let chain = tls.get_ref().1.peer_certificates()?;
    let leaf = x509_parser::parse_x509_certificate(chain.first()?.as_ref())
        .ok()?
        .1;
    let names = leaf
        .subject_alternative_name()
        .ok()??
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
            _ => None,
        })
        .collect();
    Some(names)
}

/// A plain HTTP GET to `127.0.0.1:port`: the body.
async fn plain(port: u16) -> Option<String> {
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    tcp.write_all(b"GET / HTTP/1.1\r\nhost: raw\r\nconnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tcp.read_to_string(&mut answer),
    )
    .await
    .ok()?
    .ok()?;
    answer.split("\r\n\r\n").nth(1).map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_set_passes_tls_through_on_an_additional_port() {
    let up = Up::start();
    up.wait_ready().await;
    let (http_port, https_port, extra) = (free_port(), free_port(), free_port());
    let db = tls_backend().await;
    let raw = backends::named("raw").await;
    let mut yaml = format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: edge}}
spec:
  gatewayName: edge
  inlet:
    type: HostPort
    hostPort: {{httpPort: {http_port}, httpsPort: {https_port}}}
    additionalPorts: [{{port: {extra}, protocol: TCP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: db, namespace: default}}
spec:
  parentRef: {{name: edge, namespace: d8-alb}}
  listeners:
  - {{name: db, port: {extra}, protocol: TLS, hostname: db.example.com, tls: {{mode: Passthrough}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {{name: db, namespace: default}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: db, sectionName: db, port: {extra}}}]
  hostnames: [db.example.com]
  rules: [{{backendRefs: [{{name: db, port: 5432}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: raw, namespace: d8-alb}}
spec:
  parentRefs: [{{name: edge, sectionName: tcp-port-{extra}, port: {extra}}}]
  rules: [{{backendRefs: [{{name: raw, port: 9000}}]}}]
---
"
    );
    yaml += &backends::service("default", "db", 5432, db);
    yaml += &backends::service("d8-alb", "raw", 9000, raw);
    up.apply(&yaml);

    // The name's connections reach the backend still encrypted: its answer over TLS, its
    // certificate (Envoy holds none for the name).
    let body = until("db.example.com through the additional port", async || {
        let (status, _, body) =
            fairlead_e2e::https::get(extra, "db.example.com", "/", http::HeaderMap::new()).await?;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(body, "db over tls");
    assert_eq!(
        presented(extra, "db.example.com").await,
        Some(vec!["db.example.com".to_owned()])
    );
    // The port's other connections are the Gateway's TCP listener's.
    let body = until("plain TCP on the same port", async || plain(extra).await).await;
    assert!(body.ends_with("raw"), "{body}");

    // Both listeners say so in status, neither conflicted.
    let client = up.client().await;
    let sets = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        "default",
        &fairlead_edge_controller::crds::resource("ListenerSet"),
    );
    let set = sets.get("db").await.unwrap();
    let listener = &set.data["status"]["listeners"][0];
    let conflicted = listener["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Conflicted")
        .unwrap();
    assert_eq!(conflicted["status"], "False", "{listener}");
    assert_eq!(listener["attachedRoutes"], 1, "{listener}");

    // HTTPS in Passthrough mode: the upstream CRDs refuse it, naming the rule.
    let output = fairlead_e2e::kubectl::applied(
        &up.kubeconfig,
        "apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: vault, namespace: default}
spec:
  parentRef: {name: edge, namespace: d8-alb}
  listeners:
  - {name: vault, port: 443, protocol: HTTPS, hostname: vault.example.com, tls: {mode: Passthrough}}
",
        &[],
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("tls mode must be Terminate for protocol HTTPS"),
        "{output:?}"
    );
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
