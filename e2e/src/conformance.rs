//! The Gateway API conformance suite's world in `fairlead up`: its base manifests (the
//! namespaces, Gateways and backend Services of `conformance/base/manifests.yaml`) and each
//! test's manifests, transcribed under `e2e/tests/conformance/manifests/` with their source; the
//! backends' pods stood in by [`crate::echo`] servers (an EndpointSlice per Service, as the
//! endpoint controller would write it); every Gateway provisioned by the gateway controller
//! (its Deployment, Service and ServiceAccount, not their pods); one real Envoy per Gateway a
//! test sends traffic to (`fairlead edge proxy` with the Gateway's own xDS client
//! certificate, as its proxy pod runs it), listening on a loopback address of the Gateway's
//! own (its annotation
//! `fairlead.io/listen-address`, as a load balancer's address in a cluster); and the suite's
//! assertions — statuses, then requests asked again until the answer holds for three in a
//! row (its `AwaitConvergence`).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use serde::Deserialize as _;
use serde_json::Value;

use crate::echo::{self, Pod};
use crate::{Up, until};

mod expect;
pub mod grpc;
mod infrastructure;
pub mod report;
pub mod secrets;
mod status;
pub mod tcp;
pub mod tls;
mod websocket;

pub use expect::{Ask, FAILED, Got, Redirect, Want, request, send, weighted};
pub use grpc::{Call, GrpcWant};
pub use status::ListenerWant;
pub use tls::Tls;

/// The suite's GatewayClass, here.
pub const GATEWAY_CLASS: &str = "d8-alb";

/// The suite's placeholders in manifests filled in: the GatewayClass and the controller.
fn filled(yaml: &str) -> String {
    yaml.replace("{GATEWAY_CLASS_NAME}", GATEWAY_CLASS).replace(
        "{GATEWAY_CONTROLLER_NAME}",
        fairlead_edge_model::CONTROLLER_NAME,
    )
}

/// The name of the pod standing in for the Deployment `app`'s (the suite matches a backend
/// by the prefix of its pods' names: `<deployment>-<replica set>-<pod>`).
fn pod_name(app: &str) -> String {
    format!("{app}-7d9f8b6c5-x4k2p")
}

/// Answers in a row that make a request's expectation hold (the suite's
/// `RequiredConsecutiveSuccesses`).
const IN_A_ROW: usize = 3;

/// How long an expectation has to hold (the suite's `MaxTimeToConsistency`).
const CONSISTENCY: Duration = Duration::from_secs(30);

/// The object `kind` `name` among the documents of `yaml`, as JSON.
pub fn document(yaml: &str, kind: &str, name: &str) -> Value {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).expect("a YAML document"))
        .find(|v| v["kind"] == kind && v["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the manifests"))
}

