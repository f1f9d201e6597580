//! `fairlead loadtest`: every scenario of `loadtests/` against `fairlead up` with its world and
//! echo backends (k6 through a real Envoy; TCP/UDP driven by the runner), their thresholds
//! held and a broken world failing them, the world for a cluster, and the CI guard. One at a
//! time: k6 and Envoy measure the machine.

use std::process::Command;
use std::time::Duration;

use fairlead_e2e::{Up, until};

/// `fairlead loadtest http-steady` against `up`, with `extra` arguments: its exit code, what
/// it printed, and the summary k6 wrote.
fn loadtest(up: &Up, extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    scenario(up, "http-steady", extra)
}

/// `fairlead loadtest <name>` against `up` for 10 s at 30 iterations/s (see [`loadtest`]).
fn scenario(up: &Up, name: &str, extra: &[&str]) -> (Option<i32>, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("summary.json");
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["loadtest", name, "--rate", "30", "--duration", "10s"])
        .arg("--dir")
        .arg(fairlead_e2e::workspace().join("loadtests"))
        .arg("--kubeconfig")
        .arg(&up.kubeconfig)
        .arg("--results")
        .arg(&results)
        .args(extra)
        .env("CI", "true")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = std::fs::read(&results)
        .map(|t| serde_json::from_slice(&t).unwrap())
        .unwrap_or_default();
    (out.status.code(), printed, summary)
}

