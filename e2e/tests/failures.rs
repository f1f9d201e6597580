//! The failure suite: steady k6 load (`fairlead loadtest failures`, a constant arrival rate)
//! through real Envoy while one thing fails at a time, each with its result line (requests
//! sent and failed, by status) and the figure it must meet — RELIABILITY.md records them:
//!
//! - the control plane killed with SIGKILL and started again from its `--data-dir`, while
//!   the proxies run apart from it (`fairlead edge proxy` processes beside a
//!   `--no-local-proxies` up, as in a cluster): no request fails, no proxy restarts, and a
//!   route applied after the restart is served within 2 s; then the control plane gone for
//!   30 s: no request fails on the routes that did not change;
//! - the API server gone for 30 s under a separate `fairlead edge xds`: it serves its last
//!   snapshot (no request fails, it does not exit) and takes changes again once the API
//!   server is back (a route applied then is served);
//! - a rollout of an instance's two proxies (a change of the pod template): no request
//!   fails — the Service sends a leaving proxy no new connection, and it drains;
//! - the xDS server's and the proxies' certificates renewed under the load (30 s
//!   lifetimes): no request fails, and no proxy fails a TLS handshake with the control plane;
//! - one of a route's two endpoints stopping (its port refusing connections), then a
//!   listener whose certificate Secret is malformed and a route whose backend is missing
//!   added beside the loaded routes: no request of those fails (the ALB's default retry of a
//!   refused connection, outlier detection; a broken listener or route is its own).
//!
//! One at a time: k6 and Envoy measure the machine.

use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

/// A run of `fairlead loadtest failures` in the background.
struct Load {
    child: Child,
    output: std::path::PathBuf,
    results: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// How a run went: what it printed, its exit code, and k6's summary.
struct Outcome {
    code: Option<i32>,
    printed: String,
    summary: serde_json::Value,
}

impl Load {
    /// Starts the load against `up`, for `duration` at 50 iterations/s: of the scenario's
    /// world applied to `up` with its echo backends, or (`target`, with `hosts` as
    /// failures.js reads them) of a Gateway of the test's.
    fn start(up: &Up, duration: &str, target: Option<(&str, &str)>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("output");
        let results = dir.path().join("summary.json");
        let mut command = Command::new(fairlead_e2e::binary::path());
        command
            .args([
                "loadtest",
                "failures",
                "--rate",
                "50",
                "--duration",
                duration,
            ])
            .arg("--dir")
            .arg(fairlead_e2e::workspace().join("loadtests"))
            .arg("--kubeconfig")
            .arg(&up.kubeconfig)
            .arg("--results")
            .arg(&results)
            .env("CI", "true");
        if let Some((target, hosts)) = target {
            command.args(["--target", target]).env("HOSTS", hosts);
        }
        let log = std::fs::File::create(&output).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("fairlead loadtest starts");
        Self {
            child,
            output,
            results,
            _dir: dir,
        }
    }

    fn printed(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// Waits until k6 loads (the world served first).
    async fn loading(&self) {
        until("the load running", async || {
            self.printed()
                .contains("loadtest: failures at")
                .then_some(())
        })
        .await;
        // k6's own start.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    /// Waits for the run to end.
    async fn finish(mut self) -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the load never ended");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        Outcome {
            code: status.code(),
            printed: self.printed(),
            summary: std::fs::read(&self.results)
                .map(|t| serde_json::from_slice(&t).unwrap())
                .unwrap_or_default(),
        }
    }
}

impl Outcome {
    fn count(&self, metric: &str) -> u64 {
        self.summary["metrics"][metric]["values"]["count"]
            .as_f64()
            .unwrap_or_default() as u64
    }

