//! What a scenario needs of the cluster, decided without I/O: its world's objects (read from
//! `worlds/<scenario>.yaml`), the echo backends standing in for its Services, a world broken
//! on purpose (to see a threshold fail), and whether a target may be loaded at all.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

/// The label of a Service an echo backend stands in for (its value: the Service's port
/// name the backend serves).
pub const ECHO_LABEL: &str = "loadtest.fairlead.io/echo";

/// What is wrong with a scenario's input.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The world file is not YAML objects.
    #[error("{file}: document {index}: {source}")]
    Yaml {
        /// The file.
        file: String,
        /// Which document (from 0).
        index: usize,
        /// Why.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// An object without a kind, version or name.
    #[error("{file}: document {index} has no {field}")]
    Incomplete {
        /// The file.
        file: String,
        /// Which document (from 0).
        index: usize,
        /// The field missing.
        field: &'static str,
    },
    /// A break names something the world does not have.
    #[error("--break {0}: the world has no such {1}")]
    NoSuch(String, &'static str),
    /// A break that is not `backend-down=SERVICE`, `wrong-weight=ROUTE`,
    /// `capacity=SERVICE:RATE` or `readiness-ignored=SWH`.
    #[error(
        "--break {0:?}: expected backend-down=SERVICE, wrong-weight=ROUTE (an HTTPRoute, GRPCRoute or TCPRoute), capacity=SERVICE:REQUESTS_PER_SECOND or readiness-ignored=SERVICEWITHHEALTHCHECKS"
    )]
    BadBreak(String),
    /// A world that needs what only the runner gives it (certificates, a GeoIP mirror).
    #[error("{0} cannot be applied to a cluster as it is: {1}")]
    NotForCluster(String, &'static str),
    /// A TCPRoute or UDPRoute whose port cannot be told.
    #[error(
        "{0}: spec.parentRefs[0] names no port (set port, or sectionName {1} for an additional port)"
    )]
    NoPort(String, String),
    /// A Gateway whose entry cannot be told.
    #[error("--gateway {0}: {1}")]
    Gateway(String, String),
    /// A target the runner may not load.
    #[error("--target {0}: {1}")]
    Target(String, &'static str),
}

/// A world broken on purpose, to see the matching threshold fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Break {
    /// The echo backend of this Service is not started (its endpoints still say ready).
    BackendDown(String),
    /// Every backend of this HTTPRoute gets the same weight (a split the routes must not have).
    WrongWeight(String),
    /// The echo backend of this Service answers 503 to requests beyond this many a second.
    Capacity(String, u32),
    /// The HTTP probes of this echo ServiceWithHealthchecks ask `/`, which its pods serve
    /// whether ready or not: a pod made not-ready keeps passing them.
    ReadinessIgnored(String),
}

/// What the breaks of a world do to its backends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The Services whose echo backends are not started.
    pub down: Vec<String>,
    /// The Services whose echo backends answer only so many requests a second.
    pub capacity: std::collections::BTreeMap<String, u32>,
}

impl std::str::FromStr for Break {
    type Err = WorldError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('=') {
            Some(("backend-down", name)) if !name.is_empty() => {
                Ok(Self::BackendDown(name.to_owned()))
            }
            Some(("wrong-weight", name)) if !name.is_empty() => {
                Ok(Self::WrongWeight(name.to_owned()))
            }
            Some(("readiness-ignored", name)) if !name.is_empty() => {
                Ok(Self::ReadinessIgnored(name.to_owned()))
            }
            Some(("capacity", spec)) => match spec.split_once(':') {
                Some((name, rate)) if !name.is_empty() => match rate.parse() {
                    Ok(rate) if rate > 0 => Ok(Self::Capacity(name.to_owned(), rate)),
                    _ => Err(WorldError::BadBreak(text.to_owned())),
                },
                _ => Err(WorldError::BadBreak(text.to_owned())),
            },
            _ => Err(WorldError::BadBreak(text.to_owned())),
        }
    }
}

/// The annotation of a Secret whose certificate the runner issues (its value: the DNS names,
/// comma-separated).
pub const CERTIFICATE_ANNOTATION: &str = "loadtest.fairlead.io/certificate";

/// Where a scenario's traffic goes: an instance's LoadBalancer Service and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service.
    pub service: String,
    /// The port.
    pub port: u16,
    /// `http` or `https`.
    pub scheme: &'static str,
}

/// What an echo backend speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// HTTP/1.1 (and h2c): answers `x-backend`, echoes the request.
    Http,
    /// gRPC: the `Echo` service of `echo.proto`.
    Grpc,
    /// TCP: each line answered with `<backend> <line>`.
    Tcp,
    /// UDP: each datagram answered with `<backend> <datagram>`.
    Udp,
}

impl Protocol {
    /// What a Service port asks for: `protocol: UDP`, a name or `appProtocol` of `grpc` or
    /// `tcp`, or else HTTP.
    fn of_port(port: &Value) -> Self {
        let says = |what: &str| port["name"] == what || port["appProtocol"] == what;
        if port["protocol"] == "UDP" {
            Self::Udp
        } else if says("grpc") {
            Self::Grpc
        } else if says("tcp") {
            Self::Tcp
        } else {
            Self::Http
        }
    }
}

