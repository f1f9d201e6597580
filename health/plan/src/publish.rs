//! What one node publishes for one resource, decided from its pods and their probe results:
//! the EndpointSlices (none while the controller reports that the child Service belongs to
//! someone else, so our endpoints never join a foreign Service) and this node's endpoint
//! statuses (none when the resource's pods are not probed).

use std::collections::BTreeMap;
use std::net::IpAddr;

use fairlead_health_api::{EndpointStatus, ServiceWithHealthchecks};

use crate::targets::probed;
use crate::{Planned, PodVerdicts, PodView, Verdict, endpoint_status, plan_slices};

/// The slices and statuses of one resource on one node.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Publication {
    /// The EndpointSlices to hold.
    pub slices: Planned,
    /// The endpoint status of each pod, by pod name.
    pub statuses: BTreeMap<String, EndpointStatus>,
}

/// Whether the controller reports `ChildServiceConflict` (a Service of this name that is not
/// the resource's).
pub fn child_service_conflict(swh: &ServiceWithHealthchecks) -> bool {
    swh.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "ChildServiceReady" && c.reason == "ChildServiceConflict")
    })
}

/// Decides what `node` publishes for `swh` over `pods`; `result(pod, ip, probe)` is a
/// probe's verdict and its failure reason.
pub fn publish(
    swh: &ServiceWithHealthchecks,
    node: &str,
    pods: &[PodView],
    result: impl Fn(&PodView, IpAddr, usize) -> (Verdict, Option<String>),
) -> Publication {
    let probes = swh.spec.healthcheck.probes.len();
    let mut verdicts: BTreeMap<String, PodVerdicts> = BTreeMap::new();
    let mut reasons: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
    for pod in pods {
        let Some(ip) = pod.ips.first().copied() else {
            continue;
        };
        let (v, r): (PodVerdicts, Vec<Option<String>>) =
            (0..probes).map(|probe| result(pod, ip, probe)).unzip();
        verdicts.insert(pod.uid.clone(), v);
        reasons.insert(pod.uid.clone(), r);
    }
    let slices = if child_service_conflict(swh) {
        Planned::default()
    } else {
        plan_slices(swh, node, pods, &verdicts)
    };
    let statuses = if probed(swh) {
        pods.iter()
            .map(|pod| {
                let none = Vec::new();
                let entry = endpoint_status(
                    swh,
                    node,
                    pod,
                    verdicts.get(&pod.uid).unwrap_or(&none),
                    reasons.get(&pod.uid).map_or(&[][..], Vec::as_slice),
                );
                (pod.name.clone(), entry)
            })
            .collect()
    } else {
        BTreeMap::new()
    };
    Publication { slices, statuses }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swh() -> ServiceWithHealthchecks {
        serde_json::from_value(serde_json::json!({"apiVersion": "network.deckhouse.io/v1alpha1",
            "kind": "ServiceWithHealthchecks", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "main", "port": 80, "targetPort": 8080}],
                "healthcheck": {"probes": [{"mode": "TCP", "failureThreshold": 1, "tcp": {"targetPort": 8080}}]}}}))
        .unwrap()
    }

    fn pod(name: &str, ip: &str) -> PodView {
        PodView {
            name: name.into(),
            uid: format!("uid-{name}"),
            ips: vec![ip.parse().unwrap()],
            ready: true,
            terminating: false,
        }
    }

    #[test]
    fn passing_pods_are_published_and_failing_ones_reported() {
        let pods = [pod("a", "10.0.0.1"), pod("b", "10.0.0.2")];
        let published = publish(&swh(), "n1", &pods, |pod, _, _| {
            if pod.name == "a" {
                (Verdict::Passing, None)
            } else {
                (Verdict::Failing, Some("connection refused".into()))
            }
        });
        let addresses: Vec<String> = published
            .slices
            .values()
            .flat_map(|s| s.endpoints.iter().flatten())
            .flat_map(|e| e.addresses.clone())
            .collect();
        assert_eq!(addresses, ["10.0.0.1"]);
        assert!(published.statuses["a"].probes_successful);
        assert_eq!(
            published.statuses["b"].failure_reasons,
            ["tcp:10.0.0.2:8080: connection refused"]
        );
    }

    #[test]
    fn a_child_service_conflict_publishes_no_slices_but_still_reports() {
        let mut swh = swh();
        swh.status = Some(
            serde_json::from_value(serde_json::json!({"conditions": [
            {"type": "ChildServiceReady", "status": "False", "reason": "ChildServiceConflict",
             "message": "foreign", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
            .unwrap(),
        );
        let published = publish(&swh, "n1", &[pod("a", "10.0.0.1")], |_, _, _| {
            (Verdict::Passing, None)
        });
        assert!(published.slices.is_empty());
        assert_eq!(published.statuses.len(), 1);
    }
}
