//! Which EndpointSlices one node publishes for one resource.

use std::collections::BTreeMap;
use std::net::IpAddr;

use fairlead_health_api::{MANAGED_BY, ServicePort, ServiceWithHealthchecks};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::{PodVerdicts, PodView, Verdict};

/// Endpoints per slice (the Kubernetes default of the EndpointSlice controller).
pub const MAX_ENDPOINTS: usize = 100;

/// The label naming the node whose agent owns a slice (the controller removes the slices of
/// nodes that are gone).
pub const NODE_LABEL: &str = "service-with-healthchecks.network.deckhouse.io/node";

/// The longest slice name before it is shortened with a hash (a DNS label, so it also fits
/// where names are used as label values).
const MAX_NAME: usize = 63;

/// The slices of one node, by name.
pub type Planned = BTreeMap<String, EndpointSlice>;

fn fnv64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The deterministic name of a slice: `<swh>-<node>-<port>-<family>-<shard>`, shortened with
/// a hash of the whole when longer than a DNS label.
pub fn slice_name(swh: &str, node: &str, port: &str, family: &str, shard: usize) -> String {
    let full = format!("{swh}-{node}-{port}-{family}-{shard}")
        .to_ascii_lowercase()
        .replace(|c: char| !(c.is_ascii_alphanumeric() || c == '-'), "-");
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = format!("{:016x}", fnv64(&full));
    let keep = MAX_NAME - hash.len() - 1;
    let prefix = full[..keep].trim_end_matches('-');
    format!("{prefix}-{hash}")
}

fn port_key(port: &ServicePort) -> String {
    port.name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{}-{}", port.protocol.to_ascii_lowercase(), port.port))
}

/// Whether a pod serves a port: every probe of the port's target port passes; without probes,
/// the pod's readiness; without probing at all (`publishNotReadyAddresses`, headless), always
/// or readiness respectively.
fn serves(
    swh: &ServiceWithHealthchecks,
    port: &ServicePort,
    pod: &PodView,
    verdicts: &PodVerdicts,
) -> bool {
    let spec = &swh.spec;
    if spec.publish_not_ready_addresses == Some(true) {
        return true;
    }
    if spec.cluster_ip.as_deref() == Some("None") {
        return pod.ready;
    }
    let target = port.effective_target_port();
    let mut probed = spec
        .healthcheck
        .probes
        .iter()
        .enumerate()
        .filter(|(_, probe)| probe.target_port() == Some(target))
        .peekable();
    if probed.peek().is_none() {
        return pod.ready;
    }
    probed.all(|(i, _)| verdicts.get(i) == Some(&Verdict::Passing))
}

fn owner(swh: &ServiceWithHealthchecks) -> OwnerReference {
    OwnerReference {
        api_version: "network.deckhouse.io/v1alpha1".into(),
        kind: "ServiceWithHealthchecks".into(),
        name: swh.metadata.name.clone().unwrap_or_default(),
        uid: swh.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(false),
    }
}

