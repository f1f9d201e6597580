//! Echo backends behind a ServiceWithHealthchecks, decided without I/O: a world's SWH
//! labelled [`ECHO_LABEL`] stands for pods the runner runs itself (as bare Pods on the local
//! node, each an echo named as its pod, `<swh>-<n>` as a StatefulSet's), so the health
//! agent's probes — not the runner — decide which of them traffic reaches. The runner then
//! makes one at a time fail its readiness ([`crate::echo::HEALTH_PATH`]) while it still
//! serves, as a draining backend does, and times how long traffic takes to leave it and to
//! come back.
//!
//! [`ECHO_LABEL`]: crate::world::ECHO_LABEL

use std::net::IpAddr;

use serde_json::{Value, json};

use crate::world::{self, Backend, World};

/// The annotation of an echo ServiceWithHealthchecks: how many pods stand behind it
/// (default [`DEFAULT_PODS`]).
pub const PODS_ANNOTATION: &str = "loadtest.fairlead.io/pods";

/// The pods behind an echo ServiceWithHealthchecks that names no number.
pub const DEFAULT_PODS: u16 = 2;

/// A ServiceWithHealthchecks whose pods are echo backends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthBackend {
    /// The resource (its name is its child Service's) and the port its echoes serve.
    pub backend: Backend,
    /// Its `spec.selector`: the labels of its pods.
    pub selector: Value,
    /// How many pods.
    pub pods: u16,
}

impl HealthBackend {
    /// Its pods' names, which their echoes answer with: `<name>-0`, `<name>-1`, …
    pub fn pod_names(&self) -> Vec<String> {
        (0..self.pods)
            .map(|n| format!("{}-{n}", self.backend.name))
            .collect()
    }
}

impl World {
    /// The ServiceWithHealthchecks labelled [`world::ECHO_LABEL`] (with a selector, and
    /// ports as a Service's).
    pub fn health_backends(&self) -> Vec<HealthBackend> {
        self.of_kind("ServiceWithHealthchecks")
            .filter_map(|swh| {
                let selector = &swh["spec"]["selector"];
                if selector.as_object().is_none_or(serde_json::Map::is_empty) {
                    return None;
                }
                let pods = swh["metadata"]["annotations"][PODS_ANNOTATION]
                    .as_str()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .unwrap_or(DEFAULT_PODS);
                Some(HealthBackend {
                    backend: Backend::of(swh)?,
                    selector: selector.clone(),
                    pods,
                })
            })
            .collect()
    }

    /// The world with `backend`'s pods serving on `port`: its port's `targetPort` and every
    /// probe's `targetPort` (the world's own are placeholders: the port is the runner's to
    /// choose).
    pub fn serve_health_on(&mut self, backend: &HealthBackend, port: u16) {
        let b = &backend.backend;
        for swh in self.objects.iter_mut().filter(|o| {
            o["kind"] == "ServiceWithHealthchecks"
                && o["metadata"]["name"] == b.name.as_str()
                && world::namespace_of(o) == b.namespace
        }) {
            for p in swh["spec"]["ports"].as_array_mut().into_iter().flatten() {
                if p["name"] == b.port_name.as_str() {
                    p["targetPort"] = port.into();
                }
            }
            let probes = swh["spec"]["healthcheck"]["probes"].as_array_mut();
            for probe in probes.into_iter().flatten() {
                for mode in ["http", "tcp", "postgreSQL"] {
                    if probe[mode].is_object() {
                        probe[mode]["targetPort"] = port.into();
                    }
                }
            }
        }
    }

    /// A request per HTTPRoute rule (see [`World::rule_probes`]) and the echoes that answer
    /// it: each echo ServiceWithHealthchecks named by its pods' names. Once each has answered
    /// its probe, Envoy serves the world.
    pub fn probes(&self, down: &[String]) -> Vec<world::Probe> {
        let health = self.health_backends();
        let mut probes = self.rule_probes(down);
        for probe in &mut probes {
            probe.backends = probe
                .backends
                .iter()
                .flat_map(|name| {
                    health
                        .iter()
                        .find(|h| h.backend.name == *name)
                        .map_or_else(|| vec![name.clone()], HealthBackend::pod_names)
                })
                .collect();
        }
        probes
    }
}

