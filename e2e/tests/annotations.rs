//! Deckhouse's ALB route annotations through a real Envoy in `fairlead up`: each shows its
//! behaviour on an annotated route and its absence on a plain one beside it — an allowlist
//! (403 for other client addresses, a forged `X-Forwarded-For` not believed), a rate limit
//! (429 beyond the burst), a request buffer (413 beyond its size), an idle timeout, a regular
//! expression rewrite, response headers; a cookie and a client-address affinity that keep
//! most clients where they were when an endpoint is added, the Service's own address instead
//! of its endpoints, a response header limit; basic auth with bcrypt, apr1 and SHA users,
//! alone, with an allowlist, or either under `satisfy: any`, and a users Secret in another
//! namespace that is used only once a ReferenceGrant allows it (503 until then, never the
//! backend); a malformed value is refused by the webhook naming the annotation. The WAF has
//! a test of its own (`waf.rs`).

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
    backends::service("default", &format!("backend-{port}"), 80, port)
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
spec:
  gatewayName: annotated
  inlet: {{type: HostPort, hostPort: {{httpPort: {port}}}}}
  originalIPDetection: {{realIPHeader: X-Real-IP, setRealIPFrom: [127.0.0.0/8]}}
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

    /// `whitelist-source-range`, on the client address the instance's `originalIPDetection`
    /// settles on (`X-Real-IP` from the trusted load balancer in front — here the local
    /// runner's forwarder): a listed client passes, another gets 403, and an address a client
    /// wrote into `X-Forwarded-For` is not believed.
    async fn allowlists(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        let from = |client: &str| self.http.get(&url).header("x-real-ip", client);
        assert_eq!(
            self.status("allowed", self.http.get(&url)).await,
            200,
            "the peer itself"
        );
        assert_eq!(self.status("allowed", from("10.1.1.10")).await, 200);
        assert_eq!(self.status("denied", from("10.1.1.10")).await, 200);
        assert_eq!(self.status("denied", from("192.0.2.1")).await, 403);
        let forged = from("192.0.2.1").header("x-forwarded-for", "10.1.1.10");
        assert_eq!(
            self.status("denied", forged).await,
            403,
            "a header a client chose"
        );
        assert_eq!(self.status("open", from("192.0.2.1")).await, 200);
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

    /// `idle-timeout: 1`: a backend silent for 3 s ends the request after a second (504:
    /// the request was sent whole, the answer never came); without it the answer comes.
    async fn idle_timeouts(&self) {
        let started = std::time::Instant::now();
        let (idle, _) = self.get("idle", "/").await.unwrap();
        assert_eq!(idle, 504, "the route's idle timeout");
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "{:?}",
            started.elapsed()
        );
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

/// A Service `name` whose endpoints are `127.0.0.1` at each of `ports` (one EndpointSlice
/// each), at cluster IP `127.0.0.1` and port `service_port`.
fn service(name: &str, service_port: u16, ports: &[u16]) -> String {
    let mut yaml = format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec: {{clusterIP: 127.0.0.1, ports: [{{name: http, port: {service_port}, targetPort: {service_port}}}]}}
---
"
    );
    for port in ports {
        yaml += &slice(name, *port);
    }
    yaml
}

/// An EndpointSlice of Service `name`: `127.0.0.1` at `port`.
fn slice(name: &str, port: u16) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}-{port}, namespace: default, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
---
"
    )
}

/// A route `name` to Service `to` at `port`.
fn route_to_service(name: &str, annotations: &str, to: &str, port: u16) -> String {
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
  rules: [{{backendRefs: [{{name: {to}, port: {port}}}]}}]
---
"
    )
}

/// Routes that change how their backends are reached: affinities over Service `pair`
/// (backends `a` and `b`; `c` joins later), the Service's own address (`service`) against
/// its endpoint (`pods`), and a response header limit against a backend sending 8 KiB.
struct Upstream {
    /// The backend (`c`) that joins `pair` later.
    third: u16,
}

impl Upstream {
    async fn apply(up: &Up, world: &World) -> Self {
        let (a, b, third) = (
            backends::named("a").await,
            backends::named("b").await,
            backends::named("c").await,
        );
        let (by_service, pods) = (
            backends::named("service").await,
            backends::named("pods").await,
        );
        let heavy = backends::heavy("heavy", 8192).await;
        let pair_port = free_port();
        let mut yaml = service("pair", pair_port, &[a, b]);
        yaml += &service("served", by_service, &[pods]);
        yaml += &service("heavy", heavy, &[heavy]);
        for (name, annotations, to, port) in [
            (
                "sticky",
                format!("{PREFIX}session-affinity: '{{\"cookieName\": \"pin\"}}'"),
                "pair",
                pair_port,
            ),
            (
                "hashed",
                format!("{PREFIX}hash-key: source-ip"),
                "pair",
                pair_port,
            ),
            ("spread", String::new(), "pair", pair_port),
            (
                "via-service",
                format!("{PREFIX}service-upstream: \"true\""),
                "served",
                by_service,
            ),
            ("via-pods", String::new(), "served", by_service),
            (
                "small-headers",
                format!("{PREFIX}proxy-buffer-size: 4k"),
                "heavy",
                heavy,
            ),
            ("large-headers", String::new(), "heavy", heavy),
        ] {
            yaml += &route_to_service(name, &annotations, to, port);
        }
        up.apply(&yaml);
        until("the upstream routes served", async || {
            let (status, _) = world.get("via-pods", "/").await?;
            (status == 200).then_some(())
        })
        .await;
        Self { third }
    }

