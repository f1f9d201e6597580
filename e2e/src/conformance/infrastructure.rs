//! What is made for a Gateway, as the suite finds it: the ServiceAccounts, Pods and Services
//! of its namespace labelled `gateway.networking.k8s.io/gateway-name` with its name, each
//! carrying the labels and annotations of its `spec.infrastructure`
//! (`GatewayInfrastructure`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};

use super::World;

/// The Gateway API's label on what is made for a Gateway.
const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// What one object lacks of `labels` and `annotations`: `None` when it has them all.
fn lacks(
    meta: &ObjectMeta,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<String> {
    let missing = |wanted: &BTreeMap<String, String>, have: Option<&BTreeMap<String, String>>| {
        wanted
            .iter()
            .filter(|(k, v)| have.and_then(|h| h.get(*k)) != Some(*v))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
    };
    let mut lacking = missing(labels, meta.labels.as_ref());
    lacking.extend(missing(annotations, meta.annotations.as_ref()));
    (!lacking.is_empty()).then(|| {
        format!(
            "{} lacks {}",
            meta.name.as_deref().unwrap_or_default(),
            lacking.join(", ")
        )
    })
}

impl World {
    /// Waits until the Gateway `key` (`namespace/name`) has a ServiceAccount and a Service
    /// made for it (by the label), and every ServiceAccount, Pod and Service so labelled
    /// carries `labels` and `annotations` — stricter than the suite, which settles for any
    /// one kind and looks at the first of each.
    pub async fn infrastructure_propagated(
        &self,
        key: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) {
        let (namespace, name) = key.split_once('/').expect("namespace/name");
        let client = self.up.client().await;
        let selected = ListParams::default().labels(&format!("{GATEWAY_NAME_LABEL}={name}"));
        crate::wait::until_seen(
            &format!(
                "Gateway {key}: its infrastructure's labels and annotations on what is made for it"
            ),
            async || {
                let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
                    .list(&selected)
                    .await
                    .map_err(|e| e.to_string())?;
                let pods = Api::<Pod>::namespaced(client.clone(), namespace)
                    .list(&selected)
                    .await
                    .map_err(|e| e.to_string())?;
                let services = Api::<Service>::namespaced(client.clone(), namespace)
                    .list(&selected)
                    .await
                    .map_err(|e| e.to_string())?;
                if accounts.items.is_empty() || services.items.is_empty() {
                    return Err(format!(
                        "{} ServiceAccounts, {} Services labelled {GATEWAY_NAME_LABEL}={name}",
                        accounts.items.len(),
                        services.items.len()
                    ));
                }
                let metas = accounts
                    .items
                    .iter()
                    .map(|a| &a.metadata)
                    .chain(pods.items.iter().map(|p| &p.metadata))
                    .chain(services.items.iter().map(|s| &s.metadata));
                let lacking: Vec<String> = metas
                    .filter_map(|m| lacks(m, labels, annotations))
                    .collect();
                if lacking.is_empty() {
                    Ok(())
                } else {
                    Err(lacking.join("; "))
                }
            },
        )
        .await;
    }
}
