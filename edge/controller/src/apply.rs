//! The kinds the controller writes, and what it reads back of the proxies it made.

use fairlead_key::ObjectKey;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::discovery::ApiResource;

/// The kinds the controller makes (each labelled `app.kubernetes.io/managed-by:
/// alb-gateway-controller`).
pub const MADE_KINDS: &[&str] = &[
    "ValidatingWebhookConfiguration",
    "Gateway",
    "Ingress",
    "DaemonSet",
    "Deployment",
    "StatefulSet",
    "RoleBinding",
    "PodDisruptionBudget",
    "Service",
    "ConfigMap",
    "ServiceAccount",
    "Secret",
];

/// The API resource of a kind the controller makes or reads (instances and Gateway API
/// kinds included).
pub fn resource(kind: &str) -> ApiResource {
    match kind {
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "ConfigMap" => ApiResource::erase::<ConfigMap>(&()),
        "Secret" => ApiResource::erase::<Secret>(&()),
        "Service" => ApiResource::erase::<Service>(&()),
        "Pod" => ApiResource::erase::<Pod>(&()),
        "DaemonSet" => ApiResource::erase::<DaemonSet>(&()),
        "Deployment" => ApiResource::erase::<Deployment>(&()),
        "StatefulSet" => ApiResource::erase::<StatefulSet>(&()),
        "RoleBinding" => ApiResource::erase::<k8s_openapi::api::rbac::v1::RoleBinding>(&()),
        "PodDisruptionBudget" => ApiResource::erase::<PodDisruptionBudget>(&()),
        "Ingress" => ApiResource::erase::<k8s_openapi::api::networking::v1::Ingress>(&()),
        "ClusterALBInstance" => ApiResource::erase::<fairlead_edge_api::ClusterALBInstance>(&()),
        "ALBInstance" => ApiResource::erase::<fairlead_edge_api::ALBInstance>(&()),
        "ValidatingWebhookConfiguration" => ApiResource::erase::<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        >(&()),
        other => crate::crds::resource(other),
    }
}

/// The addresses of the nodes where `gateway`'s proxies are ready (a HostPort inlet's).
pub async fn node_addresses(
    client: &kube::Client,
    gateway: &ObjectKey,
) -> Result<Vec<String>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), gateway.namespace());
    let selector = format!("{}={}", crate::pods::GATEWAY_LABEL, gateway.name());
    let mut addresses: Vec<String> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|pod| {
            let status = pod.status?;
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            ready.then_some(status.host_ip).flatten()
        })
        .collect();
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}
