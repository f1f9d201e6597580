//! The endpoint status one node reports for one pod.

use fairlead_health_api::{EndpointStatus, ServiceWithHealthchecks};

use crate::{PodVerdicts, PodView, Verdict};

/// A probe's target as `failedProbes` names it: `<mode>:<podIP>:<port>` (Deckhouse's format).
pub fn probe_target_label(mode: &str, pod: &PodView, port: i32) -> String {
    let ip = pod.ips.first().map(ToString::to_string).unwrap_or_default();
    format!("{mode}:{ip}:{port}")
}

/// The status entry of a pod: readiness, whether every probe passes, the failing probes and
/// their reasons (`reasons[i]` belongs to probe `i`). Times are left to the caller, who knows
/// whether the entry changed.
pub fn endpoint_status(
    swh: &ServiceWithHealthchecks,
    node: &str,
    pod: &PodView,
    verdicts: &PodVerdicts,
    reasons: &[Option<String>],
) -> EndpointStatus {
    let probes = &swh.spec.healthcheck.probes;
    let mut failed = Vec::new();
    let mut failure_reasons = Vec::new();
    for (i, probe) in probes.iter().enumerate() {
        if verdicts.get(i) == Some(&Verdict::Failing) {
            let label =
                probe_target_label(probe.mode.label(), pod, probe.target_port().unwrap_or(0));
            if let Some(Some(reason)) = reasons.get(i) {
                failure_reasons.push(format!("{label}: {reason}"));
            }
            failed.push(label);
        }
    }
    let probes_successful =
        !probes.is_empty() && (0..probes.len()).all(|i| verdicts.get(i) == Some(&Verdict::Passing));
    EndpointStatus {
        pod_name: pod.name.clone(),
        node_name: Some(node.to_owned()),
        ready: pod.ready,
        probes_successful,
        failed_probes: failed,
        failure_reasons,
        last_probe_time: None,
        last_transition_time: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_health_api::{
        Healthcheck, HttpProbe, Probe, ProbeMode, ServiceWithHealthchecksSpec, TcpProbe,
    };

    #[test]
    fn failing_probes_are_named_with_their_reasons() {
        let probe = |mode, port| Probe {
            mode,
            timeout_seconds: 1,
            success_threshold: 1,
            failure_threshold: 3,
            http: (mode == ProbeMode::Http).then(|| HttpProbe {
                target_port: port,
                ..HttpProbe::default()
            }),
            tcp: (mode == ProbeMode::Tcp).then_some(TcpProbe { target_port: port }),
            postgresql: None,
        };
        let swh = ServiceWithHealthchecks::new(
            "web",
            ServiceWithHealthchecksSpec {
                healthcheck: Healthcheck {
                    probes: vec![probe(ProbeMode::Http, 8080), probe(ProbeMode::Tcp, 9000)],
                    ..Healthcheck::default()
                },
                ..ServiceWithHealthchecksSpec::default()
            },
        );
        let pod = PodView {
            name: "a".into(),
            uid: "u".into(),
            ips: vec!["10.0.0.5".parse().unwrap()],
            ready: true,
            terminating: false,
        };
        let status = endpoint_status(
            &swh,
            "n1",
            &pod,
            &vec![Verdict::Failing, Verdict::Passing],
            &[Some("HTTP status 503".into()), None],
        );
        assert_eq!(status.failed_probes, vec!["http:10.0.0.5:8080"]);
        assert_eq!(
            status.failure_reasons,
            vec!["http:10.0.0.5:8080: HTTP status 503"]
        );
        assert!(!status.probes_successful && status.ready);
        let ok = endpoint_status(
            &swh,
            "n1",
            &pod,
            &vec![Verdict::Passing, Verdict::Passing],
            &[None, None],
        );
        assert!(ok.probes_successful && ok.failed_probes.is_empty());
        let pending = endpoint_status(
            &swh,
            "n1",
            &pod,
            &vec![Verdict::Passing, Verdict::Pending],
            &[None, None],
        );
        assert!(!pending.probes_successful, "pending is not successful");
    }
}
