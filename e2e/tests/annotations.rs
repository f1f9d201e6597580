//! Deckhouse's ALB route annotations through a real Envoy in `fairlead up`: each shows its
//! behaviour on an annotated route and its absence on a plain one beside it — an allowlist
//! (403 for other client addresses, a forged `X-Forwarded-For` not believed), a rate limit
//! (429 beyond the burst), a request buffer (413 beyond its size), an idle timeout, a regular
//! expression rewrite, response headers; a malformed value is refused by the webhook naming
//! the annotation, and an annotation not served yet leaves its route unserved and says so.

use std::time::Duration;

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

/// The routes of the world: name (and host `<name>.example.com`), annotations, the rule's
/// match and its backend port.
fn route(name: &str, annotations: &str, matches: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: {name}
  namespace: default
  annotations: {{{annotations}}}
spec:
  parentRefs: [{{name: annotated, namespace: d8-alb}}]
  hostnames: [{name}.example.com]
  rules:
  - matches: [{matches}]
    backendRefs: [{{name: backend-{port}, port: 80}}]
  - backendRefs: [{{name: backend-{port}, port: 80}}]
---
"
    )
}

/// A Service `backend-<port>` whose one endpoint is `127.0.0.1:<port>`.
fn backend(port: u16) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata: {{name: backend-{port}, namespace: default}}
spec: {{ports: [{{name: http, port: 80, targetPort: {port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: backend-{port}, namespace: default, labels: {{kubernetes.io/service-name: backend-{port}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
---
"
    )
}

const PREFIX: &str = "alb.network.deckhouse.io/";
const ANY: &str = "{path: {type: PathPrefix, value: /}}";

/// The world: an instance on a host port and the routes of each annotation.
struct World {
    http: reqwest::Client,
    port: u16,
}

impl World {
    async fn apply(up: &Up) -> Self {
        up.wait_ready().await;
        let port = free_port();
        let quick = backends::paths(Duration::ZERO).await;
        let slow = backends::paths(Duration::from_secs(3)).await;
        let mut yaml = format!(
            "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: annotated}}
spec: {{gatewayName: annotated, inlet: {{type: HostPort, hostPort: {{httpPort: {port}}}}}}}
---
"
        );
        yaml += &backend(quick);
        yaml += &backend(slow);
        let regex = r#"{path: {type: RegularExpression, value: "/legacy/([a-z]+)/(.*)"}}"#;
        for (name, annotations, matches, to) in [
            ("open", String::new(), ANY, quick),
            (
                "allowed",
                format!("{PREFIX}whitelist-source-range: \"10.1.1.10/32, 127.0.0.0/8\""),
                ANY,
                quick,
            ),
            (
                "denied",
                format!("{PREFIX}whitelist-source-range: \"10.1.1.10/32\""),
                ANY,
                quick,
            ),
            ("limited", format!("{PREFIX}limit-rps: \"2\""), ANY, quick),
            (
                "buffered",
                format!("{PREFIX}buffer-max-request-bytes: \"1024\""),
                ANY,
                quick,
            ),
            (
                "rewritten",
                format!("{PREFIX}rewrite-target: /v2/\\2/\\1"),
                regex,
                quick,
            ),
            ("idle", format!("{PREFIX}idle-timeout: \"1\""), ANY, slow),
            ("patient", String::new(), ANY, slow),
            (
                "headers",
                format!(
                    "{PREFIX}response-headers-to-add: '{{\"Strict-Transport-Security\": \"max-age=31536000\"}}'"
                ),
                ANY,
                quick,
            ),
            (
                "guarded",
                format!("{PREFIX}basic-auth-secret: users"),
                ANY,
                quick,
            ),
        ] {
            yaml += &route(name, &annotations, matches, to);
        }
        up.apply(&yaml);
        let world = Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            port,
        };
        until("the plain route served", async || {
            let (status, _) = world.get("open", "/").await?;
            (status == 200).then_some(())
        })
        .await;
        world
    }

    /// A request to host `<name>.example.com`: its status and body.
    async fn send(&self, name: &str, request: reqwest::RequestBuilder) -> Option<(u16, String)> {
        let response = request
            .header("host", format!("{name}.example.com"))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    async fn get(&self, name: &str, path: &str) -> Option<(u16, String)> {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        self.send(name, self.http.get(url)).await
    }

    async fn status(&self, name: &str, request: reqwest::RequestBuilder) -> u16 {
        self.send(name, request).await.map_or(0, |(s, _)| s)
    }

    /// `whitelist-source-range`: this client (127.0.0.1) passes a list holding it and gets
    /// 403 from one that does not, even claiming an allowed address in `X-Forwarded-For`.
    async fn allowlists(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        assert_eq!(self.status("allowed", self.http.get(&url)).await, 200);
        assert_eq!(self.status("denied", self.http.get(&url)).await, 403);
        let forged = self.http.get(&url).header("x-forwarded-for", "10.1.1.10");
        assert_eq!(
            self.status("denied", forged).await,
            403,
            "a header a client chose"
        );
    }

    /// `limit-rps: 2`: a burst of ten passes, then 429; the plain route is not limited.
    async fn rate_limits(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        let mut limited = Vec::new();
        let mut open = Vec::new();
        for _ in 0..30 {
            limited.push(self.status("limited", self.http.get(&url)).await);
            open.push(self.status("open", self.http.get(&url)).await);
        }
        let passed = limited.iter().filter(|s| **s == 200).count();
        let refused = limited.iter().filter(|s| **s == 429).count();
        assert_eq!(passed + refused, 30, "{limited:?}");
        assert!(
            (10..=14).contains(&passed),
            "burst 10 plus 2/s: {limited:?}"
        );
        assert!(open.iter().all(|s| *s == 200), "{open:?}");
    }

    /// `buffer-max-request-bytes: 1024`: a body within it passes, a larger one gets 413;
    /// the plain route takes the larger one.
    async fn buffers(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        let post = |size: usize| self.http.post(&url).body(vec![b'x'; size]);
        assert_eq!(self.status("buffered", post(512)).await, 200);
        assert_eq!(self.status("buffered", post(4096)).await, 413);
        assert_eq!(self.status("open", post(4096)).await, 200);
    }

    /// `rewrite-target`: the expression's groups rewrite the path; the route's other rule and
    /// the plain route keep theirs.
    async fn rewrites(&self) {
        let (status, target) = self.get("rewritten", "/legacy/abc/x/y").await.unwrap();
        assert_eq!((status, target.as_str()), (200, "/v2/x/y/abc"));
        let (_, other) = self.get("rewritten", "/elsewhere").await.unwrap();
        assert_eq!(other, "/elsewhere");
        let (_, plain) = self.get("open", "/legacy/abc/x").await.unwrap();
        assert_eq!(plain, "/legacy/abc/x");
    }

    /// `idle-timeout: 1`: a backend silent for 3 s ends the request (408); without it the
    /// answer comes.
    async fn idle_timeouts(&self) {
        let (idle, _) = self.get("idle", "/").await.unwrap();
        assert_eq!(idle, 408, "the route's idle timeout");
        let (patient, _) = self.get("patient", "/").await.unwrap();
        assert_eq!(patient, 200);
    }

    /// `response-headers-to-add`: on the annotated route's answers only.
    async fn response_headers(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        let sts = async |name: &str| {
            let r = self
                .http
                .get(&url)
                .header("host", format!("{name}.example.com"))
                .send()
                .await
                .unwrap();
            r.headers()
                .get("strict-transport-security")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(sts("headers").await.as_deref(), Some("max-age=31536000"));
        assert_eq!(sts("open").await, None);
    }
}

/// A malformed value is refused at the door, naming the annotation; a route asking for what
/// this version does not serve yet is not served, and its status says why.
async fn refusals(up: &Up, world: &World) {
    let file = up.dir().join("malformed.yaml");
    std::fs::write(
        &file,
        route("malformed", &format!("{PREFIX}limit-rps: fast"), ANY, 1),
    )
    .unwrap();
    let output = up.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("metadata.annotations[alb.network.deckhouse.io/limit-rps]"),
        "{stderr}"
    );
    let routes = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        up.client().await,
        "default",
        &fairlead_edge_controller::crds::resource("HTTPRoute"),
    );
    let accepted = until("the guarded route's status", async || {
        let r = routes.get("guarded").await.ok()?;
        r.data["status"]["parents"][0]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Accepted")
            .cloned()
    })
    .await;
    assert_eq!(accepted["status"], "False");
    assert!(
        accepted["message"]
            .as_str()
            .unwrap()
            .contains("basic-auth-secret"),
        "{accepted}"
    );
    let (status, _) = world.get("guarded", "/").await.unwrap();
    assert_eq!(
        status, 404,
        "never served without the protection it asks for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_change_what_envoy_serves_on_their_routes_only() {
    let up = Up::start();
    let world = World::apply(&up).await;
    world.allowlists().await;
    world.rate_limits().await;
    world.buffers().await;
    world.rewrites().await;
    world.idle_timeouts().await;
    world.response_headers().await;
    refusals(&up, &world).await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
