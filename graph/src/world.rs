//! What the graph reads beside the translator's input: the statuses controllers wrote (the
//! index keeps them apart from the specs), ServiceWithHealthchecks with their probe results,
//! and the proxy workloads of the ALB instances. [`read`] sorts any object given as JSON
//! into the input or the world, so a file, a cluster listing and the service's watches
//! all build the same thing.

use std::collections::HashMap;
use std::sync::Arc;

use fairlead_edge_model::input::{GATEWAY_GROUP, Input, InputError};
use fairlead_key::ObjectKey;
use serde::Deserialize;

use crate::id::NodeId;

/// The group of the Deckhouse network resources (ALB instances, ServiceWithHealthchecks).
pub const NETWORK_GROUP: &str = "network.deckhouse.io";

pub use fairlead_edge_model::names::{CLUSTER_NAMESPACE, GATEWAY_LABEL};

/// A port of a ServiceWithHealthchecks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckPort {
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Port.
    pub port: i32,
    /// The pods' port (a number; the port when absent).
    #[serde(default)]
    pub target_port: Option<i32>,
}

/// What a ServiceWithHealthchecks' controller and agents report (the fields the graph reads
/// of the health module's status).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckStatus {
    /// Conditions.
    #[serde(default)]
    pub conditions: Vec<serde_json::Value>,
    /// One entry per pod.
    #[serde(default)]
    pub endpoint_statuses: Vec<PodProbes>,
    /// Counts.
    #[serde(default)]
    pub healthcheck_condition: Option<CheckCounts>,
}

/// The probe results of one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodProbes {
    /// The pod.
    pub pod_name: String,
    /// The failing probes, `<mode>:<podIP>:<port>`.
    #[serde(default)]
    pub failed_probes: Vec<String>,
    /// Why they fail.
    #[serde(default)]
    pub failure_reasons: Vec<String>,
}

/// Pods probed and ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckCounts {
    /// Pods probed.
    #[serde(default)]
    pub endpoints: i32,
    /// Pods passing every probe.
    #[serde(default)]
    pub ready_endpoints: i32,
}

/// A ServiceWithHealthchecks: its ports and what its agents report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Check {
    /// Namespace and name (its child Service has the same).
    pub key: ObjectKey,
    /// Ports.
    pub ports: Vec<CheckPort>,
    /// Status.
    pub status: Option<CheckStatus>,
}

/// A proxy workload (Deployment or DaemonSet labelled with its Gateway).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// `Deployment` or `DaemonSet`.
    pub kind: String,
    /// Namespace and name.
    pub key: ObjectKey,
    /// The Gateway's name (in the workload's namespace).
    pub gateway: String,
    /// Replicas wanted (pods scheduled, for a DaemonSet).
    pub desired: i32,
    /// Replicas ready.
    pub ready: i32,
}

/// Everything the graph reads besides the translator's input.
#[derive(Clone, Debug, Default)]
pub struct World {
    /// The `status` of Gateway API objects and ALB instances, by node id (shared: a reader
    /// that keeps them between worlds lets the builder see an unchanged one at a glance).
    pub statuses: HashMap<NodeId, Arc<serde_json::Value>>,
    /// ServiceWithHealthchecks.
    pub checks: Vec<Check>,
    /// Proxy workloads.
    pub workloads: Vec<Workload>,
}

/// The group a kind's node ids use (ListenerSets are drawn as the standard kind whichever
/// group served them).
pub fn group_of(kind: &str) -> &'static str {
    match kind {
        "Service" | "Secret" | "ConfigMap" => "",
        "EndpointSlice" => "discovery.k8s.io",
        "Deployment" | "DaemonSet" => "apps",
        "ClusterALBInstance" | "ALBInstance" | "ServiceWithHealthchecks" => NETWORK_GROUP,
        _ => GATEWAY_GROUP,
    }
}

/// The node id of an object of `kind`.
pub fn object_id(kind: &str, key: &ObjectKey) -> NodeId {
    let kind = if kind == "XListenerSet" {
        "ListenerSet"
    } else {
        kind
    };
    NodeId::new(group_of(kind), kind, key.namespace(), key.name())
}

/// Kinds whose `status` the graph reads from the object itself.
fn status_read(kind: &str) -> bool {
    matches!(
        kind,
        "GatewayClass"
            | "Gateway"
            | "ListenerSet"
            | "XListenerSet"
            | "HTTPRoute"
            | "GRPCRoute"
            | "TLSRoute"
            | "TCPRoute"
            | "UDPRoute"
            | "BackendTLSPolicy"
            | "ClusterALBInstance"
            | "ALBInstance"
    )
}

