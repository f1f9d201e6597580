//! The failure suite: steady k6 load (`fairlead loadtest failures`, a constant arrival rate)
//! through real Envoy while one thing fails at a time, each with its result line (requests
//! sent and failed, by status) and the figure it must meet — RELIABILITY.md records them:
//!
//! - the control plane killed with SIGKILL and started again from its `--data-dir`, while
//!   the proxies run apart from it (`fairlead edge proxy` processes beside a
//!   `--no-local-proxies` up, as in a cluster): no request fails, no proxy restarts, and a
//!   route applied after the restart is served within 2 s; then the control plane gone for
//!   30 s: no request fails on the routes that did not change;
//! - a rollout of an instance's two proxies (a change of the pod template): no request
//!   fails — the Service sends a leaving proxy no new connection, and it drains.
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

/// `fairlead up` with its data in `data`, its API and xDS server on fixed ports (so it can be
/// started again where its proxies and clients look), running no proxies itself.
fn control_plane(data: &std::path::Path, api: u16, xds: u16, block: u8) -> Up {
    Up::builder()
        .path("--data-dir", data)
        .option("--api-addr", format!("127.0.0.1:{api}"))
        .option("--xds-addr", format!("127.0.0.1:{xds}"))
        .option("--loopback-block", block.to_string())
        .flag("--no-local-proxies")
        .start()
}

/// A `fairlead edge proxy` of Gateway `key` apart from the control plane, with its admin
/// interface on `admin`, its files (and log) in `dir`.
fn proxy(
    up: &Up,
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
        .args(["--xds", &format!("127.0.0.1:{}", up.xds_port)])
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
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: failures}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [{name}.failures.test]
  rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]
---
{}",
        backends::service("failures", name, 80, port)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_serve_on_while_the_control_plane_is_killed_or_gone() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let data = tempfile::tempdir().unwrap();
    let (api, xds) = (free_port(), free_port());
    let first = control_plane(data.path(), api, xds, 200);
    first.wait_ready().await;
    let address = "127.200.9.1";
    let shop = backends::named("shop").await;
    first.apply(&format!(
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
    let certificate = fairlead_e2e::alb::certificate(&first, "failures/edge");
    let files = tempfile::Builder::new()
        .prefix("failures-")
        .tempdir()
        .unwrap();
    let admins = [free_port(), free_port()];
    let mut proxies: Vec<Child> = admins
        .iter()
        .enumerate()
        .map(|(i, admin)| {
            proxy(
                &first,
                "failures/edge",
                *admin,
                certificate.path(),
                &files.path().join(format!("proxy-{i}")),
            )
        })
        .collect();
    let target = format!("http://{address}:8080");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let served = async |host: &str, answer: &str| {
        let r = http
            .get(format!("{target}/"))
            .header("host", host)
            .send()
            .await
            .ok()?;
        (r.text().await.ok()? == answer).then_some(())
    };
    until("the shop through both proxies' Gateway", async || {
        served("shop.failures.test", "shop").await
    })
    .await;
    let started = Instant::now();

    let load = Load::start(&first, "75s", Some((&target, "shop=shop.failures.test")));
    load.loading().await;
    // Killed outright, and started again from its data.
    first.kill();
    let second = control_plane(data.path(), api, xds, 200);
    second.wait_ready().await;
    let late = backends::named("late").await;
    let applied = Instant::now();
    second.apply(&route("late", late));
    until("the route applied after the restart served", async || {
        served("late.failures.test", "late").await
    })
    .await;
    let took = applied.elapsed();
    // Gone for 30 s, then back.
    second.kill();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let third = control_plane(data.path(), api, xds, 200);
    third.wait_ready().await;
    let outcome = load.finish().await;
    let failed_lines: Vec<String> = (0..2)
        .flat_map(|i| {
            std::fs::read_to_string(files.path().join(format!("proxy-{i}/access.log")))
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.contains("\"response_code\":200"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    eprintln!("{}", failed_lines.join("\n"));
    outcome.none_failed(&format!(
        "control plane SIGKILLed and started again (a route applied after it served in {} ms), then gone 30 s",
        took.as_millis()
    ));
    assert!(
        took <= Duration::from_secs(2),
        "a route applied after the restart was served after {took:?}"
    );
    for (proxy, admin) in proxies.iter_mut().zip(admins) {
        assert!(proxy.try_wait().unwrap().is_none(), "a proxy exited");
        let up_for = uptime(&http, admin).await.expect("Envoy's server_info");
        assert!(
            up_for + 2 >= started.elapsed().as_secs(),
            "Envoy restarted: up {up_for} s of {:?}",
            started.elapsed()
        );
    }
    for mut proxy in proxies {
        let _ = proxy.kill();
    }
    drop(third);
}