/// An echo backend: the Service it stands in for and the port name it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name (what the backend answers it is).
    pub name: String,
    /// The Service port's name.
    pub port_name: String,
    /// The Service port.
    pub port: u16,
    /// What it speaks (see [`Protocol::of_port`]).
    pub protocol: Protocol,
}

impl Backend {
    /// The echo backend `object` (a Service, or a ServiceWithHealthchecks, which has a
    /// Service's ports) stands in for, when it is labelled [`ECHO_LABEL`].
    pub(crate) fn of(object: &Value) -> Option<Self> {
        let label = object["metadata"]["labels"][ECHO_LABEL].as_str()?;
        let ports = object["spec"]["ports"].as_array()?;
        let port = ports
            .iter()
            .find(|p| p["name"] == label)
            .or_else(|| ports.first())?;
        Some(Self {
            namespace: namespace_of(object).to_owned(),
            name: object["metadata"]["name"].as_str()?.to_owned(),
            port_name: port["name"].as_str().unwrap_or_default().to_owned(),
            port: u16::try_from(port["port"].as_u64()?).ok()?,
            protocol: Protocol::of_port(port),
        })
    }
}

/// A scenario's world: its objects in the order they are applied.
#[derive(Clone, Debug, Default)]
pub struct World {
    /// The objects.
    pub objects: Vec<Value>,
}