    /// The result line of `fault`: requests sent and failed, by status (0: no answer).
    fn line(&self, fault: &str) -> String {
        let by_status: Vec<String> = [0, 404, 500, 502, 503, 504]
            .into_iter()
            .filter_map(|s| {
                let n = self.count(&format!("failures{{status:{s}}}"));
                (n > 0).then(|| format!("{s}: {n}"))
            })
            .collect();
        format!(
            "{fault}: {} requests, {} failed{}",
            self.count("http_reqs"),
            self.count("failures"),
            if by_status.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_status.join(", "))
            }
        )
    }

    /// Says the result line (and appends it to `$FAIRLEAD_RELIABILITY_OUT` when set) and
    /// holds the figure: requests went, none failed.
    fn none_failed(&self, fault: &str) {
        let line = self.line(fault);
        eprintln!("failure suite: {line}");
        if let Ok(path) = std::env::var("FAIRLEAD_RELIABILITY_OUT") {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            writeln!(file, "{line}").unwrap();
        }
        assert!(self.count("http_reqs") > 500, "{line}\n{}", self.printed);
        assert_eq!(self.count("failures"), 0, "{line}\n{}", self.printed);
        assert_eq!(self.code, Some(0), "{line}\n{}", self.printed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_of_two_proxies_under_load_loses_nothing() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let load = Load::start(&up, "50s", None);
    load.loading().await;
    let client = up.client().await;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client, "failures");
    let generation = deployments
        .get("d8-alb-failures")
        .await
        .unwrap()
        .metadata
        .generation;
    let patched = up.kubectl(&[
        "patch",
        "albinstance",
        "failures",
        "-n",
        "failures",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"envoyLogLevel":"Debug"}}"#,
    ]);
    assert!(patched.status.success(), "{patched:?}");
    until("the instance's two proxies rolled", async || {
        let d = deployments.get("d8-alb-failures").await.ok()?;
        let status = d.status?;
        (d.metadata.generation > generation
            && status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(2)
            && status.replicas == Some(2)
            && status.ready_replicas == Some(2))
        .then_some(())
    })
    .await;
    let outcome = load.finish().await;
    outcome.none_failed("rollout of two proxies");
}

