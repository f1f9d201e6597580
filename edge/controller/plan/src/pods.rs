//! What every pod the controller makes shares, decided without I/O: the labels of what is
//! made for a Gateway, the security contexts (non-root, read-only, no capability, seccomp
//! `RuntimeDefault`), the kube-rbac-proxy container in front of a loopback metrics port, and
//! the small parts containers are made of. The proxies' pods and the geoproxies' are built
//! from these.

use std::collections::BTreeMap;

use fairlead_key::ObjectKey;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction,
    ObjectFieldSelector, PodSecurityContext, Probe, ResourceRequirements, SeccompProfile,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::instance::{INSTANCE_LABEL, Instance, MANAGER};

pub use fairlead_edge_model::names::GATEWAY_LABEL;

/// `app.kubernetes.io/name` of the proxies' pods.
pub const PROXY_APP: &str = "alb-proxy";

/// `app.kubernetes.io/name` of the geoproxies' pods (and everything made for them).
pub const GEOPROXY_APP: &str = "alb-geoproxy";

/// The user the containers run as.
const USER: i64 = 64535;

/// Labels.
pub type Labels = BTreeMap<String, String>;

/// The Gateway API's label naming the Gateway an object was made for, which its
/// implementations put on everything they make for one (the conformance suite finds a
/// Gateway's ServiceAccounts, Pods and Services by it).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// The labels of what is made for `gateway` as the application `app` (`alb-proxy`,
/// `alb-geoproxy`): the controller's own, then those of the Gateway's
/// `spec.infrastructure` (which add, never replace, one of the controller's).
pub fn labels(instance: &Instance, gateway: &ObjectKey, app: &str) -> Labels {
    let mut labels = BTreeMap::from([
        (GATEWAY_LABEL.to_owned(), gateway.name().to_owned()),
        (GATEWAY_NAME_LABEL.to_owned(), gateway.name().to_owned()),
        (INSTANCE_LABEL.to_owned(), instance.label()),
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
        (
            "app.kubernetes.io/instance".to_owned(),
            gateway.name().to_owned(),
        ),
        (
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGER.to_owned(),
        ),
    ]);
    for (key, value) in &instance.infrastructure.labels {
        labels.entry(key.clone()).or_insert_with(|| value.clone());
    }
    labels
}

/// Whether the controller may write over an object of the name it is about to apply, whose
/// labels are `live`, with one labelled `wanted`: only if it made that object for the same
/// Gateway ([`GATEWAY_LABEL`]) and application (`app.kubernetes.io/name`). Names are made
/// from Gateway names (`d8-alb-<gateway>…`), so without this a Gateway named
/// `shop-geoproxy` would take over the ServiceAccount of `shop`'s geoproxy, an instance
/// sharing Gateway `a` as `b` the proxies of a Gateway `a-b`, and either a user's own
/// object of such a name. Why not, naming who holds it.
pub fn claim(live: Option<&Labels>, wanted: Option<&Labels>) -> Result<(), String> {
    let label = |labels: Option<&Labels>, key: &str| labels.and_then(|l| l.get(key)).cloned();
    if label(live, "app.kubernetes.io/managed-by").as_deref() != Some(MANAGER) {
        return Err("it exists and was not made by the ALB gateway controller".to_owned());
    }
    for key in [GATEWAY_LABEL, "app.kubernetes.io/name"] {
        if let Some(wanted) = label(wanted, key)
            && label(live, key).as_ref() != Some(&wanted)
        {
            return Err(format!(
                "it was made for another Gateway: {} of Gateway {:?}",
                label(live, "app.kubernetes.io/name").unwrap_or_else(|| "an object".into()),
                label(live, GATEWAY_LABEL).unwrap_or_default(),
            ));
        }
    }
    Ok(())
}

