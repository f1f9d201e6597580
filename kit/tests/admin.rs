//! The admin server: `/metrics` parsed back, `promtool check metrics`, a real Prometheus
//! scraping it and answering PromQL, and `/readyz` waiting for every component.

use std::time::Duration;

use fairlead_kit::metrics::NETWORK_LATENCY_BUCKETS;
use fairlead_kit::testing::prometheus::{Prometheus, tool};
use fairlead_kit::{AdminServer, Metrics, Readiness, Shutdown};
use prometheus_parse::{Scrape, Value};

async fn start(metrics: Metrics, readiness: Readiness) -> (std::net::SocketAddr, Shutdown) {
    let shutdown = Shutdown::new(Duration::from_secs(5));
    let admin = AdminServer::bind("127.0.0.1:0".parse().unwrap(), metrics, readiness, None)
        .await
        .unwrap();
    let addr = admin.local_addr();
    admin.spawn(&shutdown);
    (addr, shutdown)
}

fn sample_metrics() -> Metrics {
    let metrics = Metrics::new("fairlead-test").unwrap();
    let probes = metrics
        .counter_vec("swh_probe_total", "Probes run.", &["mode", "result"])
        .unwrap();
    probes.with_label_values(&["TCP", "success"]).inc_by(3);
    let duration = metrics
        .histogram_vec(
            "swh_probe_duration_seconds",
            "Probe duration.",
            &["mode"],
            NETWORK_LATENCY_BUCKETS,
        )
        .unwrap();
    for seconds in [0.002, 0.004, 0.3] {
        duration.with_label_values(&["TCP"]).observe(seconds);
    }
    metrics
}

async fn get(url: String) -> (u16, String) {
    let response = reqwest::get(url).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn metrics_parse_back_with_types_and_buckets() {
    let (addr, _shutdown) = start(sample_metrics(), Readiness::new()).await;
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        fairlead_kit::admin::PROMETHEUS_TEXT
    );
    let text = response.text().await.unwrap();
    let scrape = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();

    let counter = scrape
        .samples
        .iter()
        .find(|s| s.metric == "swh_probe_total")
        .expect("counter present");
    assert_eq!(counter.value, Value::Counter(3.0));
    assert_eq!(counter.labels.get("mode"), Some("TCP"));

    let histogram = scrape
        .samples
        .iter()
        .find(|s| s.metric == "swh_probe_duration_seconds")
        .expect("histogram present");
    let Value::Histogram(buckets) = &histogram.value else {
        panic!("not a histogram: {:?}", histogram.value)
    };
    let bounds: Vec<f64> = buckets.iter().map(|b| b.less_than).collect();
    let mut expected = NETWORK_LATENCY_BUCKETS.to_vec();
    expected.push(f64::INFINITY);
    assert_eq!(bounds, expected);
    let count_at = |le: f64| buckets.iter().find(|b| b.less_than == le).unwrap().count;
    assert_eq!(count_at(0.001), 0.0);
    assert_eq!(count_at(0.005), 2.0);
    assert_eq!(count_at(0.5), 3.0);

    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "fairlead_build_info"
                && s.labels.get("component") == Some("fairlead-test")),
    );
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "process_resident_memory_bytes")
    );
    assert_eq!(
        scrape
            .docs
            .get("swh_probe_duration_seconds")
            .map(String::as_str),
        Some("Probe duration.")
    );
}

#[tokio::test]
async fn promtool_accepts_the_exposition() {
    let (addr, _shutdown) = start(sample_metrics(), Readiness::new()).await;
    let (_, text) = get(format!("http://{addr}/metrics")).await;
    let promtool = tool("promtool").unwrap();
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_and_answers_promql() {
    let (addr, _shutdown) = start(sample_metrics(), Readiness::new()).await;
    let prometheus = Prometheus::start(&[addr]).await.unwrap();
    let result = prometheus
        .query_until_nonempty(
            r#"sum by (mode) (swh_probe_total{result="success"})"#,
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", prometheus.log()));
    assert_eq!(result[0]["metric"]["mode"], "TCP");
    assert_eq!(result[0]["value"][1], "3");

    let quantile = prometheus
        .query_until_nonempty(
            "histogram_quantile(0.5, sum by (le) (swh_probe_duration_seconds_bucket))",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let median: f64 = quantile[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!((0.0025..=0.005).contains(&median), "median {median}");

    let up = prometheus.query("up{job=\"fairlead\"}").await.unwrap();
    assert_eq!(up[0]["value"][1], "1", "the scrape itself succeeded");
    let names = prometheus.metric_names().await.unwrap();
    assert!(
        names.contains(&"fairlead_build_info".to_owned()),
        "{names:?}"
    );

    let rejected = prometheus.query("sum(").await.unwrap_err();
    assert!(rejected.to_string().contains("sum("), "{rejected}");
}

#[tokio::test]
async fn readyz_waits_for_the_last_component() {
    let readiness = Readiness::new();
    let watcher = readiness.register("watcher");
    let lease = readiness.register("lease");
    let (addr, _shutdown) = start(Metrics::new("fairlead-test").unwrap(), readiness).await;
    let readyz = format!("http://{addr}/readyz");

    assert_eq!(
        get(readyz.clone()).await,
        (503, "not ready: lease, watcher\n".to_owned())
    );
    watcher.ready();
    assert_eq!(
        get(readyz.clone()).await,
        (503, "not ready: lease\n".to_owned())
    );
    lease.ready();
    assert_eq!(get(readyz.clone()).await, (200, "ready\n".to_owned()));
    lease.not_ready();
    assert_eq!(get(readyz).await.0, 503);
    assert_eq!(
        get(format!("http://{addr}/healthz")).await,
        (200, "ok\n".to_owned())
    );
}