impl World {
    /// Reads the YAML documents of `text` (from `file`).
    pub fn parse(file: &str, text: &str) -> Result<Self, WorldError> {
        let mut objects = Vec::new();
        for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let value: Value =
                serde::Deserialize::deserialize(document).map_err(|source| WorldError::Yaml {
                    file: file.to_owned(),
                    index,
                    source,
                })?;
            if value.is_null() {
                continue;
            }
            for (field, present) in [
                ("apiVersion", value["apiVersion"].is_string()),
                ("kind", value["kind"].is_string()),
                ("metadata.name", value["metadata"]["name"].is_string()),
            ] {
                if !present {
                    return Err(WorldError::Incomplete {
                        file: file.to_owned(),
                        index,
                        field,
                    });
                }
            }
            objects.push(value);
        }
        Ok(Self { objects })
    }

    /// The objects of `kind`.
    pub(crate) fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects.iter().filter(move |o| o["kind"] == kind)
    }

    /// The echo backends: one per Service labelled [`ECHO_LABEL`], serving the port the
    /// label names (the first port when the name is not one of them).
    pub fn backends(&self) -> Vec<Backend> {
        self.of_kind("Service").filter_map(Backend::of).collect()
    }

    /// The world with `broken` applied: its objects, and what to do to its backends.
    pub fn broken(mut self, broken: &[Break]) -> Result<(Self, Faults), WorldError> {
        let mut faults = Faults::default();
        let backends = self.backends();
        let known = |name: &str, what: String| {
            if backends.iter().any(|x| x.name == name) {
                Ok(())
            } else {
                Err(WorldError::NoSuch(what, "echo Service"))
            }
        };
        for b in broken {
            match b {
                Break::BackendDown(name) => {
                    known(name, format!("backend-down={name}"))?;
                    faults.down.push(name.clone());
                }
                Break::Capacity(name, rate) => {
                    known(name, format!("capacity={name}:{rate}"))?;
                    if backends
                        .iter()
                        .any(|x| &x.name == name && x.protocol != Protocol::Http)
                    {
                        return Err(WorldError::NoSuch(
                            format!("capacity={name}:{rate}"),
                            "HTTP echo Service (it is a gRPC, TCP or UDP one)",
                        ));
                    }
                    faults.capacity.insert(name.clone(), *rate);
                }
                Break::WrongWeight(route) => {
                    let found = self
                        .objects
                        .iter_mut()
                        .find(|o| {
                            ["HTTPRoute", "GRPCRoute", "TCPRoute"]
                                .contains(&o["kind"].as_str().unwrap_or_default())
                                && o["metadata"]["name"] == **route
                        })
                        .ok_or_else(|| {
                            WorldError::NoSuch(
                                format!("wrong-weight={route}"),
                                "HTTPRoute, GRPCRoute or TCPRoute",
                            )
                        })?;
                    for rule in found["spec"]["rules"].as_array_mut().into_iter().flatten() {
                        for backend in rule["backendRefs"].as_array_mut().into_iter().flatten() {
                            backend["weight"] = 1.into();
                        }
                    }
                }
                Break::ReadinessIgnored(name) => {
                    let found = self
                        .objects
                        .iter_mut()
                        .find(|o| {
                            o["kind"] == "ServiceWithHealthchecks"
                                && o["metadata"]["name"] == **name
                                && o["metadata"]["labels"][ECHO_LABEL].is_string()
                        })
                        .ok_or_else(|| {
                            WorldError::NoSuch(
                                format!("readiness-ignored={name}"),
                                "echo ServiceWithHealthchecks",
                            )
                        })?;
                    let probes = found["spec"]["healthcheck"]["probes"].as_array_mut();
                    for probe in probes.into_iter().flatten() {
                        if probe["http"].is_object() {
                            probe["http"]["path"] = "/".into();
                        }
                    }
                }
            }
        }
        Ok((self, faults))
    }

    /// Where the scenario's traffic goes: the LoadBalancer Service of the world's
    /// ClusterALBInstance (else of its ALBInstance, in the instance's namespace), on its HTTP
    /// port, or on its HTTPS port when `httpPort` is 0.
    pub fn entry(&self) -> Option<Entry> {
        let (instance, namespace) = match self.of_kind("ClusterALBInstance").next() {
            Some(cluster) => (cluster, "d8-alb"),
            None => {
                let instance = self.of_kind("ALBInstance").next()?;
                (instance, instance["metadata"]["namespace"].as_str()?)
            }
        };
        let gateway = instance["spec"]["gatewayName"].as_str()?;
        let ports = &instance["spec"]["inlet"]["loadBalancer"];
        let (scheme, port) = match ports["httpPort"].as_u64() {
            Some(0) => ("https", ports["httpsPort"].as_u64().unwrap_or(443)),
            http => ("http", http.unwrap_or(80)),
        };
        Some(Entry {
            namespace: namespace.to_owned(),
            service: load_balancer_service(gateway),
            port: u16::try_from(port).ok()?,
            scheme,
        })
    }

    /// The Secrets annotated [`CERTIFICATE_ANNOTATION`], with the DNS names their
    /// certificate is for: the runner issues it.
    pub fn certificates(&self) -> Vec<(usize, Vec<String>)> {
        self.objects
            .iter()
            .enumerate()
            .filter(|(_, o)| o["kind"] == "Secret")
            .filter_map(|(i, o)| {
                let names = o["metadata"]["annotations"][CERTIFICATE_ANNOTATION].as_str()?;
                Some((
                    i,
                    names
                        .split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned)
                        .collect(),
                ))
            })
            .collect()
    }

    /// The world with the certificate (`cert_pem`, `key_pem`) in its object `index`, a
    /// `kubernetes.io/tls` Secret.
    pub fn certify(&mut self, index: usize, cert_pem: &str, key_pem: &str) {
        use base64::Engine as _;
        let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        if let Some(secret) = self.objects.get_mut(index) {
            secret["type"] = "kubernetes.io/tls".into();
            secret["data"] = serde_json::json!({
                "tls.crt": encode(cert_pem),
                "tls.key": encode(key_pem),
            });
        }
    }

    /// A request per HTTPRoute rule (the route's first hostname, the rule's first match:
    /// its path and exact headers) and the backends it names (weight above 0, none of
    /// `down`); see [`World::probes`] for those that answer.
    pub(crate) fn rule_probes(&self, down: &[String]) -> Vec<Probe> {
        let mut probes = Vec::new();
        for route in self.of_kind("HTTPRoute").chain(self.of_kind("GRPCRoute")) {
            let Some(host) = route["spec"]["hostnames"][0].as_str() else {
                continue;
            };
            let grpc = route["kind"] == "GRPCRoute";
            for rule in route["spec"]["rules"].as_array().into_iter().flatten() {
                let matched = &rule["matches"][0];
                let headers = matched["headers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|h| h["type"].as_str().is_none_or(|t| t == "Exact"))
                    .filter_map(|h| {
                        Some((
                            h["name"].as_str()?.to_owned(),
                            h["value"].as_str()?.to_owned(),
                        ))
                    })
                    .collect();
                let backends = rule["backendRefs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["weight"].as_i64().is_none_or(|w| w > 0))
                    .filter_map(|b| b["name"].as_str())
                    .filter(|name| !down.iter().any(|d| d == name))
                    .map(str::to_owned)
                    .collect();
                let path = if grpc {
                    let method = &matched["method"];
                    format!(
                        "/{}/{}",
                        method["service"]
                            .as_str()
                            .unwrap_or("fairlead.loadtest.Echo"),
                        method["method"].as_str().unwrap_or("Say")
                    )
                } else {
                    matched["path"]["value"].as_str().unwrap_or("/").to_owned()
                };
                probes.push(Probe {
                    host: host.to_owned(),
                    path,
                    headers,
                    backends,
                    grpc,
                });
            }
        }
        probes
    }
}

/// A TCPRoute or UDPRoute of a world, as the runner loads it (k6 has no raw sockets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRoute {
    /// The route's name (its tag in the summary).
    pub name: String,
    /// [`Protocol::Tcp`] or [`Protocol::Udp`].
    pub protocol: Protocol,
    /// The instance's port it is reached on: its parent's `port`, or the `<n>` of an
    /// additional port's listener `tcp-port-<n>` / `udp-port-<n>`.
    pub port: u16,
    /// Its first rule's backends and their weights (1 unless given).
    pub backends: Vec<(String, u32)>,
}