/// The serial number of the certificate in Secret `namespace/name`.
async fn serial(client: &kube::Client, namespace: &str, name: &str) -> Option<String> {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let pem = secrets
        .get_opt(name)
        .await
        .ok()??
        .data?
        .get("tls.crt")?
        .0
        .clone();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    Some(pem.parse_x509().ok()?.raw_serial_as_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_rotated_under_load_lose_nothing() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    // Renewed at two thirds of 30 s: twice or more while the load runs.
    let up = Up::with(&["--certificate-lifetime", "30"], &[]);
    up.wait_ready().await;
    let load = Load::start(&up, "50s", None);
    load.loading().await;
    let client = up.client().await;
    let mut serials = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(45) {
        if let Some(now) = serial(&client, "failures", "d8-alb-failures-xds-client").await
            && serials.last() != Some(&now)
        {
            serials.push(now);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let outcome = load.finish().await;
    outcome.none_failed(&format!(
        "xDS and proxy certificates (30 s lifetimes) renewed {} times",
        serials.len().saturating_sub(1)
    ));
    assert!(serials.len() >= 2, "never renewed: {serials:?}");
    // No proxy failed a TLS handshake with the control plane (Envoy's own counters).
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client, "failures");
    let http = reqwest::Client::new();
    for pod in pods
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=alb-proxy"))
        .await
        .unwrap()
        .items
    {
        let ip = pod.status.and_then(|s| s.pod_ip).expect("a pod address");
        let stats = http
            .get(format!(
                "http://{ip}:19000/stats?filter=^cluster.fairlead-xds.(ssl.connection_error|upstream_cx_connect_fail)$"
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(stats.lines().count() == 2, "{stats}");
        for line in stats.lines() {
            assert!(line.ends_with(": 0"), "{ip}: {line}");
        }
    }
}

/// Where the parts of a control plane listen, fixed so that it can be started again where
/// its proxies and clients look.
#[derive(Clone, Copy)]
struct Ports {
    api: u16,
    xds: u16,
    webhooks: u16,
    block: u8,
    /// The gateway controller and the xDS server run apart from `up` (`--without`).
    separate: bool,
}

/// `fairlead up` with its data in `data`, at `ports`, running no proxies itself.
fn control_plane(data: &std::path::Path, ports: Ports) -> Up {
    let up = Up::builder()
        .path("--data-dir", data)
        .option("--api-addr", format!("127.0.0.1:{}", ports.api))
        .option("--xds-addr", format!("127.0.0.1:{}", ports.xds))
        .option("--webhook-addr", format!("127.0.0.1:{}", ports.webhooks))
        .option("--loopback-block", ports.block.to_string())
        .flag("--no-local-proxies");
    if ports.separate {
        up.args(&["--without", "gateway-controller", "--without", "xds-server"])
            .start()
    } else {
        up.start()
    }
}

/// `fairlead edge <args>` apart from `up`, against its API server, its log in `log`.
fn component(up: &Up, args: &[String], log: &std::path::Path) -> Child {
    Command::new(fairlead_e2e::binary::path())
        .args(["--log-format", "json", "edge"])
        .args(args)
        .env("KUBECONFIG", &up.kubeconfig)
        .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("the component starts")
}

/// A `fairlead edge proxy` of Gateway `key` apart from the control plane (its xDS server
/// on `127.0.0.1:<xds>`), with its admin interface on `admin`, its files (and log) in `dir`.
fn proxy(
    xds: u16,
    key: &str,
    admin: u16,
    certificate: &std::path::Path,
    dir: &std::path::Path,
) -> Child {
    std::fs::create_dir_all(dir).unwrap();
    let log = std::fs::File::create(dir.join("proxy.log")).unwrap();
    let access = std::fs::File::create(dir.join("access.log")).unwrap();
    Command::new(fairlead_e2e::binary::path())
        .args(["--log-format", "json", "edge", "proxy", "--gateway", key])
        .args(["--xds", &format!("127.0.0.1:{xds}")])
        .arg("--xds-ca")
        .arg(certificate.join("ca.crt"))
        .arg("--xds-cert")
        .arg(certificate.join("tls.crt"))
        .arg("--xds-key")
        .arg(certificate.join("tls.key"))
        .args(["--admin-port", &admin.to_string()])
        .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .arg("--work-dir")
        .arg(dir)
        .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(access)
        .stderr(log)
        .spawn()
        .expect("fairlead edge proxy starts")
}

/// How long Envoy at admin port `admin` has run, over all its restarts (`server_info`).
async fn uptime(http: &reqwest::Client, admin: u16) -> Option<u64> {
    let info: serde_json::Value = http
        .get(format!("http://127.0.0.1:{admin}/server_info"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let seconds: f64 = info["uptime_all_epochs"]
        .as_str()?
        .trim_end_matches('s')
        .parse()
        .ok()?;
    Some(seconds as u64)
}

/// A route `name` of Gateway `failures/edge` for `name.failures.test` to the backend at
/// `port`.
fn route(name: &str, port: u16) -> String {
    format!(
        "{}---\n{}",
        route_to_service(name),
        backends::service("failures", name, 80, port)
    )
}

/// A route `name` of Gateway `failures/edge` for `name.failures.test` to the Service `name`
/// (port 80).
fn route_to_service(name: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: failures}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [{name}.failures.test]
  rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]
"
    )
}

/// A control plane and two proxies of its Gateway `failures/edge` running apart from it (as
/// in a cluster), the Gateway on its own loopback address, its route `shop` served.
struct Apart {
    /// `fairlead edge controller` and `fairlead edge xds` apart from `fairlead up`, when the
    /// proxies are theirs.
    components: Vec<Child>,
    data: tempfile::TempDir,
    ports: Ports,
    files: tempfile::TempDir,
    _certificate: tempfile::TempDir,
    proxies: Vec<Child>,
    admins: [u16; 2],
    target: String,
    http: reqwest::Client,
}

impl Apart {
    /// Starts the control plane (on loopback block `block`) and the world; the control plane.
    /// With `separate`, `up` is the API server alone: the gateway controller and the xDS
    /// server serving the proxies are `fairlead edge controller` and `fairlead edge xds`
    /// processes of their own, as in a cluster.
    async fn start(block: u8, separate: bool) -> (Self, Up) {
        let data = tempfile::tempdir().unwrap();
        let ports = Ports {
            api: free_port(),
            xds: free_port(),
            webhooks: free_port(),
            block,
            separate,
        };
        let files = tempfile::Builder::new()
            .prefix("failures-")
            .tempdir()
            .unwrap();
        let up = control_plane(data.path(), ports);
        up.wait_ready().await;
        let address = |port: u16| format!("127.0.0.1:{port}");
        let mut components = Vec::new();
        if separate {
            let admins = [free_port(), free_port()];
            let controller = [
                "controller",
                "--identity",
                "separate-controller",
                "--managed-gateway-editor",
                fairlead_apiserver::access::user::ADMIN,
                "--webhook-addr",
                &address(ports.webhooks),
                "--xds-address",
                &address(ports.xds),
                "--admin-addr",
                &address(admins[0]),
                "--graph-addr",
                &address(free_port()),
            ];
            let xds = [
                "xds",
                "--identity",
                "separate-xds",
                "--tls-secret",
                "d8-alb/alb-xds-tls",
                "--xds-addr",
                &address(ports.xds),
                "--admin-addr",
                &address(admins[1]),
            ];
            for (args, name) in [(&controller[..], "controller"), (&xds[..], "xds")] {
                let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
                let log = files.path().join(format!("{name}.log"));
                components.push(component(&up, &args, &log));
            }
            let http = reqwest::Client::new();
            for admin in admins {
                until("a separate component ready", async || {
                    let url = format!("http://127.0.0.1:{admin}/readyz");
                    let r = http.get(url).send().await.ok()?;
                    r.status().is_success().then_some(())
                })
                .await;
            }
        }
        let address = format!("127.{block}.9.1");
        let shop = backends::named("shop").await;
        up.apply(&format!(
            "apiVersion: v1
kind: Namespace
metadata: {{name: failures}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: failures
  annotations: {{fairlead.io/listen-address: {address}}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: 8080, protocol: HTTP, allowedRoutes: {{namespaces: {{from: Same}}}}}}]
---
{}",
            route("shop", shop)
        ));
        let certificate = fairlead_e2e::alb::certificate(&up, "failures/edge");
        let admins = [free_port(), free_port()];
        let proxies = admins
            .iter()
            .enumerate()
            .map(|(i, admin)| {
                proxy(
                    ports.xds,
                    "failures/edge",
                    *admin,
                    certificate.path(),
                    &files.path().join(format!("proxy-{i}")),
                )
            })
            .collect();
        let apart = Self {
            components,
            data,
            ports,
            files,
            _certificate: certificate,
            proxies,
            admins,
            target: format!("http://{address}:8080"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
        };
        until("the shop through both proxies' Gateway", async || {
            apart.served("shop.failures.test", "shop").await
        })
        .await;
        (apart, up)
    }

    /// The control plane again, from its data, where it was.
    fn again(&self) -> Up {
        control_plane(self.data.path(), self.ports)
    }

    /// Whether `host` answers `answer` through the proxies.
    async fn served(&self, host: &str, answer: &str) -> Option<()> {
        let r = self
            .http
            .get(format!("{}/", self.target))
            .header("host", host)
            .send()
            .await
            .ok()?;
        (r.text().await.ok()? == answer).then_some(())
    }

    /// The steady load on `hosts` (`route=host,…`) for `duration`.
    async fn load(&self, up: &Up, duration: &str, hosts: &str) -> Load {
        let load = Load::start(up, duration, Some((&self.target, hosts)));
        load.loading().await;
        load
    }

    /// The outcome of `load`, the proxies' lines of the requests that failed printed beside
    /// it.
    async fn finished(&self, load: Load) -> Outcome {
        let outcome = load.finish().await;
        eprintln!("{}", self.failed_lines());
        outcome
    }

    /// The proxies' access-log lines of requests that did not answer 200 (said when a
    /// figure is not met).
    fn failed_lines(&self) -> String {
        (0..2)
            .flat_map(|i| {
                std::fs::read_to_string(self.files.path().join(format!("proxy-{i}/access.log")))
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| !l.contains("\"response_code\":200"))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Neither proxy exited, and neither Envoy restarted since `since`.
    async fn none_restarted(&mut self, since: Instant) {
        for (proxy, admin) in self.proxies.iter_mut().zip(self.admins) {
            assert!(proxy.try_wait().unwrap().is_none(), "a proxy exited");
            let up_for = uptime(&self.http, admin)
                .await
                .expect("Envoy's server_info");
            assert!(
                up_for + 2 >= since.elapsed().as_secs(),
                "Envoy restarted: up {up_for} s of {:?}",
                since.elapsed()
            );
        }
    }
}

impl Drop for Apart {
    fn drop(&mut self) {
        for proxy in self.proxies.iter_mut().chain(&mut self.components) {
            let _ = proxy.kill();
            let _ = proxy.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_serve_on_while_the_control_plane_is_killed_or_gone() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let (mut apart, first) = Apart::start(200, false).await;
    let started = Instant::now();
    let load = apart.load(&first, "75s", "shop=shop.failures.test").await;
    // Killed outright, and started again from its data.
    first.kill();
    let second = apart.again();
    second.wait_ready().await;
    let late = backends::named("late").await;
    let applied = Instant::now();
    second.apply(&route("late", late));
    until("the route applied after the restart served", async || {
        apart.served("late.failures.test", "late").await
    })
    .await;
    let took = applied.elapsed();
    // Gone for 30 s, then back.
    second.kill();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let third = apart.again();
    third.wait_ready().await;
    let outcome = apart.finished(load).await;
    outcome.none_failed(&format!(
        "control plane SIGKILLed and started again (a route applied after it served in {} ms), then gone 30 s",
        took.as_millis()
    ));
    assert!(
        took <= Duration::from_secs(2),
        "a route applied after the restart was served after {took:?}"
    );
    apart.none_restarted(started).await;
    drop(third);
}

/// A Pod `name` of namespace `failures` labelled `app: <app>` on `up`'s node, running and
/// ready at `ip` (a local process stands in for it).
fn local_pod(up: &Up, name: &str, app: &str, ip: &str) {
    up.apply(&format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: failures, labels: {{app: {app}}}}}
spec: {{nodeName: local, containers: [{{name: app, image: app}}]}}
"
    ));
    let status = format!(
        r#"{{"status": {{"phase": "Running", "podIP": "{ip}", "podIPs": [{{"ip": "{ip}"}}], "conditions": [{{"type": "Ready", "status": "True"}}]}}}}"#
    );
    let patched = Command::new("kubectl")
        .args([
            "-n",
            "failures",
            "patch",
            "pod",
            name,
            "--subresource=status",
        ])
        .args(["--type=merge", "-p", &status])
        .env("KUBECONFIG", &up.kubeconfig)
        .output()
        .unwrap();
    assert!(patched.status.success(), "{patched:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_pod_a_broken_certificate_and_a_missing_backend_cost_nothing() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let (apart, up) = Apart::start(201, false).await;
    // `pair`: a ServiceWithHealthchecks over two pods answering alike (each on a loopback
    // address of its own, one port), probed every second; one of them stops.
    let pods = ["127.201.5.1", "127.201.5.2"];
    let (port, _kept) = backends::named_at("pair", &format!("{}:0", pods[0])).await;
    let (_, stopped) = backends::named_at("pair", &format!("{}:{port}", pods[1])).await;
    up.apply(&format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata: {{name: pair, namespace: failures}}
spec:
  selector: {{app: pair}}
  ports: [{{name: http, port: 80, targetPort: {port}}}]
  healthcheck: {{initialDelaySeconds: 0, periodSeconds: 1, probes: [{{mode: TCP, tcp: {{targetPort: {port}}}}}]}}
---
{}",
        route_to_service("pair")
    ));
    for (i, ip) in pods.iter().enumerate() {
        local_pod(&up, &format!("pair-{i}"), "pair", ip);
    }
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(up.client().await, "failures");
    let ready = async || {
        let slice = slices.get_opt("pair-local-http-ipv4-0").await.ok()??;
        let ready: Vec<String> = slice
            .endpoints
            .iter()
            .flatten()
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .flat_map(|e| e.addresses.clone())
            .collect();
        Some(ready)
    };
    until("both pods of pair probed and published", async || {
        (ready().await?.len() == 2).then_some(())
    })
    .await;
    until("pair served", async || {
        apart.served("pair.failures.test", "pair").await
    })
    .await;
    // Let the new endpoints reach Envoy (EDS).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let load = apart
        .load(
            &up,
            "40s",
            "shop=shop.failures.test,pair=pair.failures.test",
        )
        .await;
    // One of pair's pods stops: its port refuses connections, and its probe withdraws it
    // after three failures.
    let stopping = Instant::now();
    stopped.abort();
    until("the stopped pod withdrawn by its probe", async || {
        (ready().await? == [pods[0]]).then_some(())
    })
    .await;
    let withdrawn = stopping.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A listener whose certificate is no certificate, and a route whose backend is missing.
    up.apply(
        "apiVersion: v1
kind: Secret
metadata: {name: broken, namespace: failures}
type: kubernetes.io/tls
stringData: {tls.crt: not a certificate, tls.key: not a key}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: failures
  annotations: {fairlead.io/listen-address: 127.201.9.1}
spec:
  gatewayClassName: d8-alb
  listeners:
  - {name: http, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}
  - name: https
    port: 8443
    protocol: HTTPS
    hostname: broken.failures.test
    tls: {certificateRefs: [{name: broken}]}
    allowedRoutes: {namespaces: {from: Same}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: orphan, namespace: failures}
spec:
  parentRefs: [{name: edge, sectionName: http}]
  hostnames: [orphan.failures.test]
  rules: [{backendRefs: [{name: nowhere, port: 80}]}]
",
    );
    let outcome = apart.finished(load).await;
    outcome.none_failed(&format!(
        "one of a ServiceWithHealthchecks' two pods stopped (its probe withdrew it in {} ms); a listener with a malformed certificate and a route without its backend added",
        withdrawn.as_millis()
    ));
    assert!(
        withdrawn <= Duration::from_secs(6),
        "the probe (every second, three failures) withdrew the pod after {withdrawn:?}"
    );
    // The orphan is refused as the Gateway API says, beside them.
    let orphan = apart
        .http
        .get(format!("{}/", apart.target))
        .header("host", "orphan.failures.test")
        .send()
        .await
        .unwrap();
    assert_eq!(orphan.status(), 500);
}

/// An ALBInstance `name` of namespace `failures` (its Gateway of the same name).
fn instance(name: &str) -> String {
    format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ALBInstance
metadata: {{name: {name}, namespace: failures}}
spec: {{gatewayName: {name}, inlet: {{type: LoadBalancer}}}}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_plane_apart_rides_out_the_api_server_gone() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let (mut apart, up) = Apart::start(202, true).await;
    let started = Instant::now();
    let load = apart.load(&up, "60s", "shop=shop.failures.test").await;
    // The API server gone for 30 s; the gateway controller and the xDS server run on.
    up.kill();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let back = apart.again();
    back.wait_ready().await;
    let late = backends::named("late").await;
    let applied = Instant::now();
    back.apply(&route("late", late));
    until(
        "a route applied after the API server's return served",
        async || apart.served("late.failures.test", "late").await,
    )
    .await;
    let took = applied.elapsed();
    // The gateway controller took up its work again: an instance made after the return has
    // its Gateway.
    back.apply(&instance("later"));
    let gateways = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        back.client().await,
        "failures",
        &fairlead_edge_controller::crds::resource("Gateway"),
    );
    until(
        "the Gateway of an instance made after the return",
        async || gateways.get_opt("later").await.ok().flatten(),
    )
    .await;
    let outcome = apart.finished(load).await;
    outcome.none_failed(&format!(
        "API server gone 30 s under a separate `fairlead edge controller` and `fairlead edge xds` (a route applied after its return served in {} ms)",
        took.as_millis()
    ));
    assert!(
        took <= Duration::from_secs(3),
        "a route applied after the API server's return took {took:?}"
    );
    for component in &mut apart.components {
        assert!(
            component.try_wait().unwrap().is_none(),
            "a component apart from `up` exited"
        );
    }
    apart.none_restarted(started).await;
}
