//! The ALB world most tests build on (the README's walk): ClusterALBInstances behind a
//! LoadBalancer Service and on host ports, an ALBInstance of two replicas, routes to backends
//! on this machine, served through real Envoys; and what tests of it share: a proxy's
//! certificate, an ADS stream as a proxy opens it, routes and instances.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{Up, backends, until};
use fairlead_kit::testing::free_port;

/// `fairlead edge certificate` against `up`: the client certificate of a proxy of
/// `gateway`, in a new directory.
pub fn certificate(up: &Up, gateway: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(crate::binary::path())
            .args(["edge", "certificate", "--gateway", gateway, "--dir"])
            .arg(dir.path())
            .env("KUBECONFIG", &up.kubeconfig)
            .output()
            .unwrap();
        if out.status.success() {
            return dir;
        }
        // The controller makes its CA at its first round.
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An ADS stream of a proxy of `cluster` with the certificate in `dir`; the first answer.
/// It checks the server's certificate for `localhost`, as a local gRPC client's bootstrap
/// names it (the proxies' Envoy checks `127.0.0.1`).
pub async fn ads(
    up: &Up,
    dir: &std::path::Path,
    cluster: &str,
) -> (
    Result<
        Option<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse>,
        tonic::Status,
    >,
    tokio::sync::mpsc::Sender<envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest>,
) {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read("ca.crt")))
        .identity(Identity::from_pem(read("tls.crt"), read("tls.key")))
        .domain_name("localhost");
    let deadline = Instant::now() + Duration::from_secs(20);
    let channel = loop {
        // The server takes connections once the controller has issued its certificate.
        match Endpoint::from_shared(format!("https://127.0.0.1:{}", up.xds_port))
            .unwrap()
            .tls_config(tls.clone())
            .unwrap()
            .connect()
            .await
        {
            Ok(channel) => break channel,
            Err(e) => assert!(Instant::now() < deadline, "no xDS over mutual TLS: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(DiscoveryRequest {
        node: Some(Node {
            id: "proxy".into(),
            cluster: cluster.into(),
            ..Default::default()
        }),
        type_url: "type.googleapis.com/envoy.config.listener.v3.Listener".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let first = match client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
    {
        Ok(stream) => tokio::time::timeout(Duration::from_secs(10), stream.into_inner().message())
            .await
            .expect("an answer in time"),
        Err(status) => Err(status),
    };
    (first, tx)
}

/// The Gateways of namespace `default`.
pub fn gateways_of(client: kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(
        client,
        "default",
        &fairlead_edge_controller::crds::resource("Gateway"),
    )
}

/// A route in `default` to a Service of that name whose one endpoint is `backend`.
pub fn route_to(name: &str, parent: &str, parent_namespace: &str, backend: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: {parent}, namespace: {parent_namespace}}}]
  rules: [{{backendRefs: [{{name: {name}, port: 80}}]}}]
---
{}",
        crate::backends::service("default", name, 80, backend)
    )
}

/// ClusterALBInstances.
pub fn cluster_instances(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::all_with(
        client.clone(),
        &kube::discovery::ApiResource {
            group: "network.deckhouse.io".into(),
            version: "v1alpha1".into(),
            api_version: "network.deckhouse.io/v1alpha1".into(),
            kind: "ClusterALBInstance".into(),
            plural: "clusteralbinstances".into(),
        },
    )
}

/// A Gateway of the class with a listener of every protocol, a ListenerSet, a route of
/// every kind and a BackendTLSPolicy: the kinds whose status the control plane writes.
pub const STREAMS_WORLD: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: streams, namespace: default}
spec:
  gatewayClassName: d8-alb
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - {name: tls, port: 8443, protocol: TLS, tls: {mode: Passthrough}}
  - {name: tcp, port: 9000, protocol: TCP}
  - {name: udp, port: 9001, protocol: UDP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: default}