/// Runs `check` until it holds [`IN_A_ROW`] times in a row within [`CONSISTENCY`] (the
/// suite's `AwaitConvergence`); what the last check that failed said, when that never happens.
async fn consistently(mut check: impl AsyncFnMut() -> Result<(), String>) -> Result<(), String> {
    let deadline = Instant::now() + CONSISTENCY;
    let mut in_a_row = 0;
    while in_a_row < IN_A_ROW {
        match check().await {
            Ok(()) => in_a_row += 1,
            Err(seen) if Instant::now() > deadline => return Err(seen),
            Err(_) => {
                in_a_row = 0;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    Ok(())
}

/// Whether the condition `c` is (`type`, `status`, and `reason` unless empty).
fn holds(c: &Value, (type_, status, reason): (&str, &str, &str)) -> bool {
    c["type"] == type_ && c["status"] == status && (reason.is_empty() || c["reason"] == reason)
}

/// The transcribed manifest `name` (under `e2e/tests/conformance/manifests/`).
pub fn manifest(name: &str) -> String {
    let path = crate::workspace()
        .join("e2e/tests/conformance/manifests")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a Deployment's pods are, when not the plain HTTP echo.
#[derive(Clone, Debug, Default)]
struct App {
    /// Serving TLS with this.
    serving: Option<echo::Serving>,
    /// echo-basic's TCP server.
    tcp: bool,
    /// echo-basic's gRPC server.
    grpc: bool,
    /// The suite's CoreDNS.
    dns: bool,
}

/// A running Envoy for one Gateway; killed with the world.
struct Proxy {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The conformance world.
pub struct World {
    /// The `fairlead up` it runs in.
    pub up: Up,
    /// Each Gateway's listen address (`namespace/name` → address).
    addresses: Mutex<BTreeMap<String, String>>,
    /// The proxies started, by Gateway.
    proxies: Mutex<BTreeMap<String, Proxy>>,
    /// The TLS material of the suite's setup.
    pub secrets: secrets::Secrets,
    /// The Deployments (`namespace/app`) whose pods are not the plain HTTP echo: TLS
    /// (echo-basic's `TLS_SERVER_CERT`), the TCP echo (`TCP_ECHO_SERVER`), the gRPC echo
    /// (`GRPC_ECHO_SERVER`), CoreDNS.
    apps: Mutex<BTreeMap<String, App>>,
    /// The port of each Deployment's (`namespace/app`) echo.
    echo_ports: Mutex<BTreeMap<String, u16>>,
}

impl World {
    /// Starts `fairlead up` serving the experimental channel's CRDs (the suite's extended
    /// features need its fields) and provisioning every Gateway as the Gateway API does
    /// (`--provision-gateways`: a Deployment, Service and ServiceAccount each, carrying
    /// `spec.infrastructure`), without running those pods (`--no-local-proxies`: the world
    /// runs one Envoy per Gateway a test sends traffic to, [`World::gateway`]); applies the
    /// base manifests and the TLS material of the suite's setup, and stands in their
    /// backends' pods.
    pub async fn start() -> World {
        let up = Up::builder()
            .option("--gateway-api-channel", "experimental")
            .flag("--provision-gateways")
            .flag("--no-local-proxies")
            .start();
        up.wait_ready().await;
        let world = World {
            up,
            addresses: Mutex::new(BTreeMap::new()),
            proxies: Mutex::new(BTreeMap::new()),
            secrets: secrets::Secrets::generate(),
            apps: Mutex::new(BTreeMap::new()),
            echo_ports: Mutex::new(BTreeMap::new()),
        };
        let base = manifest("base.yaml");
        world.apply(&base);
        world.up.apply(&world.secrets.manifests());
        world.serve_backends(&base).await;
        world
    }

    /// Applies a test's transcribed manifests ([`World::apply`]) and stands in the pods of
    /// the Services they bring.
    pub async fn apply_test(&self, yaml: &str) {
        self.apply(yaml);
        self.serve_backends(yaml).await;
    }

    /// Applies one object, changed by a test, as [`World::apply`] applies manifests.
    pub fn apply_object(&self, object: &Value) {
        self.apply(&serde_yaml_ng::to_string(object).expect("YAML"));
    }

    /// Applies transcribed manifests: the suite's placeholders filled in ([`filled`]), each
    /// Gateway given a listen address of its own, Deployments left out (their pods are the
    /// harness's echo servers; what one says of TLS is kept for them).
    pub fn apply(&self, yaml: &str) {
        let mut documents = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_str(&filled(yaml)) {
            let mut value: Value =
                serde::Deserialize::deserialize(document).expect("a YAML document");
            if value["kind"] == "Deployment" {
                if let Some((key, app)) = self.app(&value) {
                    self.apps.lock().expect("the apps").insert(key, app);
                }
                continue;
            }
            if value.is_null() {
                continue;
            }
            if value["kind"] == "Gateway" {
                let key = format!(
                    "{}/{}",
                    value["metadata"]["namespace"].as_str().unwrap_or("default"),
                    value["metadata"]["name"].as_str().expect("a name")
                );
                let address = self.address(&key);
                value["metadata"]["annotations"]["fairlead.io/listen-address"] =
                    Value::String(address);
            }
            documents.push(serde_yaml_ng::to_string(&value).expect("YAML"));
        }
        self.up.apply(&documents.join("---\n"));
    }

    /// The `namespace/app` of a Deployment whose pods are not the plain HTTP echo, and what
    /// they are: serving TLS as echo-basic does (its `TLS_SERVER_CERT` from a Secret volume,
    /// `TLS_CLIENT_CACERTS` from a ConfigMap's), its TCP server (`TCP_ECHO_SERVER`, plain
    /// and, with a certificate, over TLS), its gRPC server (`GRPC_ECHO_SERVER`), or CoreDNS
    /// (its image).
    fn app(&self, deployment: &Value) -> Option<(String, App)> {
        let namespace = deployment["metadata"]["namespace"].as_str()?;
        let pod = &deployment["spec"]["template"];
        let name = pod["metadata"]["labels"]["app"].as_str()?;
        let container = &pod["spec"]["containers"][0];
        let dns = container["image"]
            .as_str()
            .is_some_and(|image| image.contains("/coredns/"));
        let env = container["env"].as_array().cloned().unwrap_or_default();
        let names = |name: &str| env.iter().any(|e| e["name"] == name);
        let tcp = names("TCP_ECHO_SERVER");
        let grpc = names("GRPC_ECHO_SERVER");
        let volumes = pod["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let serving = names("TLS_SERVER_CERT")
            .then(|| {
                volumes
                    .iter()
                    .find_map(|v| v["secret"]["secretName"].as_str())
            })
            .flatten()
            .map(|secret| {
                let certified = self.secrets.get(&format!("{namespace}/{secret}"));
                let client_cas = names("TLS_CLIENT_CACERTS")
                    .then(|| volumes.iter().find_map(|v| v["configMap"]["name"].as_str()))
                    .flatten()
                    .map(|ca| self.secrets.ca_of(&format!("{namespace}/{ca}")).to_owned());
                echo::Serving {
                    cert_pem: certified.cert_pem.clone(),
                    key_pem: certified.key_pem.clone(),
                    client_cas,
                }
            });
        (tcp || grpc || dns || serving.is_some()).then(|| {
            let app = App {
                serving,
                tcp,
                grpc,
                dns,
            };
            (format!("{namespace}/{name}"), app)
        })
    }

    /// Fills the EndpointSlices `slices` (`namespace/name`, a selector-less Service's, of
    /// IPv4) with the pod of the Deployment `app` (`namespace/app`), as the suite's
    /// `setupEndpointSlices` does with the pods' addresses: the pod is an echo on loopback, so
    /// each port of a slice becomes the echo's port.
    pub async fn fill_endpoint_slices(&self, slices: &[&str], app: &str) {
        let port = *self
            .echo_ports
            .lock()
            .expect("the echo ports")
            .get(app)
            .unwrap_or_else(|| panic!("no echo stands in the pods of {app}"));
        let pod = pod_name(app.split_once('/').expect("namespace/app").1);
        let client = self.up.client().await;
        for key in slices {
            let (namespace, name) = key.split_once('/').expect("namespace/name");
            let api: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                namespace,
                &kube::discovery::ApiResource::erase::<
                    k8s_openapi::api::discovery::v1::EndpointSlice,
                >(&()),
            );
            let mut slice = api
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("EndpointSlice {key}: {e}"));
            for p in slice.data["ports"].as_array_mut().into_iter().flatten() {
                p["port"] = port.into();
            }
            slice.data["endpoints"] = serde_json::json!([{
                "addresses": ["127.0.0.1"],
                "conditions": {"ready": true, "serving": true, "terminating": false},
                "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace},
            }]);
            slice.metadata.managed_fields = None;
            api.replace(name, &kube::api::PostParams::default(), &slice)
                .await
                .unwrap_or_else(|e| panic!("EndpointSlice {key}: {e}"));
        }
    }

    /// The listen address of the Gateway `key` (`namespace/name`): `127.<block>.9.<n>`.
    pub fn address(&self, key: &str) -> String {
        let mut addresses = self.addresses.lock().expect("the addresses");
        let next = addresses.len() + 1;
        addresses
            .entry(key.to_owned())
            .or_insert_with(|| format!("127.{}.9.{next}", self.up.block))
            .clone()
    }

    /// An echo server for each Service of `yaml` (its pod named after the Service's `app`
    /// selector, as the suite's Deployments are; serving TLS when that Deployment's pods do),
    /// and the Service's EndpointSlice to it.
    async fn serve_backends(&self, yaml: &str) {
        let mut slices = Vec::new();
        for document in serde_yaml_ng::Deserializer::from_str(yaml) {
            let value: Value = serde::Deserialize::deserialize(document).expect("a YAML document");
            if value["kind"] != "Service" {
                continue;
            }
            let namespace = value["metadata"]["namespace"]
                .as_str()
                .expect("a namespace");
            let name = value["metadata"]["name"].as_str().expect("a name");
            // A Service without a selector has no pods: its EndpointSlices are the test's.
            let Some(app) = value["spec"]["selector"]["app"].as_str() else {
                continue;
            };
            let app_key = format!("{namespace}/{app}");
            let pod = Pod {
                namespace: namespace.to_owned(),
                name: pod_name(app),
            };
            let udp = value["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["protocol"] == "UDP");
            let app = self
                .apps
                .lock()
                .expect("the apps")
                .get(&app_key)
                .cloned()
                .unwrap_or_default();
            // The echo port of each Service port: the TCP echo's TLS port for the Service
            // port that targets echo-basic's TLS port (8443), its plain one for the others.
            let (port, tls_port) = match (udp, &app) {
                (true, App { dns: true, .. }) => (echo::serve_dns().await, None),
                (true, _) => (echo::serve_udp(pod).await, None),
                (false, App { grpc: true, .. }) => (echo::grpc::serve(pod).await, None),
                (
                    false,
                    App {
                        tcp: true, serving, ..
                    },
                ) => {
                    let tls = match serving {
                        Some(serving) => Some(echo::serve_tcp(pod.clone(), Some(serving)).await),
                        None => None,
                    };
                    (echo::serve_tcp(pod, None).await, tls)
                }
                (
                    false,
                    App {
                        serving: Some(serving),
                        ..
                    },
                ) => (echo::serve_tls(pod, serving).await, None),
                (false, _) => (echo::serve(pod).await, None),
            };
            self.echo_ports
                .lock()
                .expect("the echo ports")
                .insert(app_key, port);
            let ports: Vec<Value> = value["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let port = match tls_port {
                        Some(tls) if p["targetPort"] == 8443 => tls,
                        _ => port,
                    };
                    let mut slice_port = serde_json::json!({"port": port,
                        "protocol": p["protocol"].as_str().unwrap_or("TCP")});
                    if let Some(name) = p["name"].as_str() {
                        slice_port["name"] = name.into();
                    }
                    if let Some(app_protocol) = p["appProtocol"].as_str() {
                        slice_port["appProtocol"] = app_protocol.into();
                    }
                    slice_port
                })
                .collect();
            slices.push(serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-echo"), "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": ports,
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
            }));
        }
        if slices.is_empty() {
            return;
        }
        let yaml: Vec<String> = slices
            .iter()
            .map(|s| serde_yaml_ng::to_string(s).expect("YAML"))
            .collect();
        self.up.apply(&yaml.join("---\n"));
    }

    /// The address (`ip:port`) where the Gateway `key`'s listener on `port` takes traffic,
    /// its Envoy started the first time it is asked for.
    pub fn gateway(&self, key: &str, port: u16) -> String {
        let mut proxies = self.proxies.lock().expect("the proxies");
        if !proxies.contains_key(key) {
            proxies.insert(key.to_owned(), self.proxy(key));
        }
        format!(
            "{}:{}",
            self.address(key),
            fairlead_edge_model::names::container_port(port)
        )
    }

    /// `fairlead edge proxy` for the Gateway `key`, with its xDS client certificate.
    fn proxy(&self, key: &str) -> Proxy {
        let certificate = crate::alb::certificate(&self.up, key);
        let dir = certificate.path();
        let log = std::fs::File::create(
            self.up
                .dir()
                .join(format!("proxy-{}.log", key.replace('/', "_"))),
        )
        .expect("the proxy's log");
        let child = Command::new(crate::binary::path())
            .args(["--log-format", "json", "edge", "proxy", "--gateway", key])
            .args(["--xds", &format!("127.0.0.1:{}", self.up.xds_port)])
            .arg("--xds-ca")
            .arg(dir.join("ca.crt"))
            .arg("--xds-cert")
            .arg(dir.join("tls.crt"))
            .arg("--xds-key")
            .arg(dir.join("tls.key"))
            .args([
                "--admin-port",
                &fairlead_kit::testing::free_port().to_string(),
            ])
            .args([
                "--metrics-addr",
                &format!("127.0.0.1:{}", fairlead_kit::testing::free_port()),
            ])
            .arg("--work-dir")
            .arg(dir)
            .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("fairlead edge proxy starts");
        Proxy {
            child,
            _dir: certificate,
        }
    }

    /// Applies the test manifest `file` ([`World::apply_test`]) and waits until each of its
    /// `routes` (`namespace/name`, of `kind`) is accepted by `gateway`; the manifests, to
    /// delete at the test's end.
    pub async fn routes_accepted(
        &self,
        file: &str,
        kind: &str,
        routes: &[&str],
        gateway: &str,
    ) -> String {
        let yaml = manifest(file);
        self.apply_test(&yaml).await;
        for route in routes {
            self.route_accepted(kind, route, gateway).await;
        }
        yaml
    }

    /// The API of the Gateway API `kind` in `key`'s namespace (`namespace/name`; a bare name
    /// is a cluster-scoped object's, a GatewayClass's), and `key`'s name.
    pub async fn api<'k>(&self, kind: &str, key: &'k str) -> (Api<DynamicObject>, &'k str) {
        let client = self.up.client().await;
        let resource = fairlead_edge_controller::crds::resource(kind);
        match key.split_once('/') {
            Some((namespace, name)) => (Api::namespaced_with(client, namespace, &resource), name),
            None => (Api::all_with(client, &resource), key),
        }
    }

    /// Waits until the route `kind` `namespace/name` is `Accepted` with its references
    /// resolved by the Gateway `gateway` (`namespace/name`): the suite's
    /// `GatewayAndHTTPRoutesMustBeAccepted` and `HTTPRouteMustHaveResolvedRefsConditionsTrue`.
    pub async fn route_accepted(&self, kind: &str, route: &str, gateway: &str) {
        for condition in [("Accepted", "True", ""), ("ResolvedRefs", "True", "")] {
            self.route_condition(kind, route, gateway, condition).await;
        }
    }

    /// Waits until the route `kind` `namespace/name` has, for its parent the Gateway `gateway`
    /// (`namespace/name`), the condition (`type`, `status`, and `reason` unless empty) (the
    /// suite's `HTTPRouteMustHaveParents` and `…MustHaveCondition`).
    pub async fn route_condition(
        &self,
        kind: &str,
        route: &str,
        gateway: &str,
        (type_, status, reason): (&str, &str, &str),
    ) {
        let (api, name) = self.api(kind, route).await;
        let namespace = route.split_once('/').map(|(n, _)| n).unwrap_or_default();
        let (gateway_namespace, gateway_name) = gateway.split_once('/').expect("namespace/name");
        until(
            &format!("{kind} {route} on {gateway}: {type_}={status} ({reason})"),
            async || {
                let route = api.get(name).await.ok()?;
                let parents = route.data["status"]["parents"].as_array()?.clone();
                parents
                    .iter()
                    .filter(|p| {
                        p["parentRef"]["name"] == gateway_name
                            && p["parentRef"]["namespace"].as_str().unwrap_or(namespace)
                                == gateway_namespace
                    })
                    .flat_map(|p| p["conditions"].as_array().cloned().unwrap_or_default())
                    .any(|c| holds(&c, (type_, status, reason)))
                    .then_some(())
            },
        )
        .await;
    }

    /// Waits until the policy `kind` `key` (a BackendTLSPolicy) has, for its ancestor the
    /// Gateway `gateway`, the condition (`type`, `status`, and `reason` unless empty), at its
    /// latest generation (the suite's `BackendTLSPolicyMustHaveCondition` and
    /// `…MustHaveLatestConditions`).
    pub async fn policy_condition(
        &self,
        key: &str,
        gateway: &str,
        (type_, status, reason): (&str, &str, &str),
    ) {
        let (api, name) = self.api("BackendTLSPolicy", key).await;
        let (gateway_namespace, gateway_name) = gateway.split_once('/').expect("namespace/name");
        crate::wait::until_seen(
            &format!("BackendTLSPolicy {key} on {gateway}: {type_}={status} ({reason})"),
            async || {
                let policy = api.get(name).await.map_err(|e| e.to_string())?;
                let generation = policy.metadata.generation.unwrap_or_default();
                let ancestors = policy.data["status"]["ancestors"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let conditions: Vec<Value> = ancestors
                    .iter()
                    .filter(|a| {
                        a["ancestorRef"]["name"] == gateway_name
                            && a["ancestorRef"]["namespace"] == gateway_namespace
                    })
                    .flat_map(|a| a["conditions"].as_array().cloned().unwrap_or_default())
                    .collect();
                let holds = conditions
                    .iter()
                    .all(|c| c["observedGeneration"].as_i64() == Some(generation))
                    && conditions.iter().any(|c| holds(c, (type_, status, reason)));
                if holds {
                    Ok(())
                } else {
                    Err(format!(
                        "generation {generation}, status {}",
                        policy.data["status"]
                    ))
                }
            },
        )
        .await;
    }

    /// Waits until every condition of the `kind` `key` (its own, its listeners' and its
    /// parents') carries its latest generation, past `after` (the suite's
    /// `…MustHaveLatestConditions` once a change bumped it).
    pub async fn latest_generation(&self, kind: &str, key: &str, after: i64) {
        let (api, name) = self.api(kind, key).await;
        crate::wait::until_seen(
            &format!("{kind} {key}: conditions at a generation past {after}"),
            async || {
                let object = api.get(name).await.map_err(|e| e.to_string())?;
                let generation = object.metadata.generation.unwrap_or_default();
                let status = &object.data["status"];
                let mut conditions: Vec<Value> =
                    status["conditions"].as_array().cloned().unwrap_or_default();
                for list in ["listeners", "parents"] {
                    for entry in status[list].as_array().into_iter().flatten() {
                        conditions
                            .extend(entry["conditions"].as_array().cloned().unwrap_or_default());
                    }
                }
                let latest = generation > after
                    && !conditions.is_empty()
                    && conditions
                        .iter()
                        .all(|c| c["observedGeneration"].as_i64() == Some(generation));
                if latest {
                    Ok(())
                } else {
                    Err(format!("generation {generation}, status {status}"))
                }
            },
        )
        .await;
    }

    /// Waits until no parent of the route `kind` `key` has accepted it (the suite's
    /// `…MustHaveNoAcceptedParents`).
    pub async fn no_accepted_parents(&self, kind: &str, key: &str) {
        let (api, name) = self.api(kind, key).await;
        until(&format!("{kind} {key}: no parent accepts it"), async || {
            let route = api.get(name).await.ok()?;
            let accepted = route.data["status"]["parents"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| p["conditions"].as_array().cloned().unwrap_or_default())
                .any(|c| c["type"] == "Accepted" && c["status"] == "True");
            (!accepted).then_some(())
        })
        .await;
    }

    /// Waits until no listener of the Gateway `key` counts an attached route (the suite's
    /// `GatewayMustHaveZeroRoutes`).
    pub async fn zero_routes(&self, key: &str) {
        let (api, name) = self.api("Gateway", key).await;
        until(&format!("Gateway {key}: no attached route"), async || {
            let gateway = api.get(name).await.ok()?;
            let listeners = gateway.data["status"]["listeners"].as_array()?.clone();
            listeners
                .iter()
                .all(|l| l["attachedRoutes"].as_i64() == Some(0))
                .then_some(())
        })
        .await;
    }

    /// Waits until the listener `listener` of the Gateway `key` counts `n` attached routes.
    pub async fn attached_routes(&self, key: &str, listener: &str, n: i64) {
        let (api, name) = self.api("Gateway", key).await;
        until(
            &format!("Gateway {key} listener {listener}: {n} attached routes"),
            async || {
                let gateway = api.get(name).await.ok()?;
                let listeners = gateway.data["status"]["listeners"].as_array()?.clone();
                let found = listeners.iter().find(|l| l["name"] == listener)?;
                (found["attachedRoutes"].as_i64() == Some(n)).then_some(())
            },
        )
        .await;
    }

    /// Waits until the Gateway `key` has, at its latest generation, the condition `type_` with
    /// `status` and `reason` (the suite's `GatewayMustHaveLatestConditions` and
    /// `GatewayMustHaveCondition`).
    pub async fn gateway_condition(&self, key: &str, type_: &str, status: &str, reason: &str) {
        let (api, name) = self.api("Gateway", key).await;
        until(
            &format!("Gateway {key}: {type_}={status} ({reason})"),
            async || {
                let gateway = api.get(name).await.ok()?;
                let generation = gateway.metadata.generation?;
                let conditions = gateway.data["status"]["conditions"].as_array()?.clone();
                conditions
                    .iter()
                    .all(|c| c["observedGeneration"].as_i64() == Some(generation))
                    .then_some(())?;
                conditions
                    .iter()
                    .any(|c| c["type"] == type_ && c["status"] == status && c["reason"] == reason)
                    .then_some(())
            },
        )
        .await;
    }

    /// Waits until the `kind` `key` (`namespace/name`, a Gateway API kind) has the condition
    /// (`type`, `status`, and `reason` unless empty) in `status.conditions`, or — with
    /// `listener` — in that listener's `status.listeners[].conditions` (the suite's
    /// `…MustHaveCondition` and `…ListenersMustHaveConditions`).
    pub async fn condition(
        &self,
        kind: &str,
        key: &str,
        listener: Option<&str>,
        (type_, status, reason): (&str, &str, &str),
    ) {
        let (api, name) = self.api(kind, key).await;
        let what = format!(
            "{kind} {key}{}: {type_}={status} ({reason})",
            listener
                .map(|l| format!(" listener {l}"))
                .unwrap_or_default()
        );
        until(&what, async || {
            let object = api.get(name).await.ok()?;
            let status_of = &object.data["status"];
            let conditions = match listener {
                None => status_of["conditions"].as_array()?.clone(),
                Some(listener) => status_of["listeners"]
                    .as_array()?
                    .iter()
                    .find(|l| l["name"] == listener)?["conditions"]
                    .as_array()?
                    .clone(),
            };
            conditions
                .iter()
                .any(|c| holds(c, (type_, status, reason)))
                .then_some(())
        })
        .await;
    }

    /// Waits until the Gateway `key` counts `n` attached ListenerSets.
    pub async fn attached_listener_sets(&self, key: &str, n: i64) {
        let (api, name) = self.api("Gateway", key).await;
        until(
            &format!("Gateway {key}: {n} attached ListenerSets"),
            async || {
                let gateway = api.get(name).await.ok()?;
                (gateway.data["status"]["attachedListenerSets"].as_i64() == Some(n)).then_some(())
            },
        )
        .await;
    }

    /// Removes the objects of `yaml` (a test's manifests, at its end), with kubectl.
    pub async fn delete(&self, yaml: &str) {
        use std::io::Write as _;
        let mut child = crate::kubectl::command(&self.up.kubeconfig)
            .args(["delete", "--ignore-not-found", "--wait=false", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        child
            .stdin
            .take()
            .expect("its stdin")
            .write_all(filled(yaml).as_bytes())
            .expect("kubectl reads the manifests");
        let out = child.wait_with_output().expect("kubectl ends");
        assert!(
            out.status.success(),
            "kubectl delete: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What a TCP echo session must show (the suite's `tcp.ExpectedResponse`).
#[derive(Clone, Copy, Debug)]
pub struct TcpWant<'a> {
    /// Whether the backend saw TLS.
    pub is_tls: bool,
    /// The Deployment whose pod answered.
    pub backend: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The server name the backend was asked for (over TLS).
    pub server_name: Option<&'a str>,
}

impl World {
    /// Opens sessions with the TCP echo behind the Gateway `gateway`'s listener on `port`
    /// (over TLS when `tls` says so) until one shows `want` (the suite's
    /// `MakeTCPRequestAndExpectEventuallyValidResponse`).
    pub async fn expect_tcp(
        &self,
        gateway: &str,
        port: u16,
        tls: Option<Tls<'_>>,
        want: TcpWant<'_>,
    ) {
        let address = self.gateway(gateway, port);
        crate::wait::until_seen(
            &format!("{address}: the TCP echo of {} answers", want.backend),
            async || {
                let answer = tcp::exchange(&address, tls.as_ref()).await?;
                let p = &answer.payload;
                let holds = answer.is_tls == want.is_tls
                    && p["namespace"] == want.namespace
                    && p["pod"]
                        .as_str()
                        .is_some_and(|pod| pod.starts_with(&format!("{}-", want.backend)))
                    && want
                        .server_name
                        .is_none_or(|name| p["tls"]["serverName"] == name);
                if holds {
                    Ok(())
                } else {
                    Err(format!("{answer:?}"))
                }
            },
        )
        .await;
    }

    /// Waits until TLS handshakes with the Gateway `gateway`'s listener on `port` asking for
    /// `server_name` are refused [`IN_A_ROW`] times in a row (the suite's
    /// `MakeTLSConnectionAndExpectEventuallyConnectionRejection`).
    pub async fn expect_refused(&self, gateway: &str, port: u16, server_name: &str) {
        let address = self.gateway(gateway, port);
        let refused = consistently(async || {
            if tcp::refused(&address, server_name).await {
                Ok(())
            } else {
                Err(format!(
                    "{address}: TLS for {server_name} kept being accepted"
                ))
            }
        })
        .await;
        if let Err(seen) = refused {
            panic!("{seen}");
        }
    }
}

impl World {
    /// Asks the Gateway `gateway`'s listener on `port` `ask` until it fails (no answer: the
    /// connection or the TLS handshake refused) [`IN_A_ROW`] times in a row within
    /// [`CONSISTENCY`] (the suite's `WaitForConsistentFailureResponse`).
    pub async fn expect_failure(&self, gateway: &str, port: u16, mut ask: Ask<'_>) {
        let address = self.gateway(gateway, port);
        let failed = consistently(async || {
            let target = (ask.target)();
            match send(&address, &ask, &target).await {
                Err(_) => Ok(()),
                Ok(got) => Err(format!(
                    "{} {address}{target} kept being answered: {got:?}",
                    ask.method
                )),
            }
        })
        .await;
        if let Err(seen) = failed {
            panic!("{seen}");
        }
    }
}

impl World {
    /// Sends one datagram to the Gateway `gateway`'s UDP listener on `port` from a socket of
    /// its own (a new session) and returns the pod whose echo answered, within 2 s.
    pub async fn udp_pod(&self, gateway: &str, port: u16) -> Option<String> {
        let address = self.gateway(gateway, port);
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.ok()?;
        socket.connect(&address).await.ok()?;
        socket
            .send(b"gateway-api-conformance-udp-weight\n")
            .await
            .ok()?;
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(2), socket.recv(&mut buf))
            .await
            .ok()?
            .ok()?;
        let answer: Value = serde_json::from_slice(&buf[..n]).ok()?;
        answer["pod"].as_str().map(str::to_owned)
    }
}

impl World {
    /// Asks the Gateway `gateway`'s listener on `port` (its address also the `Host`, as the
    /// suite sends it) `ask` until the answer holds [`IN_A_ROW`] times in a row, within
    /// [`CONSISTENCY`]; fails with the last answer and the end of the Gateway's proxy log.
    pub async fn expect(&self, gateway: &str, port: u16, mut ask: Ask<'_>, want: Want<'_>) {
        let address = self.gateway(gateway, port);
        let held = consistently(async || {
            let target = (ask.target)();
            let got = send(&address, &ask, &target).await;
            if got.as_ref().is_ok_and(|got| want.holds(got, &target)) {
                Ok(())
            } else {
                Err(format!(
                    "{} {address}{target} {:?} never answered {want:?} {IN_A_ROW} times in a \
                     row; last: {got:?}",
                    ask.method, ask.headers
                ))
            }
        })
        .await;
        if let Err(seen) = held {
            let log = std::fs::read_to_string(
                self.up
                    .dir()
                    .join(format!("proxy-{}.log", gateway.replace('/', "_"))),
            )
            .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "{seen}; the proxy's log ends:\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}
