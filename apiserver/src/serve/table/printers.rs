//! The columns a real API server (v1.36, `pkg/printers/internalversion`) prints for the
//! built-in kinds kubectl users read most: Pods, Deployments, DaemonSets, StatefulSets,
//! Services, EndpointSlices, Nodes and Events. Columns of priority 1 are those `-o wide`
//! adds. Each row is computed from the typed object; an object that does not read as its
//! kind gets empty cells rather than a failed list.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod, PodTemplateSpec, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use serde_json::{Value, json};

use super::human_age;

/// A column of a built-in kind's Table.
pub struct Column {
    /// Its header (`Ready`, `Up-to-date`).
    pub name: &'static str,
    /// `string`, `integer` or `date`.
    pub type_: &'static str,
    /// 0: always shown; 1: with `-o wide`.
    pub priority: u8,
}

/// The cells of an object's row, in the columns' order.
pub type Row = fn(&Value, DateTime<Utc>) -> Vec<Value>;

/// How a built-in kind is printed: its columns and a row's cells.
pub struct Printer {
    /// The columns.
    pub columns: &'static [Column],
    /// The cells of an object's row.
    pub row: Row,
}

const fn col(name: &'static str, type_: &'static str, priority: u8) -> Column {
    Column {
        name,
        type_,
        priority,
    }
}

const NAME: Column = col("Name", "string", 0);
const AGE: Column = col("Age", "string", 0);

const POD: &[Column] = &[
    NAME,
    col("Ready", "string", 0),
    col("Status", "string", 0),
    col("Restarts", "string", 0),
    AGE,
    col("IP", "string", 1),
    col("Node", "string", 1),
    col("Nominated Node", "string", 1),
    col("Readiness Gates", "string", 1),
];

const DEPLOYMENT: &[Column] = &[
    NAME,
    col("Ready", "string", 0),
    col("Up-to-date", "integer", 0),
    col("Available", "integer", 0),
    AGE,
    col("Containers", "string", 1),
    col("Images", "string", 1),
    col("Selector", "string", 1),
];

const DAEMON_SET: &[Column] = &[
    NAME,
    col("Desired", "integer", 0),
    col("Current", "integer", 0),
    col("Ready", "integer", 0),
    col("Up-to-date", "integer", 0),
    col("Available", "integer", 0),
    col("Node Selector", "string", 0),
    AGE,
    col("Containers", "string", 1),
    col("Images", "string", 1),
    col("Selector", "string", 1),
];

const STATEFUL_SET: &[Column] = &[
    NAME,
    col("Ready", "string", 0),
    AGE,
    col("Containers", "string", 1),
    col("Images", "string", 1),
];

const SERVICE: &[Column] = &[
    NAME,
    col("Type", "string", 0),
    col("Cluster-IP", "string", 0),
    col("External-IP", "string", 0),
    col("Port(s)", "string", 0),
    AGE,
    col("Selector", "string", 1),
];

const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    col("AddressType", "string", 0),
    col("Ports", "string", 0),
    col("Endpoints", "string", 0),
    AGE,
];

const NODE: &[Column] = &[
    NAME,
    col("Status", "string", 0),
    col("Roles", "string", 0),
    AGE,
    col("Version", "string", 0),
    col("Internal-IP", "string", 1),
    col("External-IP", "string", 1),
    col("OS-Image", "string", 1),
    col("Kernel-Version", "string", 1),
    col("Container-Runtime", "string", 1),
];

const EVENT: &[Column] = &[
    col("Last Seen", "string", 0),
    col("Type", "string", 0),
    col("Reason", "string", 0),
    col("Object", "string", 0),
    col("Subobject", "string", 1),
    col("Source", "string", 1),
    col("Message", "string", 0),
    col("First Seen", "string", 1),
    col("Count", "integer", 1),
    col("Name", "string", 1),
];