spec:
  parentRef: {name: streams}
  listeners: [{name: extra, port: 8081, protocol: HTTP, hostname: extra.example.com}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: http}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: tls, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: tls}]
  hostnames: [tls.example.com]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: tcp, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: tcp}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: udp, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: udp}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: v1
kind: Service
metadata: {name: secure, namespace: default}
spec: {ports: [{name: https, port: 443}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-secure, namespace: default}
spec:
  parentRefs: [{name: streams, sectionName: http}]
  rules: [{backendRefs: [{name: secure, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: secure, namespace: default}
spec:
  targetRefs: [{group: \"\", kind: Service, name: secure}]
  validation: {hostname: secure.example.com, wellKnownCACertificates: System}
";

/// A kubeconfig for the ServiceAccount `namespace/account` of `up` (its token from
/// `kubectl create token`), written into `dir`.
pub fn service_account_kubeconfig(
    up: &Up,
    namespace: &str,
    account: &str,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let token = Command::new("kubectl")
        .args(["-n", namespace, "create", "token", account])
        .env("KUBECONFIG", &up.kubeconfig)
        .output()
        .unwrap();
    assert!(token.status.success(), "{token:?}");
    let mut config: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&up.kubeconfig).unwrap()).unwrap();
    config["users"][0]["user"] = serde_json::json!({
        "token": String::from_utf8(token.stdout).unwrap().trim()});
    let path = dir.join(format!("{account}.kubeconfig"));
    std::fs::write(&path, serde_yaml_ng::to_string(&config).unwrap()).unwrap();
    path
}

/// The world of ALB instances `up` runs: LoadBalancer and HostPort inlets, an ALBInstance
/// in a team's namespace, routes with real backends through real Envoys, statuses, the
/// webhooks, a proxy restarted, an instance deleted: the README's walk ([`World`]), step by
/// step.
pub async fn alb_instances_world(up: &Up) {
    let mut world = World::apply(up).await;
    world.instances_are_ready().await;
    world.a_held_port_is_named().await;
    world.unmanaged_and_managed_gateways().await;
    world.health_checks_answer_load_balancers().await;
    world.a_dead_proxy_is_restarted().await;
    world.rollouts_keep_serving().await;
    world.a_deleted_instance_stops_its_proxies().await;
}

/// The ALB world of the README: ClusterALBInstance `main` behind a LoadBalancer (with an
/// additional port another program holds), `nodes` on host ports, ALBInstance `team/shop` of
/// two replicas, a Gateway `default/plain` no instance names, and a route to a backend of its
/// own behind each instance's Gateway.
pub struct World<'a> {
    up: &'a Up,
    client: kube::Client,
    http: reqwest::Client,
    /// The LoadBalancer Services' HTTP port.
    lb_port: u16,
    /// The host port of `nodes`.
    host_port: u16,
    /// The additional port of `main`, held by the test.
    taken: u16,
    held: Option<std::net::TcpListener>,
    /// The LoadBalancer address of `main`'s Gateway and of the shop's.
    public: String,
    shop: String,
}

/// A steady stream of requests, each on a new connection, every 10 ms, and what failed.
struct Steady {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    load: tokio::task::JoinHandle<(usize, Vec<String>)>,
}

impl Steady {
    fn start(url: String) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let load = tokio::spawn({
            let stop = stop.clone();
            async move {
                let http = reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .timeout(Duration::from_secs(5))
                    .build()
                    .unwrap();
                let mut failed = Vec::new();
                let mut sent = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    sent += 1;
                    match http.get(&url).send().await {
                        Ok(r) if r.status().is_success() => {}
                        Ok(r) => failed.push(r.status().to_string()),
                        Err(e) => failed.push(format!("{e:?}")),
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                (sent, failed)
            }
        });
        Self { stop, load }
    }

    /// Stops the stream; none of its requests failed (`during` says when it ran).
    async fn none_failed(self, during: &str) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (sent, failed) = self.load.await.unwrap();
        assert!(sent > 50, "{sent} requests");
        assert!(
            failed.is_empty(),
            "{} of {sent} requests failed {during}: {failed:?}",
            failed.len()
        );
    }
}

impl<'a> World<'a> {
    /// Applies the world and waits until each backend answers through its instance.
    pub async fn apply(up: &'a Up) -> Self {
        up.wait_ready().await;
        let (one, two, three) = (
            backends::named("one").await,
            backends::named("two").await,
            backends::named("three").await,
        );
        let (lb_port, host_port) = (free_port(), free_port());
        // Held on every address: which Service address `main` gets depends on which
        // instance's pods come up first.
        let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let taken = held.local_addr().unwrap().port();
        let mut yaml = instances_yaml(lb_port, host_port, taken);
        yaml.push_str(&route_to("one", "public", "d8-alb", one));
        yaml.push_str(&route_to("two", "nodes", "d8-alb", two));
        up.apply(&yaml);
        // The shop's routes live in its namespace (its Gateway admits routes from everywhere,
        // its ListenerSets from its own namespace only).
        up.apply(
            &route_to("three", "shop", "team", three)
                .replace("namespace: default", "namespace: team"),
        );
        let mut world = Self {
            up,
            client: up.client().await,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
            lb_port,
            host_port,
            taken,
            held: Some(held),
            public: String::new(),
            shop: String::new(),
        };
        world.public = world
            .load_balancer("d8-alb", "d8-alb-public-loadbalancer")
            .await;
        assert!(
            world.public.starts_with(&format!("127.{}.2.", up.block)),
            "{}",
            world.public
        );
        let public = format!("http://{}:{lb_port}/", world.public);
        assert_eq!(
            world.answer("through the LoadBalancer", &public).await,
            "one"
        );
        let nodes = format!("http://127.0.0.1:{host_port}/");
        assert_eq!(world.answer("through the host port", &nodes).await, "two");
        world.shop = world
            .load_balancer("team", "d8-alb-shop-loadbalancer")
            .await;
        assert_ne!(world.shop, world.public, "each Service its own address");
        let shop = format!("http://{}:{lb_port}/", world.shop);
        assert_eq!(
            world.answer("through the shop's LoadBalancer", &shop).await,
            "three"
        );
        world
    }

    /// The LoadBalancer address of Service `namespace/name`, once it has one.
    async fn load_balancer(&self, namespace: &str, name: &str) -> String {
        let services: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::namespaced(self.client.clone(), namespace);
        until(
            &format!("the LoadBalancer address of {namespace}/{name}"),
            async || {
                let s = services.get_opt(name).await.ok()??;
                s.status?.load_balancer?.ingress?.first()?.ip.clone()
            },
        )
        .await
    }

    /// The first successful answer of `url` (a backend `what`).
    async fn answer(&self, what: &str, url: &str) -> String {
        until(&format!("a backend {what}"), async || {
            let r = self.http.get(url).send().await.ok()?;
            r.status().is_success().then_some(())?;
            r.text().await.ok()
        })
        .await
    }

    /// The instances are ready, with their addresses; the shop's two pods are real, each on
    /// an address of its own.
    pub async fn instances_are_ready(&self) {
        let instances = cluster_instances(&self.client);
        let ready = async |name: &str| {
            until(&format!("ClusterALBInstance {name} Ready"), async || {
                let i = instances.get(name).await.ok()?;
                let ready = i.data["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                ready.then_some(i)
            })
            .await
        };
        let main = ready("main").await;
        assert_eq!(
            main.data["status"]["addresses"],
            serde_json::json!([self.public])
        );
        let nodes = ready("nodes").await;
        assert_eq!(
            nodes.data["status"]["addresses"],
            serde_json::json!(["127.0.0.1"]),
            "a host port inlet: the node's address"
        );
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), "team");
        let shop_pods = until("two ready shop proxies", async || {
            let list = pods
                .list(&kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=shop"))
                .await
                .ok()?;
            let ready = list.items.iter().filter(|p| pod_ready(p)).count();
            (ready == 2).then_some(list.items)
        })
        .await;
        let ips: BTreeSet<String> = shop_pods
            .iter()
            .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
            .collect();
        assert_eq!(ips.len(), 2, "each pod its own address: {ips:?}");
        let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
            kube::Api::namespaced(self.client.clone(), "team");
        let shop_deployment = deployments.get("d8-alb-shop").await.unwrap();
        assert_eq!(shop_deployment.status.unwrap().ready_replicas, Some(2));
        // Every proxy ACKed its Gateway's configuration: the Gateway says how many, the
        // instance says synced.
        let team_gateways = kube::Api::<kube::api::DynamicObject>::namespaced_with(
            self.client.clone(),
            "team",
            &fairlead_edge_controller::crds::resource("Gateway"),
        );
        let synced = until("the shop's two proxies synced", async || {
            let g = team_gateways.get("shop").await.ok()?;
            g.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| {
                    c["type"] == "Synced"
                        && c["status"] == "True"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.starts_with("2 of 2 proxies"))
                })
                .cloned()
        })
        .await;
        assert_eq!(synced["reason"], "Synced");
        until("main synced", async || {
            let i = instances.get("main").await.ok()?;
            (i.data["status"]["synced"] == true).then_some(())
        })
        .await;
    }

    /// A port another program holds is named in the Service's status.
    pub async fn a_held_port_is_named(&mut self) {
        let services: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let taken = i32::from(self.taken);
        let error = until("the held port's error in the Service status", async || {
            let s = services.get("d8-alb-public-loadbalancer").await.ok()?;
            let ingress = s.status?.load_balancer?.ingress?;
            let port = ingress
                .first()?
                .ports
                .as_ref()?
                .iter()
                .find(|p| p.port == taken)?
                .clone();
            port.error
        })
        .await;
        assert_eq!(error, "PortUnavailable");
        self.held = None;
    }

    /// A Gateway no instance names is told why no proxy serves it; managed Gateways are the
    /// controller's: the webhook refuses a user's edit and deletion (the embedded API server
    /// reaches it through `d8-alb/alb-gateway-controller`).
    pub async fn unmanaged_and_managed_gateways(&self) {
        let gateways = gateways_of(self.client.clone());
        let plain = until("the plain Gateway's Provisioned condition", async || {
            let g = gateways.get("plain").await.ok()?;
            g.data["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "alb.deckhouse.io/Provisioned")
                .cloned()
        })
        .await;
        assert_eq!(plain["status"], "False");
        assert_eq!(plain["reason"], "NoInstance");
        for args in [
            &["-n", "d8-alb", "label", "gateway", "public", "team=x"][..],
            &["-n", "d8-alb", "delete", "gateway", "public"][..],
        ] {
            let refused = self.up.kubectl(args);
            let stderr = String::from_utf8_lossy(&refused.stderr);
            assert!(
                !refused.status.success()
                    && stderr.contains(
                        "admission webhook \"gateways.alb.deckhouse.io\" denied the request"
                    )
                    && stderr
                        .contains("Gateway d8-alb/public is managed by ClusterALBInstance main"),
                "kubectl {args:?}: {stderr}"
            );
        }
    }

    /// A proxy that dies is restarted, and its pod says so; traffic comes back.
    pub async fn a_dead_proxy_is_restarted(&self) {
        let d8: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let selector = kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=public");
        let pod = d8.list(&selector).await.unwrap().items.remove(0);
        let pod_ip = pod.status.unwrap().pod_ip.unwrap();
        let killed = Command::new("pkill")
            .args(["-KILL", "-f", &format!("metrics-addr {pod_ip}:19001")])
            .status()
            .unwrap();
        assert!(
            killed.success(),
            "the proxy of d8-alb/public runs as a process"
        );
        until("the restart counted", async || {
            let pod = d8.list(&selector).await.ok()?.items.into_iter().next()?;
            let status = pod
                .status?
                .container_statuses?
                .into_iter()
                .find(|c| c.name == "proxy")?;
            (status.restart_count >= 1).then_some(())
        })
        .await;
        let public = format!("http://{}:{}/", self.public, self.lb_port);
        assert_eq!(self.answer("again after the restart", &public).await, "one");
    }

    /// A load balancer's health check, `GET /healthz` addressed to the proxy's IP, answers
    /// 200 while the proxy serves and 503 once Envoy fails its health checks (the first step
    /// of a drain); an application's route on a host name is not shadowed.
    pub async fn health_checks_answer_load_balancers(&self) {
        let d8: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let selector = kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=public");
        let pod = d8.list(&selector).await.unwrap().items.remove(0);
        let admin = format!("http://{}:19000", pod.status.unwrap().pod_ip.unwrap());
        let check = format!("http://{}:{}/healthz", self.public, self.lb_port);
        let status = async || {
            self.http
                .get(&check)
                .send()
                .await
                .map(|r| r.status().as_u16())
        };
        assert_eq!(status().await.unwrap(), 200, "a serving proxy");
        let named = self
            .http
            .get(&check)
            .header("host", "app.example.com")
            .send()
            .await
            .unwrap();
        assert_eq!(
            named.text().await.unwrap(),
            "one",
            "the route's own /healthz"
        );
        let post = |path: &str| self.http.post(format!("{admin}{path}")).send();
        assert!(
            post("/healthcheck/fail")
                .await
                .unwrap()
                .status()
                .is_success()
        );
        assert_eq!(status().await.unwrap(), 503, "a draining proxy");
        assert!(post("/healthcheck/ok").await.unwrap().status().is_success());
        assert_eq!(status().await.unwrap(), 200);
    }

    /// A change of an instance's pod template (`envoyLogLevel`) rolls its proxies as a
    /// cluster would. The host-port instance `nodes` (a DaemonSet: the new pod first, then
    /// the old one stopped; the host port retargeted, never closed) loses no request of a
    /// steady stream, each on a connection of its own, from the change until the new proxy
    /// serves and the old one drains. The shop's Deployment (two replicas, `maxSurge: 1`,
    /// `maxUnavailable: 0`) never runs more than three proxies nor has fewer than two ready.
    pub async fn rollouts_keep_serving(&self) {
        let d8: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let nodes_pods = kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=nodes");
        let before: BTreeSet<String> = d8
            .list(&nodes_pods)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let load = Steady::start(format!("http://127.0.0.1:{}/", self.host_port));
        let patched = self.up.kubectl(&[
            "patch",
            "clusteralbinstance",
            "nodes",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"envoyLogLevel":"Debug"}}"#,
        ]);
        assert!(patched.status.success(), "{patched:?}");
        until("a new nodes proxy ready", async || {
            let pods = d8.list(&nodes_pods).await.ok()?.items;
            pods.iter()
                .any(|p| {
                    p.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| !before.contains(n))
                        && pod_ready(p)
                })
                .then_some(())
        })
        .await;
        // The old proxy is stopping now, draining.
        tokio::time::sleep(Duration::from_secs(3)).await;
        load.none_failed("while the host-port proxy was replaced")
            .await;

        let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
            kube::Api::namespaced(self.client.clone(), "team");
        let generation = deployments
            .get("d8-alb-shop")
            .await
            .unwrap()
            .metadata
            .generation;
        let patched = self.up.kubectl(&[
            "patch",
            "albinstance",
            "shop",
            "-n",
            "team",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"envoyLogLevel":"Debug"}}"#,
        ]);
        assert!(patched.status.success(), "{patched:?}");
        // Through the instance's Service, which reaches each proxy at its pod's address, and
        // so sends a leaving one nothing new.
        let load = Steady::start(format!("http://{}:{}/", self.shop, self.lb_port));
        let (mut most, mut fewest_ready) = (0, i32::MAX);
        until("the shop's proxies rolled", async || {
            let d = deployments.get("d8-alb-shop").await.ok()?;
            let status = d.status?;
            most = most.max(status.replicas.unwrap_or(0));
            fewest_ready = fewest_ready.min(status.ready_replicas.unwrap_or(0));
            // The runner's status of the new template (the one before says all is done).
            let rolled = d.metadata.generation > generation
                && status.observed_generation == d.metadata.generation
                && status.updated_replicas == Some(2)
                && status.replicas == Some(2)
                && status.ready_replicas == Some(2);
            if !rolled {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            rolled.then_some(())
        })
        .await;
        assert!(most <= 3, "{most} proxies at once, beyond maxSurge: 1");
        assert!(
            fewest_ready >= 2,
            "{fewest_ready} ready proxies at a time, below maxUnavailable: 0"
        );
        // The last old proxy drains and exits.
        tokio::time::sleep(Duration::from_secs(3)).await;
        load.none_failed("while the shop's two proxies rolled")
            .await;

        // Each proxy serves at its pod's own address too: where its Service's endpoints
        // send connections.
        let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
            kube::Api::namespaced(self.client.clone(), "team");
        let of_service = kube::api::ListParams::default()
            .labels("kubernetes.io/service-name=d8-alb-shop-loadbalancer");
        let addresses: Vec<String> = until("the shop Service's two ready endpoints", async || {
            let ready: Vec<String> = slices
                .list(&of_service)
                .await
                .ok()?
                .items
                .into_iter()
                .flat_map(|s| s.endpoints.into_iter().flatten())
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .flat_map(|e| e.addresses)
                .collect();
            (ready.len() == 2).then_some(ready)
        })
        .await;
        for ip in addresses {
            let port = fairlead_edge_model::names::container_port(80);
            let url = format!("http://{ip}:{port}/");
            assert_eq!(
                self.answer("a shop proxy at its pod's address", &url).await,
                "three"
            );
        }
    }

    /// Deleting an instance stops its proxies and removes what it made.
    pub async fn a_deleted_instance_stops_its_proxies(&self) {
        let deleted = self.up.kubectl(&["delete", "clusteralbinstance", "nodes"]);
        assert!(
            deleted.status.success(),
            "{}",
            String::from_utf8_lossy(&deleted.stderr)
        );
        let d8: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let daemons: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        until("the nodes proxies gone", async || {
            let list = d8
                .list(&kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=nodes"))
                .await
                .ok()?;
            (list.items.is_empty() && daemons.get_opt("d8-alb-nodes").await.ok()?.is_none())
                .then_some(())
        })
        .await;
        let host_port = self.host_port;
        until("the host port closed", async || {
            tokio::net::TcpStream::connect(("127.0.0.1", host_port))
                .await
                .is_err()
                .then_some(())
        })
        .await;
    }
}

/// Whether a pod's `Ready` condition is true.
pub fn pod_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The instances of the world and the plain Gateway.
fn instances_yaml(lb_port: u16, host_port: u16, taken: u16) -> String {
    format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: main}}
spec: {{gatewayName: public, inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {lb_port}}}, additionalPorts: [{{port: {taken}, protocol: TCP}}]}}}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: nodes}}
spec: {{gatewayName: nodes, inlet: {{type: HostPort, hostPort: {{httpPort: {host_port}}}}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: team}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ALBInstance
metadata: {{name: shop, namespace: team}}
spec: {{gatewayName: shop, inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {lb_port}}}}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: plain, namespace: default}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: 8080, protocol: HTTP}}]
---
"
    )
}
