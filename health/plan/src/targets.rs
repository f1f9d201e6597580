//! What the agent probes: the pods of its node that match a resource, as planner views, and
//! one target per (resource, pod, probe). A target's key includes the pod's uid and IP, so a
//! recreated pod or a new IP starts from a fresh state.

use std::collections::BTreeMap;
use std::net::IpAddr;

use fairlead_health_api::ServiceWithHealthchecks;
use k8s_openapi::api::core::v1::Pod;

use crate::PodView;
use fairlead_key::ObjectKey;

/// One (resource, pod, probe).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetKey {
    /// The resource.
    pub swh: ObjectKey,
    /// Pod uid.
    pub pod_uid: String,
    /// Pod IP probed.
    pub ip: IpAddr,
    /// Index in `spec.healthcheck.probes`.
    pub probe: usize,
}

impl TargetKey {
    /// A stable text form (for the schedule's phase).
    pub fn text(&self) -> String {
        format!("{}/{}/{}/{}", self.swh, self.pod_uid, self.ip, self.probe)
    }
}

/// The key of a resource.
pub fn swh_key(swh: &ServiceWithHealthchecks) -> ObjectKey {
    ObjectKey::new(
        swh.metadata.namespace.as_deref().unwrap_or_default(),
        swh.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// What the agent keeps of a pod of its node: identity, labels, phase, IPs, readiness,
/// deletion and age (a projection, about a tenth of a cached `Pod`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// In a terminal phase (`Succeeded`, `Failed`).
    pub terminal: bool,
    /// IPs (`status.podIPs`, else `status.podIP`).
    pub ips: Vec<IpAddr>,
    /// The kubelet's `Ready` condition is `True`.
    pub ready: bool,
    /// Has a deletionTimestamp.
    pub terminating: bool,
    /// `metadata.creationTimestamp` (RFC 3339).
    pub created: Option<String>,
}

impl NodePod {
    /// The projection of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let mut ips: Vec<IpAddr> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.ip.parse().ok())
            .collect();
        if ips.is_empty()
            && let Some(ip) = status
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse().ok())
        {
            ips.push(ip);
        }
        ips.shrink_to_fit();
        Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            terminal: matches!(
                status.and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            ),
            ips,
            ready: status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            created: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string()),
        }
    }
}

/// The pods of `swh` on this node, as the planner sees them: matching the selector, in the
/// resource's namespace, with an IP, not in a terminal phase. A resource without a selector
/// selects nothing (as a Service does).
pub fn pods_of<'a>(
    swh: &ServiceWithHealthchecks,
    pods: impl IntoIterator<Item = &'a NodePod>,
) -> Vec<(PodView, Option<String>)> {
    let Some(selector) = swh.spec.selector.as_ref().filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let namespace = swh.metadata.namespace.as_deref().unwrap_or_default();
    pods.into_iter()
        .filter(|pod| pod.namespace == namespace && !pod.terminal && !pod.ips.is_empty())
        .filter(|pod| selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)))
        .map(|pod| {
            (
                PodView {
                    name: pod.name.clone(),
                    uid: pod.uid.clone(),
                    ips: pod.ips.clone(),
                    ready: pod.ready,
                    terminating: pod.terminating,
                },
                pod.created.clone(),
            )
        })
        .collect()
}

/// Whether a resource's pods are probed at all (not with `publishNotReadyAddresses`, not
/// headless).
pub fn probed(swh: &ServiceWithHealthchecks) -> bool {
    swh.spec.publish_not_ready_addresses != Some(true)
        && swh.spec.cluster_ip.as_deref() != Some("None")
}

/// The targets of one resource: each probe of each of its pods, on the pod's first IP, with
/// the pod's name and creation time.
pub fn targets(
    swh: &ServiceWithHealthchecks,
    pods: &[(PodView, Option<String>)],
) -> BTreeMap<TargetKey, (String, Option<String>)> {
    let mut out = BTreeMap::new();
    if !probed(swh) {
        return out;
    }
    let key = swh_key(swh);
    for (pod, created) in pods {
        let Some(ip) = pod.ips.first().copied() else {
            continue;
        };
        for probe in 0..swh.spec.healthcheck.probes.len() {
            out.insert(
                TargetKey {
                    swh: key.clone(),
                    pod_uid: pod.uid.clone(),
                    ip,
                    probe,
                },
                (pod.name.clone(), created.clone()),
            );
        }
    }
    out
}
