//! The controller's decisions: the child Service of a resource, its status (conditions and
//! counts), the endpoint statuses of pods that are gone, and the slices of nodes and resources
//! that are gone.

use std::collections::{BTreeMap, BTreeSet};

use fairlead_health_api::{HealthcheckCondition, MANAGED_BY, ServiceWithHealthchecks};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::NODE_LABEL;

/// Metadata keys never propagated to the child Service.
const NOT_PROPAGATED: [&str; 3] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    "meta.helm.sh/release-name",
    "meta.helm.sh/release-namespace",
];

/// The tracking annotation listing the propagated annotation keys (Deckhouse's name).
pub const PROPAGATED_ANNOTATIONS: &str = "network.deckhouse.io/propagated-annotations";
/// The tracking annotation listing the propagated label keys (Deckhouse's name).
pub const PROPAGATED_LABELS: &str = "network.deckhouse.io/propagated-labels";

/// Why there is no child Service to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServiceConflict {
    /// A Service of that name exists and is not controlled by this resource.
    Foreign,
    /// The resource asks for a clusterIP other than the Service's.
    ClusterIpImmutable,
}

fn controlled_by(service: &Service, swh: &ServiceWithHealthchecks) -> bool {
    service
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && Some(r.uid.as_str()) == swh.metadata.uid.as_deref())
}

