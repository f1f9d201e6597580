//! The ingress-nginx converter as a migrating user runs it against `fairlead up`: Ingresses
//! and their Services POSTed to `/ingress2gateway`, the drafted ListenerSet and HTTPRoutes
//! applied, and each host and path served through a real Envoy as the Ingress meant — an
//! HTTPS host with its own certificate (HTTP redirected to it, as ingress-nginx's
//! `ssl-redirect` does), a named Service port, a regular expression path rewritten by
//! `rewrite-target`; an Ingress of another class left out and said so; a bad parameter 400,
//! a body over 8 MiB 413.

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

const INGRESSES: &str = "apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/limit-rps: \"50\"}
spec:
  ingressClassName: nginx
  tls: [{hosts: [shop.example.com], secretName: shop-tls}]
  rules:
  - host: shop.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 8080}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: legacy
  namespace: shop
  annotations: {nginx.ingress.kubernetes.io/rewrite-target: /$2}
spec:
  ingressClassName: nginx
  rules:
  - host: legacy.example.com
    http:
      paths:
      - {path: /old(/|$)(.*), pathType: ImplementationSpecific, backend: {service: {name: paths, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: internal, namespace: shop}
spec:
  ingressClassName: internal
  rules: [{host: internal.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converted_ingresses_serve_as_the_ingresses_meant() {
    let up = Up::start();
    up.wait_ready().await;
    let (http_port, https_port) = (free_port(), free_port());
    let (web, api) = (backends::named("web").await, backends::named("api").await);
    let paths = backends::paths(std::time::Duration::ZERO).await;
    let ca = fairlead_kit::pki::Ca::generate("shop-ca").unwrap();
    let pair = ca.issue_server(&["*.example.com"], &[]).unwrap();
    let b64 = |pem: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(pem)
    };
    let services = backends::service("shop", "web", 80, web)
        + &backends::service("shop", "api", 8080, api)
        + &backends::service("shop", "paths", 80, paths);
    up.apply(&format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: shop}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: public-gw}}
spec:
  gatewayName: public-gw
  inlet: {{type: HostPort, hostPort: {{httpPort: {http_port}, httpsPort: {https_port}}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: shop-tls, namespace: shop}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
{services}",
        b64(&pair.cert_pem),
        b64(&pair.key_pem)
    ));

    // The converter, as Deckhouse's gateway controller serves it.
    let base = up.ingress2gateway_base();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let response = http
        .post(format!(
            "{base}/ingress2gateway?gateway=d8-alb/public-gw&scope=cluster&ingress-class=nginx"
        ))
        .header("content-type", "application/yaml")
        .body(format!("{INGRESSES}{services}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let drafted = response.text().await.unwrap();
    assert!(
        drafted.contains("# Ingress shop/internal: class internal, not nginx: not converted"),
        "{drafted}"
    );
    up.apply(&drafted);

    // HTTPS with the Ingress's certificate, a path per backend, the named port resolved.
    let served = until("the shop served over HTTPS", async || {
        let (status, _, body) =
            fairlead_e2e::https::get(https_port, "shop.example.com", "/", Default::default())
                .await?;
        (status == 200).then_some(body)
    })
    .await;
    assert_eq!(served, "web");
    let (status, _, body) = fairlead_e2e::https::get(
        https_port,
        "shop.example.com",
        "/api/orders",
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!((status, body.as_str()), (200, "api"));
    // HTTP redirects to HTTPS, as ingress-nginx's ssl-redirect did.
    let redirect = http
        .get(format!("http://127.0.0.1:{http_port}/cart"))
        .header("host", "shop.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 308);
    assert_eq!(
        redirect.headers()["location"],
        "https://shop.example.com/cart"
    );
    // A regular expression path, rewritten by its groups.
    let rewritten = until("the legacy path rewritten", async || {
        let r = http
            .get(format!("http://127.0.0.1:{http_port}/old/catalog/42"))
            .header("host", "legacy.example.com")
            .send()
            .await
            .ok()?;
        (r.status() == 200).then_some(r.text().await.ok()?)
    })
    .await;
    assert_eq!(rewritten, "/catalog/42");

    // What it cannot take is said.
    let bad = http
        .post(format!("{base}/ingress2gateway?scope=everything"))
        .body(INGRESSES)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("cluster or namespaced"));
    let huge = http
        .post(format!("{base}/ingress2gateway"))
        .body("#".repeat(8 * 1024 * 1024 + 1))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), 413);

    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