/// The Pods of `backend` on `node`, the n-th at `ips[n]` listening on `port`: running and
/// ready as a kubelet would say (what its resource's probes say decides whether traffic
/// reaches it). Each with its `status`, which is written apart.
pub fn pods(backend: &HealthBackend, node: &str, ips: &[IpAddr], port: u16) -> Vec<Value> {
    let b = &backend.backend;
    backend
        .pod_names()
        .into_iter()
        .zip(ips)
        .map(|(name, ip)| {
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": b.namespace,
                    "labels": backend.selector.clone()},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "echo", "image": "fairlead-loadtest/echo",
                        "ports": [{"name": b.port_name, "containerPort": port}]}],
                },
                "status": {
                    "phase": "Running",
                    "podIP": ip.to_string(),
                    "podIPs": [{"ip": ip.to_string()}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: &str = r"
apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata:
  name: web
  namespace: loadtest
  labels: {loadtest.fairlead.io/echo: http}
  annotations: {loadtest.fairlead.io/pods: '3'}
spec:
  selector: {loadtest.fairlead.io/backend: web}
  ports: [{name: http, port: 80, targetPort: 1}]
  healthcheck:
    probes:
    - {mode: HTTP, http: {path: /healthz, targetPort: 1}}
    - {mode: TCP, tcp: {targetPort: 1}}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ServiceWithHealthchecks
metadata: {name: unlabelled, namespace: loadtest}
spec:
  selector: {app: x}
  ports: [{name: http, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: loadtest}
spec:
  hostnames: [r.test]
  rules:
  - matches: [{path: {type: PathPrefix, value: /web}}]
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: plain, port: 80}]
";

    #[test]
    fn a_labelled_swh_is_its_pods_and_they_answer_its_probes() {
        let world = World::parse("w", WORLD).unwrap();
        let health = world.health_backends();
        assert_eq!(health.len(), 1, "the unlabelled one is not an echo");
        let web = &health[0];
        assert_eq!(web.pods, 3);
        assert_eq!(web.pod_names(), ["web-0", "web-1", "web-2"]);
        let probes = world.probes(&[]);
        assert_eq!(probes[0].backends, ["web-0", "web-1", "web-2"]);
        assert_eq!(probes[1].backends, ["plain"], "a Service stays itself");
    }

    #[test]
    fn the_runners_port_is_every_target_port_and_its_pods_are_ready_on_the_node() {
        let mut world = World::parse("w", WORLD).unwrap();
        let web = world.health_backends().remove(0);
        world.serve_health_on(&web, 4321);
        let swh = &world.objects[0]["spec"];
        assert_eq!(swh["ports"][0]["targetPort"], 4321);
        assert_eq!(swh["healthcheck"]["probes"][0]["http"]["targetPort"], 4321);
        assert_eq!(swh["healthcheck"]["probes"][1]["tcp"]["targetPort"], 4321);
        assert!(swh["healthcheck"]["probes"][0]["tcp"].is_null());
        let ips: Vec<IpAddr> = vec![[127, 0, 9, 1].into(), [127, 0, 9, 2].into()];
        let pods = pods(&web, "local", &ips, 4321);
        assert_eq!(pods.len(), 2, "as many as there are addresses");
        assert_eq!(pods[1]["metadata"]["name"], "web-1");
        assert_eq!(pods[1]["metadata"]["labels"], web.selector);
        assert_eq!(pods[1]["spec"]["nodeName"], "local");
        assert_eq!(pods[1]["status"]["podIP"], "127.0.9.2");
        assert_eq!(pods[1]["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn a_break_makes_its_http_probes_ask_what_a_not_ready_pod_still_serves() {
        let world = World::parse("w", WORLD).unwrap();
        let (broken, _) = world
            .clone()
            .broken(&["readiness-ignored=web".parse().unwrap()])
            .unwrap();
        let probes = &broken.objects[0]["spec"]["healthcheck"]["probes"];
        assert_eq!(probes[0]["http"]["path"], "/");
        assert!(probes[1]["http"].is_null(), "a TCP probe stays one");
        for name in ["unlabelled", "nope"] {
            let refused = world
                .clone()
                .broken(&[format!("readiness-ignored={name}").parse().unwrap()])
                .unwrap_err();
            assert_eq!(
                refused.to_string(),
                format!(
                    "--break readiness-ignored={name}: the world has no such echo ServiceWithHealthchecks"
                )
            );
        }
    }

    #[test]
    fn in_a_cluster_it_is_a_statefulset_whose_pods_are_named_alike() {
        let world = World::parse("w", WORLD).unwrap();
        let web = world.health_backends().remove(0);
        let set = crate::deploy::statefulset(&web, "fairlead:test");
        assert_eq!(set["metadata"]["name"], "web");
        assert_eq!(set["spec"]["replicas"], 3);
        assert_eq!(set["spec"]["selector"]["matchLabels"], web.selector);
        let template = &set["spec"]["template"];
        assert_eq!(template["metadata"]["labels"], web.selector);
        let args = &template["spec"]["containers"][0]["args"];
        assert_eq!(args[2], "$(POD_NAME)");
    }
}