/// The printer of resource `plural` of API group `group`, when it is one of those printed
/// as a real server prints them.
pub fn printer(group: &str, plural: &str) -> Option<Printer> {
    let (columns, row): (&'static [Column], Row) = match (group, plural) {
        ("", "pods") => (POD, pod),
        ("apps", "deployments") => (DEPLOYMENT, deployment),
        ("apps", "daemonsets") => (DAEMON_SET, daemon_set),
        ("apps", "statefulsets") => (STATEFUL_SET, stateful_set),
        ("", "services") => (SERVICE, service),
        ("discovery.k8s.io", "endpointslices") => (ENDPOINT_SLICE, endpoint_slice),
        ("", "nodes") => (NODE, node),
        ("", "events") => (EVENT, event),
        _ => return None,
    };
    Some(Printer { columns, row })
}

/// `object` as its kind, or its default when it does not read as one.
fn typed<T: serde::de::DeserializeOwned + Default>(object: &Value) -> T {
    serde_json::from_value(object.clone()).unwrap_or_default()
}

fn name(object: &Value) -> Value {
    object["metadata"]["name"].clone()
}

fn age(created: Option<&Time>, now: DateTime<Utc>) -> Value {
    json!(created.map_or_else(
        || "<unknown>".to_owned(),
        |t| human_age(now.timestamp() - t.0.as_second())
    ))
}

fn or_none(text: String) -> Value {
    json!(if text.is_empty() {
        "<none>".into()
    } else {
        text
    })
}

/// `k=v,…` of a map, as kubectl prints selectors and node selectors.
fn pairs(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn selector(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return String::new();
    };
    let mut parts = vec![pairs(selector.match_labels.as_ref())];
    for e in selector.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "In" => format!("{} in ({values})", e.key),
            "NotIn" => format!("{} notin ({values})", e.key),
            "Exists" => e.key.clone(),
            _ => format!("!{}", e.key),
        });
    }
    parts.retain(|p| !p.is_empty());
    parts.join(",")
}

/// The containers' names and images of a pod template.
fn containers(template: Option<&PodTemplateSpec>) -> (Value, Value) {
    let containers = template
        .and_then(|t| t.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.image.as_deref().unwrap_or_default())
        .collect();
    (json!(names.join(",")), json!(images.join(",")))
}

fn pod(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let pod: Pod = typed(object);
    let spec = pod.spec.unwrap_or_default();
    let status = pod.status.unwrap_or_default();
    let statuses = status.container_statuses.unwrap_or_default();
    let ready = statuses.iter().filter(|s| s.ready).count();
    let mut reason = status
        .reason
        .clone()
        .or(status.phase.clone())
        .unwrap_or_default();
    let mut running = false;
    for s in statuses.iter().rev() {
        let state = s.state.clone().unwrap_or_default();
        if let Some(waiting) = state.waiting.as_ref().and_then(|w| w.reason.clone()) {
            reason = waiting;
        } else if let Some(terminated) = &state.terminated {
            reason = terminated.reason.clone().unwrap_or_else(|| {
                terminated.signal.map_or_else(
                    || format!("ExitCode:{}", terminated.exit_code),
                    |signal| format!("Signal:{signal}"),
                )
            });
        } else if state.running.is_some() && s.ready {
            running = true;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".into();
    }
    if pod.metadata.deletion_timestamp.is_some() {
        reason = if status.reason.as_deref() == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let restarts: i32 = statuses.iter().map(|s| s.restart_count).sum();
    let last_restart = statuses
        .iter()
        .filter_map(|s| {
            s.last_state
                .as_ref()?
                .terminated
                .as_ref()?
                .finished_at
                .clone()
        })
        .max_by_key(|t| t.0);
    let restarts = match last_restart {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_age(now.timestamp() - t.0.as_second())
        ),
        _ => restarts.to_string(),
    };
    let gates = spec.readiness_gates.unwrap_or_default();
    let gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let conditions = status.conditions.unwrap_or_default();
        let passed = gates
            .iter()
            .filter(|g| {
                conditions
                    .iter()
                    .any(|c| c.type_ == g.condition_type && c.status == "True")
            })
            .count();
        format!("{passed}/{}", gates.len())
    };
    vec![
        name(object),
        json!(format!("{ready}/{}", spec.containers.len())),
        json!(reason),
        json!(restarts),
        age(pod.metadata.creation_timestamp.as_ref(), now),
        or_none(status.pod_ip.unwrap_or_default()),
        or_none(spec.node_name.unwrap_or_default()),
        or_none(status.nominated_node_name.unwrap_or_default()),
        json!(gates),
    ]
}