/// The slices `node` publishes for `swh`, given its pods there and their verdicts (by pod
/// uid). Pods not serving a port are left out of that port's slices, unless they are
/// terminating (published with `terminating=true`, `serving` = the probe result,
/// `ready=false`, so connections drain). A port with no endpoint on this node has no slice.
pub fn plan_slices(
    swh: &ServiceWithHealthchecks,
    node: &str,
    pods: &[PodView],
    verdicts: &BTreeMap<String, PodVerdicts>,
) -> Planned {
    let name = swh.metadata.name.clone().unwrap_or_default();
    let namespace = swh.metadata.namespace.clone();
    let mut sorted: Vec<&PodView> = pods.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let none = Vec::new();
    let mut planned = Planned::new();
    for port in &swh.spec.ports {
        for (family, address_type) in [("ipv4", "IPv4"), ("ipv6", "IPv6")] {
            let endpoints: Vec<Endpoint> = sorted
                .iter()
                .filter_map(|pod| {
                    let ip = pod.ips.iter().find(|ip| {
                        matches!(
                            (ip, family),
                            (IpAddr::V4(_), "ipv4") | (IpAddr::V6(_), "ipv6")
                        )
                    })?;
                    let serving = serves(swh, port, pod, verdicts.get(&pod.uid).unwrap_or(&none));
                    if !serving && !pod.terminating {
                        return None;
                    }
                    Some(Endpoint {
                        addresses: vec![ip.to_string()],
                        conditions: Some(EndpointConditions {
                            ready: Some(serving && !pod.terminating),
                            serving: Some(serving),
                            terminating: Some(pod.terminating),
                        }),
                        node_name: Some(node.to_owned()),
                        target_ref: Some(ObjectReference {
                            kind: Some("Pod".into()),
                            name: Some(pod.name.clone()),
                            namespace: namespace.clone(),
                            uid: Some(pod.uid.clone()),
                            ..ObjectReference::default()
                        }),
                        ..Endpoint::default()
                    })
                })
                .collect();
            for (shard, chunk) in endpoints.chunks(MAX_ENDPOINTS).enumerate() {
                let slice_name = slice_name(&name, node, &port_key(port), family, shard);
                let labels = BTreeMap::from([
                    ("kubernetes.io/service-name".to_owned(), name.clone()),
                    (
                        "endpointslice.kubernetes.io/managed-by".to_owned(),
                        MANAGED_BY.to_owned(),
                    ),
                    (NODE_LABEL.to_owned(), node.to_owned()),
                ]);
                planned.insert(
                    slice_name.clone(),
                    EndpointSlice {
                        metadata: ObjectMeta {
                            name: Some(slice_name),
                            namespace: namespace.clone(),
                            labels: Some(labels),
                            owner_references: Some(vec![owner(swh)]),
                            ..ObjectMeta::default()
                        },
                        address_type: address_type.into(),
                        endpoints: Some(chunk.to_vec()),
                        ports: Some(vec![EndpointPort {
                            name: Some(port.name.clone().unwrap_or_default()),
                            port: Some(port.effective_target_port()),
                            protocol: Some(port.protocol.clone()),
                            app_protocol: port.app_protocol.clone(),
                        }]),
                    },
                );
            }
        }
    }
    planned
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_health_api::{
        Healthcheck, Probe, ProbeMode, ServiceWithHealthchecksSpec, TcpProbe,
    };

    fn swh(probes: &[(i32,)]) -> ServiceWithHealthchecks {
        let mut swh = ServiceWithHealthchecks::new(
            "web",
            ServiceWithHealthchecksSpec {
                ports: vec![
                    ServicePort {
                        name: Some("http".into()),
                        protocol: "TCP".into(),
                        port: 80,
                        target_port: Some(8080),
                        ..ServicePort::default()
                    },
                    ServicePort {
                        name: Some("admin".into()),
                        protocol: "TCP".into(),
                        port: 9000,
                        target_port: Some(9000),
                        ..ServicePort::default()
                    },
                    ServicePort {
                        name: Some("metrics".into()),
                        protocol: "TCP".into(),
                        port: 9100,
                        ..ServicePort::default()
                    },
                ],
                healthcheck: Healthcheck {
                    probes: probes
                        .iter()
                        .map(|(port,)| Probe {
                            mode: ProbeMode::Tcp,
                            timeout_seconds: 1,
                            success_threshold: 1,
                            failure_threshold: 3,
                            http: None,
                            tcp: Some(TcpProbe { target_port: *port }),
                            postgresql: None,
                        })
                        .collect(),
                    ..Healthcheck::default()
                },
                ..ServiceWithHealthchecksSpec::default()
            },
        );
        swh.metadata.namespace = Some("default".into());
        swh.metadata.uid = Some("swh-uid".into());
        swh
    }

    fn pod(name: &str, ip: &str) -> PodView {
        PodView {
            name: name.into(),
            uid: format!("{name}-uid"),
            ips: vec![ip.parse().unwrap()],
            ready: true,
            terminating: false,
        }
    }

    fn addresses(planned: &Planned, name: &str) -> Vec<String> {
        planned
            .get(name)
            .map(|s| {
                s.endpoints
                    .iter()
                    .flatten()
                    .map(|e| e.addresses[0].clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn a_failing_probe_withdraws_the_pod_from_its_port_only() {
        // Probes: 0 -> 8080 (two probes on http), 1 -> 8080, 2 -> 9000; metrics has none.
        let swh = swh(&[(8080,), (8080,), (9000,)]);
        let pods = vec![pod("a", "10.0.0.1"), pod("b", "10.0.0.2")];
        let verdicts = BTreeMap::from([
            (
                "a-uid".to_owned(),
                vec![Verdict::Passing, Verdict::Failing, Verdict::Passing],
            ),
            (
                "b-uid".to_owned(),
                vec![Verdict::Passing, Verdict::Passing, Verdict::Pending],
            ),
        ]);
        let planned = plan_slices(&swh, "n1", &pods, &verdicts);
        assert_eq!(
            addresses(&planned, "web-n1-http-ipv4-0"),
            vec!["10.0.0.2"],
            "every probe of 8080 must pass"
        );
        assert_eq!(
            addresses(&planned, "web-n1-admin-ipv4-0"),
            vec!["10.0.0.1"],
            "pending is not passing"
        );
        assert_eq!(
            addresses(&planned, "web-n1-metrics-ipv4-0"),
            vec!["10.0.0.1", "10.0.0.2"],
            "unprobed ports follow readiness"
        );
        let slice = &planned["web-n1-http-ipv4-0"];
        let port = &slice.ports.as_ref().unwrap()[0];
        assert_eq!(
            (port.name.as_deref(), port.port),
            (Some("http"), Some(8080))
        );
        let labels = slice.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["kubernetes.io/service-name"], "web");
        assert_eq!(
            labels["endpointslice.kubernetes.io/managed-by"],
            "servicewithhealthchecks"
        );
        let endpoint = &slice.endpoints.as_ref().unwrap()[0];
        assert_eq!(endpoint.node_name.as_deref(), Some("n1"));
        assert_eq!(
            endpoint.target_ref.as_ref().unwrap().uid.as_deref(),
            Some("b-uid")
        );
        assert_eq!(
            slice.metadata.owner_references.as_ref().unwrap()[0].uid,
            "swh-uid"
        );
    }

    #[test]
    fn terminating_pods_drain_and_unready_unprobed_pods_are_left_out() {
        let swh = swh(&[(8080,)]);
        let mut leaving = pod("a", "10.0.0.1");
        leaving.terminating = true;
        let mut unready = pod("b", "10.0.0.2");
        unready.ready = false;
        let verdicts = BTreeMap::from([
            ("a-uid".to_owned(), vec![Verdict::Passing]),
            ("b-uid".to_owned(), vec![Verdict::Passing]),
        ]);
        let planned = plan_slices(&swh, "n1", &[leaving, unready], &verdicts);
        let http = &planned["web-n1-http-ipv4-0"];
        let conditions: Vec<_> = http
            .endpoints
            .iter()
            .flatten()
            .map(|e| e.conditions.clone().unwrap())
            .collect();
        assert_eq!(
            conditions[0],
            EndpointConditions {
                ready: Some(false),
                serving: Some(true),
                terminating: Some(true)
            }
        );
        assert_eq!(
            conditions[1],
            EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false)
            }
        );
        assert_eq!(
            addresses(&planned, "web-n1-metrics-ipv4-0"),
            vec!["10.0.0.1"],
            "terminating, shown as not ready"
        );
        assert_eq!(
            planned["web-n1-metrics-ipv4-0"].endpoints.as_ref().unwrap()[0]
                .conditions
                .as_ref()
                .unwrap()
                .serving,
            Some(true)
        );
    }

    #[test]
    fn families_shards_and_empty_ports() {
        let swh = swh(&[(8080,), (9000,)]);
        let mut pods: Vec<PodView> = (0..250)
            .map(|i| {
                pod(
                    &format!("p{i:03}"),
                    &format!("10.0.{}.{}", i / 200, i % 200 + 1),
                )
            })
            .collect();
        pods.push(PodView {
            ips: vec!["10.1.0.1".parse().unwrap(), "fd00::1".parse().unwrap()],
            ..pod("dual", "10.1.0.1")
        });
        let verdicts: BTreeMap<String, PodVerdicts> = pods
            .iter()
            .map(|p| (p.uid.clone(), vec![Verdict::Passing, Verdict::Failing]))
            .collect();
        let planned = plan_slices(&swh, "n1", &pods, &verdicts);
        let http: Vec<usize> = (0..3)
            .map(|s| {
                planned[&format!("web-n1-http-ipv4-{s}")]
                    .endpoints
                    .as_ref()
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(http, vec![100, 100, 51]);
        assert_eq!(planned["web-n1-http-ipv6-0"].address_type, "IPv6");
        assert_eq!(addresses(&planned, "web-n1-http-ipv6-0"), vec!["fd00::1"]);
        assert!(
            !planned.keys().any(|k| k.contains("admin")),
            "no endpoint, no slice"
        );
    }

    #[test]
    fn publish_not_ready_and_headless() {
        let mut swh = swh(&[(8080,)]);
        let mut unready = pod("a", "10.0.0.1");
        unready.ready = false;
        swh.spec.publish_not_ready_addresses = Some(true);
        let planned = plan_slices(&swh, "n1", std::slice::from_ref(&unready), &BTreeMap::new());
        assert_eq!(
            addresses(&planned, "web-n1-http-ipv4-0"),
            vec!["10.0.0.1"],
            "published without probing"
        );
        swh.spec.publish_not_ready_addresses = None;
        swh.spec.cluster_ip = Some("None".into());
        let planned = plan_slices(
            &swh,
            "n1",
            &[pod("b", "10.0.0.2"), unready],
            &BTreeMap::new(),
        );
        assert_eq!(
            addresses(&planned, "web-n1-http-ipv4-0"),
            vec!["10.0.0.2"],
            "headless: readiness, no probes"
        );
    }

    #[test]
    fn names_are_deterministic_and_hashed_when_long() {
        assert_eq!(
            slice_name("web", "node-1", "http", "ipv4", 0),
            "web-node-1-http-ipv4-0"
        );
        let long = slice_name(&"a".repeat(50), "node.example.com", "http", "ipv4", 0);
        assert!(long.len() <= 63, "{long}");
        assert_eq!(
            long,
            slice_name(&"a".repeat(50), "node.example.com", "http", "ipv4", 0)
        );
        assert_ne!(
            long,
            slice_name(&"a".repeat(50), "node.example.com", "http", "ipv4", 1)
        );
    }
}
