//! External authentication and HTTPS ListenerSets through a real Envoy in `fairlead up`, in
//! the shape Deckhouse's DexAuthenticator gives them (its documentation's §4.2): an
//! application's own HTTPS listener (a ListenerSet with its own certificate, on the inlet's
//! HTTPS port, with no platform certificate in the cluster), its route annotated with
//! `auth-url` (an HTTPS authenticator), `auth-signin` and `auth-response-headers`, and the
//! authenticator's own route under `/dex-authenticator` with `backend-tls-settings`
//! insecure. Without a session the client is sent to the sign-in page with `rd`; with one
//! the backend sees the user the authenticator named (never a header the client sent); a
//! banned session gets 403, a failing authenticator 500; without `auth-signin` the 401 is
//! passed back. `tls-disable-protocol: http2` takes `h2` out of the route's hostname's ALPN
//! and leaves the other names be.

use std::sync::{Arc, Mutex};

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const PREFIX: &str = "alb.network.deckhouse.io/";

/// What the authenticator was asked: each subrequest's request line and headers.
type Asked = Arc<Mutex<Vec<String>>>;

/// The authenticator: HTTPS on loopback (a certificate nobody trusts), answering
/// `/dex-authenticator/auth` by the session cookie (`alice`: 202 with her headers and a
/// refreshed cookie; `banned`: 403; `broken`: 500; none: 401) and
/// `/dex-authenticator/sign_in` with the sign-in page; its port and what it was asked.
async fn authenticator() -> (u16, Asked) {
    let ca = fairlead_kit::pki::Ca::generate("authenticator-ca").unwrap();
    let pair = ca
        .issue_server(&["authenticator"], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let config = fairlead_kit::pki::server_config(&pair, &[b"http/1.1"]).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Asked::default();
    let record = asked.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (acceptor, record) = (acceptor.clone(), record.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut buf = vec![0u8; 16384];
                let n = tls.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let answer = answer(&head);
                if head.contains(" /dex-authenticator/auth") {
                    record.lock().unwrap().push(head);
                }
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, asked)
}

/// The authenticator's answer to a request `head`.
fn answer(head: &str) -> String {
    let cookie = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("cookie:"))
        .unwrap_or_default();
    let (status, headers, body) = if head.contains(" /dex-authenticator/sign_in") {
        ("200 OK", String::new(), "sign in")
    } else if cookie.contains("_oauth2_proxy=alice") {
        (
            "202 Accepted",
            "x-auth-request-user: alice\r\nx-auth-request-email: alice@example.com\r\nauthorization: Bearer token-alice\r\nset-cookie: _oauth2_proxy=alice-refreshed; Path=/\r\n".to_owned(),
            "",
        )
    } else if cookie.contains("_oauth2_proxy=banned") {
        ("403 Forbidden", String::new(), "")
    } else if cookie.contains("_oauth2_proxy=broken") {
        ("500 Internal Server Error", String::new(), "")
    } else {
        (
            "401 Unauthorized",
            "www-authenticate: Bearer realm=\"dex\"\r\n".to_owned(),
            "",
        )
    };
    format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// An HTTPRoute `name` on the application's ListenerSet for `host`, to `to`:`port` under
/// `path`.
fn route(name: &str, annotations: &str, host: &str, path: &str, to: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: {name}
  namespace: default
  annotations: {{{annotations}}}
spec:
  parentRefs: [{{group: gateway.networking.k8s.io, kind: ListenerSet, name: app, sectionName: app}}]
  hostnames: [{host}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: {path}}}}}]
    backendRefs: [{{name: {to}, port: {port}}}]
---
"
    )
}

/// The world: the instance (no platform certificate anywhere), the application's
/// ListenerSet and routes, the authenticator and the backend.
struct World {
    https: u16,
    asked: Asked,
}

