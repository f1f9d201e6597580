//! The Rust types of the resource.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LoadBalancerStatus, SessionAffinityConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A Service with per-port active health checks: the child Service is selector-less, and the
/// agents publish, per port, only the pods whose probes of that port pass.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "network.deckhouse.io",
    version = "v1alpha1",
    kind = "ServiceWithHealthchecks",
    plural = "servicewithhealthchecks",
    singular = "servicewithhealthcheck",
    shortname = "swh",
    namespaced,
    status = "ServiceWithHealthchecksStatus",
    printcolumn = r#"{"name": "Type", "type": "string", "jsonPath": ".spec.type"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Endpoints", "type": "string", "jsonPath": ".status.healthcheckCondition.readyEndpoints"}"#,
    printcolumn = r#"{"name": "ExternalIP", "type": "string", "jsonPath": ".status.loadBalancer.ingress[0].ip"}"#,
    printcolumn = r#"{"name": "Ports", "type": "string", "jsonPath": ".spec.ports[*].port"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceWithHealthchecksSpec {
    /// The ports the Service exposes (a list-map keyed by `port` and `protocol`).
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    /// Pods to probe and publish, by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<BTreeMap<String, String>>,
    /// `ClusterIP` (default), `NodePort`, `LoadBalancer` or `ExternalName`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    #[schemars(extend("enum" = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]))]
    pub type_: Option<String>,
    /// The cluster IP; `None` makes a headless Service, whose pods are not probed.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    /// Publish pods without probing them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_not_ready_addresses: Option<bool>,
    /// `Cluster` or `Local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Cluster", "Local"]))]
    pub external_traffic_policy: Option<String>,
    /// `Cluster` or `Local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Cluster", "Local"]))]
    pub internal_traffic_policy: Option<String>,
    /// External IPs routed to the Service.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "externalIPs"
    )]
    pub external_ips: Option<Vec<String>>,
    /// The DNS name of an `ExternalName` Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    /// The health-check node port of a `Local` LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_node_port: Option<i32>,
    /// IP families (`IPv4`, `IPv6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_families: Option<Vec<String>>,
    /// `SingleStack`, `PreferDualStack` or `RequireDualStack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family_policy: Option<String>,
    /// The load-balancer implementation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_class: Option<String>,
    /// A requested load-balancer IP.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "loadBalancerIP"
    )]
    pub load_balancer_ip: Option<String>,
    /// Client CIDRs allowed through the load balancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer_source_ranges: Option<Vec<String>>,
    /// Whether node ports are allocated for a LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocate_load_balancer_node_ports: Option<bool>,
    /// `None` or `ClientIP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// Client-IP affinity settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// Traffic distribution preference (`PreferClose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
    /// The health checks.
    pub healthcheck: Healthcheck,
}

/// One Service port.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// Port name (required when there are several ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `TCP` (default), `UDP` or `SCTP`.
    #[serde(default = "tcp")]
    #[schemars(extend("enum" = ["TCP", "UDP", "SCTP"]))]
    pub protocol: String,
    /// The Service port.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// The pods' port (defaults to `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: Option<i32>,
    /// The node port of NodePort and LoadBalancer Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub node_port: Option<i32>,
    /// The application protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

fn tcp() -> String {
    "TCP".into()
}

impl ServicePort {
    /// The port probes and endpoints use: `targetPort`, else `port`.
    pub fn effective_target_port(&self) -> i32 {
        self.target_port.unwrap_or(self.port)
    }
}

/// When and how to probe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Healthcheck {
    /// Seconds after a pod's creation before its first probe.
    #[serde(default = "ten")]
    #[schemars(range(min = 0, max = 108000))]
    pub initial_delay_seconds: i32,
    /// Seconds between probes of one pod.
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 108000))]
    pub period_seconds: i32,
    /// The probes; each checks one target port.
    #[serde(default)]
    pub probes: Vec<Probe>,
}

impl Default for Healthcheck {
    fn default() -> Self {
        Self {
            initial_delay_seconds: 10,
            period_seconds: 10,
            probes: Vec::new(),
        }
    }
}

fn ten() -> i32 {
    10
}

fn one() -> i32 {
    1
}

fn three() -> i32 {
    3
}

/// The kind of a probe.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum ProbeMode {
    /// An HTTP(S) request that must answer 2xx.
    #[default]
    #[serde(rename = "HTTP")]
    Http,
    /// A TCP connection that must be accepted.
    #[serde(rename = "TCP")]
    Tcp,
    /// A PostgreSQL query that must return true.
    #[serde(rename = "PostgreSQL")]
    PostgreSql,
}