/// An object the graph cannot read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not YAML.
    #[error("document {index}: {source}")]
    Parse {
        /// Position in the stream.
        index: usize,
        /// Why.
        source: serde_yaml_ng::Error,
    },
    /// The translator's input refused it.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A ServiceWithHealthchecks or workload that is not one.
    #[error("{kind} {name}: {source}")]
    Object {
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// Sorts `object` (a whole object with its `kind`) into `input` or `world`; `Ok(false)` for
/// kinds the graph does not draw.
pub fn read(
    input: &mut Input,
    world: &mut World,
    object: serde_json::Value,
) -> Result<bool, ReadError> {
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let meta = &object["metadata"];
    let key = ObjectKey::new(
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    );
    let invalid = |source| ReadError::Object {
        kind: kind.clone(),
        name: key.to_string(),
        source,
    };
    match kind.as_str() {
        "ServiceWithHealthchecks" => {
            #[derive(Deserialize)]
            struct Spec {
                #[serde(default)]
                ports: Vec<CheckPort>,
            }
            let spec = Spec::deserialize(&object["spec"]).map_err(invalid)?;
            let status = match object.get("status") {
                Some(s) if !s.is_null() => Some(CheckStatus::deserialize(s).map_err(invalid)?),
                _ => None,
            };
            world.checks.push(Check {
                key,
                ports: spec.ports,
                status,
            });
            Ok(true)
        }
        "Deployment" | "DaemonSet" => {
            let Some(gateway) = meta["labels"][GATEWAY_LABEL].as_str() else {
                return Ok(false);
            };
            let int = |pointer: &str| {
                object
                    .pointer(pointer)
                    .and_then(serde_json::Value::as_i64)
                    .and_then(|n| i32::try_from(n).ok())
            };
            let (desired, ready) = if kind == "Deployment" {
                (
                    int("/spec/replicas").unwrap_or(1),
                    int("/status/readyReplicas").unwrap_or(0),
                )
            } else {
                (
                    int("/status/desiredNumberScheduled").unwrap_or(0),
                    int("/status/numberReady").unwrap_or(0),
                )
            };
            world.workloads.push(Workload {
                kind,
                key,
                gateway: gateway.to_owned(),
                desired,
                ready,
            });
            Ok(true)
        }
        _ => {
            read_status(world, &object);
            Ok(input.add(object)?)
        }
    }
}

/// Takes the `status` of a Gateway API object or ALB instance given as JSON (its `kind`,
/// `metadata` and `status`; the spec is not read); whether it was one with a status.
pub fn read_status(world: &mut World, object: &serde_json::Value) -> bool {
    let kind = object["kind"].as_str().unwrap_or_default();
    match status_of(kind, object) {
        Some((id, status)) => {
            world.statuses.insert(id, Arc::new(status));
            true
        }
        None => false,
    }
}

/// The node id and `status` of a Gateway API object or ALB instance of `kind` given as JSON,
/// when it has one.
pub fn status_of(kind: &str, object: &serde_json::Value) -> Option<(NodeId, serde_json::Value)> {
    let meta = &object["metadata"];
    let key = ObjectKey::new(
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    );
    let status = object.get("status").filter(|s| !s.is_null())?;
    status_read(kind).then(|| (object_id(kind, &key), status.clone()))
}

/// Reads a stream of YAML documents into an input and a world.
pub fn from_yaml(text: &str) -> Result<(Input, World), ReadError> {
    let mut input = Input::default();
    let mut world = World::default();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(document)
            .map_err(|source| ReadError::Parse { index, source })?;
        if value.is_null() {
            continue;
        }
        read(&mut input, &mut world, value)?;
    }
    Ok((input, world))
}

/// Fills in, for every object of `input` that `world` has no status for, the status
/// fairlead's translator decides for it — what its control plane would write. For fixtures
/// and benchmarks, whose objects carry no statuses of their own.
pub fn decided_statuses(input: &Input, world: &mut World) {
    let statuses = fairlead_edge_translate::statuses(input, fairlead_edge_model::CONTROLLER_NAME);
    let mut put = |id: NodeId, status: serde_json::Value| {
        world.statuses.entry(id).or_insert_with(|| Arc::new(status));
    };
    for (name, conditions) in statuses.gateway_classes {
        put(
            object_id("GatewayClass", &ObjectKey::cluster(name)),
            serde_json::json!({"conditions": conditions}),
        );
    }
    for (key, status) in statuses.gateways {
        put(
            object_id("Gateway", &key),
            serde_json::to_value(status).unwrap_or_default(),
        );
    }
    for (key, status) in statuses.listener_sets {
        put(
            object_id("ListenerSet", &key),
            serde_json::to_value(status).unwrap_or_default(),
        );
    }
    for (route, parents) in statuses.routes {
        put(
            object_id(route.kind, &route.key),
            serde_json::json!({"parents": parents}),
        );
    }
    for (key, ancestors) in statuses.backend_tls_policies {
        put(
            object_id("BackendTLSPolicy", &key),
            serde_json::json!({"ancestors": ancestors}),
        );
    }
}