    /// Which backend of `pair` each client answers from: clients by cookie value on
    /// `sticky`, by address (`X-Real-IP`, as the load balancer in front says) on `hashed`.
    async fn placements(world: &World, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        for client in 10..70u8 {
            let url = format!("http://127.0.0.1:{}/", world.port);
            let request = if name == "sticky" {
                world
                    .http
                    .get(&url)
                    .header("cookie", format!("pin=client-{client}"))
            } else {
                world
                    .http
                    .get(&url)
                    .header("x-real-ip", format!("10.0.0.{client}"))
            };
            let body = world.send(name, request).await;
            out.push(body.map(|(_, b)| b).unwrap_or_default());
        }
        out
    }

    /// Each client sticks to one backend while the plain route spreads; an endpoint added
    /// moves about a third of the clients, not all.
    async fn affinities(&self, up: &Up, world: &World) {
        let url = format!("http://127.0.0.1:{}/", world.port);
        let mut spread = std::collections::BTreeSet::new();
        for _ in 0..10 {
            spread.insert(world.send("spread", world.http.get(&url)).await.unwrap().1);
        }
        assert_eq!(spread.len(), 2, "the plain route spreads: {spread:?}");
        let mut before = Vec::new();
        for name in ["sticky", "hashed"] {
            let first = Self::placements(world, name).await;
            assert_eq!(
                first,
                Self::placements(world, name).await,
                "{name}: clients stay"
            );
            assert!(
                first.iter().all(|b| b == "a" || b == "b"),
                "{name}: {first:?}"
            );
            before.push(first);
        }
        up.apply(&slice("pair", self.third));
        for (name, first) in ["sticky", "hashed"].into_iter().zip(before) {
            // Each old endpoint keeps its points on the ring: a client either stays or moves
            // to the new endpoint, never between the old ones (until the ring sized for three
            // is in place, Envoy briefly balances over a ring of the old size).
            let after = until("clients moving to the new endpoint only", async || {
                let after = Self::placements(world, name).await;
                let only_to_c = first.iter().zip(&after).all(|(x, y)| x == y || y == "c");
                (only_to_c && after.iter().any(|b| b == "c")).then_some(after)
            })
            .await;
            let moved = first.iter().zip(&after).filter(|(x, y)| x != y).count();
            // A third (20) on average; without affinity about two thirds would move.
            assert!(
                (1..=30).contains(&moved),
                "{name}: {moved} of 60 clients moved (20 expected): {first:?} → {after:?}"
            );
        }
    }

    /// `service-upstream`: the Service's address, not its endpoint; `proxy-buffer-size`:
    /// 8 KiB of response headers beyond a 4 KiB limit fail (502, Envoy's upstream protocol
    /// error), within the default they pass.
    async fn addresses_and_header_limits(world: &World) {
        assert_eq!(
            world.get("via-service", "/").await.unwrap(),
            (200, "service".into())
        );
        assert_eq!(
            world.get("via-pods", "/").await.unwrap(),
            (200, "pods".into())
        );
        assert_eq!(world.get("small-headers", "/").await.unwrap().0, 502);
        assert_eq!(
            world.get("large-headers", "/").await.unwrap(),
            (200, "heavy".into())
        );
    }
}

