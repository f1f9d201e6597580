//! What a route change sends to a real Envoy: the proxies' bootstrap speaks delta xDS, so a
//! change to the routes of one of a Gateway's two listeners sends that listener's
//! RouteConfiguration alone (and nothing of another type); a bootstrap switched to the
//! state-of-the-world protocol is still served, every RouteConfiguration in each response.
//! And when the control plane goes away, Envoy keeps serving what it has and is back on the
//! control plane within a second of its return.

mod cluster;
mod proxies;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster::{cluster, control_plane, create};
use fairlead_edge_model::ObjectKey;
use fairlead_edge_xds::cache::{Cache, short};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use proxies::{Envoy, serve_xds, start_envoy};
use serde_json::json;

/// The pushes of the xDS server, as (type, resources carried).
#[derive(Default)]
struct Pushes(Mutex<Vec<(&'static str, usize)>>);

impl fairlead_edge_xds::server::Observer for Pushes {
    fn pushed(&self, _: &ObjectKey, type_url: &str, resources: usize, _: Option<Duration>) {
        self.0.lock().unwrap().push((short(type_url), resources));
    }
}

impl Pushes {
    fn since(&self, mark: usize) -> Vec<(&'static str, usize)> {
        self.0.lock().unwrap()[mark..].to_vec()
    }
    fn mark(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn route(name: &str, listener: &str, redirect: &str) -> serde_json::Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw", "sectionName": listener}],
            "hostnames": [format!("{name}.example.com")],
            "rules": [{"filters": [{"type": "RequestRedirect",
                "requestRedirect": {"hostname": redirect}}]}]}})
}

/// Where `GET /` for `host` on `port` is redirected, if Envoy answers with a redirect.
async fn location(port: u16, host: &str) -> Option<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let response = client
        .get(format!("http://127.0.0.1:{port}/"))
        .header("host", host)
        .send()
        .await
        .ok()?;
    Some(
        response
            .headers()
            .get("location")?
            .to_str()
            .ok()?
            .to_owned(),
    )
}

