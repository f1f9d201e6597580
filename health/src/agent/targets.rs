//! What the agent probes: the pods of its node that match a resource, as planner views, and
//! one target per (resource, pod, probe). A target's key includes the pod's uid and IP, so a
//! recreated pod or a new IP starts from a fresh state.

use std::collections::BTreeMap;
use std::net::IpAddr;

use fairlead_health_api::ServiceWithHealthchecks;
use fairlead_health_plan::PodView;
use k8s_openapi::api::core::v1::Pod;

/// One (resource, pod, probe).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetKey {
    /// `namespace/name` of the resource.
    pub swh: String,
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

/// `namespace/name` of an object.
pub fn swh_key(swh: &ServiceWithHealthchecks) -> String {
    format!(
        "{}/{}",
        swh.metadata.namespace.as_deref().unwrap_or_default(),
        swh.metadata.name.as_deref().unwrap_or_default()
    )
}

fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn ips(pod: &Pod) -> Vec<IpAddr> {
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
    ips
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The pods of `swh` on this node, as the planner sees them: matching the selector, in the
/// resource's namespace, with an IP, not in a terminal phase. A resource without a selector
/// selects nothing (as a Service does).
pub fn pods_of<'a>(
    swh: &ServiceWithHealthchecks,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<(PodView, Option<String>)> {
    let Some(selector) = swh.spec.selector.as_ref().filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    let namespace = swh.metadata.namespace.as_deref();
    pods.into_iter()
        .filter(|pod| pod.metadata.namespace.as_deref() == namespace)
        .filter(|pod| {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter(|pod| !terminal(pod))
        .filter_map(|pod| {
            let ips = ips(pod);
            if ips.is_empty() {
                return None;
            }
            let created = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string());
            Some((
                PodView {
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    uid: pod.metadata.uid.clone().unwrap_or_default(),
                    ips,
                    ready: ready(pod),
                    terminating: pod.metadata.deletion_timestamp.is_some(),
                },
                created,
            ))
        })
        .collect()
}

/// Whether a resource's pods are probed at all (not with `publishNotReadyAddresses`, not
/// headless).
pub fn probed(swh: &ServiceWithHealthchecks) -> bool {
    swh.spec.publish_not_ready_addresses != Some(true)
        && swh.spec.cluster_ip.as_deref() != Some("None")
}

/// The targets of one resource: each probe of each of its pods, on the pod's first IP.
pub fn targets(
    swh: &ServiceWithHealthchecks,
    pods: &[(PodView, Option<String>)],
) -> BTreeMap<TargetKey, Option<String>> {
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
                created.clone(),
            );
        }
    }
    out
}