/// Basic auth: htpasswd users of each kind nginx reads (apr1, SHA, bcrypt), alone
/// (`members`), either it or the allowlist (`office`, `satisfy: any`), both (`strict`), and
/// from a Secret in another namespace (`borrowed`).
async fn basic_auth(up: &Up, world: &World) {
    use base64::Engine as _;
    let carol = bcrypt::hash("secret", 4).unwrap();
    let users = format!(
        "alice:$apr1$fairlead$t6vvlCQ7SxpycJ3UcbhX50\nbob:{{SHA}}5en6G6MezRroT3XKqkdPOmY/BfQ=\ncarol:{carol}\n"
    );
    let data = base64::engine::general_purpose::STANDARD.encode(&users);
    let backend = backends::named("inside").await;
    let mut yaml = format!(
        "apiVersion: v1
kind: Secret
metadata: {{name: users, namespace: default}}
data: {{auth: {data}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: vault}}
---
apiVersion: v1
kind: Secret
metadata: {{name: users, namespace: vault}}
data: {{auth: {data}}}
---
"
    );
    yaml += &service("inside", backend, &[backend]);
    let allow = format!("{PREFIX}whitelist-source-range: 10.0.0.0/8");
    for (name, annotations) in [
        ("members", format!("{PREFIX}basic-auth-secret: users")),
        (
            "office",
            format!("{PREFIX}basic-auth-secret: default/users, {allow}, {PREFIX}satisfy: any"),
        ),
        (
            "strict",
            format!("{PREFIX}basic-auth-secret: users, {allow}"),
        ),
        (
            "borrowed",
            format!("{PREFIX}basic-auth-secret: vault/users"),
        ),
    ] {
        yaml += &route_to_service(name, &annotations, "inside", backend);
    }
    up.apply(&yaml);
    let url = format!("http://127.0.0.1:{}/", world.port);
    let ask = |client: &str, user: Option<(&str, &str)>| {
        let request = world.http.get(&url).header("x-real-ip", client);
        match user {
            Some((u, p)) => request.basic_auth(u, Some(p)),
            None => request,
        }
    };
    let challenge = until("the members' route asking for credentials", async || {
        let r = ask("192.0.2.1", None)
            .header("host", "members.example.com")
            .send()
            .await
            .ok()?;
        (r.status() == 401).then(|| r.headers().get("www-authenticate").cloned())?
    })
    .await;
    assert_eq!(challenge, "Basic realm=\"Authentication Required\"");
    for user in ["alice", "bob", "carol"] {
        let passed = world
            .send("members", ask("192.0.2.1", Some((user, "secret"))))
            .await;
        assert_eq!(passed, Some((200, "inside".into())), "{user}");
        let wrong = world
            .status("members", ask("192.0.2.1", Some((user, "Secret"))))
            .await;
        assert_eq!(wrong, 401, "{user}: a wrong password");
    }
    let office = |client, user| world.status("office", ask(client, user));
    assert_eq!(
        office("10.1.2.3", None).await,
        200,
        "satisfy any: the allowlist"
    );
    assert_eq!(office("192.0.2.1", None).await, 401);
    assert_eq!(
        office("192.0.2.1", Some(("bob", "secret"))).await,
        200,
        "or a user"
    );
    let strict = |client, user| world.status("strict", ask(client, user));
    assert_eq!(strict("10.1.2.3", None).await, 401, "satisfy all: both");
    assert_eq!(strict("10.1.2.3", Some(("bob", "secret"))).await, 200);
    assert_eq!(strict("192.0.2.1", Some(("bob", "secret"))).await, 403);
    borrowed_users(up, world, &ask).await;
}

/// A users Secret in another namespace: the route answers 503 and says why until a
/// ReferenceGrant there allows it, then asks for credentials.
async fn borrowed_users(
    up: &Up,
    world: &World,
    ask: &impl Fn(&str, Option<(&str, &str)>) -> reqwest::RequestBuilder,
) {
    let routes = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        up.client().await,
        "default",
        &fairlead_edge_controller::crds::resource("HTTPRoute"),
    );
    let resolved = until("the borrowed route's ResolvedRefs", async || {
        let r = routes.get("borrowed").await.ok()?;
        r.data["status"]["parents"][0]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "ResolvedRefs")
            .cloned()
    })
    .await;
    assert_eq!(resolved["status"], "False", "{resolved}");
    assert_eq!(resolved["reason"], "RefNotPermitted", "{resolved}");
    let shut = world
        .status("borrowed", ask("192.0.2.1", Some(("bob", "secret"))))
        .await;
    assert_eq!(shut, 503, "never the backend, credentials or not");
    up.apply(
        "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: routes-read-users, namespace: vault}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: \"\", kind: Secret, name: users}]
",
    );
    until("the granted route asking for credentials", async || {
        let status = world.status("borrowed", ask("192.0.2.1", None)).await;
        (status == 401).then_some(())
    })
    .await;
    let granted = world
        .status("borrowed", ask("192.0.2.1", Some(("bob", "secret"))))
        .await;
    assert_eq!(granted, 200);
}

/// `response-headers-to-add` is served and, being deprecated, told in a Warning Event on
/// its route.
async fn deprecation_told(up: &Up) {
    let event = fairlead_e2e::wait::event(
        &up.client().await,
        "default",
        "headers",
        "the Warning Event of the deprecated annotation",
        |e| e.reason.as_deref() == Some("DeprecatedAnnotation"),
    )
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.regarding.and_then(|r| r.kind).as_deref(),
        Some("HTTPRoute")
    );
    assert!(
        event
            .note
            .is_some_and(|n| n.contains("response-headers-to-add")),
        "the note names the annotation"
    );
}

/// A malformed value is refused at the door, naming the annotation.
async fn refusals(up: &Up) {
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
    deprecation_told(&up).await;
    let upstream = Upstream::apply(&up, &world).await;
    upstream.affinities(&up, &world).await;
    Upstream::addresses_and_header_limits(&world).await;
    basic_auth(&up, &world).await;
    refusals(&up).await;
    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
