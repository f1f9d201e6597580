//! Shared fixtures of the health integration tests: an embedded API server with the CRD, pods
//! that stand in for real ones on loopback addresses, a running agent, and polling helpers.

#![allow(dead_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use fairlead_apiserver::{ApiServer, Config};
use fairlead_health::agent::{self, Settings};
use fairlead_health::metrics::HealthMetrics;
use fairlead_health_api::crd;
use fairlead_kit::Metrics;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// An API server with the CRD installed, and a client.
pub async fn cluster() -> (ApiServer, kube::Client) {
    let server = ApiServer::start(Config {
        allow_loopback_endpoints: true,
        ..Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await
        .unwrap();
    (server, client)
}

/// Starts an agent for `node`; stops when the token is cancelled.
pub fn start_agent(client: &kube::Client, node: &str) -> CancellationToken {
    let stop = CancellationToken::new();
    let metrics = HealthMetrics::new(&Metrics::new("test").unwrap()).unwrap();
    let settings = Settings {
        node: node.into(),
        concurrency: 16,
        verbose_status: false,
    };
    tokio::spawn(agent::run(
        client.clone(),
        settings,
        metrics,
        stop.clone(),
        || {},
    ));
    stop
}

/// A listener standing in for one container port; dropped to make its probe fail.
pub fn listen(ip: &str, port: u16) -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind((ip.parse::<IpAddr>().unwrap(), port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// A free port on a loopback address.
pub fn free_port_on(ip: &str) -> u16 {
    std::net::TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Creates a running, ready pod on `node` with `ip` and labels `app=<app>`.
pub async fn pod(client: &kube::Client, name: &str, app: &str, node: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app"}]}}))
        .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    set_ip(client, name, ip).await;
}

/// Sets a pod's IP (and marks it running and ready).
pub async fn set_ip(client: &kube::Client, name: &str, ip: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running",
        "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [{"type": "Ready", "status": "True"}]}})))
        .await
        .unwrap();
}

/// A resource over pods `app=<app>`, one port with the given probes, probing every second.
pub fn swh(name: &str, app: &str, port: u16, probes: Value) -> Value {
    json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": name},
        "spec": {"selector": {"app": app}, "ports": [{"name": "main", "port": 80, "targetPort": port}],
          "healthcheck": {"initialDelaySeconds": 0, "periodSeconds": 1, "probes": probes}}})
}

/// The addresses of a slice (sorted; empty when it does not exist).
pub async fn addresses(client: &kube::Client, name: &str) -> Vec<String> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let mut got: Vec<String> = slices
        .get_opt(name)
        .await
        .unwrap()
        .map(|s| {
            s.endpoints
                .into_iter()
                .flatten()
                .map(|e| e.addresses[0].clone())
                .collect()
        })
        .unwrap_or_default();
    got.sort();
    got
}

/// Waits until a slice holds exactly `expected`; returns how long it took.
pub async fn wait_for(
    client: &kube::Client,
    name: &str,
    expected: &[&str],
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let got = addresses(client, name).await;
        if got == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{name}: {got:?} is not {expected:?} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A ValidatingAdmissionPolicy (and its binding) that refuses every create and update of
/// `resource` in `api_group` with "maintenance": a dependency failing on purpose.
pub struct Refusal {
    bindings: Api<kube::core::DynamicObject>,
    name: String,
}

impl Refusal {
    /// Starts refusing.
    pub async fn start(client: &kube::Client, name: &str, api_group: &str, resource: &str) -> Self {
        use kube::core::{DynamicObject, GroupVersionKind};
        use kube::discovery::ApiResource;
        let api = |kind: &str, plural: &str| -> Api<DynamicObject> {
            Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
                    plural,
                ),
            )
        };
        let policies = api("ValidatingAdmissionPolicy", "validatingadmissionpolicies");
        let bindings = api(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        );
        let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [api_group], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": [resource]}]},
              "validations": [{"expression": "false", "message": "maintenance"}]}});
        policies
            .create(
                &PostParams::default(),
                &serde_json::from_value(policy).unwrap(),
            )
            .await
            .unwrap();
        let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]}});
        bindings
            .create(
                &PostParams::default(),
                &serde_json::from_value(binding).unwrap(),
            )
            .await
            .unwrap();
        Self {
            bindings,
            name: name.to_owned(),
        }
    }

    /// Stops refusing.
    pub async fn lift(self) {
        self.bindings
            .delete(&self.name, &kube::api::DeleteParams::default())
            .await
            .unwrap();
    }
}

/// Starts the controller with a short Lease, as replica `identity`; it runs until the token
/// is cancelled.
pub fn start_controller(client: &kube::Client, identity: &str) -> CancellationToken {
    let stop = CancellationToken::new();
    let lease = fairlead_kit::lease::LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_interval: Duration::from_millis(200),
        ..fairlead_kit::lease::LeaseConfig::new(
            fairlead_health::controller::LEASE,
            "default",
            identity,
        )
    };
    let metrics = HealthMetrics::new(&Metrics::new("test").unwrap()).unwrap();
    tokio::spawn(fairlead_health::controller::run(
        client.clone(),
        lease,
        metrics,
        stop.clone(),
        || {},
    ));
    stop
}
