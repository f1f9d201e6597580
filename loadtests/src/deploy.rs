//! A scenario's world as it is applied to a cluster (`fairlead loadtest --cluster-world`),
//! decided without I/O: each echo Service selects the pods of a Deployment of `fairlead
//! echo`, each echo ServiceWithHealthchecks those of a StatefulSet named alike (its pods
//! `<name>-<n>`, as the runner names them on `fairlead up`).

use serde_json::{Value, json};

use crate::health::HealthBackend;
use crate::world::{
    BACKEND_LABEL, Backend, CLUSTER_ECHO_PORT, MANAGER, Protocol, World, WorldError, namespace_of,
};

impl World {
    /// The world for a cluster (`name` in errors): each echo Service selects the pods of a
    /// Deployment of its own running `fairlead echo` from `image` on
    /// [`CLUSTER_ECHO_PORT`], each echo ServiceWithHealthchecks those of a StatefulSet
    /// (see [`crate::health`]), the rest as it is. Refused for worlds whose certificates or
    /// GeoIP mirror only the runner gives.
    pub fn for_cluster(&self, name: &str, image: &str) -> Result<Vec<Value>, WorldError> {
        if !self.certificates().is_empty() {
            return Err(WorldError::NotForCluster(
                name.to_owned(),
                "its certificate Secrets are issued by the runner's CA (give them yourself)",
            ));
        }
        if self.mirrored() {
            return Err(WorldError::NotForCluster(
                name.to_owned(),
                "its GeoIP databases are MaxMind's test databases, served by the runner",
            ));
        }
        let backends = self.backends();
        let health = self.health_backends();
        let mut world = self.clone();
        for backend in &health {
            world.serve_health_on(backend, CLUSTER_ECHO_PORT);
        }
        let mut objects = Vec::new();
        for object in &world.objects {
            let swh = health.iter().find(|h| {
                object["kind"] == "ServiceWithHealthchecks"
                    && object["metadata"]["name"] == h.backend.name.as_str()
                    && namespace_of(object) == h.backend.namespace
            });
            if let Some(swh) = swh {
                objects.push(object.clone());
                objects.push(statefulset(swh, image));
                continue;
            }
            let backend = backends.iter().find(|b| {
                object["kind"] == "Service"
                    && object["metadata"]["name"] == b.name.as_str()
                    && namespace_of(object) == b.namespace
            });
            let Some(backend) = backend else {
                objects.push(object.clone());
                continue;
            };
            let mut service = object.clone();
            service["spec"]["selector"] = serde_json::json!({ BACKEND_LABEL: backend.name });
            for port in service["spec"]["ports"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if port["name"] == backend.port_name.as_str() {
                    port["targetPort"] = CLUSTER_ECHO_PORT.into();
                }
            }
            objects.push(service);
            objects.push(echo_deployment(backend, image));
        }
        Ok(objects)
    }
}

/// The Deployment of `backend`'s echo in a cluster: one replica of `fairlead echo`, as
/// hardened as the ALB's own containers.
fn echo_deployment(backend: &Backend, image: &str) -> Value {
    let labels = serde_json::json!({ BACKEND_LABEL: backend.name });
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": format!("echo-{}", backend.name), "namespace": backend.namespace,
            "labels": {BACKEND_LABEL: backend.name, "app.kubernetes.io/managed-by": MANAGER}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": echo_pod_template(backend, image, &labels, &backend.name),
        },
    })
}

/// The pod template of `backend`'s echo in a cluster, its pods labelled `labels`: `fairlead
/// echo` named `name` (`$(POD_NAME)`: as its pod) on [`CLUSTER_ECHO_PORT`], as hardened as
/// the ALB's own containers.
fn echo_pod_template(backend: &Backend, image: &str, labels: &Value, name: &str) -> Value {
    let protocol = match backend.protocol {
        Protocol::Http => "http",
        Protocol::Grpc => "grpc",
        Protocol::Tcp => "tcp",
        Protocol::Udp => "udp",
    };
    let field = |name: &str, path: &str| serde_json::json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    serde_json::json!({
        "metadata": {"labels": labels},
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "echo",
                "image": image,
                "args": ["echo", "--name", name, "--protocol", protocol,
                    "--listen", format!("$(POD_IP):{CLUSTER_ECHO_PORT}")],
                "env": [field("POD_IP", "status.podIP"), field("POD_NAME", "metadata.name")],
                "ports": [{"name": backend.port_name, "containerPort": CLUSTER_ECHO_PORT,
                    "protocol": if backend.protocol == Protocol::Udp { "UDP" } else { "TCP" }}],
                "resources": {"requests": {"cpu": "50m", "memory": "32Mi"},
                    "limits": {"memory": "128Mi"}},
                "securityContext": {"allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
            }],
        },
    })
}

/// `backend` in a cluster: a StatefulSet of its name (so its pods are named as here,
/// `<name>-<n>`) running `fairlead echo` from `image` named as its pod.
pub fn statefulset(backend: &HealthBackend, image: &str) -> Value {
    let b = &backend.backend;
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": b.name, "namespace": b.namespace,
            "labels": {BACKEND_LABEL: b.name, "app.kubernetes.io/managed-by": MANAGER}},
        "spec": {
            "replicas": backend.pods,
            "serviceName": b.name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": backend.selector},
            "template": echo_pod_template(b, image, &backend.selector, "$(POD_NAME)"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_churns_world_runs_its_health_checked_pods_as_a_statefulset() {
        let world = World::parse(
            "route-churn.yaml",
            include_str!("../worlds/route-churn.yaml"),
        )
        .unwrap();
        let objects = world.for_cluster("route-churn", "fairlead:test").unwrap();
        let swh = objects
            .iter()
            .find(|o| o["kind"] == "ServiceWithHealthchecks")
            .unwrap();
        assert_eq!(swh["spec"]["ports"][0]["targetPort"], CLUSTER_ECHO_PORT);
        let probe = &swh["spec"]["healthcheck"]["probes"][0]["http"];
        assert_eq!(probe["targetPort"], CLUSTER_ECHO_PORT);
        assert_eq!(probe["path"], crate::echo::HEALTH_PATH);
        let set = objects.iter().find(|o| o["kind"] == "StatefulSet").unwrap();
        assert_eq!(set["metadata"]["name"], swh["metadata"]["name"]);
        assert_eq!(
            set["spec"]["template"]["metadata"]["labels"],
            swh["spec"]["selector"]
        );
        assert_eq!(set["spec"]["replicas"], 2);
        // The echo Services keep their Deployments; nothing else is added.
        let added = objects.len() - world.objects.len();
        assert_eq!(added, world.backends().len() + 1);
    }
}
