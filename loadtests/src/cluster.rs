//! The cluster side of a run: a client from a kubeconfig, server-side apply (and delete) of
//! any kind (found by discovery), the local node, the address an instance's LoadBalancer Service got, and where a
//! Gateway's traffic enters.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::world;

/// A client of the cluster `cluster` names.
pub async fn client(cluster: &fairlead_kit::cluster::ClusterArgs) -> anyhow::Result<kube::Client> {
    cluster
        .client()
        .await
        .context("is `fairlead up` running? --kubeconfig or KUBECONFIG names another cluster")
}

/// The API of `object`'s kind (found by discovery) in its namespace, and its name.
async fn api_of(
    client: &kube::Client,
    object: &Value,
) -> anyhow::Result<(Api<DynamicObject>, String)> {
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
    Ok((api, name.to_owned()))
}

/// Server-side applies `object`, its kind found by discovery.
pub async fn apply(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    let (api, name) = api_of(client, object).await?;
    api.patch(
        &name,
        &PatchParams::apply(world::MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", object["kind"]))?;
    Ok(())
}

/// Server-side applies `object` and then its `status` (a subresource, which the first
/// apply leaves alone), as the controller of a kind the runner stands in for writes it.
pub async fn apply_with_status(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    apply(client, object).await?;
    let (api, name) = api_of(client, object).await?;
    api.patch_status(
        &name,
        &PatchParams::apply(world::MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("writing the status of {} {name}", object["kind"]))?;
    Ok(())
}

/// Deletes `object` (gone already is fine).
pub async fn delete(client: &kube::Client, object: &Value) -> anyhow::Result<()> {
    let (api, name) = api_of(client, object).await?;
    match api.delete(&name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting {} {name}", object["kind"])),
    }
}

/// The cluster's one node (`fairlead up`'s), which the runner's pods are on.
pub async fn local_node(client: &kube::Client) -> anyhow::Result<String> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let names: Vec<String> = nodes
        .list(&Default::default())
        .await
        .context("listing the Nodes")?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        _ => anyhow::bail!(
            "the runner's pods go on the one node of `fairlead up`; this cluster has {names:?}"
        ),
    }
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

/// Where the traffic of the Gateway `key` enters for `scheme` (see
/// [`world::gateway_target`]).
pub async fn gateway_target(
    client: &kube::Client,
    key: &fairlead_key::ObjectKey,
    scheme: &str,
) -> anyhow::Result<url::Url> {
    let resource = kube::discovery::ApiResource::from_gvk(&GroupVersionKind::gvk(
        "gateway.networking.k8s.io",
        "v1",
        "Gateway",
    ));
    let namespace = key.namespace();
    let gateways: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let gateway = gateways
        .get_opt(key.name())
        .await?
        .with_context(|| format!("--gateway {key}: no such Gateway"))?;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), namespace);
    let service = services
        .get_opt(&world::load_balancer_service(key.name()))
        .await?
        .map(serde_json::to_value)
        .transpose()?;
    Ok(world::gateway_target(
        &serde_json::to_value(gateway)?,
        service.as_ref(),
        scheme,
    )?)
}
