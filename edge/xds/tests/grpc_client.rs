//! gRPC's own xDS clients as the data plane: PyPI `grpcio` (C-core) and npm
//! `@grpc/grpc-js-xds` (an independent implementation in TypeScript) each send real RPCs to two
//! local gRPC backends through a GRPCRoute served by fairlead. A header match goes to backend
//! A, an 80/20 split holds within tolerance, an endpoint marked not ready leaves the traffic,
//! and a route change is followed on the same stream. Any NACK fails the test.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use fairlead_edge_model::input::Input;
use fairlead_edge_xds::cache::{Cache, Snapshot};
use fairlead_edge_xds::server::{Ads, Observer};
use fairlead_edge_xds::sotw::Verdict;

#[derive(Default)]
struct Recorder {
    connects: Mutex<u32>,
    nacks: Mutex<Vec<String>>,
}

impl Observer for Recorder {
    fn connected(&self, _group: &fairlead_edge_model::ObjectKey) {
        *self.connects.lock().unwrap() += 1;
    }
    fn verdict(&self, _group: &fairlead_edge_model::ObjectKey, verdict: &Verdict) {
        if let Verdict::Nack {
            type_url, message, ..
        } = verdict
        {
            self.nacks
                .lock()
                .unwrap()
                .push(format!("{type_url}: {message}"));
        }
    }
}

/// The configuration: `weights` of echo-a/echo-b on the split rule, and whether B's endpoint
/// of the shared Service is ready.
fn snapshot(port_a: u16, port_b: u16, weights: (u32, u32), b_ready: bool) -> Snapshot {
    let yaml = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: d8-alb}}
spec: {{controllerName: alb.network.deckhouse.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: grpc, port: 50051, protocol: HTTP, hostname: echo.example.com}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: echo, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{method: {{service: echo.Echo, method: Say}}, headers: [{{name: x-backend, value: a}}]}}]
    backendRefs: [{{name: echo-a, port: 50051}}]
  - matches: [{{method: {{service: echo.Echo, method: Say}}, headers: [{{name: x-backend, value: both}}]}}]
    backendRefs: [{{name: echo-both, port: 50051}}]
  - matches: [{{method: {{service: echo.Echo, method: Say}}}}]
    backendRefs: [{{name: echo-a, port: 50051, weight: {wa}}}, {{name: echo-b, port: 50051, weight: {wb}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo-a, namespace: default}}
spec: {{ports: [{{name: grpc, port: 50051}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: echo-b, namespace: default}}
spec: {{ports: [{{name: grpc, port: 50051}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: echo-both, namespace: default}}
spec: {{ports: [{{name: grpc, port: 50051}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-a, namespace: default, labels: {{kubernetes.io/service-name: echo-a}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_a}}}]
endpoints: [{{addresses: [127.0.0.1]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-b, namespace: default, labels: {{kubernetes.io/service-name: echo-b}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_b}}}]
endpoints: [{{addresses: [127.0.0.1]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-both-a, namespace: default, labels: {{kubernetes.io/service-name: echo-both}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_a}}}]
endpoints: [{{addresses: [127.0.0.1]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-both-b, namespace: default, labels: {{kubernetes.io/service-name: echo-both}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_b}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: {b_ready}}}}}]
"#,
        wa = weights.0,
        wb = weights.1,
    );
    let input = Input::from_yaml(&yaml).expect("fixture");
    let mut t = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    Snapshot::new(t.gateways.remove(&gw()).expect("gateway"))
}

/// HTTPRoutes on the same listener after the conformance suite's path tests: which backend
/// (A or B) each path reaches, or none.
fn paths_snapshot(port_a: u16, port_b: u16) -> Snapshot {
    let yaml = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: d8-alb}}
spec: {{controllerName: alb.network.deckhouse.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: grpc, port: 50051, protocol: HTTP, hostname: echo.example.com}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: paths, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: Exact, value: /one}}}}]
    backendRefs: [{{name: echo-a, port: 50051}}]
  - matches: [{{path: {{type: Exact, value: /two}}}}]
    backendRefs: [{{name: echo-b, port: 50051}}]
  - matches: [{{path: {{type: Exact, value: /match/exact}}}}]
    backendRefs: [{{name: echo-a, port: 50051}}]
  - matches: [{{path: {{type: PathPrefix, value: /match}}}}]
    backendRefs: [{{name: echo-b, port: 50051}}]
  - matches: [{{path: {{type: PathPrefix, value: /match/prefix/long}}}}]
    backendRefs: [{{name: echo-a, port: 50051}}]
  - matches: [{{path: {{type: Exact, value: /none}}}}]
  - matches: [{{path: {{type: Exact, value: /moved}}}}]
    filters: [{{type: RequestRedirect, requestRedirect: {{hostname: example.org}}}}]
  - matches: [{{path: {{type: Exact, value: /query}}, queryParams: [{{name: v, value: "1"}}]}}]
    backendRefs: [{{name: echo-a, port: 50051}}]
  - matches: [{{path: {{type: PathPrefix, value: /}}}}]
    backendRefs: [{{name: echo-b, port: 50051}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo-a, namespace: default}}
