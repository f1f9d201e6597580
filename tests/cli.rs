//! The `fairlead` binary as a user runs it: usage errors, `version`, and `fairlead up` with its
//! telemetry pointed at a collector that is there and at one that is not.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use fairlead_kit::testing::free_port;
use fairlead_kit::testing::otlp::OtlpReceiver;

const BIN: &str = env!("CARGO_BIN_EXE_fairlead");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn version_prints_the_crate_version() {
    let out = run(&["version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("fairlead {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (&["--bogus", "version"][..], "unexpected argument '--bogus'"),
        (
            &["up", "--admin-addr", "localhost:notaport"],
            "--admin-addr",
        ),
        (
            &["up", "--drain-deadline=-1"],
            "non-negative number of seconds",
        ),
        (&["--log-format", "xml", "version"], "--log-format"),
        (&["--log-level", "info,[[", "version"], "not a log filter"),
        (&["no-such-command"], "unrecognized subcommand"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `fairlead up` on free ports, with extra arguments and environment.
struct Up {
    child: Child,
    admin: String,
    xds_port: u16,
    kubeconfig: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Up {
    fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with(&[], env)
    }

    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let xds_port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let child = Command::new(BIN)
            .args([
                "--log-format",
                "json",
                "up",
                "--api-addr",
                "127.0.0.1:0",
                "--xds-addr",
            ])
            .arg(format!("127.0.0.1:{xds_port}"))
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Self {
            child,
            admin: format!("http://127.0.0.1:{port}"),
            xds_port,
            kubeconfig,
            _dir: dir,
        }
    }

    /// Waits until `/readyz` answers 200 (the API server is up and manifests are applied).
    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::get(format!("{}/readyz", self.admin)).await
                && r.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fairlead up was not ready within 20 s");
    }

    async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    async fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if reqwest::get(format!("{}/healthz", self.admin))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("fairlead up did not serve /healthz within 10 s");
    }

    /// Sends SIGTERM and waits (bounded) for the exit.
    fn stop(mut self) -> Output {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "fairlead up ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child.wait_with_output().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_exports_traces_under_the_configured_service_name() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let endpoint = receiver.endpoint();
    let up = Up::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "edge-demo"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ]);
    up.wait_ready().await;
    let span = receiver
        .wait_for_span("GET /readyz", Duration::from_secs(10))
        .await
        .expect("the request span is exported while running");
    assert_eq!(span.resource["service.name"], "edge-demo");
    assert_eq!(span.resource["deployment.environment"], "ci");
    let out = up.stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_is_logged_once_and_blocks_nothing() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let up = Up::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", dead.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ]);
    up.wait_healthy().await;
    for _ in 0..10 {
        let started = Instant::now();
        let response = reqwest::get(format!("{}/metrics", up.admin)).await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "export never blocks serving"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let out = up.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let reports = stderr
        .lines()
        .filter(|l| l.contains("OTLP trace export failing"))
        .count();
    assert_eq!(reports, 1, "logged exactly once:\n{stderr}");
    assert!(
        stderr
            .lines()
            .filter(|l| l.contains("\"level\":\"ERROR\""))
            .count()
            == 0,
        "no error lines per failed batch:\n{stderr}"
    );
}

const DEMO_WORLD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1, namespace: demo}
spec: {size: 3}
status: {phase: Ready}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: local, namespace: demo}
addressType: IPv4
endpoints: [{addresses: ["127.0.0.1"]}]
ports: [{port: 8080}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_an_api_and_applies_a_demo_world_with_status() {
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(manifests.path().join("world.yaml"), DEMO_WORLD).unwrap();
    let up = Up::start_with(&["-f", manifests.path().to_str().unwrap()], &[]);
    up.wait_ready().await;
    let client = up.client().await;

    let gvk = kube::core::GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let resource = kube::discovery::ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let gadgets: kube::Api<kube::core::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "demo", &resource);
    let g1 = gadgets.get("g1").await.unwrap();
    assert_eq!(g1.data["spec"]["size"], 3);
    assert_eq!(
        g1.data["status"]["phase"], "Ready",
        "status written through /status"
    );

    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client, "demo");
    let slice = slices.get("local").await.unwrap();
    assert_eq!(
        slice.endpoints.unwrap()[0].addresses,
        vec!["127.0.0.1"],
        "loopback allowed by default"
    );

    let out = up.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("127.0.0.0/8"), "says so at start: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_endpoints_refuse_loopback_in_manifests() {
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(manifests.path().join("world.yaml"), DEMO_WORLD).unwrap();
    let up = Up::start_with(
        &[
            "--strict-endpoints",
            "-f",
            manifests.path().to_str().unwrap(),
        ],
        &[],
    );
    let mut child = up.child;
    let status = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let mut stderr = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut stderr)
                    .unwrap();
                return (status, stderr);
            }
            assert!(Instant::now() < deadline, "fairlead up should fail");
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    assert!(!status.0.success());
    assert!(
        status.1.contains("endpoints[0].addresses[0]") && status.1.contains("loopback"),
        "names the field: {}",
        status.1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_kill_with_a_data_dir() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_owned();
    let up = Up::start_with(&["--data-dir", &data_dir], &[]);
    up.wait_ready().await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(up.client().await, "default");
    for i in 0..20 {
        let cm =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{i}")}}))
                .unwrap();
        cms.create(&Default::default(), &cm).await.unwrap();
    }
    let mut child = up.child;
    child.kill().unwrap();
    child.wait().unwrap();

    let again = Up::start_with(&["--data-dir", &data_dir], &[]);
    again.wait_ready().await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(again.client().await, "default");
    let names: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    for i in 0..20 {
        assert!(names.contains(&format!("cm-{i}")), "cm-{i} lost: {names:?}");
    }
    assert!(again.stop().status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_the_health_module_on_a_local_node() {
    let backend = std::net::TcpListener::bind("127.0.0.4:0").unwrap();
    let port = backend.local_addr().unwrap().port();
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(
        manifests.path().join("web.yaml"),
        format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: web-a, labels: {{app: web}}}}
spec: {{nodeName: local, containers: [{{name: app, image: app}}]}}
status:
  phase: Running
  podIP: 127.0.0.4
  podIPs: [{{ip: 127.0.0.4}}]
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: web, port: 80, targetPort: {port}}}]
  healthcheck:
    initialDelaySeconds: 0
    periodSeconds: 1
    probes: [{{mode: TCP, tcp: {{targetPort: {port}}}}}]