impl World {
    async fn apply(up: &Up) -> Self {
        up.wait_ready().await;
        let (http_port, https) = (free_port(), free_port());
        let (auth_port, asked) = authenticator().await;
        let echo = backends::echo().await;
        let ca = fairlead_kit::pki::Ca::generate("app-ca").unwrap();
        let pair = ca.issue_server(&["*.example.com"], &[]).unwrap();
        let b64 = |pem: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(pem)
        };
        let auth_url = format!("https://127.0.0.1:{auth_port}/dex-authenticator/auth");
        let mut yaml = format!(
            "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: dex}}
spec:
  gatewayName: dex
  inlet: {{type: HostPort, hostPort: {{httpPort: {http_port}, httpsPort: {https}}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: app-tls, namespace: default}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: app, namespace: default}}
spec:
  parentRef: {{name: dex, namespace: d8-alb}}
  listeners:
  - name: app
    port: 443
    protocol: HTTPS
    hostname: \"*.example.com\"
    tls: {{mode: Terminate, certificateRefs: [{{name: app-tls}}]}}
---
",
            b64(&pair.cert_pem),
            b64(&pair.key_pem)
        );
        yaml += &backends::service("default", "app", 80, echo);
        yaml += &backends::service("default", "dash-dex-authenticator", 443, auth_port);
        let guarded = format!(
            "{PREFIX}auth-url: \"{auth_url}\", {PREFIX}auth-signin: \"https://app.example.com/dex-authenticator/sign_in\", {PREFIX}auth-response-headers: Authorization"
        );
        yaml += &route("app", &guarded, "app.example.com", "/", "app", 80);
        yaml += &route(
            "dex-authenticator",
            &format!(
                "{PREFIX}backend-tls-settings: '{{\"mode\": \"SIMPLE\", \"insecureSkipVerify\": true}}'"
            ),
            "app.example.com",
            "/dex-authenticator",
            "dash-dex-authenticator",
            443,
        );
        yaml += &route(
            "api",
            &format!("{PREFIX}auth-url: \"{auth_url}\""),
            "api.example.com",
            "/",
            "app",
            80,
        );
        yaml += &route(
            "legacy",
            &format!("{PREFIX}tls-disable-protocol: http2"),
            "legacy.example.com",
            "/",
            "app",
            80,
        );
        up.apply(&yaml);
        let world = Self { https, asked };
        until("the legacy route served over HTTPS", async || {
            let (status, _, _) = world.get("legacy", "/", None).await?;
            (status == 200).then_some(())
        })
        .await;
        world
    }

    /// A GET of `path` on `<host>.example.com` over HTTPS, with a session cookie and a
    /// forged `X-Auth-Request-User`.
    async fn get(
        &self,
        host: &str,
        path: &str,
        session: Option<&str>,
    ) -> Option<fairlead_e2e::https::Answer> {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-auth-request-user", "mallory".parse().ok()?);
        if let Some(session) = session {
            headers.insert("cookie", format!("_oauth2_proxy={session}").parse().ok()?);
        }
        fairlead_e2e::https::get(self.https, &format!("{host}.example.com"), path, headers).await
    }

    /// The ALPN protocol the listener picks for `host` when a client offers h2 and 1.1.
    async fn alpn(&self, host: &str) -> Option<String> {
        let config = fairlead_kit::pki::insecure_client_config(&[b"h2", b"http/1.1"]).ok()?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.https))
            .await
            .ok()?;
        let name = rustls_pki_types::ServerName::try_from(format!("{host}.example.com")).ok()?;
        let tls = connector.connect(name, tcp).await.ok()?;
        tls.get_ref()
            .1
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_authentication_guards_an_https_listener_set_route() {
    let up = Up::start();
    let world = World::apply(&up).await;

    // No session: to the sign-in page, with the original URL escaped as nginx does.
    let (status, headers, _) = world.get("app", "/orders?id=1&by=a", None).await.unwrap();
    assert_eq!(status, 302);
    assert_eq!(
        headers["location"],
        "https://app.example.com/dex-authenticator/sign_in?rd=https://app.example.com/orders%3Fid=1%26by=a"
    );
    // The sign-in page is the authenticator's own route (TLS to it, unverified).
    let (status, _, body) = world
        .get("app", "/dex-authenticator/sign_in", None)
        .await
        .unwrap();
    assert_eq!((status, body.as_str()), (200, "sign in"));

    // A session: the backend sees the user the authenticator named, not the client's.
    let (status, headers, body) = world.get("app", "/orders", Some("alice")).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let seen: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["x-auth-request-user"], "alice", "{seen}");
    assert_eq!(seen["x-auth-request-email"], "alice@example.com");
    assert_eq!(seen["authorization"], "Bearer token-alice");
    assert_eq!(
        headers["set-cookie"], "_oauth2_proxy=alice-refreshed; Path=/",
        "the refreshed session reaches the client"
    );
    let subrequest = world.asked.lock().unwrap().last().cloned().unwrap();
    assert!(
        subrequest.starts_with("GET /dex-authenticator/auth HTTP/1.1"),
        "the auth URL's own path: {subrequest}"
    );
    let lower = subrequest.to_ascii_lowercase();
    assert!(
        lower.contains("x-original-url: https://app.example.com/orders"),
        "{subrequest}"
    );
    assert!(lower.contains("x-original-method: get"), "{subrequest}");

    // A banned session is refused; a failing authenticator is a 500, never the backend.
    assert_eq!(world.get("app", "/", Some("banned")).await.unwrap().0, 403);
    assert_eq!(world.get("app", "/", Some("broken")).await.unwrap().0, 500);
    // Without auth-signin the authenticator's 401 and challenge are passed back.
    let (status, headers, _) = world.get("api", "/", None).await.unwrap();
    assert_eq!(status, 401);
    assert_eq!(headers["www-authenticate"], "Bearer realm=\"dex\"");
    assert_eq!(world.get("api", "/", Some("alice")).await.unwrap().0, 200);

    // tls-disable-protocol: http2 on legacy.example.com only.
    assert_eq!(world.alpn("legacy").await.as_deref(), Some("http/1.1"));
    assert_eq!(world.alpn("app").await.as_deref(), Some("h2"));
    let (status, _, body) = world.get("legacy", "/", None).await.unwrap();
    assert_eq!(status, 200, "{body}");

    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