spec: {{ports: [{{name: grpc, port: 50051, appProtocol: kubernetes.io/h2c}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: echo-b, namespace: default}}
spec: {{ports: [{{name: grpc, port: 50051, appProtocol: kubernetes.io/h2c}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-a, namespace: default, labels: {{kubernetes.io/service-name: echo-a}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_a}}}]
endpoints: [{{addresses: [127.0.0.1]}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-b, namespace: default, labels: {{kubernetes.io/service-name: echo-b}}}}
addressType: IPv4
ports: [{{name: grpc, port: {port_b}}}]
endpoints: [{{addresses: [127.0.0.1]}}]
"#
    );
    let input = Input::from_yaml(&yaml).expect("fixture");
    let mut t = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    Snapshot::new(t.gateways.remove(&gw()).expect("gateway"))
}

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Client {
    fn call(&mut self, count: u32, header: Option<&str>) -> serde_json::Value {
        let line = match header {
            Some(h) => format!("call {count} {h}\n"),
            None => format!("call {count}\n"),
        };
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
    }

    fn path(&mut self, path: &str, count: u32) -> serde_json::Value {
        self.stdin
            .write_all(format!("path {path} {count}\n").as_bytes())
            .unwrap();
        self.stdin.flush().unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
    }
}

/// Whether `check` holds within 10 s, asked every 100 ms: how long a client takes to apply a
/// pushed change depends on the machine's load (calls that fail fast once ran out of tries
/// before the change arrived).
fn within(mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn count(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_default()
}

/// Runs the scenario against the data plane `command` starts (given the two backend ports
/// and `GRPC_XDS_BOOTSTRAP`).
async fn scenario(name: &str, mut command: Command) {
    let (port_a, port_b) = (
        fairlead_kit::testing::free_port(),
        fairlead_kit::testing::free_port(),
    );
    let cache = Arc::new(Cache::with_derive(Arc::new(
        fairlead_edge_render::proxyless::Proxyless,
    )));
    cache.set(&gw(), snapshot(port_a, port_b, (80, 20), true));
    let recorder = Arc::new(Recorder::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Ads::new(cache.clone(), recorder.clone()).into_service())
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    let dir = std::env::temp_dir().join(format!("fairlead-grpc-xds-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bootstrap = dir.join("bootstrap.json");
    std::fs::write(
        &bootstrap,
        serde_json::json!({
            "xds_servers": [{"server_uri": xds.to_string(), "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
            "node": {"id": "grpc-test", "cluster": "default/gw", "locality": {}}
        })
        .to_string(),
    )
    .unwrap();
    let mut child = command
        .arg(port_a.to_string())
        .arg(port_b.to_string())
        .env("GRPC_XDS_BOOTSTRAP", &bootstrap)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{name}: {e} (scripts/setup installs the clients)"));
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    assert_eq!(
        ready.trim(),
        "ready",
        "{name}: the data plane did not start"
    );
    let mut client = Client {
        child,
        stdin,
        stdout,
    };

    let result = tokio::task::block_in_place(|| {
        let first = client.call(20, Some("a"));
        assert_eq!(count(&first, "A"), 20, "header match goes to A: {first}");

        let split = client.call(1000, None);
        let (a, b) = (count(&split, "A"), count(&split, "B"));
        assert_eq!(a + b, 1000, "{split}");
        assert!((120..=280).contains(&b), "an 80/20 split, got {a}/{b}");

        let both = client.call(100, Some("both"));
        assert!(
            count(&both, "B") > 0 && count(&both, "A") > 0,
            "both endpoints serve: {both}"
        );

        // B's endpoint of the shared Service is no longer ready: it leaves the traffic.
        cache.set(&gw(), snapshot(port_a, port_b, (80, 20), false));
        let mut last = serde_json::Value::Null;
        let gone = within(|| {
            last = client.call(50, Some("both"));
            count(&last, "B") == 0 && count(&last, "A") == 50
        });
        assert!(gone, "B still gets traffic: {last}");

        // A route change: everything to B, followed on the same stream.
        cache.set(&gw(), snapshot(port_a, port_b, (0, 1), false));
        let moved = within(|| {
            last = client.call(50, None);
            count(&last, "B") == 50
        });
        assert!(moved, "the route change did not arrive: {last}");

        // The conformance suite's path tests, through gRPC's own router.
        cache.set(&gw(), paths_snapshot(port_a, port_b));
        let arrived = within(|| {
            last = client.path("/one", 5);
            count(&last, "A") == 5
        });
        assert!(arrived, "the path routes did not arrive: {last}");
        for (path, backend) in [
            ("/two", "B"),
            ("/match/exact", "A"),
            ("/match/prefix/long/x", "A"),
            ("/match/other", "B"),
            ("/query", "B"),
        ] {
            let got = client.path(path, 5);
            assert_eq!(count(&got, backend), 5, "{path} goes to {backend}: {got}");
        }
        for path in ["/none", "/moved"] {
            let got = client.path(path, 3);
            assert_eq!(count(&got, "errors"), 3, "{path} fails: {got}");
            assert!(
                got["codes"].as_array().unwrap().iter().all(|c| c
                    .as_str()
                    .unwrap()
                    .starts_with("UNAVAILABLE")
                    || c.as_str().unwrap().starts_with("14")),
                "{path} fails with UNAVAILABLE: {got}"
            );
        }
        Ok::<(), String>(())
    });
    result.unwrap();
    assert_eq!(
        *recorder.connects.lock().unwrap(),
        1,
        "one stream, never reconnected"
    );
    let nacks = recorder.nacks.lock().unwrap().clone();
    assert!(nacks.is_empty(), "{name} rejected configuration: {nacks:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_routes_real_rpcs_through_fairlead() {
    let mut python = Command::new("python3");
    python.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc_xds.py"));
    scenario("grpcio", python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_js_xds_routes_real_rpcs_through_fairlead() {
    let mut node = Command::new("node");
    node.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/node/grpc_xds.js"
    ));
    scenario("grpc-js-xds", node).await;
}

/// The Gateway the tests configure.
fn gw() -> fairlead_edge_model::ObjectKey {
    fairlead_edge_model::ObjectKey::new("default", "gw")
}