fn propagated(map: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    map.into_iter()
        .flatten()
        .filter(|(k, _)| {
            !NOT_PROPAGATED.contains(&k.as_str())
                && k.as_str() != PROPAGATED_ANNOTATIONS
                && k.as_str() != PROPAGATED_LABELS
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The child Service of `swh`, given the Service of that name if one exists: same name, an
/// empty selector (so no other controller publishes endpoints for it), a controller owner
/// reference, the ports with `targetPort` defaulted and existing node ports kept, the
/// clusterIP kept, traffic policies, and the resource's labels and annotations.
pub fn child_service(
    swh: &ServiceWithHealthchecks,
    existing: Option<&Service>,
) -> Result<Service, ServiceConflict> {
    if let Some(existing) = existing
        && !controlled_by(existing, swh)
    {
        return Err(ServiceConflict::Foreign);
    }
    let spec = &swh.spec;
    let existing_spec = existing.and_then(|s| s.spec.as_ref());
    if let (Some(wanted), Some(current)) = (
        spec.cluster_ip.as_deref(),
        existing_spec.and_then(|s| s.cluster_ip.as_deref()),
    ) && !wanted.is_empty()
        && wanted != current
    {
        return Err(ServiceConflict::ClusterIpImmutable);
    }
    let type_ = spec.type_.clone().unwrap_or_else(|| "ClusterIP".into());
    let exposes_nodes = matches!(type_.as_str(), "NodePort" | "LoadBalancer");
    let ports = spec
        .ports
        .iter()
        .map(|p| {
            let existing_node_port = existing_spec
                .and_then(|s| s.ports.as_ref())
                .into_iter()
                .flatten()
                .find(|e| e.port == p.port && e.protocol.as_deref().unwrap_or("TCP") == p.protocol)
                .and_then(|e| e.node_port);
            ServicePort {
                name: p.name.clone(),
                protocol: Some(p.protocol.clone()),
                port: p.port,
                target_port: Some(IntOrString::Int(p.effective_target_port())),
                node_port: if exposes_nodes {
                    p.node_port.or(existing_node_port)
                } else {
                    None
                },
                app_protocol: p.app_protocol.clone(),
            }
        })
        .collect();
    let labels = propagated(swh.metadata.labels.as_ref());
    let mut annotations = propagated(swh.metadata.annotations.as_ref());
    let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>().join(",");
    annotations.insert(PROPAGATED_LABELS.into(), keys(&labels));
    let annotation_keys = keys(
        &annotations
            .iter()
            .filter(|(k, _)| k.as_str() != PROPAGATED_LABELS)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    annotations.insert(PROPAGATED_ANNOTATIONS.into(), annotation_keys);
    Ok(Service {
        metadata: ObjectMeta {
            name: swh.metadata.name.clone(),
            namespace: swh.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "network.deckhouse.io/v1alpha1".into(),
                kind: "ServiceWithHealthchecks".into(),
                name: swh.metadata.name.clone().unwrap_or_default(),
                uid: swh.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(false),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::new()),
            ports: Some(ports),
            type_: Some(type_),
            cluster_ip: spec
                .cluster_ip
                .clone()
                .or_else(|| existing_spec.and_then(|s| s.cluster_ip.clone())),
            external_traffic_policy: if exposes_nodes {
                Some(
                    spec.external_traffic_policy
                        .clone()
                        .unwrap_or_else(|| "Cluster".into()),
                )
            } else {
                None
            },
            internal_traffic_policy: Some(
                spec.internal_traffic_policy
                    .clone()
                    .unwrap_or_else(|| "Cluster".into()),
            ),
            publish_not_ready_addresses: spec.publish_not_ready_addresses,
            session_affinity: spec.session_affinity.clone(),
            session_affinity_config: spec.session_affinity_config.clone(),
            external_ips: spec.external_ips.clone(),
            external_name: spec.external_name.clone(),
            load_balancer_class: spec.load_balancer_class.clone(),
            load_balancer_ip: spec.load_balancer_ip.clone(),
            load_balancer_source_ranges: spec.load_balancer_source_ranges.clone(),
            allocate_load_balancer_node_ports: spec.allocate_load_balancer_node_ports,
            health_check_node_port: spec.health_check_node_port,
            ip_families: spec.ip_families.clone(),
            ip_family_policy: spec.ip_family_policy.clone(),
            traffic_distribution: spec.traffic_distribution.clone(),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

/// A condition as the controller computes it (status, reason, message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionState {
    /// `Ready` or `ChildServiceReady`.
    pub type_: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// Reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

/// The `ChildServiceReady` condition of a child-Service decision.
pub fn child_service_condition(decision: &Result<Service, ServiceConflict>) -> ConditionState {
    match decision {
        Ok(_) => ConditionState { type_: "ChildServiceReady", status: "True", reason: "ChildServiceWasCreated", message: "Service was created successfully".into() },
        Err(ServiceConflict::Foreign) => ConditionState {
            type_: "ChildServiceReady",
            status: "False",
            reason: "ChildServiceConflict",
            message: "a Service of this name exists and is not controlled by this resource; it is left untouched".into(),
        },
        Err(ServiceConflict::ClusterIpImmutable) => ConditionState {
            type_: "ChildServiceReady",
            status: "False",
            reason: "ChildServiceClusterIPImmutable",
            message: "spec.clusterIP differs from the existing Service's, which cannot change".into(),
        },
    }
}

/// The `Ready` condition and the counts, from the agents' endpoint statuses.
pub fn readiness(swh: &ServiceWithHealthchecks) -> (ConditionState, HealthcheckCondition) {
    let entries = swh
        .status
        .as_ref()
        .map(|s| s.endpoint_statuses.as_slice())
        .unwrap_or_default();
    let total = entries.len();
    let ready = entries
        .iter()
        .filter(|e| e.ready && e.probes_successful)
        .count();
    let condition = if total > 0 && ready == total {
        ConditionState {
            type_: "Ready",
            status: "True",
            reason: "AllEndpointsAreReady",
            message: "All endpoints are ready".into(),
        }
    } else {
        ConditionState {
            type_: "Ready",
            status: "False",
            reason: "NotAllEndpointsAreReady",
            message: if total == 0 {
                "No endpoints".into()
            } else {
                format!("{ready} of {total} endpoints are ready")
            },
        }
    };
    let counts = HealthcheckCondition {
        observed_generation: swh.metadata.generation,
        endpoints: i32::try_from(total).unwrap_or(i32::MAX),
        ready_endpoints: i32::try_from(ready).unwrap_or(i32::MAX),
    };
    (condition, counts)
}

/// The fields of the status the controller owns.
pub const STATUS_FIELDS: [&str; 5] = [
    "conditions",
    "healthcheckCondition",
    "clusterIP",
    "clusterIPs",
    "loadBalancer",
];

/// A condition as the status carries it (its `lastTransitionTime` is the writer's: kept from
/// the stored one while its status stays).
fn condition_json(state: &ConditionState, generation: Option<i64>) -> serde_json::Value {
    serde_json::json!({"type": state.type_, "status": state.status, "reason": state.reason,
        "message": state.message, "observedGeneration": generation.unwrap_or(0)})
}

/// The status the controller owns: the `ChildServiceReady` condition of the child-Service
/// decision, the `Ready` condition and counts of the agents' entries, and the child
/// Service's cluster IPs (and load balancer, for a LoadBalancer Service).
pub fn desired_status(
    swh: &ServiceWithHealthchecks,
    child: &ConditionState,
    service: Option<&Service>,
) -> serde_json::Value {
    let (ready, counts) = readiness(swh);
    let generation = swh.metadata.generation;
    let mut status = serde_json::json!({
        "conditions": [condition_json(child, generation), condition_json(&ready, generation)],
        "healthcheckCondition": counts,
    });
    let spec = service.and_then(|s| s.spec.as_ref());
    if let Some(ip) = spec.and_then(|s| s.cluster_ip.clone()) {
        status["clusterIP"] = serde_json::json!(ip);
    }
    if let Some(ips) = spec.and_then(|s| s.cluster_ips.clone()) {
        status["clusterIPs"] = serde_json::json!(ips);
    }
    if spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
        && let Some(lb) = service
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.load_balancer.clone())
    {
        status["loadBalancer"] = serde_json::json!(lb);
    }
    status
}

/// Whether the stored status already carries every field of `desired` as it is.
pub fn status_unchanged(desired: &serde_json::Value, current: &serde_json::Value) -> bool {
    STATUS_FIELDS.iter().all(|field| {
        desired
            .get(*field)
            .is_none_or(|v| current.get(*field) == Some(v))
    })
}

/// Indexes (in `status.endpointStatuses`) of entries whose pod no longer exists.
pub fn stale_entries(swh: &ServiceWithHealthchecks, live_pods: &BTreeSet<String>) -> Vec<usize> {
    swh.status
        .as_ref()
        .map(|s| s.endpoint_statuses.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .filter(|(_, e)| !live_pods.contains(&e.pod_name))
        .map(|(i, _)| i)
        .collect()
}

/// Slices managed by the module whose node or resource no longer exists, as
/// `(namespace, name)`. `resources` holds `namespace/name` of existing resources.
pub fn orphaned_slices(
    slices: &[EndpointSlice],
    resources: &BTreeSet<String>,
    nodes: &BTreeSet<String>,
) -> Vec<(String, String)> {
    slices
        .iter()
        .filter(|s| {
            let labels = s.metadata.labels.clone().unwrap_or_default();
            if labels
                .get("endpointslice.kubernetes.io/managed-by")
                .map(String::as_str)
                != Some(MANAGED_BY)
            {
                return false;
            }
            let namespace = s.metadata.namespace.clone().unwrap_or_default();
            let resource_gone = labels
                .get("kubernetes.io/service-name")
                .is_none_or(|name| !resources.contains(&format!("{namespace}/{name}")));
            let node_gone = labels
                .get(NODE_LABEL)
                .is_none_or(|node| !nodes.contains(node));
            resource_gone || node_gone
        })
        .map(|s| {
            (
                s.metadata.namespace.clone().unwrap_or_default(),
                s.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_health_api::{
        EndpointStatus, ServiceWithHealthchecksSpec, ServiceWithHealthchecksStatus,
    };

    fn swh() -> ServiceWithHealthchecks {
        let mut swh = ServiceWithHealthchecks::new(
            "db",
            ServiceWithHealthchecksSpec {
                ports: vec![fairlead_health_api::ServicePort {
                    name: Some("pg".into()),
                    protocol: "TCP".into(),
                    port: 5432,
                    ..Default::default()
                }],
                type_: Some("NodePort".into()),
                ..ServiceWithHealthchecksSpec::default()
            },
        );
        swh.metadata.namespace = Some("default".into());
        swh.metadata.uid = Some("u1".into());
        swh.metadata.labels = Some(BTreeMap::from([("app".into(), "db".into())]));
        swh.metadata.annotations = Some(BTreeMap::from([
            ("team".into(), "data".into()),
            (
                "kubectl.kubernetes.io/last-applied-configuration".into(),
                "{}".into(),
            ),
        ]));
        swh
    }

    #[test]
    fn the_child_service_is_selectorless_owned_and_keeps_what_the_cluster_assigned() {
        let swh = swh();
        let first = child_service(&swh, None).unwrap();
        let spec = first.spec.clone().unwrap();
        assert_eq!(spec.selector, Some(BTreeMap::new()));
        assert_eq!(
            spec.ports.as_ref().unwrap()[0].target_port,
            Some(IntOrString::Int(5432))
        );
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(
            first.metadata.owner_references.as_ref().unwrap()[0].uid,
            "u1"
        );
        let annotations = first.metadata.annotations.clone().unwrap();
        assert_eq!(annotations["team"], "data");
        assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        assert_eq!(annotations[PROPAGATED_LABELS], "app");
        assert_eq!(annotations[PROPAGATED_ANNOTATIONS], "team");

        let mut stored = first.clone();
        let s = stored.spec.as_mut().unwrap();
        s.cluster_ip = Some("10.96.0.10".into());
        s.ports.as_mut().unwrap()[0].node_port = Some(30432);
        let again = child_service(&swh, Some(&stored)).unwrap().spec.unwrap();
        assert_eq!(again.cluster_ip.as_deref(), Some("10.96.0.10"));
        assert_eq!(again.ports.unwrap()[0].node_port, Some(30432));
    }

    #[test]
    fn foreign_services_and_cluster_ip_changes_are_conflicts() {
        let swh = swh();
        let foreign = Service {
            metadata: ObjectMeta {
                name: Some("db".into()),
                ..ObjectMeta::default()
            },
            ..Service::default()
        };
        let decision = child_service(&swh, Some(&foreign));
        assert_eq!(decision, Err(ServiceConflict::Foreign));
        assert_eq!(
            child_service_condition(&decision).reason,
            "ChildServiceConflict"
        );
        let mut owned = child_service(&swh, None).unwrap();
        owned.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.10".into());
        let mut wants_other = swh.clone();
        wants_other.spec.cluster_ip = Some("10.96.0.11".into());
        assert_eq!(
            child_service(&wants_other, Some(&owned)),
            Err(ServiceConflict::ClusterIpImmutable)
        );
    }

    #[test]
    fn readiness_counts_entries_and_stale_ones_are_found() {
        let mut swh = swh();
        let entry = |pod: &str, ok: bool| EndpointStatus {
            pod_name: pod.into(),
            ready: true,
            probes_successful: ok,
            ..Default::default()
        };
        assert_eq!(readiness(&swh).0.reason, "NotAllEndpointsAreReady");
        swh.status = Some(ServiceWithHealthchecksStatus {
            endpoint_statuses: vec![entry("a", true), entry("b", false)],
            ..Default::default()
        });
        let (condition, counts) = readiness(&swh);
        assert_eq!(
            (condition.status, counts.endpoints, counts.ready_endpoints),
            ("False", 2, 1)
        );
        swh.status.as_mut().unwrap().endpoint_statuses[1].probes_successful = true;
        assert_eq!(readiness(&swh).0.reason, "AllEndpointsAreReady");
        assert_eq!(
            stale_entries(&swh, &BTreeSet::from(["a".to_owned()])),
            vec![1]
        );
    }

    #[test]
    fn slices_of_gone_nodes_and_resources_are_orphans() {
        let slice = |name: &str, swh: &str, node: &str| EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some(BTreeMap::from([
                    (
                        "endpointslice.kubernetes.io/managed-by".into(),
                        MANAGED_BY.into(),
                    ),
                    ("kubernetes.io/service-name".into(), swh.into()),
                    (NODE_LABEL.into(), node.into()),
                ])),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints: None,
            ports: None,
        };
        let slices = vec![
            slice("keep", "db", "n1"),
            slice("node-gone", "db", "n2"),
            slice("swh-gone", "old", "n1"),
        ];
        let orphans = orphaned_slices(
            &slices,
            &BTreeSet::from(["default/db".to_owned()]),
            &BTreeSet::from(["n1".to_owned()]),
        );
        let names: Vec<&str> = orphans.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, vec!["node-gone", "swh-gone"]);
    }

    #[test]
    fn the_desired_status_carries_conditions_counts_and_the_child_services_addresses() {
        let swh = swh();
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}}))
        .unwrap();
        let child = child_service_condition(&Ok(service.clone()));
        let status = desired_status(&swh, &child, Some(&service));
        assert_eq!(status["conditions"][0]["type"], "ChildServiceReady");
        assert_eq!(status["conditions"][1]["reason"], "NotAllEndpointsAreReady");
        assert!(status["conditions"][0].get("lastTransitionTime").is_none());
        assert_eq!(status["clusterIPs"], serde_json::json!(["10.96.0.9"]));
        assert_eq!(status["loadBalancer"]["ingress"][0]["ip"], "192.0.2.7");
        assert!(status_unchanged(&status, &status.clone()));
        let mut other = status.clone();
        other["clusterIP"] = serde_json::json!("10.96.0.10");
        assert!(!status_unchanged(&status, &other));
        assert!(
            status_unchanged(
                &serde_json::json!({"clusterIP": "x"}),
                &serde_json::json!({"clusterIP": "x", "extra": 1})
            ),
            "fields the controller does not own are not compared"
        );
    }
}