/// `meta` with the annotations of the Gateway's `spec.infrastructure` added (an annotation
/// `meta` has already keeps its value).
pub fn annotated(mut meta: ObjectMeta, instance: &Instance) -> ObjectMeta {
    let wanted = &instance.infrastructure.annotations;
    if !wanted.is_empty() {
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        for (key, value) in wanted {
            annotations
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
    }
    meta
}

/// The selector of `gateway`'s pods of `app`.
pub fn selector(gateway: &ObjectKey, app: &str) -> Labels {
    BTreeMap::from([
        (GATEWAY_LABEL.to_owned(), gateway.name().to_owned()),
        ("app.kubernetes.io/name".to_owned(), app.to_owned()),
    ])
}

/// A label selector matching `labels`.
pub fn match_labels(labels: Labels) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels),
        ..LabelSelector::default()
    }
}

/// The metadata of `name` in `gateway`'s namespace with `labels`, owned by `owners`.
pub fn metadata(
    name: &str,
    gateway: &ObjectKey,
    labels: Labels,
    owners: &[OwnerReference],
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(gateway.namespace().to_owned()),
        labels: Some(labels),
        owner_references: Some(owners.to_vec()),
        ..ObjectMeta::default()
    }
}

/// Every container's security context: non-root, nothing escalated, a read-only root
/// filesystem, no capability, seccomp `RuntimeDefault`.
pub fn hardened() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(USER),
        run_as_group: Some(USER),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_owned(),
        ..SeccompProfile::default()
    }
}

/// Every pod's security context.
pub fn security() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(USER),
        run_as_group: Some(USER),
        fs_group: Some(USER),
        seccomp_profile: Some(runtime_default()),
        ..PodSecurityContext::default()
    }
}

/// Requests of `cpu` and `memory`, and a `limit` of memory.
pub fn resources(cpu: &str, memory: &str, limit: &str) -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity(limit.to_owned()),
        )])),
        ..ResourceRequirements::default()
    }
}

/// The variable `name` from the pod's field `path` (`metadata.name`, `status.podIP`).
pub fn field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// A TCP port `name` at `port` (on the host at `host`, when given).
pub fn port(name: &str, port: u16, protocol: &str, host: Option<u16>) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_owned()),
        container_port: i32::from(port),
        host_port: host.map(i32::from),
        protocol: Some(protocol.to_owned()),
        ..ContainerPort::default()
    }
}

/// A probe getting `path` on `port` every `period` seconds, failing after `failures`.
pub fn probe(path: &str, port: u16, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::Int(i32::from(port)),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// The volume `name` mounted at `path`.
pub fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// An emptyDir `name` of at most `size` (in memory when `memory`).
pub fn empty_dir(name: &str, size: Option<&str>, memory: bool) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(k8s_openapi::api::core::v1::EmptyDirVolumeSource {
            medium: memory.then(|| "Memory".to_owned()),
            size_limit: size.map(|s| Quantity(s.to_owned())),
        }),
        ..Volume::default()
    }
}

/// kube-rbac-proxy (`image`) on the pod's address at `port`, in front of the loopback
/// `upstream` port, letting through `paths` (comma-separated) of callers allowed to get
/// them.
pub fn rbac_proxy(image: &str, port: u16, upstream: u16, paths: &str) -> Container {
    Container {
        name: "kube-rbac-proxy".to_owned(),
        image: Some(image.to_owned()),
        args: Some(vec![
            format!("--secure-listen-address=$(POD_IP):{port}"),
            format!("--upstream=http://127.0.0.1:{upstream}/"),
            "--auth-header-fields-enabled".to_owned(),
            format!("--allow-paths={paths}"),
        ]),
        env: Some(vec![field("POD_IP", "status.podIP")]),
        ports: Some(vec![self::port("https-metrics", port, "TCP", None)]),
        resources: Some(resources("10m", "20Mi", "64Mi")),
        security_context: Some(hardened()),
        ..Container::default()
    }
}

/// An object as JSON (what tests read, and the order objects are applied in).
pub fn value(object: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(object).expect("Kubernetes objects serialize")
}