"#
        ),
    )
    .unwrap();
    let up = Up::start_with(&["-f", manifests.path().to_str().unwrap()], &[]);
    up.wait_ready().await;
    let client = up.client().await;
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(slice) = slices.get_opt("web-local-web-ipv4-0").await.unwrap() {
            let endpoints = slice.endpoints.unwrap_or_default();
            assert_eq!(endpoints[0].addresses, vec!["127.0.0.4"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the local agent published the pod"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client, "default");
    assert!(
        services.get_opt("web").await.unwrap().is_some(),
        "the controller made the child Service"
    );
    let metrics = reqwest::get(format!("{}/metrics", up.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("swh_probe_duration_seconds_bucket"),
        "probe histograms are exported"
    );
    drop(backend);
    assert!(up.stop().status.success());
}

#[test]
fn edge_xds_refuses_to_serve_plaintext_unless_asked() {
    let out = run(&["edge", "xds", "--admin-addr", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tls-cert-file") && stderr.contains("--insecure"),
        "{stderr}"
    );
}

#[test]
fn edge_bootstrap_prints_a_bootstrap_for_one_gateway() {
    // The bootstrap of `infra/web` against `xds.d8-alb.svc:18000`, with `extra` arguments.
    let print = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "edge",
            "bootstrap",
            "--gateway",
            "infra/web",
            "--xds",
            "xds.d8-alb.svc:18000",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_yaml_ng::from_slice(&out.stdout).unwrap()
    };
    let bootstrap = print(&[]);
    assert_eq!(bootstrap["node"]["cluster"], "infra/web");
    assert_eq!(bootstrap["node"]["id"], "web");
    let xds = &bootstrap["staticResources"]["clusters"][0];
    assert_eq!(xds["type"], "STRICT_DNS", "a host name is resolved");
    let address = &xds["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"];
    assert_eq!(address["address"], "xds.d8-alb.svc");
    assert_eq!(address["portValue"], 18000);
    assert_eq!(
        bootstrap["dynamicResources"]["adsConfig"]["apiType"],
        "GRPC"
    );

    // Mutual TLS to the xDS server: the CA as a file, the proxy's certificate and key through
    // the SDS document written beside them (or where --xds-sds-file says).
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let bootstrap = print(&[
        "--xds-ca",
        &path("ca.crt"),
        "--xds-cert",
        &path("proxy.crt"),
        "--xds-key",
        &path("proxy.key"),
    ]);
    let socket = &bootstrap["staticResources"]["clusters"][0]["transportSocket"];
    assert_eq!(socket["name"], "envoy.transport_sockets.tls");
    let context = &socket["typedConfig"];
    assert_eq!(context["sni"], "xds.d8-alb.svc");
    let san = &context["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"][0];
    assert_eq!(
        san["sanType"], "DNS",
        "the server must name the address dialled"
    );
    assert_eq!(san["matcher"]["exact"], "xds.d8-alb.svc");
    assert_eq!(
        context["commonTlsContext"]["validationContext"]["trustedCa"]["filename"],
        path("ca.crt")
    );
    let sds = &context["commonTlsContext"]["tlsCertificateSdsSecretConfigs"][0]["sdsConfig"]["pathConfigSource"];
    assert_eq!(sds["path"], path("xds-client-sds.json"));
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("xds-client-sds.json")).unwrap())
            .unwrap();
    assert_eq!(
        document["resources"][0]["tlsCertificate"]["privateKey"]["filename"],
        path("proxy.key")
    );
    print(&[
        "--xds-ca",
        &path("ca.crt"),
        "--xds-cert",
        &path("proxy.crt"),
        "--xds-key",
        &path("proxy.key"),
        "--xds-sds-file",
        &path("elsewhere.json"),
    ]);
    assert!(dir.path().join("elsewhere.json").exists());
    let half = run(&[
        "edge",
        "bootstrap",
        "--gateway",
        "a/b",
        "--xds",
        "x:1",
        "--xds-cert",
        "c",
    ]);
    assert_eq!(
        half.status.code(),
        Some(2),
        "a client certificate needs its key and a CA"
    );

    let bad = run(&["edge", "bootstrap", "--gateway", "web", "--xds", "x:1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("<namespace>/<name>"));
    let bad = run(&["edge", "bootstrap", "--gateway", "a/b", "--xds", "nowhere"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not host:port"));
}

/// A proxy connected over xDS does not hold the shutdown: its stream ends when the drain
/// starts (the proxy keeps its configuration), and `fairlead up` exits long before its
/// drain deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_stops_at_once_with_a_proxy_connected() {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let up = Up::start(&[]);
    up.wait_ready().await;
    let xds = up.kubeconfig.parent().unwrap().join("xds");
    let read = |name: &str| std::fs::read_to_string(xds.join(name)).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.crt")))
        .identity(Identity::from_pem(read("proxy.crt"), read("proxy.key")))
        .domain_name("127.0.0.1");
    let channel = Endpoint::from_shared(format!("https://127.0.0.1:{}", up.xds_port))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .expect("the proxy connects over mutual TLS");
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(DiscoveryRequest {
        node: Some(Node {
            id: "proxy".into(),
            cluster: "default/web".into(),
            ..Default::default()
        }),
        type_url: "type.googleapis.com/envoy.config.listener.v3.Listener".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut stream = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .expect("an answer in time")
        .expect("the stream is open");
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || up.stop())
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fairlead up took {:?} to stop with a proxy connected (its drain deadline is 25 s)",
        started.elapsed()
    );
    drop(tx);
}

/// The Gateways of namespace `default`.
fn gateways_of(client: kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(
        client,
        "default",
        &fairlead_edge_controller::crds::resource("Gateway"),
    )
}

/// Applies `yaml` (one or more documents) with kubectl's server-side apply.
fn kubectl_apply(up: &Up, yaml: &str) {
    let mut child = Command::new("kubectl")
        .args(["apply", "--server-side", "-f", "-"])
        .env("KUBECONFIG", &up.kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl (scripts/setup installs it)");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), yaml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A backend answering every request with `name`.
async fn named_backend(name: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{name}",
                    name.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_a_local_proxy_per_gateway_on_its_own_address() {
    let up = Up::start(&[]);
    up.wait_ready().await;
    let (one, two) = (named_backend("one").await, named_backend("two").await);
    // Both Gateways listen on the same port: each proxy on its own loopback address.
    let port = free_port();
    let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let taken = held.local_addr().unwrap().port();
    let mut yaml = String::new();
    for (name, backend) in [("one", one), ("two", two)] {
        yaml.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: {name}}}]
  rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec: {{ports: [{{name: http, port: 80, targetPort: {backend}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: {name}, namespace: default, labels: {{kubernetes.io/service-name: {name}}}}}
addressType: IPv4
ports: [{{name: http, port: {backend}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
---
"
        ));
    }
    // A third whose TCP listener's port another program holds.
    yaml.push_str(&format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: blocked, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: db, port: {taken}, protocol: TCP}}]
"
    ));
    kubectl_apply(&up, &yaml);

    let client = up.client().await;
    let gateways: kube::Api<kube::api::DynamicObject> = gateways_of(client);
    let condition = |g: &kube::api::DynamicObject| -> Option<(String, String, String)> {
        let c = g.data["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "LocalProxy")?
            .clone();
        Some((
            c["status"].as_str()?.to_owned(),
            c["reason"].as_str()?.to_owned(),
            c["message"].as_str()?.to_owned(),
        ))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut addresses = std::collections::BTreeMap::new();
    for name in ["one", "two"] {
        loop {
            let g = gateways.get(name).await.unwrap();
            if let (Some((status, _, _)), Some(address)) = (
                condition(&g),
                g.data["status"]["addresses"][0]["value"].as_str(),
            ) && status == "True"
            {
                addresses.insert(name, address.to_owned());
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name} never got a ready local proxy: {:?}",
                g.data["status"]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_ne!(addresses["one"], addresses["two"], "each its own address");
    for (name, address) in &addresses {
        assert!(address.starts_with("127.0.1."), "{address}");
        let body = reqwest::get(format!("http://{address}:{port}/"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(&body, name, "{address}:{port} reaches {name}'s backend");
    }
    loop {
        let g = gateways.get("blocked").await.unwrap();
        if let Some((status, reason, message)) = condition(&g)
            && reason == "PortUnavailable"
        {
            assert_eq!(status, "False");
            assert!(
                message.contains(&format!(":{taken}: in use")),
                "the port is named: {message}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the blocked Gateway says nothing: {:?}",
            g.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(held);
    let output = tokio::task::spawn_blocking(move || up.stop())
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_envoy_gateways_say_so_and_the_rest_runs() {
    let up = Up::start(&[("FAIRLEAD_ENVOY", "/nonexistent/envoy")]);
    up.wait_ready().await;
    let port = free_port();
    kubectl_apply(
        &up,
        &format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: lonely, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
"
        ),
    );
    let gateways: kube::Api<kube::api::DynamicObject> = gateways_of(up.client().await);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let g = gateways.get("lonely").await.unwrap();
        let conditions = g.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let local = conditions.iter().find(|c| c["type"] == "LocalProxy");
        let programmed = conditions
            .iter()
            .any(|c| c["type"] == "Programmed" && c["status"] == "True");
        if let Some(local) = local
            && programmed
        {
            assert_eq!(local["status"], "False");
            assert_eq!(local["reason"], "EnvoyNotFound", "{local}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no EnvoyNotFound condition beside the control plane's: {:?}",
            g.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let output = tokio::task::spawn_blocking(move || up.stop())
        .await
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.matches("Gateways get no local proxy").count(),
        1,
        "said once: {stderr}"
    );
}