fn deployment(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let d: Deployment = typed(object);
    let spec = d.spec.unwrap_or_default();
    let status = d.status.unwrap_or_default();
    let (names, images) = containers(Some(&spec.template));
    vec![
        name(object),
        json!(format!(
            "{}/{}",
            status.ready_replicas.unwrap_or(0),
            spec.replicas.unwrap_or(0)
        )),
        json!(status.updated_replicas.unwrap_or(0)),
        json!(status.available_replicas.unwrap_or(0)),
        age(d.metadata.creation_timestamp.as_ref(), now),
        names,
        images,
        or_none(selector(Some(&spec.selector))),
    ]
}

fn daemon_set(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let d: DaemonSet = typed(object);
    let spec = d.spec.unwrap_or_default();
    let status = d.status.unwrap_or_default();
    let (names, images) = containers(Some(&spec.template));
    let node_selector = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref());
    vec![
        name(object),
        json!(status.desired_number_scheduled),
        json!(status.current_number_scheduled),
        json!(status.number_ready),
        json!(status.updated_number_scheduled.unwrap_or(0)),
        json!(status.number_available.unwrap_or(0)),
        or_none(pairs(node_selector)),
        age(d.metadata.creation_timestamp.as_ref(), now),
        names,
        images,
        or_none(selector(Some(&spec.selector))),
    ]
}

fn stateful_set(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let s: StatefulSet = typed(object);
    let spec = s.spec.unwrap_or_default();
    let status = s.status.unwrap_or_default();
    let (names, images) = containers(Some(&spec.template));
    vec![
        name(object),
        json!(format!(
            "{}/{}",
            status.ready_replicas.unwrap_or(0),
            spec.replicas.unwrap_or(0)
        )),
        age(s.metadata.creation_timestamp.as_ref(), now),
        names,
        images,
    ]
}

fn service(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let s: Service = typed(object);
    let spec = s.spec.unwrap_or_default();
    let type_ = spec.type_.clone().unwrap_or_else(|| "ClusterIP".into());
    let mut external: Vec<String> = Vec::new();
    if type_ == "LoadBalancer" {
        for ingress in s
            .status
            .and_then(|st| st.load_balancer)
            .and_then(|lb| lb.ingress)
            .unwrap_or_default()
        {
            external.extend(ingress.ip.or(ingress.hostname));
        }
    }
    external.extend(spec.external_ips.clone().unwrap_or_default());
    let external = match (external.is_empty(), type_.as_str()) {
        (true, "LoadBalancer") => "<pending>".to_owned(),
        (true, "ExternalName") => spec.external_name.clone().unwrap_or_default(),
        _ => external.join(","),
    };
    let ports: Vec<String> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            let protocol = p.protocol.as_deref().unwrap_or("TCP");
            match p.node_port {
                Some(node) if node > 0 => format!("{}:{node}/{protocol}", p.port),
                _ => format!("{}/{protocol}", p.port),
            }
        })
        .collect();
    vec![
        name(object),
        json!(type_),
        or_none(spec.cluster_ip.clone().unwrap_or_default()),
        or_none(external),
        or_none(ports.join(",")),
        age(s.metadata.creation_timestamp.as_ref(), now),
        or_none(pairs(spec.selector.as_ref())),
    ]
}

fn endpoint_slice(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let s: EndpointSlice = typed(object);
    let ports: Vec<String> = s
        .ports
        .iter()
        .flatten()
        .map(|p| {
            p.port
                .map_or_else(|| "<unset>".to_owned(), |p| p.to_string())
        })
        .collect();
    let addresses: Vec<&String> = s
        .endpoints
        .iter()
        .flatten()
        .flat_map(|e| &e.addresses)
        .collect();
    let shown: Vec<&str> = addresses.iter().take(3).map(|a| a.as_str()).collect();
    let mut endpoints = shown.join(",");
    if addresses.len() > 3 {
        endpoints.push_str(&format!(" + {} more...", addresses.len() - 3));
    }
    vec![
        name(object),
        json!(s.address_type),
        json!(if ports.is_empty() {
            "<unset>".to_owned()
        } else {
            ports.join(",")
        }),
        json!(if endpoints.is_empty() {
            "<unset>".to_owned()
        } else {
            endpoints
        }),
        age(s.metadata.creation_timestamp.as_ref(), now),
    ]
}