/// Whether the threshold `expression` of `metric` held in a k6 summary.
fn held(summary: &serde_json::Value, metric: &str, expression: &str) -> bool {
    summary["metrics"][metric]["thresholds"][expression]["ok"]
        .as_bool()
        .unwrap_or_else(|| panic!("no threshold {metric} {expression} in the summary"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_steady_holds_its_thresholds_through_envoy_and_a_broken_world_fails_them() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let prometheus = fairlead_kit::testing::prometheus::Prometheus::start(&[])
        .await
        .unwrap();
    let rw = prometheus.remote_write_url();
    let (code, printed, summary) = loadtest(&up, &["--prometheus-rw", &rw]);
    assert_eq!(code, Some(0), "{printed}");
    // k6's metrics reached Prometheus, per route.
    let series = prometheus
        .query_until_nonempty(
            r#"k6_http_reqs_total{route="shop"}"#,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert!(!series.is_empty());
    assert!(printed.contains("loadtest: passed"), "{printed}");
    // Every route was loaded, each answered by its own backends, the split within bounds.
    for route in ["web", "api", "shop"] {
        let count = summary["metrics"][format!("http_reqs{{route:{route}}}")]["values"]["count"]
            .as_f64()
            .unwrap_or_default();
        assert!(count >= 100.0, "{route}: {count} requests\n{printed}");
        assert!(held(
            &summary,
            &format!("checks{{route:{route}}}"),
            "rate>0.99"
        ));
    }
    let v2 = summary["metrics"]["backend_share{route:shop,backend:shop-v2}"]["values"]["rate"]
        .as_f64()
        .unwrap();
    assert!(
        (0.1..0.3).contains(&v2),
        "shop-v2 had {v2} of shop's responses"
    );

    // One backend down (its endpoint still says ready): its share of the split fails.
    let (code, printed, summary) = loadtest(&up, &["--break", "backend-down=shop-v2"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(!held(&summary, "http_req_failed", "rate<0.01"), "{printed}");
    assert!(
        !held(&summary, "checks{route:shop}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        held(&summary, "checks{route:web}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        printed.contains("loadtest: FAIL http_req_failed rate<0.01"),
        "{printed}"
    );

    // A wrong weight (50/50 for 80/20): every request succeeds, the split's bounds fail.
    let (code, printed, summary) = loadtest(&up, &["--break", "wrong-weight=shop"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(held(&summary, "http_req_failed", "rate<0.01"), "{printed}");
    assert!(
        !held(
            &summary,
            "backend_share{route:shop,backend:shop-v2}",
            "rate<0.300"
        ),
        "{printed}"
    );
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_churn_changes_a_route_and_a_pods_readiness_under_load_without_a_failed_request() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let (code, printed, summary) = scenario(&up, "route-churn", &[]);
    assert_eq!(code, Some(0), "{printed}");
    assert!(held(&summary, "http_req_failed", "rate==0"), "{printed}");
    let churn = &summary["churn"];
    assert!(
        churn["changes"].as_u64().unwrap_or_default() >= 5,
        "{churn}"
    );
    let (p50, p99) = (
        churn["propagation_p50_ms"].as_f64().unwrap(),
        churn["propagation_p99_ms"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 < 10_000.0, "{churn}");
    // The pods behind the ServiceWithHealthchecks went not-ready and ready again, one at a
    // time, and traffic left each and came back (through the health agent's probes and
    // EndpointSlices), while every request to them succeeded.
    let readiness = &churn["readiness"];
    assert!(
        readiness["changes"].as_u64().unwrap_or_default() >= 2,
        "{printed}"
    );
    for figure in ["left_p50_ms", "left_max_ms", "back_p50_ms", "back_max_ms"] {
        let ms = readiness[figure].as_f64().unwrap_or(-1.0);
        assert!((0.0..10_000.0).contains(&ms), "{figure}: {printed}");
    }
    assert!(
        held(&summary, "checks{route:churn-swh}", "rate==1"),
        "{printed}"
    );
    assert!(printed.contains("loadtest: changes"), "{printed}");
    // The backend of the added paths down: no change ever reaches traffic; and probes that
    // ask what a not-ready pod still serves: traffic never leaves it. Each fails the run
    // although k6's own thresholds hold.
    let (code, printed, summary) = scenario(
        &up,
        "route-churn",
        &[
            "--break",
            "backend-down=churn-c",
            "--break",
            "readiness-ignored=churn-h",
        ],
    );
    assert_eq!(code, Some(1), "{printed}");
    assert!(held(&summary, "http_req_failed", "rate==0"), "{printed}");
    let error =
        |figures: &serde_json::Value| figures["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error(&summary["churn"]).contains("did not reach traffic"),
        "{printed}"
    );
    assert!(
        error(&summary["churn"]["readiness"]).contains("did not leave churn-h-"),
        "{printed}"
    );
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_ramp_finds_the_knee_where_a_backend_runs_out_of_capacity() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    // Steps of 6, 12, 18, 24 and 30 iterations/s: every one holds through Envoy.
    let (code, printed, summary) = scenario(&up, "http-ramp", &[]);
    assert_eq!(code, Some(0), "{printed}");
    let ramp = &summary["ramp"];
    assert_eq!(ramp["knee"], 30, "{printed}");
    assert!(ramp["broke_at"].is_null(), "{printed}");
    assert!(printed.contains("above the top rate"), "{printed}");
    // A backend that answers 15 requests a second: 18/s breaks, the knee is 12/s, the run
    // stops there (the steps after it never run) and passes, since it found its knee.
    let (code, printed, summary) = scenario(&up, "http-ramp", &["--break", "capacity=ramp:15"]);
    assert_eq!(code, Some(0), "{printed}");
    let ramp = &summary["ramp"];
    assert_eq!(
        (ramp["knee"].clone(), ramp["broke_at"].clone()),
        (12.into(), 18.into()),
        "{printed}"
    );
    assert_eq!(ramp["steps"][4]["reached"], false, "{printed}");
    assert!(
        !held(&summary, "http_req_failed{stage:18}", "rate<0.001"),
        "{printed}"
    );
    assert!(
        printed.contains("loadtest: BROKE http_req_failed{stage:18}"),
        "{printed}"
    );
    assert!(printed.contains("the knee is 12 iterations/s"), "{printed}");
    // Its backend down: the first step breaks, there is no knee, and the run fails.
    let (code, printed, summary) = scenario(&up, "http-ramp", &["--break", "backend-down=ramp"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(summary["ramp"]["knee"].is_null(), "{printed}");
    assert!(printed.contains("the first step broke"), "{printed}");
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_handshakes_open_a_verified_tls_connection_per_request_with_sni_per_hostname() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let (code, printed, summary) = scenario(&up, "https-handshakes", &[]);
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains("at https://127."), "{printed}");
    for route in ["tls-a", "tls-b"] {
        let requests = summary["metrics"][format!("http_reqs{{route:{route}}}")]["values"]["count"]
            .as_f64()
            .unwrap_or_default();
        assert!(requests >= 200.0, "{route}: {requests} requests\n{printed}");
        // Every answer came over a handshake of its own, from the hostname's backend.
        assert!(
            held(&summary, &format!("checks{{route:{route}}}"), "rate>0.99"),
            "{printed}"
        );
        let handshake = summary["metrics"][format!("http_req_tls_handshaking{{route:{route}}}")]["values"]["min"]
            .as_f64()
            .unwrap_or_default();
        assert!(
            handshake > 0.0,
            "{route}: a request without a handshake\n{printed}"
        );
    }
    // One hostname's backend down: its checks fail, the other's hold.
    let (code, printed, summary) =
        scenario(&up, "https-handshakes", &["--break", "backend-down=tls-b"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(
        !held(&summary, "checks{route:tls-b}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        held(&summary, "checks{route:tls-a}", "rate>0.99"),
        "{printed}"
    );
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_go_through_a_grpcroute_by_method_and_weight() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let (code, printed, summary) = scenario(&up, "grpc", &[]);
    assert_eq!(code, Some(0), "{printed}");
    for route in ["say", "shout"] {
        let calls = summary["metrics"][format!("grpc_reqs{{route:{route}}}")]["values"]["count"]
            .as_f64()
            .unwrap_or_default();
        assert!(calls >= 200.0, "{route}: {calls} calls\n{printed}");
        assert!(
            held(&summary, &format!("checks{{route:{route}}}"), "rate>0.99"),
            "{printed}"
        );
    }
    // The table reads gRPC's metrics: a p99 on each method's line.
    let say = printed
        .lines()
        .find(|l| l.starts_with("say "))
        .unwrap_or_default();
    assert!(!say.contains(" - "), "{say}\n{printed}");
    // Say's backend down and Shout's split made even: Say's checks fail, and both of
    // Shout's backends leave their share.
    let (code, printed, summary) = scenario(
        &up,
        "grpc",
        &[
            "--break",
            "backend-down=say",
            "--break",
            "wrong-weight=echo",
        ],
    );
    assert_eq!(code, Some(99), "{printed}");
    assert!(
        !held(&summary, "checks{route:say}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        held(&summary, "checks{route:shout}", "rate>0.99"),
        "{printed}"
    );
    for (backend, expression) in [("shout-v1", "rate>0.700"), ("shout-v2", "rate<0.300")] {
        let metric = format!("backend_share{{route:shout,backend:{backend}}}");
        assert!(!held(&summary, &metric, expression), "{printed}");
    }
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_and_udp_echo_go_through_tcproutes_and_udproutes_driven_by_the_runner() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let exchanges = |summary: &serde_json::Value, route: &str| {
        summary["metrics"][format!("stream_reqs{{route:{route}}}")]["values"]["count"]
            .as_f64()
            .unwrap_or_default()
    };
    // Every line answered by a backend of its TCPRoute, the split within its bounds.
    let (code, printed, summary) = scenario(&up, "tcp-echo", &[]);
    assert_eq!(code, Some(0), "{printed}");
    assert!(printed.contains("split       "), "the table: {printed}");
    for route in ["split", "single"] {
        assert!(exchanges(&summary, route) >= 200.0, "{route}\n{printed}");
    }
    // The split made even and the single route's backend down.
    let (code, printed, summary) = scenario(
        &up,
        "tcp-echo",
        &[
            "--break",
            "wrong-weight=split",
            "--break",
            "backend-down=tcp-solo",
        ],
    );
    assert_eq!(code, Some(99), "{printed}");
    assert!(
        !held(&summary, "checks{route:single}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        !held(&summary, "stream_req_failed{route:single}", "rate<0.01"),
        "{printed}"
    );
    assert!(
        held(&summary, "checks{route:split}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        !held(
            &summary,
            "backend_share{route:split,backend:tcp-v1}",
            "rate>0.700"
        ),
        "{printed}"
    );
    // Datagrams, each from a socket of its own, answered by their UDPRoute's backend.
    let (code, printed, summary) = scenario(&up, "udp-echo", &[]);
    assert_eq!(code, Some(0), "{printed}");
    for route in ["dns", "syslog"] {
        assert!(exchanges(&summary, route) >= 200.0, "{route}\n{printed}");
    }
    let (code, printed, summary) =
        scenario(&up, "udp-echo", &["--break", "backend-down=udp-syslog"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(
        !held(&summary, "checks{route:syslog}", "rate>0.99"),
        "{printed}"
    );
    assert!(
        held(&summary, "checks{route:dns}", "rate>0.99"),
        "{printed}"
    );
    // k6 does not run these: its remote write is refused, not silently skipped.
    let out = Command::new(fairlead_e2e::binary::path())
        .args([
            "loadtest",
            "udp-echo",
            "--prometheus-rw",
            "http://127.0.0.1:9/api/v1/write",
        ])
        .arg("--dir")
        .arg(fairlead_e2e::workspace().join("loadtests"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("not k6"), "{said}");
    up.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geo_headers_reach_the_backend_for_the_addresses_of_maxmind_s_test_databases() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    // The instance downloads the test databases from the runner's mirror (through its
    // geoproxy), and Envoy's GeoIP filter sets, replaces and removes the headers.
    let (code, printed, summary) = scenario(&up, "geo", &[]);
    assert_eq!(code, Some(0), "{printed}");
    for address in ["london", "linkoping", "milton", "asn-only", "unknown"] {
        assert!(
            held(&summary, &format!("checks{{route:{address}}}"), "rate>0.99"),
            "{address}\n{printed}"
        );
    }
    // The backend down: every address's checks fail.
    let (code, printed, summary) = scenario(&up, "geo", &["--break", "backend-down=geo"]);
    assert_eq!(code, Some(99), "{printed}");
    assert!(
        !held(&summary, "checks{route:london}", "rate>0.99"),
        "{printed}"
    );
    up.stop();
}

/// A scenario's world for a cluster: `--cluster-world` prints it with `fairlead echo`
/// Deployments behind its Services; `kubectl apply` it to `up` (whose runner runs them and
/// writes their EndpointSlices, as a cluster would), and the scenario holds against the
/// instance's address with `--target`, nothing started by the runner, and with `--gateway`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_world_for_a_cluster_runs_its_echo_backends_as_deployments() {
    let _alone = fairlead_e2e::MEASURING.lock().await;
    let up = Up::start();
    up.wait_ready().await;
    let printed = Command::new(fairlead_e2e::binary::path())
        .args(["loadtest", "http-steady", "--cluster-world"])
        .arg("--dir")
        .arg(fairlead_e2e::workspace().join("loadtests"))
        .output()
        .unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let world = String::from_utf8(printed.stdout).unwrap();
    assert_eq!(
        world.matches("\"kind\": \"Deployment\"").count(),
        6,
        "{world}"
    );
    up.apply(&world);
    let client = up.client().await;
    let services: kube::Api<k8s_openapi::api::core::v1::Service> =
        kube::Api::namespaced(client.clone(), "d8-alb");
    let ip = until("the instance's LoadBalancer address", async || {
        let service = services.get("d8-alb-loadtest-loadbalancer").await.ok()?;
        service.status?.load_balancer?.ingress?.pop()?.ip
    })
    .await;
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client.clone(), "loadtest");
    until(
        "every echo Deployment's pod ready in its Service's slice",
        async || {
            let listed = slices.list(&Default::default()).await.ok()?.items;
            let ready = listed
                .iter()
                .filter(|s| {
                    s.endpoints
                        .iter()
                        .flatten()
                        .any(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                })
                .count();
            (ready == 6).then_some(())
        },
    )
    .await;
    let (code, printed, summary) = scenario(
        &up,
        "http-steady",
        &["--wait-served", "--target", &format!("http://{ip}:8088")],
    );
    assert_eq!(code, Some(0), "{printed}");
    assert!(
        held(&summary, "checks{route:shop}", "rate>0.99"),
        "{printed}"
    );
    // The same, found from the instance's Gateway: its LoadBalancer address and the port of
    // its HTTP listener.
    let (code, printed, _) = scenario(&up, "http-steady", &["--gateway", "d8-alb/loadtest"]);
    assert_eq!(code, Some(0), "{printed}");
    assert!(
        printed.contains(&format!("at http://{ip}:8088/")),
        "{printed}"
    );
    up.stop();
}

#[test]
fn loadtest_in_ci_refuses_targets_outside_loopback_before_starting_anything() {
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["loadtest", "http-steady", "--target", "http://10.1.2.3:80"])
        .env("CI", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("only addresses in 127.0.0.0/8"), "{stderr}");
    let out = Command::new(fairlead_e2e::binary::path())
        .args(["loadtest", "http-steady", "--duration", "ten"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--duration"), "{stderr}");
}
