//! The shipped dashboards and alert rules, checked against real tools: `promtool` checks and
//! unit-tests the rules, and a real Prometheus scraping `fairlead up` (with the health module
//! probing a backend, a proxy's Envoy with the GeoIP filter, and a geoproxy) and receiving
//! k6's metrics from `fairlead loadtest` parses every PromQL expression and knows every
//! metric they name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fairlead_e2e::geo::{Mirror, city_database};
use fairlead_e2e::{Up, until};
use fairlead_kit::testing::free_port;
use fairlead_kit::testing::prometheus::{Prometheus, tool};

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = fairlead_e2e::workspace().join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(ext))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .{ext} files in {}", dir.display());
    files
}

/// Every PromQL expression of the dashboards (Grafana variables replaced) and alert rules.
fn expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in files("dashboards", "json") {
        let dashboard: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$namespace", ".*")
                    .replace("$swh", ".*")
                    .replace("$gateway", ".*")
                    .replace("$route", ".*")
                    .replace("$__rate_interval", "5m");
                out.push((format!("{}: {}", path.display(), panel["title"]), expr));
            }
        }
    }
    for path in files("alerts", "yaml") {
        let rules: serde_json::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for group in rules["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                out.push((
                    format!("{}: {}", path.display(), rule["alert"]),
                    rule["expr"].as_str().unwrap().to_owned(),
                ));
            }
        }
    }
    out
}

/// Metric names an expression uses (ours, Envoy's and `up`): words outside label matchers
/// (`{…}`), grouping clauses (`by (…)`, `on (…)`, …) and strings.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const GROUPING: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let (mut braces, mut grouping, mut quoted) = (0usize, 0usize, false);
    let mut after_grouping_word = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if quoted {
            quoted = c != '"';
            i += 1;
            continue;
        }
        match c {
            '"' => quoted = true,
            '{' => braces += 1,
            '}' => braces = braces.saturating_sub(1),
            '(' if after_grouping_word || grouping > 0 => grouping += 1,
            ')' if grouping > 0 => grouping -= 1,
            _ => {}
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            after_grouping_word = GROUPING.contains(&word.as_str());
            if braces == 0
                && grouping == 0
                && (["swh_", "fairlead_", "alb_", "envoy_", "k6_"]
                    .iter()
                    .any(|p| word.starts_with(p))
                    || word == "up")
            {
                names.insert(word);
            }
            continue;
        }
        if !c.is_whitespace() {
            after_grouping_word = false;
        }
        i += 1;
    }
    names
}

#[test]
fn metric_names_are_told_from_labels() {
    let names = metric_names(
        r#"sum by (gateway, envoy_cluster_name) (rate(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"backend/.*"}[5m])) / on (gateway) up"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["envoy_cluster_upstream_rq_total", "up"]
    );
}