fn node(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let n: Node = typed(object);
    let status = n.status.unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.as_str());
    let mut state = match ready {
        Some("True") => "Ready",
        Some("False") => "NotReady",
        _ => "Unknown",
    }
    .to_owned();
    if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        state.push_str(",SchedulingDisabled");
    }
    let roles: Vec<&str> = n
        .metadata
        .labels
        .iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/"))
        .collect();
    let address = |kind: &str| {
        status
            .addresses
            .iter()
            .flatten()
            .find(|a| a.type_ == kind)
            .map(|a| a.address.clone())
            .unwrap_or_default()
    };
    let info = status.node_info.clone().unwrap_or_default();
    vec![
        name(object),
        json!(state),
        or_none(roles.join(",")),
        age(n.metadata.creation_timestamp.as_ref(), now),
        json!(info.kubelet_version),
        or_none(address("InternalIP")),
        or_none(address("ExternalIP")),
        json!(info.os_image),
        json!(info.kernel_version),
        json!(info.container_runtime_version),
    ]
}

fn event(object: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let e: Event = typed(object);
    let first = e
        .first_timestamp
        .clone()
        .or_else(|| e.event_time.as_ref().map(|t| Time(t.0)));
    let last = e.last_timestamp.clone().or_else(|| first.clone());
    let involved = &e.involved_object;
    let source = e.source.clone().unwrap_or_default();
    let source = [source.component, source.host]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
    vec![
        age(last.as_ref(), now),
        json!(e.type_.unwrap_or_default()),
        json!(e.reason.unwrap_or_default()),
        json!(format!(
            "{}/{}",
            involved.kind.as_deref().unwrap_or_default().to_lowercase(),
            involved.name.as_deref().unwrap_or_default()
        )),
        json!(involved.field_path.clone().unwrap_or_default()),
        json!(source),
        json!(e.message.unwrap_or_default()),
        age(first.as_ref(), now),
        json!(e.count.unwrap_or(1)),
        name(object),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-12-07T12:00:00Z".parse().unwrap()
    }

    fn cells(group: &str, plural: &str, object: Value) -> Vec<(String, Value)> {
        let printer = printer(group, plural).unwrap();
        let row = (printer.row)(&object, now());
        assert_eq!(row.len(), printer.columns.len(), "a cell per column");
        printer
            .columns
            .iter()
            .map(|c| c.name.to_owned())
            .zip(row)
            .collect()
    }

    fn cell(cells: &[(String, Value)], column: &str) -> Value {
        cells
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, v)| v.clone())
            .unwrap()
    }

    #[test]
    fn a_pod_reads_as_kubectl_prints_it() {
        let pod = json!({
            "metadata": {"name": "web", "creationTimestamp": "2026-12-07T11:00:00Z"},
            "spec": {"nodeName": "local", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "image": "x", "imageID": "",
                 "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-12-07T11:55:00Z"}}},
                {"name": "b", "ready": false, "restartCount": 0, "image": "x", "imageID": "",
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}
        });
        let c = cells("", "pods", pod);
        assert_eq!(cell(&c, "Ready"), json!("1/2"));
        assert_eq!(cell(&c, "Status"), json!("CrashLoopBackOff"));
        assert_eq!(cell(&c, "Restarts"), json!("2 (5m ago)"));
        assert_eq!(cell(&c, "Age"), json!("60m"));
        assert_eq!(cell(&c, "IP"), json!("10.0.0.1"));
        assert_eq!(cell(&c, "Node"), json!("local"));
        assert_eq!(cell(&c, "Nominated Node"), json!("<none>"));
    }

    #[test]
    fn a_terminating_pod_says_so() {
        let pod = json!({
            "metadata": {"name": "web", "deletionTimestamp": "2026-12-07T11:59:00Z"},
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running"}
        });
        assert_eq!(
            cell(&cells("", "pods", pod), "Status"),
            json!("Terminating")
        );
    }

    #[test]
    fn workloads_count_their_replicas() {
        let template = json!({"spec": {"containers": [{"name": "envoy", "image": "envoy:1.40"}]}});
        let deployment = json!({
            "metadata": {"name": "d"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}}, "template": template},
            "status": {"readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}
        });
        let c = cells("apps", "deployments", deployment);
        assert_eq!(cell(&c, "Ready"), json!("1/2"));
        assert_eq!(cell(&c, "Up-to-date"), json!(2));
        assert_eq!(cell(&c, "Available"), json!(1));
        assert_eq!(cell(&c, "Images"), json!("envoy:1.40"));
        assert_eq!(cell(&c, "Selector"), json!("app=d"));
        let daemon_set = json!({
            "metadata": {"name": "ds"},
            "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": template},
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
                       "numberReady": 2, "numberMisscheduled": 0}
        });
        let c = cells("apps", "daemonsets", daemon_set);
        assert_eq!(cell(&c, "Desired"), json!(3));
        assert_eq!(cell(&c, "Ready"), json!(2));
        assert_eq!(cell(&c, "Node Selector"), json!("<none>"));
        let stateful_set = json!({
            "metadata": {"name": "ss"},
            "spec": {"replicas": 1, "serviceName": "ss", "selector": {}, "template": template},
            "status": {"replicas": 1, "readyReplicas": 1}
        });
        assert_eq!(
            cell(&cells("apps", "statefulsets", stateful_set), "Ready"),
            json!("1/1")
        );
    }

    #[test]
    fn services_and_slices_show_their_addresses_and_ports() {
        let service = json!({
            "metadata": {"name": "lb"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10",
                     "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]},
            "status": {"loadBalancer": {}}
        });
        let c = cells("", "services", service);
        assert_eq!(cell(&c, "External-IP"), json!("<pending>"));
        assert_eq!(cell(&c, "Port(s)"), json!("80:30080/TCP,53/UDP"));
        assert_eq!(cell(&c, "Selector"), json!("<none>"));
        let endpoints: Vec<Value> = (1..=5)
            .map(|n| json!({"addresses": [format!("10.0.0.{n}")]}))
            .collect();
        let slice = json!({
            "metadata": {"name": "s"}, "addressType": "IPv4",
            "ports": [{"port": 8080}],
            "endpoints": endpoints
        });
        let c = cells("discovery.k8s.io", "endpointslices", slice);
        assert_eq!(cell(&c, "Ports"), json!("8080"));
        assert_eq!(
            cell(&c, "Endpoints"),
            json!("10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...")
        );
    }

    #[test]
    fn nodes_and_events_read_as_kubectl_prints_them() {
        let node = json!({
            "metadata": {"name": "local", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"kubeletVersion": "v1.36.0", "architecture": "", "bootID": "",
                                    "containerRuntimeVersion": "", "kernelVersion": "",
                                    "kubeProxyVersion": "", "machineID": "", "operatingSystem": "",
                                    "osImage": "", "systemUUID": ""}}
        });
        let c = cells("", "nodes", node);
        assert_eq!(cell(&c, "Status"), json!("Ready,SchedulingDisabled"));
        assert_eq!(cell(&c, "Roles"), json!("control-plane"));
        assert_eq!(cell(&c, "Version"), json!("v1.36.0"));
        let event = json!({
            "metadata": {"name": "web.1"},
            "involvedObject": {"kind": "ServiceWithHealthchecks", "name": "web"},
            "type": "Warning", "reason": "ProbeFailed", "message": "refused",
            "lastTimestamp": "2026-12-07T11:59:30Z", "count": 3
        });
        let c = cells("", "events", event);
        assert_eq!(cell(&c, "Last Seen"), json!("30s"));
        assert_eq!(cell(&c, "Object"), json!("servicewithhealthchecks/web"));
        assert_eq!(cell(&c, "Count"), json!(3));
    }

    #[test]
    fn other_kinds_have_no_printer() {
        assert!(printer("", "configmaps").is_none());
        assert!(printer("gateway.networking.k8s.io", "gateways").is_none());
    }
}