async fn until_redirected(port: u16, host: &str, to: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = location(port, host).await;
        if now.as_deref().is_some_and(|l| l.contains(to)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{host} on {port} is never redirected to {to} (last: {now:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_change_sends_only_its_route_configuration() {
    let (_server, client) = cluster().await;
    let (a, b) = (
        fairlead_kit::testing::free_port(),
        fairlead_kit::testing::free_port(),
    );
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [
            {"name": "a", "port": a, "protocol": "HTTP"},
            {"name": "b", "port": b, "protocol": "HTTP"}]}}),
    )
    .await;
    create(&client, route("ra", "a", "v0.example.org")).await;
    create(&client, route("rb", "b", "v0.example.org")).await;
    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let pushes = Arc::new(Pushes::default());
    let xds_port = serve_xds(&cache, pushes.clone()).await;
    let routes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &fairlead_edge_index::api_resource("HTTPRoute", "v1").unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = fairlead_edge_bootstrap::Spec {
        gateway: ObjectKey::new("default", "gw"),
        node_id: None,
        xds_host: "127.0.0.1".into(),
        xds_port,
        admin_port: fairlead_kit::testing::free_port(),
        tls: None,
        otlp: None,
    };
    let delta = fairlead_edge_bootstrap::yaml(&spec).unwrap();
    assert!(delta.contains("DELTA_GRPC"), "{delta}");
    // The same bootstrap on the state-of-the-world protocol.
    let sotw = delta.replace("DELTA_GRPC", "GRPC");
    // Each: how many resources a response of RouteConfigurations carries after the change.
    for (n, (protocol, bootstrap, carried)) in
        [("delta", delta, 1), ("state of the world", sotw, 2)]
            .into_iter()
            .enumerate()
    {
        let path = dir.path().join(format!("bootstrap-{n}.yaml"));
        std::fs::write(&path, bootstrap).unwrap();
        let log = dir.path().join(format!("envoy-{n}.log"));
        let envoy = Envoy(
            tokio::process::Command::new(fairlead_kit::testing::envoy())
                .arg("--config-path")
                .arg(&path)
                .args(["--log-level", "warn", "--use-dynamic-base-id"])
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .kill_on_drop(true)
                .spawn()
                .expect("starting Envoy"),
        );
        let before = format!("v{n}.example.org");
        until_redirected(a, "ra.example.com", &before).await;
        until_redirected(b, "rb.example.com", "v0.example.org").await;
        // The first connection's pushes are over once both listeners serve; whatever the
        // control plane does next (statuses) sends nothing new.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mark = pushes.mark();
        let after = format!("v{}.example.org", n + 1);
        let patch = json!({"spec": {"rules": [{"filters": [{"type": "RequestRedirect",
            "requestRedirect": {"hostname": after}}]}]}});
        routes
            .patch("ra", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        until_redirected(a, "ra.example.com", &after).await;
        until_redirected(b, "rb.example.com", "v0.example.org").await;
        let sent = pushes.since(mark);
        assert!(
            !sent.is_empty() && sent.iter().all(|p| *p == ("route", carried)),
            "{protocol}: the change sent {sent:?}, not only responses of {carried} RouteConfiguration(s)"
        );
        drop(envoy);
        let said = std::fs::read_to_string(&log).unwrap();
        let complaints: Vec<&str> = said
            .lines()
            .filter(|l| l.contains("[warning]") || l.contains("[error]"))
            .collect();
        assert!(
            complaints.is_empty(),
            "{protocol}: Envoy complained:\n{}",
            complaints.join("\n")
        );
        // The next Envoy binds the same ports once this one has let them go.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.cancel();
}

/// A TCP front of the xDS server that can go away: while down, its connections are closed
/// and its port refuses new ones, as when the control plane's process is gone.
struct Front {
    port: u16,
    server: u16,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl Front {
    async fn up(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        let server = self.server;
        self.serving = Some(tokio::spawn(async move {
            // Dropped with this task: every connection it carries is closed then.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut upstream) =
                        tokio::net::TcpStream::connect(("127.0.0.1", server)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        }));
    }

    fn down(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_is_back_on_the_control_plane_within_a_second_of_its_return() {
    let (_server, client) = cluster().await;
    let a = fairlead_kit::testing::free_port();
    create(
        &client,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [
            {"name": "a", "port": a, "protocol": "HTTP"}]}}),
    )
    .await;
    create(&client, route("ra", "a", "v0.example.org")).await;
    let cache = Arc::new(Cache::new());
    let (stop, _nacks) = control_plane(&client, &cache);
    let mut front = Front {
        port: fairlead_kit::testing::free_port(),
        server: serve_xds(&cache, Arc::new(fairlead_edge_xds::server::Quiet)).await,
        serving: None,
    };
    front.up().await;
    let dir = tempfile::tempdir().unwrap();
    let _envoy = start_envoy(
        &ObjectKey::new("default", "gw"),
        (front.port, fairlead_kit::testing::free_port()),
        None,
        dir.path(),
    );
    until_redirected(a, "ra.example.com", "v0.example.org").await;

    // The control plane away for 15 s, long enough that Envoy's own back-off (a random
    // share of 0.5 s doubling to 30 s) would most likely wait seconds more after it returns;
    // a change made meanwhile waits too.
    front.down();
    let routes: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &fairlead_edge_index::api_resource("HTTPRoute", "v1").unwrap(),
    );
    let patch = json!({"spec": {"rules": [{"filters": [{"type": "RequestRedirect",
        "requestRedirect": {"hostname": "v1.example.org"}}]}]}});
    routes
        .patch("ra", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let served = location(a, "ra.example.com").await;
        assert!(
            served
                .as_deref()
                .is_some_and(|l| l.contains("v0.example.org")),
            "while the control plane is away, Envoy serves what it has: {served:?}"
        );
    }

    let back = tokio::time::Instant::now();
    front.up().await;
    until_redirected(a, "ra.example.com", "v1.example.org").await;
    let took = back.elapsed();
    assert!(
        took < fairlead_edge_bootstrap::RECONNECT_AT_MOST + Duration::from_millis(500),
        "the change made while the control plane was away reached Envoy {took:?} after it returned"
    );
    stop.cancel();
}