impl World {
    /// The TCPRoutes and UDPRoutes, each with the port it is reached on; a route whose port
    /// cannot be told is refused with the field named.
    pub fn streams(&self) -> Result<Vec<StreamRoute>, WorldError> {
        let mut streams = Vec::new();
        for (kind, protocol, prefix) in [
            ("TCPRoute", Protocol::Tcp, "tcp-port-"),
            ("UDPRoute", Protocol::Udp, "udp-port-"),
        ] {
            for route in self.of_kind(kind) {
                let name = route["metadata"]["name"].as_str().unwrap_or_default();
                let parent = &route["spec"]["parentRefs"][0];
                let port = parent["port"]
                    .as_u64()
                    .or_else(|| {
                        parent["sectionName"]
                            .as_str()?
                            .strip_prefix(prefix)?
                            .parse()
                            .ok()
                    })
                    .and_then(|p| u16::try_from(p).ok())
                    .ok_or_else(|| {
                        WorldError::NoPort(format!("{kind} {name}"), format!("{prefix}<port>"))
                    })?;
                let backends = route["spec"]["rules"][0]["backendRefs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| {
                        let weight = b["weight"].as_u64().unwrap_or(1);
                        Some((b["name"].as_str()?.to_owned(), u32::try_from(weight).ok()?))
                    })
                    .collect();
                streams.push(StreamRoute {
                    name: name.to_owned(),
                    protocol,
                    port,
                    backends,
                });
            }
        }
        Ok(streams)
    }
}

/// The annotation of an ALB instance whose GeoIP databases come from the runner's mirror of
/// MaxMind's test databases.
pub const MIRROR_ANNOTATION: &str = "loadtest.fairlead.io/mirror";

impl World {
    /// Points each instance annotated [`MIRROR_ANNOTATION`] at the mirror `url`; whether
    /// there was one.
    pub fn mirror(&mut self, url: &str) -> bool {
        let mut any = false;
        for instance in &mut self.objects {
            let kind = instance["kind"].as_str().unwrap_or_default();
            if matches!(kind, "ClusterALBInstance" | "ALBInstance")
                && instance["metadata"]["annotations"][MIRROR_ANNOTATION].is_string()
            {
                instance["spec"]["geoIP"]["maxmindMirror"] = serde_json::json!({ "url": url });
                any = true;
            }
        }
        any
    }

    /// Whether an instance is annotated [`MIRROR_ANNOTATION`].
    pub fn mirrored(&self) -> bool {
        self.clone().mirror("")
    }
}

/// Who applies the worlds, and the `app.kubernetes.io/managed-by` of the echo backends'
/// Deployments in a cluster.
pub const MANAGER: &str = "fairlead-loadtest";

/// The port an echo backend listens on in a cluster (unprivileged, as it runs as non-root).
pub const CLUSTER_ECHO_PORT: u16 = 8080;

/// The label of an echo backend's pods in a cluster (its value: the Service's name).
pub const BACKEND_LABEL: &str = "loadtest.fairlead.io/backend";

/// The label of the HTTPRoute a churning scenario changes while it runs.
pub const CHURN_LABEL: &str = "loadtest.fairlead.io/churn";

/// How many path rules a churned route keeps (a route holds at most 16 rules).
const CHURN_PATHS: usize = 8;

impl World {
    /// The HTTPRoute labelled [`CHURN_LABEL`], if any.
    pub fn churned(&self) -> Option<&Value> {
        self.of_kind("HTTPRoute")
            .find(|r| r["metadata"]["labels"][CHURN_LABEL].is_string())
    }
}

/// Change `step` of a churned `route`: its first rule's backends get their weights turned
/// around (80/20 becomes 20/80 on odd steps), and a rule for the path `/churn/<step>` sends to
/// the backend of its last rule (which none of the others use: an `Exact` path of its own),
/// beside the last few steps' paths. The probe tells the change has reached traffic: that
/// path answered by that backend (before, the first rule's `/` prefix answers it, from
/// another).
pub fn churn_step(route: &Value, step: usize) -> Option<(Value, Probe)> {
    let mut next = route.clone();
    let rules = next["spec"]["rules"].as_array_mut()?;
    let mut to = rules.last()?["backendRefs"][0].clone();
    let name = to["name"].as_str()?.to_owned();
    to["weight"] = 1.into();
    let backends = rules.first_mut()?["backendRefs"].as_array_mut()?;
    if step % 2 == 1 {
        let weights: Vec<Value> = backends.iter().map(|b| b["weight"].clone()).collect();
        for (backend, weight) in backends.iter_mut().zip(weights.into_iter().rev()) {
            backend["weight"] = weight;
        }
    }
    for past in step.saturating_sub(CHURN_PATHS - 1)..=step {
        rules.push(serde_json::json!({
            "matches": [{"path": {"type": "PathPrefix", "value": format!("/churn/{past}")}}],
            "backendRefs": [to.clone()],
        }));
    }
    let probe = Probe {
        host: route["spec"]["hostnames"][0].as_str()?.to_owned(),
        path: format!("/churn/{step}"),
        headers: Vec::new(),
        backends: vec![name],
        grpc: false,
    };
    Some((next, probe))
}

/// A request that shows a route rule served, and the backends that must answer it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The `Host` header.
    pub host: String,
    /// The path.
    pub path: String,
    /// Headers the rule matches.
    pub headers: Vec<(String, String)>,
    /// The backends that must each answer it once (none: any answer but Envoy's 404 will do).
    pub backends: Vec<String>,
    /// Whether it is a gRPC call (to the path `/<service>/<method>`).
    pub grpc: bool,
}