#[test]
fn promtool_checks_and_unit_tests_the_rules() {
    let promtool = tool("promtool").unwrap();
    for rules in files("alerts", "yaml") {
        let out = Command::new(&promtool)
            .args(["check", "rules"])
            .arg(&rules)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    for test in files("alerts/tests", "yaml") {
        let out = Command::new(&promtool)
            .args(["test", "rules"])
            .arg(test.file_name().unwrap())
            .current_dir(test.parent().unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The metric families the dashboards and alerts read, each of which the world must export.
const WANTED: &[&str] = &[
    "swh_probe_total",
    "swh_endpoints",
    "swh_endpointslice_writes_total",
    "swh_status_writes_total",
    "alb_xds_connected_proxies",
    "alb_xds_pushes_total",
    "alb_xds_responses_total",
    "alb_xds_push_latency_seconds_bucket",
    "alb_xds_snapshot_resources",
    "alb_xds_streams_refused_total",
    "alb_xds_proxies_without_geoip",
    "alb_controller_reconciles_total",
    "alb_controller_instance_ready",
    "alb_controller_instance_reconcile_failures",
    "alb_controller_certificate_expiry_timestamp_seconds",
    "alb_controller_certificates_issued_total",
    "alb_controller_webhook_requests_total",
    "alb_controller_webhook_duration_seconds_bucket",
    "envoy_http_downstream_rq_total",
    "envoy_vhost_route_upstream_rq_completed",
    "envoy_cluster_upstream_rq_xx",
    "envoy_http_maxmind_total",
    "envoy_http_maxmind_hit",
    "envoy_maxmind_db_build_epoch",
    "envoy_http_ext_proc_waf_streams_failed",
    "envoy_http_ext_proc_waf_message_timeouts",
    "fairlead_waf_requests_total",
    "fairlead_waf_blocked_rules_total",
    "fairlead_waf_detected_rules_total",
    "fairlead_waf_inspection_seconds_bucket",
    "alb_geoproxy_downloads_total",
    "alb_geoproxy_download_error",
    "alb_geoproxy_database_build_timestamp_seconds",
    "alb_geoproxy_served_bytes_total",
    "k6_http_reqs_total",
    "k6_http_req_duration_p99",
    "k6_http_req_failed_rate",
    "k6_checks_rate",
    "k6_vus",
    "k6_iterations_total",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_expression_parses_and_names_metrics_a_real_prometheus_scraped() {
    let backend = std::net::TcpListener::bind("127.0.0.5:0").unwrap();
    let port = backend.local_addr().unwrap().port();
    let (echo, listener) = (echo().await, free_port());
    let dir = tempfile::tempdir().unwrap();
    // GeoIP: a geoproxy (its databases from a mirror) and the filter on the proxy.
    let mirror = Mirror::start().await.unwrap();
    mirror
        .publish(
            "GeoIP2-City",
            city_database(1_770_000_000, "London", "GB", "ENG"),
        )
        .unwrap();
    std::fs::write(
        dir.path().join("world.yaml"),
        world(port, listener, echo, &mirror.url),
    )
    .unwrap();
    // The graph's traffic overlay asks the Prometheus started below.
    let (graph, prometheus_port) = (free_port(), free_port());
    let up = Up::builder()
        .option("--graph-addr", format!("127.0.0.1:{graph}"))
        .option(
            "--prometheus-url",
            format!("http://127.0.0.1:{prometheus_port}"),
        )
        .manifests(dir.path())
        .start();
    let addresses = addresses(&up).await;
    let prometheus = scrape(&up, prometheus_port, &addresses).await;
    // Traffic through the proxy: successes, and server errors from the backend.
    let lb_ip = addresses.load_balancer.clone();
    let traffic = tokio::spawn(async move {
        let http = reqwest::Client::new();
        loop {
            for (host, path) in [
                ("echo", "/"),
                ("echo", "/"),
                ("echo", "/"),
                ("echo", "/fail"),
                // The WAF's routes: an ordinary request, and a SQL injection it blocks
                // (`guarded`) or only detects (`watched`).
                ("guarded", "/"),
                ("guarded", "/?id=1%27%20OR%20%271%27=%271"),
                ("watched", "/?id=1%27%20OR%20%271%27=%271"),
            ] {
                let _ = http
                    .get(format!("http://{lb_ip}:{listener}{path}"))
                    .header("host", format!("{host}.example.com"))
                    .header("user-agent", "Mozilla/5.0")
                    // An address the GeoIP database knows.
                    .header("x-real-ip", "81.2.69.142")
                    .send()
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let proxy = tokio::spawn(proxy(up.xds_port, up.kubeconfig.clone()));
    let target = format!("http://{}:{listener}", addresses.load_balancer);
    k6_through_the_proxy(&prometheus, &target, dir.path()).await;
    every_family_scraped(&prometheus).await;
    every_expression_known(&prometheus).await;
    let routes = prometheus
        .query("sum by (envoy_route) (envoy_vhost_route_upstream_rq_completed)")
        .await
        .unwrap();
    assert!(
        routes
            .iter()
            .any(|r| r["metric"]["envoy_route"] == "httproute/default/echo/rule/0"),
        "route statistics name their Gateway API rule: {routes:?}"
    );
    graph_overlays_traffic(graph).await;
    traffic.abort();
    let ready = prometheus
        .query("sum by (swh, port) (swh_endpoints{state=\"ready\"})")
        .await
        .unwrap();
    assert_eq!(
        ready[0]["value"][1], "1",
        "the dashboard's ready-endpoints query sees the probed pod"
    );
    kubectl_shows_the_bundles_columns(&up);
    // The proxy streams until aborted: finished means it failed (TLS refused, a panic).
    if proxy.is_finished() {
        let result = proxy.await;
        panic!("the proxy stopped early: {result:?}");
    }
    proxy.abort();
    up.kill();
    drop(backend);
}

/// The world: a pod probed through a ServiceWithHealthchecks on `port`, an instance with
/// route statistics and GeoIP (a geoproxy, its databases from `mirror`) on `listener`,
/// routes to the probed Service and to the `echo` backend, and another Service.
fn world(port: u16, listener: u16, echo: u16, mirror: &str) -> String {
    let mirror_url = mirror;
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: web-a, labels: {{app: web}}}}
spec: {{nodeName: local, containers: [{{name: app, image: app}}]}}
status: {{phase: Running, podIP: 127.0.0.5, podIPs: [{{ip: 127.0.0.5}}], conditions: [{{type: Ready, status: "True"}}]}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: web, port: 80, targetPort: {port}}}]
  healthcheck: {{initialDelaySeconds: 0, periodSeconds: 1, probes: [{{mode: TCP, tcp: {{targetPort: {port}}}}}]}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: d8-alb}}
---
apiVersion: v1
kind: Secret
metadata: {{name: maxmind, namespace: d8-alb}}
stringData: {{licenseKey: test-licence}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: gw, annotations: {{fairlead.io/route-statistics: "true"}}}}
spec:
  gatewayName: gw
  inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {listener}}}}}
  originalIPDetection: {{realIPHeader: X-Real-IP, setRealIPFrom: [127.0.0.0/8]}}
  geoIP:
    licenseKeySecretRef: {{name: maxmind, namespace: d8-alb}}
    maxmindMirror: {{url: "{mirror_url}"}}
    maxmindEditionIDs: [GeoIP2-City]
    headers: {{country: x-geo-country}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: gw, namespace: d8-alb}}]
  rules: [{{backendRefs: [{{name: web, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: echo, namespace: default}}
spec:
  parentRefs: [{{name: gw, namespace: d8-alb}}]
  hostnames: [echo.example.com]
  rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: guarded
  namespace: default
  annotations: {{alb.network.deckhouse.io/mod-security: '{{"mode": "on", "preset": "owasp-crs"}}'}}
spec:
  parentRefs: [{{name: gw, namespace: d8-alb}}]
  hostnames: [guarded.example.com]
  rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: watched
  namespace: default
  annotations: {{alb.network.deckhouse.io/mod-security: '{{"mode": "DetectionOnly", "preset": "owasp-crs"}}'}}
spec:
  parentRefs: [{{name: gw, namespace: d8-alb}}]
  hostnames: [watched.example.com]
  rules: [{{backendRefs: [{{name: echo, port: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: default}}
spec: {{ports: [{{name: http, port: 80, targetPort: {echo}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo, namespace: default, labels: {{kubernetes.io/service-name: echo}}}}
addressType: IPv4
ports: [{{name: http, port: {echo}}}]
endpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: other, namespace: default}}
spec: {{ports: [{{name: http, port: 80}}]}}
"#
    )
}

/// Where the world's parts are.
struct Addresses {
    /// The instance's proxy pod.
    pod: String,
    /// Its LoadBalancer Service.
    load_balancer: String,
    /// The geoproxy's pod.
    geoproxy: String,
}

/// The instance's proxy: a real Envoy in a pod of the local runner, scraped at its metrics
/// port (`/stats/prometheus`) as a PodMonitor would, its series labelled with the Gateway;
/// clients reach it at its LoadBalancer Service's address. And the geoproxy's pod.
async fn addresses(up: &Up) -> Addresses {
    let jsonpath = |args: &[&str]| -> Option<String> {
        let out = up.kubectl(args);
        let text = String::from_utf8(out.stdout).ok()?;
        (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
    };
    let pods = |path: &str| {
        let path = format!("jsonpath={{.items[0].status.{path}}}");
        jsonpath(&[
            "get",
            "pods",
            "-n",
            "d8-alb",
            "-l",
            "alb.deckhouse.io/gateway=gw",
            "-o",
            &path,
        ])
    };
    let (pod, load_balancer) = until("the proxy pod ready behind its LoadBalancer", async || {
        // The pod running the WAF its routes ask for (the first one may come without).
        jsonpath(&[
            "get",
            "pods",
            "-n",
            "d8-alb",
            "-l",
            "alb.deckhouse.io/gateway=gw",
            "-o",
            "jsonpath={.items[0].spec.containers[*].name}",
        ])?
        .split_whitespace()
        .any(|c| c == "waf")
        .then_some(())?;
        let ready = pods("conditions[?(@.type==\"Ready\")].status")?;
        let pod = pods("podIP")?;
        let lb = jsonpath(&[
            "get",
            "service",
            "-n",
            "d8-alb",
            "d8-alb-gw-loadbalancer",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ])?;
        (ready == "True").then_some((pod, lb))
    })
    .await;
    let geoproxy = until("the geoproxy's pod", async || {
        jsonpath(&[
            "get",
            "pod",
            "-n",
            "d8-alb",
            "d8-alb-gw-geoproxy-0",
            "-o",
            "jsonpath={.status.podIP}",
        ])
    })
    .await;
    Addresses {
        pod,
        load_balancer,
        geoproxy,
    }
}

/// A real Prometheus on `port` scraping `fairlead up`, the proxy's Envoy and WAF, and the
/// geoproxy.
async fn scrape(up: &Up, port: u16, addresses: &Addresses) -> Prometheus {
    use fairlead_kit::testing::prometheus::Job;
    let admin = up.admin.trim_start_matches("http://");
    let job = |name: &str, path: &str, target: String, labels: &[(&str, &str)]| Job {
        name: name.into(),
        path: path.into(),
        targets: vec![target.parse().unwrap()],
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    };
    Prometheus::start_jobs_on(
        port,
        &[
            job("fairlead", "/metrics", admin.to_owned(), &[]),
            job(
                "envoy",
                "/stats/prometheus",
                format!("{}:19001", addresses.pod),
                &[("gateway", "d8-alb/gw")],
            ),
            job(
                "waf",
                "/waf/metrics",
                format!("{}:19001", addresses.pod),
                &[("gateway", "d8-alb/gw")],
            ),
            job(
                "geoproxy",
                "/metrics",
                format!("{}:9090", addresses.geoproxy),
                &[("namespace", "d8-alb")],
            ),
        ],
    )
    .await
    .unwrap()
}

/// k6's metrics, as `fairlead loadtest --prometheus-rw` sends them, through the same proxy
/// (the scenario's routes are not this world's: its checks fail; its metrics are what the
/// load test's dashboard reads beside Envoy's).
async fn k6_through_the_proxy(prometheus: &Prometheus, target: &str, dir: &Path) {
    let (rw, results, target) = (
        prometheus.remote_write_url(),
        dir.join("k6.json"),
        target.to_owned(),
    );
    let k6 = tokio::task::spawn_blocking(move || {
        Command::new(fairlead_e2e::binary::path())
            .args(["loadtest", "http-steady", "--rate", "5", "--duration", "5s"])
            .args(["--target", &target, "--prometheus-rw", &rw])
            .arg("--dir")
            .arg(fairlead_e2e::workspace().join("loadtests"))
            .arg("--results")
            .arg(&results)
            .env("CI", "true")
            .env("K6_PROMETHEUS_RW_PUSH_INTERVAL", "1s")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        matches!(k6.status.code(), Some(0 | 99)),
        "k6 did not run: {}",
        String::from_utf8_lossy(&k6.stderr)
    );
}

/// Waits until Prometheus holds every family of [`WANTED`].
async fn every_family_scraped(prometheus: &Prometheus) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = prometheus.metric_names().await.unwrap();
        if WANTED.iter().all(|w| names.iter().any(|n| n == w)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "metrics never scraped: {names:?}\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every expression of the dashboards and rules parses and names only metrics Prometheus
/// knows; every panel of the proxies' and the load test's dashboards shows data (the proxy
/// carries traffic, k6 sent its own).
async fn every_expression_known(prometheus: &Prometheus) {
    let known: BTreeSet<String> = prometheus
        .metric_names()
        .await
        .unwrap()
        .into_iter()
        .collect();
    let expressions = expressions();
    assert!(expressions.len() >= 10, "{expressions:?}");
    for (source, expr) in &expressions {
        if let Err(err) = prometheus.query(expr).await {
            panic!("{source}: {err}");
        }
        for name in metric_names(expr) {
            assert!(
                known.contains(&name),
                "{source}: metric {name} is not exported (known: {known:?})"
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for (source, expr) in expressions.iter().filter(|(source, _)| {
        source.contains("alb-proxy.json") || source.contains("alb-loadtest.json")
    }) {
        loop {
            let result = prometheus.query(expr).await.unwrap();
            if !result.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "{source}: no data for {expr}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The graph's traffic overlay (on port `graph`): the route and its backend carry the
/// proxy's numbers.
async fn graph_overlays_traffic(graph: u16) {
    let url = format!("http://127.0.0.1:{graph}/api/v1/graph?namespace=default");
    let (route, backend) = until("the graph's traffic overlay", async || {
        let graph: serde_json::Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
        let route = graph["elements"]["nodes"]
            .as_array()?
            .iter()
            .map(|n| &n["data"])
            .find(|n| n["id"] == "gateway.networking.k8s.io/HTTPRoute/default/echo")?
            .clone();
        let backend = graph["elements"]["edges"]
            .as_array()?
            .iter()
            .map(|e| &e["data"])
            .find(|e| e["relation"] == "backendRef" && e["target"] == "/Service/default/echo")?
            .clone();
        let busy = |t: &serde_json::Value| t["requestsPerSecond"].as_f64().is_some_and(|r| r > 0.0);
        // A p99 needs two samples of the histogram in the window; the rate may come first.
        let timed = route["traffic"]["p99Ms"].as_f64().is_some();
        (busy(&route["traffic"]) && busy(&backend["traffic"]) && timed).then_some((route, backend))
    })
    .await;
    assert!(route["traffic"]["p99Ms"].as_f64().is_some(), "{route}");
    assert!(
        backend["traffic"]["errorRatio"].as_f64().is_some(),
        "{backend}"
    );
}

/// `kubectl get` shows the upstream bundle's columns for the generated Gateway API CRDs.
fn kubectl_shows_the_bundles_columns(up: &Up) {
    let get = |args: &[&str]| {
        let out = up.kubectl(&[&["get"], args].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let gateway = get(&["gateway", "-n", "d8-alb", "gw"]);
    let (header, row) = gateway.split_once('\n').unwrap();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns,
        ["NAME", "CLASS", "ADDRESS", "PROGRAMMED", "AGE"],
        "{gateway}"
    );
    let values: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(values[..2], ["gw", "d8-alb"], "{gateway}");
    assert!(values.contains(&"True"), "programmed: {gateway}");
    let class = get(&["gatewayclass", "d8-alb"]);
    assert!(
        class.contains("CONTROLLER")
            && class.contains("alb.network.deckhouse.io/gateway-controller"),
        "{class}"
    );
    assert!(
        get(&["httproute", "web"]).starts_with("NAME"),
        "routes print a table"
    );
}

/// A backend answering 200, and 500 on `/fail`; its port.
async fn echo() -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                loop {
                    let n = match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let failing = buf[..n].starts_with(b"GET /fail");
                    let answer: &[u8] = if failing {
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\n\r\nfail"
                    } else {
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
                    };
                    if socket.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Issues a proxy's certificate for `gateway` with `fairlead edge certificate`: (CA, its
/// certificate, its key), the key readable by its owner only.
fn issue(kubeconfig: &Path, gateway: &str) -> (String, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(fairlead_e2e::binary::path())
        .env("KUBECONFIG", kubeconfig)
        .args(["edge", "certificate", "--gateway", gateway, "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "the proxy's key is its owner's only");
    }
    (read("ca.crt"), read("tls.crt"), read("tls.key"))
}

/// Whether the xDS server behind `endpoint` answers `hello` with a response.
async fn answers(
    endpoint: tonic::transport::Endpoint,
    hello: envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest,
) -> bool {
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    match endpoint.connect().await {
        Err(_) => false,
        Ok(channel) => match AggregatedDiscoveryServiceClient::new(channel)
            .stream_aggregated_resources(tokio_stream::iter([hello]))
            .await
        {
            Err(_) => false,
            Ok(response) => matches!(response.into_inner().message().await, Ok(Some(_))),
        },
    }
}

/// A proxy of Gateway `d8-alb/gw` on `fairlead up`'s xDS server, over mutual TLS with a
/// certificate `fairlead edge certificate` issued for it: it fetches and ACKs the clusters,
/// then changes the route (so a push follows) and ACKs what comes, until aborted. Before
/// that, a plaintext client, a TLS client without a certificate and one whose certificate
/// names another Gateway are refused.
async fn proxy(xds: u16, kubeconfig: PathBuf) {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
    const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    let (ca, cert, key) = issue(&kubeconfig, "d8-alb/gw");
    let (_, other_cert, other_key) = issue(&kubeconfig, "d8-alb/other");
    let endpoint = |tls: Option<ClientTlsConfig>| {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let endpoint = Channel::from_shared(format!("{scheme}://127.0.0.1:{xds}")).unwrap();
        match tls {
            Some(tls) => endpoint.tls_config(tls).unwrap(),
            None => endpoint,
        }
    };
    let tls = || {
        ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&ca))
            .domain_name("127.0.0.1")
    };
    let channel = loop {
        match endpoint(Some(tls().identity(Identity::from_pem(&cert, &key))))
            .connect()
            .await
        {
            Ok(channel) => break channel,
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let hello = || DiscoveryRequest {
        node: Some(Node {
            id: "stranger".into(),
            cluster: "d8-alb/gw".into(),
            ..Default::default()
        }),
        type_url: CLUSTER.into(),
        ..Default::default()
    };
    // Refused: plaintext, TLS without a client certificate, and another Gateway's proxy.
    for refused in [
        endpoint(None),
        endpoint(Some(tls())),
        endpoint(Some(
            tls().identity(Identity::from_pem(&other_cert, &other_key)),
        )),
    ] {
        assert!(
            !answers(refused, hello()).await,
            "the xDS server answered a client without a valid certificate"
        );
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(DiscoveryRequest {
        node: Some(Node {
            id: "observability".into(),
            cluster: "d8-alb/gw".into(),
            ..Default::default()
        }),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut changed = false;
    while let Ok(Some(response)) = responses.message().await {
        tx.send(DiscoveryRequest {
            type_url: response.type_url.clone(),
            version_info: response.version_info.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
        if !changed {
            changed = true;
            // A second backend (another Service): the clusters change, and are pushed.
            let status = Command::new("kubectl")
                .env("KUBECONFIG", &kubeconfig)
                .args(["patch", "httproute", "web", "--type=merge", "-p"])
                .arg(r#"{"spec":{"rules":[{"backendRefs":[{"name":"web","port":80},{"name":"other","port":80}]}]}}"#)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "kubectl patch failed");
        }
    }
}
