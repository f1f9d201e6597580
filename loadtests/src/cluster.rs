//! The cluster side of a run: a client from a kubeconfig, server-side apply of any kind
//! (found by discovery), and the address an instance's LoadBalancer Service got.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::world;

/// A client of the cluster `kubeconfig` names.
pub async fn client(kubeconfig: &std::path::Path) -> anyhow::Result<kube::Client> {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).with_context(|| {
        format!(
            "reading {} (is `fairlead up` running? --kubeconfig names another)",
            kubeconfig.display()
        )
    })?;
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Server-side applies `object`, its kind found by discovery.
pub async fn apply(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("{api_version} {kind} is not served"))?;
    let api: Api<DynamicObject> = if capabilities.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), world::namespace_of(object), &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    api.patch(
        name,
        &PatchParams::apply(world::MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {kind} {name}"))?;
    Ok(())
}

/// The address the LoadBalancer Service `namespace/name` got (the local runner gives one
/// once the instance's proxy runs).
pub async fn entry_address(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + crate::READY_WITHIN;
    loop {
        let service = services.get_opt(name).await?;
        let ip = service
            .as_ref()
            .and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref())
            .and_then(|i| i.first()?.ip.clone());
        if let Some(ip) = ip {
            return Ok(ip);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the Service {namespace}/{name} got no LoadBalancer address within {}s (is the instance ready? `kubectl get clusteralbinstances`)",
            crate::READY_WITHIN.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