/// An object's namespace (`default` when it names none).
pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
}

/// The EndpointSlice that sends `backend`'s Service to the echo server at `addr`.
pub fn slice(backend: &Backend, addr: SocketAddr) -> Value {
    let (_, slice) = fairlead_kit::local::service(&fairlead_kit::local::LocalService {
        namespace: &backend.namespace,
        name: &backend.name,
        port_name: &backend.port_name,
        port: backend.port,
        addr,
        udp: backend.protocol == Protocol::Udp,
        managed_by: "fairlead-loadtest",
    });
    serde_json::to_value(slice).expect("an EndpointSlice serializes")
}

/// The LoadBalancer Service an ALB instance puts in front of its Gateway `gateway`'s proxies
/// (in the Gateway's namespace; its ports named as the listeners).
pub fn load_balancer_service(gateway: &str) -> String {
    format!("d8-alb-{gateway}-loadbalancer")
}

/// Where the traffic of `gateway` enters, for a `scheme` (`http`: its first HTTP listener;
/// `https`: its first HTTPS one): its instance's LoadBalancer `service` (the address it got,
/// the port named as the listener), or, without one, the Gateway's own first address and
/// the listener's port (a Gateway of the class without an instance's Service).
pub fn gateway_target(
    gateway: &Value,
    service: Option<&Value>,
    scheme: &str,
) -> Result<url::Url, WorldError> {
    let key = format!(
        "{}/{}",
        namespace_of(gateway),
        gateway["metadata"]["name"].as_str().unwrap_or_default()
    );
    let fail = |why: String| WorldError::Gateway(key.clone(), why);
    let protocol = scheme.to_ascii_uppercase();
    let listener = gateway["spec"]["listeners"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["protocol"] == protocol.as_str())
        .ok_or_else(|| fail(format!("no {protocol} listener in spec.listeners")))?;
    let name = listener["name"].as_str().unwrap_or_default();
    let (host, port) = match service {
        Some(service) => {
            let ingress = &service["status"]["loadBalancer"]["ingress"][0];
            let host = ingress["ip"]
                .as_str()
                .or_else(|| ingress["hostname"].as_str());
            let port = service["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == name)
                .and_then(|p| p["port"].as_u64());
            let service_name = service["metadata"]["name"].as_str().unwrap_or_default();
            (
                host.ok_or_else(|| {
                    fail(format!(
                        "its Service {service_name} has no LoadBalancer address yet"
                    ))
                })?,
                port.ok_or_else(|| fail(format!("its Service {service_name} has no port {name}")))?,
            )
        }
        None => (
            gateway["status"]["addresses"][0]["value"]
                .as_str()
                .ok_or_else(|| fail("no LoadBalancer Service and no status.addresses".into()))?,
            listener["port"].as_u64().unwrap_or_default(),
        ),
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    url::Url::parse(&format!("{scheme}://{host}:{port}/"))
        .map_err(|e| fail(format!("{host}:{port}: {e}")))
}

/// Whether the runner may load `target`: with `ci` (the `CI` variable is `true`), only
/// addresses in 127.0.0.0/8 (a CI machine must never load someone else's service).
pub fn check_target(target: &url::Url, ci: bool) -> Result<(), WorldError> {
    if !matches!(target.scheme(), "http" | "https") {
        return Err(WorldError::Target(target.to_string(), "not http or https"));
    }
    if !ci {
        return Ok(());
    }
    let loopback = match target.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Domain("localhost")) => true,
        _ => false,
    };
    if loopback {
        Ok(())
    } else {
        Err(WorldError::Target(
            target.to_string(),
            "with CI=true only addresses in 127.0.0.0/8 are loaded",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: &str = r#"
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: lt}
spec: {gatewayName: lt, inlet: {type: LoadBalancer, loadBalancer: {httpPort: 8080}}}
---
apiVersion: v1
kind: Service
metadata: {name: shop-v1, namespace: lt, labels: {loadtest.fairlead.io/echo: http}}
spec: {ports: [{name: admin, port: 9000}, {name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: lt}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: lt}
spec:
  hostnames: [shop.test]
  rules:
  - matches: [{path: {type: PathPrefix, value: /buy}}]
    backendRefs: [{name: shop-v1, port: 80, weight: 80}, {name: shop-v2, port: 80, weight: 20}]
"#;

    #[test]
    fn a_world_names_its_backends_entry_and_probes() {
        let world = World::parse("w.yaml", WORLD).unwrap();
        assert_eq!(world.objects.len(), 4);
        assert_eq!(
            world.backends(),
            vec![Backend {
                namespace: "lt".into(),
                name: "shop-v1".into(),
                port_name: "http".into(),
                port: 80,
                protocol: Protocol::Http,
            }],
            "only labelled Services, on the port the label names"
        );
        assert_eq!(
            world.entry(),
            Some(Entry {
                namespace: "d8-alb".into(),
                service: "d8-alb-lt-loadbalancer".into(),
                port: 8080,
                scheme: "http"
            })
        );
        let probe = |backends: &[&str]| Probe {
            host: "shop.test".into(),
            path: "/buy".into(),
            headers: Vec::new(),
            backends: backends.iter().map(|b| b.to_string()).collect(),
            grpc: false,
        };
        assert_eq!(world.rule_probes(&[]), vec![probe(&["shop-v1", "shop-v2"])]);
        assert_eq!(
            world.rule_probes(&["shop-v2".into()]),
            vec![probe(&["shop-v1"])]
        );
        let slice = slice(&world.backends()[0], "127.0.0.1:4321".parse().unwrap());
        assert_eq!(slice["ports"][0]["port"], 4321);
        assert_eq!(slice["ports"][0]["name"], "http");
        assert_eq!(
            slice["metadata"]["labels"]["kubernetes.io/service-name"],
            "shop-v1"
        );
    }

    #[test]
    fn a_world_of_an_albinstance_enters_at_its_service_in_its_namespace() {
        let world = World::parse(
            "w.yaml",
            "apiVersion: network.deckhouse.io/v1alpha1
kind: ALBInstance
metadata: {name: shop, namespace: team}
spec: {gatewayName: front, inlet: {type: LoadBalancer, loadBalancer: {httpPort: 8090}}}
",
        )
        .unwrap();
        assert_eq!(
            world.entry(),
            Some(Entry {
                namespace: "team".into(),
                service: "d8-alb-front-loadbalancer".into(),
                port: 8090,
                scheme: "http"
            })
        );
    }

    #[test]
    fn breaks_change_what_they_name_and_refuse_what_is_not_there() {
        let world = World::parse("w.yaml", WORLD).unwrap();
        let breaks = [
            "backend-down=shop-v1".parse().unwrap(),
            "wrong-weight=shop".parse().unwrap(),
        ];
        let (broken, faults) = world.clone().broken(&breaks).unwrap();
        assert_eq!(faults.down, vec!["shop-v1".to_owned()]);
        let rule = &broken.objects[3]["spec"]["rules"][0]["backendRefs"];
        assert_eq!(
            (rule[0]["weight"].clone(), rule[1]["weight"].clone()),
            (1.into(), 1.into())
        );
        let (_, faults) = world
            .clone()
            .broken(&["capacity=shop-v1:20".parse().unwrap()])
            .unwrap();
        assert_eq!(faults.capacity.get("shop-v1"), Some(&20));
        assert!(faults.down.is_empty());
        for (text, needle) in [
            ("backend-down=nope", "no such echo Service"),
            ("capacity=nope:5", "no such echo Service"),
            (
                "wrong-weight=nope",
                "no such HTTPRoute, GRPCRoute or TCPRoute",
            ),
        ] {
            let e = world.clone().broken(&[text.parse().unwrap()]).unwrap_err();
            assert!(e.to_string().contains(needle), "{e}");
        }
        assert!("slow=shop".parse::<Break>().is_err());
        assert!("backend-down=".parse::<Break>().is_err());
        for bad in [
            "capacity=shop",
            "capacity=shop:0",
            "capacity=:5",
            "capacity=shop:x",
        ] {
            assert!(bad.parse::<Break>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_churned_route_turns_its_weights_and_adds_a_path_per_step() {
        let world = World::parse("w.yaml", WORLD).unwrap();
        assert!(world.churned().is_none(), "no route is labelled");
        let route = &world.objects[3];
        let (even, probe) = churn_step(route, 0).unwrap();
        let weights = |r: &Value| -> Vec<Value> {
            r["spec"]["rules"][0]["backendRefs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["weight"].clone())
                .collect()
        };
        assert_eq!(weights(&even), vec![Value::from(80), Value::from(20)]);
        assert_eq!(probe.path, "/churn/0");
        assert_eq!(
            probe.backends,
            vec!["shop-v1".to_owned()],
            "the last rule's backend"
        );
        let (odd, _) = churn_step(route, 1).unwrap();
        assert_eq!(weights(&odd), vec![Value::from(20), Value::from(80)]);
        let (late, probe) = churn_step(route, 20).unwrap();
        let rules = late["spec"]["rules"].as_array().unwrap();
        assert_eq!(
            rules.len(),
            1 + CHURN_PATHS,
            "at most 16 rules: the oldest paths go"
        );
        assert_eq!(rules[1]["matches"][0]["path"]["value"], "/churn/13");
        assert_eq!(
            rules[CHURN_PATHS]["matches"][0]["path"]["value"],
            "/churn/20"
        );
        assert_eq!(rules[CHURN_PATHS]["backendRefs"][0]["name"], "shop-v1");
        assert_eq!(rules[CHURN_PATHS]["backendRefs"][0]["weight"], 1);
        assert_eq!(probe.host, "shop.test");
    }

    #[test]
    fn an_https_world_is_entered_on_its_https_port_with_the_certificates_it_asks_for() {
        let mut world = World::parse(
            "w.yaml",
            r#"
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: lt}
spec: {gatewayName: tls, inlet: {type: LoadBalancer, loadBalancer: {httpPort: 0, httpsPort: 8443}}}
---
apiVersion: v1
kind: Secret
metadata: {name: d8-alb-tls-tls, namespace: d8-alb, annotations: {loadtest.fairlead.io/certificate: "*.lt.test, lt.test"}}
---
apiVersion: v1
kind: Secret
metadata: {name: other, namespace: d8-alb}
"#,
        )
        .unwrap();
        let entry = world.entry().unwrap();
        assert_eq!((entry.scheme, entry.port), ("https", 8443));
        assert_eq!(entry.service, "d8-alb-tls-loadbalancer");
        let wanted = world.certificates();
        assert_eq!(
            wanted,
            vec![(1, vec!["*.lt.test".to_owned(), "lt.test".to_owned()])]
        );
        world.certify(1, "CERT", "KEY");
        assert_eq!(world.objects[1]["type"], "kubernetes.io/tls");
        assert_eq!(world.objects[1]["data"]["tls.crt"], "Q0VSVA==");
        assert_eq!(world.objects[1]["data"]["tls.key"], "S0VZ");
        assert!(
            world.objects[2]["data"].is_null(),
            "only the annotated Secret"
        );
    }

    #[test]
    fn grpc_routes_are_probed_by_method_and_their_backends_speak_grpc() {
        let world = World::parse(
            "w.yaml",
            r#"
apiVersion: v1
kind: Service
metadata: {name: say, namespace: lt, labels: {loadtest.fairlead.io/echo: grpc}}
spec: {ports: [{name: grpc, port: 9000}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, namespace: lt}
spec:
  hostnames: [grpc.lt.test]
  rules:
  - matches: [{method: {service: fairlead.loadtest.Echo, method: Shout}}]
    backendRefs: [{name: say, port: 9000, weight: 80}, {name: say, port: 9000, weight: 20}]
"#,
        )
        .unwrap();
        assert_eq!(world.backends()[0].protocol, Protocol::Grpc);
        let probes = world.rule_probes(&[]);
        assert_eq!(probes.len(), 1);
        assert!(probes[0].grpc);
        assert_eq!(probes[0].path, "/fairlead.loadtest.Echo/Shout");
        assert_eq!(probes[0].host, "grpc.lt.test");
        let (even, _) = world
            .clone()
            .broken(&["wrong-weight=echo".parse().unwrap()])
            .unwrap();
        let refs = &even.objects[1]["spec"]["rules"][0]["backendRefs"];
        assert_eq!(
            (refs[0]["weight"].clone(), refs[1]["weight"].clone()),
            (1.into(), 1.into())
        );
        let e = world
            .broken(&["capacity=say:5".parse().unwrap()])
            .unwrap_err();
        assert!(e.to_string().contains("gRPC"), "{e}");
    }

    #[test]
    fn tcp_and_udp_routes_are_loaded_on_their_listener_s_port() {
        let world = World::parse(
            "w.yaml",
            r#"
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: split, namespace: lt}
spec:
  parentRefs: [{name: lt, sectionName: tcp-port-9101}]
  rules: [{backendRefs: [{name: a, port: 7000, weight: 80}, {name: b, port: 7000, weight: 20}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns, namespace: lt}
spec:
  parentRefs: [{name: lt, port: 53}]
  rules: [{backendRefs: [{name: c, port: 5300}]}]
---
apiVersion: v1
kind: Service
metadata: {name: c, namespace: lt, labels: {loadtest.fairlead.io/echo: udp}}
spec: {ports: [{name: udp, port: 5300, protocol: UDP}]}
"#,
        )
        .unwrap();
        assert_eq!(
            world.streams().unwrap(),
            vec![
                StreamRoute {
                    name: "split".into(),
                    protocol: Protocol::Tcp,
                    port: 9101,
                    backends: vec![("a".into(), 80), ("b".into(), 20)],
                },
                StreamRoute {
                    name: "dns".into(),
                    protocol: Protocol::Udp,
                    port: 53,
                    backends: vec![("c".into(), 1)],
                },
            ]
        );
        let backend = &world.backends()[0];
        assert_eq!(backend.protocol, Protocol::Udp);
        let slice = slice(backend, "127.0.0.1:5301".parse().unwrap());
        assert_eq!(slice["ports"][0]["protocol"], "UDP");
        // A listener that is not an additional port's: which port is not known.
        let bad = World::parse(
            "w.yaml",
            "apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {name: x}\nspec: {parentRefs: [{name: lt, sectionName: d8-http}]}\n",
        )
        .unwrap();
        let e = bad.streams().unwrap_err().to_string();
        assert!(
            e.contains("TCPRoute x") && e.contains("tcp-port-<port>"),
            "{e}"
        );
    }

    #[test]
    fn annotated_instances_take_the_runner_s_mirror() {
        let mut world = World::parse(
            "w.yaml",
            r#"
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: geo, annotations: {loadtest.fairlead.io/mirror: "true"}}
spec: {gatewayName: geo, geoIP: {maxmindEditionIDs: [GeoIP2-City]}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: plain}
spec: {gatewayName: plain}
"#,
        )
        .unwrap();
        assert!(world.mirrored());
        assert!(world.objects[0]["spec"]["geoIP"]["maxmindMirror"].is_null());
        assert!(world.mirror("http://127.0.0.2:1234"));
        assert_eq!(
            world.objects[0]["spec"]["geoIP"],
            serde_json::json!({"maxmindEditionIDs": ["GeoIP2-City"],
                "maxmindMirror": {"url": "http://127.0.0.2:1234"}})
        );
        assert!(world.objects[1]["spec"]["geoIP"].is_null());
        assert!(!World::default().mirrored());
    }

    #[test]
    fn a_world_for_a_cluster_runs_fairlead_echo_behind_each_echo_service() {
        let world = World::parse("w.yaml", WORLD).unwrap();
        let objects = world
            .for_cluster("w", "ghcr.io/fairlead/fairlead:1.2.3")
            .unwrap();
        let service = objects
            .iter()
            .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == "shop-v1")
            .unwrap();
        assert_eq!(service["spec"]["selector"][BACKEND_LABEL], "shop-v1");
        assert_eq!(service["spec"]["ports"][1]["targetPort"], CLUSTER_ECHO_PORT);
        assert!(
            service["spec"]["ports"][0]["targetPort"].is_null(),
            "not the echo's port"
        );
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        assert_eq!(deployment["metadata"]["name"], "echo-shop-v1");
        assert_eq!(deployment["metadata"]["namespace"], "lt");
        let pod = &deployment["spec"]["template"];
        assert_eq!(
            pod["metadata"]["labels"],
            deployment["spec"]["selector"]["matchLabels"]
        );
        assert_eq!(pod["metadata"]["labels"], service["spec"]["selector"]);
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["image"], "ghcr.io/fairlead/fairlead:1.2.3");
        assert_eq!(
            container["args"],
            serde_json::json!([
                "echo",
                "--name",
                "shop-v1",
                "--protocol",
                "http",
                "--listen",
                "$(POD_IP):8080"
            ])
        );
        // The Service without the label and every other object pass as they are.
        assert_eq!(
            objects.iter().filter(|o| o["kind"] != "Deployment").count(),
            world.objects.len()
        );
        let mut mirrored = world.clone();
        mirrored.objects[0]["metadata"]["annotations"][MIRROR_ANNOTATION] = "true".into();
        let e = mirrored.for_cluster("geo", "i").unwrap_err().to_string();
        assert!(
            e.contains("geo cannot be applied") && e.contains("GeoIP"),
            "{e}"
        );
    }

    #[test]
    fn a_gateway_is_loaded_where_its_traffic_enters() {
        let gateway = serde_json::json!({
            "metadata": {"name": "main", "namespace": "d8-alb"},
            "spec": {"listeners": [{"name": "d8-http", "port": 80, "protocol": "HTTP"},
                {"name": "d8-https", "port": 443, "protocol": "HTTPS"}]},
            "status": {"addresses": [{"type": "IPAddress", "value": "10.0.0.7"}]},
        });
        let service = serde_json::json!({
            "metadata": {"name": "d8-alb-main-loadbalancer"},
            "spec": {"ports": [{"name": "d8-http", "port": 8088}, {"name": "d8-https", "port": 8443}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}},
        });
        let target = |service: Option<&Value>, scheme| {
            gateway_target(&gateway, service, scheme).map(|u| u.to_string())
        };
        assert_eq!(
            target(Some(&service), "http").unwrap(),
            "http://203.0.113.9:8088/"
        );
        assert_eq!(
            target(Some(&service), "https").unwrap(),
            "https://203.0.113.9:8443/"
        );
        // Without an instance's Service: the Gateway's own address and listener port.
        assert_eq!(target(None, "http").unwrap(), "http://10.0.0.7/");
        let mut pending = service.clone();
        pending["status"] = serde_json::json!({});
        let e = target(Some(&pending), "http").unwrap_err().to_string();
        assert!(
            e.contains("d8-alb/main") && e.contains("no LoadBalancer address"),
            "{e}"
        );
        let mut tcp_only = gateway.clone();
        tcp_only["spec"]["listeners"] =
            serde_json::json!([{"name": "t", "port": 9, "protocol": "TCP"}]);
        let e = gateway_target(&tcp_only, None, "http")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no HTTP listener"), "{e}");
    }

    #[test]
    fn incomplete_objects_are_refused_with_the_field_named() {
        let e =
            World::parse("w.yaml", "apiVersion: v1\nkind: Service\nmetadata: {}\n").unwrap_err();
        assert_eq!(e.to_string(), "w.yaml: document 0 has no metadata.name");
        assert!(World::parse("w.yaml", "a: [").is_err());
    }

    #[test]
    fn in_ci_only_loopback_targets_are_loaded() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        for ok in [
            "http://127.0.2.1:8080",
            "https://127.9.9.9",
            "http://localhost:80",
        ] {
            assert!(check_target(&url(ok), true).is_ok(), "{ok}");
        }
        for refused in [
            "http://10.0.0.1",
            "http://example.com",
            "http://[::1]:80",
            "http://128.0.0.1",
        ] {
            let e = check_target(&url(refused), true).unwrap_err();
            assert!(e.to_string().contains("127.0.0.0/8"), "{refused}: {e}");
            assert!(
                check_target(&url(refused), false).is_ok(),
                "{refused} outside CI"
            );
        }
        assert!(check_target(&url("ftp://127.0.0.1"), false).is_err());
    }
}
