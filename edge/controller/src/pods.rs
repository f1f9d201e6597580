//! What every pod the controller makes shares, decided without I/O: the labels of what is
//! made for a Gateway, the security contexts (non-root, read-only, no capability, seccomp
//! `RuntimeDefault`), and the kube-rbac-proxy container in front of a loopback metrics port.
//! The proxies' pods and the geoproxies' are built from these.

use fairlead_key::ObjectKey;
use serde_json::{Value, json};

use crate::instance::{INSTANCE_LABEL, Instance, MANAGER};

pub use fairlead_edge_model::names::GATEWAY_LABEL;

/// `app.kubernetes.io/name` of the proxies' pods.
pub const PROXY_APP: &str = "alb-proxy";

/// `app.kubernetes.io/name` of the geoproxies' pods (and everything made for them).
pub const GEOPROXY_APP: &str = "alb-geoproxy";

/// The user the containers run as.
const USER: i64 = 64535;

/// The labels of what is made for `gateway` as the application `app` (`alb-proxy`,
/// `alb-geoproxy`).
pub fn labels(instance: &Instance, gateway: &ObjectKey, app: &str) -> Value {
    json!({
        GATEWAY_LABEL: gateway.name(),
        INSTANCE_LABEL: format!("{}.{}", instance.kind, instance.key.name()),
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": gateway.name(),
        "app.kubernetes.io/managed-by": MANAGER,
    })
}

/// Every container's security context: non-root, nothing escalated, a read-only root
/// filesystem, no capability, seccomp `RuntimeDefault`.
pub fn hardened() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": USER,
        "runAsGroup": USER,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// Every pod's security context.
pub fn security() -> Value {
    json!({"runAsNonRoot": true, "runAsUser": USER, "runAsGroup": USER,
        "fsGroup": USER, "seccompProfile": {"type": "RuntimeDefault"}})
}

/// kube-rbac-proxy (`image`) on the pod's address at `port`, in front of the loopback
/// `upstream` port, letting through `paths` (comma-separated) of callers allowed to get
/// them.
pub fn rbac_proxy(image: &str, port: u16, upstream: u16, paths: &str) -> Value {
    json!({
        "name": "kube-rbac-proxy",
        "image": image,
        "args": [
            format!("--secure-listen-address=$(POD_IP):{port}"),
            format!("--upstream=http://127.0.0.1:{upstream}/"),
            "--auth-header-fields-enabled",
            format!("--allow-paths={paths}"),
        ],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "https-metrics", "containerPort": port, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": hardened(),
    })
}