impl ProbeMode {
    /// The mode as a metric label and in `failedProbes` entries (`http`, `tcp`, `postgresql`).
    pub fn label(self) -> &'static str {
        match self {
            ProbeMode::Http => "http",
            ProbeMode::Tcp => "tcp",
            ProbeMode::PostgreSql => "postgresql",
        }
    }
}

/// One probe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// `HTTP`, `TCP` or `PostgreSQL`; the block of the same name must be set, and no other.
    pub mode: ProbeMode,
    /// Seconds before a probe times out.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: i32,
    /// Consecutive successes to count as passing.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub success_threshold: i32,
    /// Consecutive failures to count as failing.
    #[serde(default = "three")]
    #[schemars(range(min = 1))]
    pub failure_threshold: i32,
    /// The HTTP probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpProbe>,
    /// The TCP probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpProbe>,
    /// The PostgreSQL probe.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "postgreSQL"
    )]
    pub postgresql: Option<PostgreSqlProbe>,
}

impl Probe {
    /// The pod port this probe checks (from the block of its mode).
    pub fn target_port(&self) -> Option<i32> {
        match self.mode {
            ProbeMode::Http => self.http.as_ref().map(|h| h.target_port),
            ProbeMode::Tcp => self.tcp.as_ref().map(|t| t.target_port),
            ProbeMode::PostgreSql => self.postgresql.as_ref().map(|p| p.target_port),
        }
    }
}

/// An HTTP(S) request to the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpProbe {
    /// The pod port.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i32,
    /// The request path (default `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The Host header (default: the pod IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `HTTP` (default) or `HTTPS`.
    #[serde(default = "http_scheme")]
    #[schemars(extend("enum" = ["HTTP", "HTTPS"]))]
    pub scheme: String,
    /// `GET` (default) or `HEAD`.
    #[serde(default = "get")]
    #[schemars(extend("enum" = ["GET", "HEAD"]))]
    pub method: String,
    /// Extra request headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
    /// Do not verify the pod's certificate.
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    /// PEM CA bundle to verify the pod's certificate with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<String>,
}

fn http_scheme() -> String {
    "HTTP".into()
}

fn get() -> String {
    "GET".into()
}

/// One request header.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// A TCP connection to the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpProbe {
    /// The pod port.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i32,
}

/// A PostgreSQL query against the pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PostgreSqlProbe {
    /// The pod port.
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i32,
    /// The database (default: the user's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_name: Option<String>,
    /// A query whose first value must be true (`select 1` by default).
    #[serde(default = "select_one")]
    pub query: String,
    /// A Secret of type `network.deckhouse.io/postgresql-credentials` in the same namespace
    /// (`user`, `password`, `tlsMode`, `clientCert`, `clientKey`, `caCert`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_name: Option<String>,
}

fn select_one() -> String {
    "select 1".into()
}

/// What the controller and the agents report.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceWithHealthchecksStatus {
    /// `Ready` and `ChildServiceReady` (a list-map by `type`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// One entry per pod (a list-map by `podName`); each agent writes its own node's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_statuses: Vec<EndpointStatus>,
    /// Counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthcheck_condition: Option<HealthcheckCondition>,
    /// The child Service's load balancer (type LoadBalancer only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerStatus>,
    /// The child Service's cluster IP.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    /// The child Service's cluster IPs.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "clusterIPs")]
    pub cluster_ips: Vec<String>,
}

/// The probe results of one pod.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStatus {
    /// The pod.
    pub pod_name: String,
    /// Its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The kubelet's readiness of the pod.
    #[serde(default)]
    pub ready: bool,
    /// Every probe passes.
    #[serde(default)]
    pub probes_successful: bool,
    /// The failing probes, `<mode>:<podIP>:<port>` (Deckhouse's format).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_probes: Vec<String>,
    /// Why the failing probes fail (fairlead: refused, timeout, HTTP status, SQL result…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_reasons: Vec<String>,
    /// When the pod was last probed (set on transitions unless verbose status is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<String>,
    /// When the result last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// Counts across the resource's endpoints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthcheckCondition {
    /// The generation the counts refer to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Pods probed.
    #[serde(default)]
    pub endpoints: i32,
    /// Pods ready and passing every probe.
    #[serde(default)]
    pub ready_endpoints: i32,
}
