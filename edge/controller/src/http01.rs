//! cert-manager HTTP-01 bridging (Deckhouse's `migrations.http01CertificateSolverBridging`),
//! decided without I/O: while certificates are still issued through an ingress controller,
//! each HTTPRoute cert-manager makes to solve a challenge (label
//! `acme.cert-manager.io/http01-solver: "true"`, path `/.well-known/acme-challenge/<token>`)
//! gets a temporary Ingress of the configured class routing the same hosts and paths to the
//! same Service. The Ingress is owned by its route, so it goes when cert-manager deletes the
//! route; the controller also removes bridges whose route is gone.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::Value;

use crate::instance::MANAGER;

/// The label cert-manager puts on its HTTP-01 solver routes.
pub const SOLVER_LABEL: &str = "acme.cert-manager.io/http01-solver";

/// The label of the Ingresses made here, naming their route.
pub const BRIDGE_LABEL: &str = "alb.deckhouse.io/http01-bridge-for";

/// The Ingress bridging `route` (an HTTPRoute as JSON) through the ingress class `class`;
/// `None` for a route that is not a solver's or names no Service backend.
pub fn bridge(route: &Value, class: &str) -> Option<Ingress> {
    let meta = &route["metadata"];
    if meta["labels"][SOLVER_LABEL] != "true" {
        return None;
    }
    let name = meta["name"].as_str()?;
    let namespace = meta["namespace"].as_str()?;
    let mut paths = Vec::new();
    for rule in route["spec"]["rules"].as_array().into_iter().flatten() {
        let Some(backend) = rule["backendRefs"].as_array().and_then(|b| {
            b.iter().find(|r| {
                r.get("kind").is_none_or(|k| k == "Service")
                    && r.get("group").is_none_or(|g| g == "")
                    && r.get("namespace").is_none_or(|n| n == namespace)
            })
        }) else {
            continue;
        };
        let service = IngressServiceBackend {
            name: backend["name"].as_str().unwrap_or_default().to_owned(),
            port: Some(ServiceBackendPort {
                number: backend["port"].as_i64().and_then(|p| i32::try_from(p).ok()),
                name: None,
            }),
        };
        for m in rule["matches"].as_array().into_iter().flatten() {
            let Some(path) = m["path"]["value"].as_str() else {
                continue;
            };
            let kind = if m["path"]["type"] == "PathPrefix" {
                "Prefix"
            } else {
                "Exact"
            };
            paths.push(HTTPIngressPath {
                path: Some(path.to_owned()),
                path_type: kind.to_owned(),
                backend: IngressBackend {
                    service: Some(service.clone()),
                    resource: None,
                },
            });
        }
    }
    if paths.is_empty() {
        return None;
    }
    let http = Some(HTTPIngressRuleValue { paths });
    let hosts: Vec<&str> = route["spec"]["hostnames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let rules: Vec<IngressRule> = if hosts.is_empty() {
        vec![IngressRule { host: None, http }]
    } else {
        hosts
            .iter()
            .map(|host| IngressRule {
                host: Some((*host).to_owned()),
                http: http.clone(),
            })
            .collect()
    };
    Some(Ingress {
        metadata: ObjectMeta {
            name: Some(format!("{name}-http01")),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([
                (BRIDGE_LABEL.to_owned(), name.to_owned()),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    MANAGER.to_owned(),
                ),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "gateway.networking.k8s.io/v1".to_owned(),
                kind: "HTTPRoute".to_owned(),
                name: name.to_owned(),
                uid: meta["uid"].as_str().unwrap_or_default().to_owned(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(IngressSpec {
            ingress_class_name: Some(class.to_owned()),
            rules: Some(rules),
            ..IngressSpec::default()
        }),
        status: None,
    })
}

/// Applies the bridge of every solver route, and removes bridges whose route is gone.
pub async fn sync(client: &kube::Client, class: &str) -> Result<(), kube::Error> {
    use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
    let routes: Api<DynamicObject> =
        Api::all_with(client.clone(), &crate::crds::resource("HTTPRoute"));
    let mut wanted = std::collections::BTreeSet::new();
    for route in routes
        .list(&ListParams::default().labels(&format!("{SOLVER_LABEL}=true")))
        .await?
        .items
    {
        let Some(ingress) = serde_json::to_value(&route)
            .ok()
            .and_then(|r| bridge(&r, class))
        else {
            continue;
        };
        let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
        let name = ingress.metadata.name.clone().unwrap_or_default();
        let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&ingress),
        )
        .await?;
        wanted.insert((namespace, name));
    }
    let ingresses: Api<Ingress> = Api::all(client.clone());
    for ingress in ingresses
        .list(&ListParams::default().labels(BRIDGE_LABEL))
        .await?
        .items
    {
        let (Some(namespace), Some(name)) = (ingress.metadata.namespace, ingress.metadata.name)
        else {
            continue;
        };
        if !wanted.contains(&(namespace.clone(), name.clone())) {
            let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace);
            api.delete(&name, &DeleteParams::default()).await?;
            tracing::info!(ingress = %format!("{namespace}/{name}"), "removed an HTTP-01 bridge whose route is gone");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_solver_route_is_bridged_through_the_ingress_class() {
        let route = json!({"metadata": {"name": "cm-acme-http-solver-abc", "namespace": "apps",
                "uid": "u1", "labels": {SOLVER_LABEL: "true"}},
            "spec": {"hostnames": ["shop.example.com"],
                "rules": [{"matches": [{"path": {"type": "Exact",
                        "value": "/.well-known/acme-challenge/token123"}}],
                    "backendRefs": [{"name": "cm-acme-http-solver-xyz", "port": 8089}]}]}});
        let ingress = serde_json::to_value(bridge(&route, "nginx").unwrap()).unwrap();
        assert_eq!(
            ingress["metadata"]["name"],
            "cm-acme-http-solver-abc-http01"
        );
        assert_eq!(ingress["metadata"]["namespace"], "apps");
        assert_eq!(ingress["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(ingress["spec"]["ingressClassName"], "nginx");
        let rule = &ingress["spec"]["rules"][0];
        assert_eq!(rule["host"], "shop.example.com");
        assert_eq!(
            rule["http"]["paths"][0],
            json!({"path": "/.well-known/acme-challenge/token123", "pathType": "Exact",
                "backend": {"service": {"name": "cm-acme-http-solver-xyz", "port": {"number": 8089}}}})
        );
        let mut plain = route.clone();
        plain["metadata"]["labels"] = json!({});
        assert_eq!(bridge(&plain, "nginx"), None, "not a solver's route");
        let mut foreign = route;
        foreign["spec"]["rules"][0]["backendRefs"][0]["namespace"] = json!("elsewhere");
        assert_eq!(
            bridge(&foreign, "nginx"),
            None,
            "an Ingress reaches its own namespace only"
        );
    }
}
