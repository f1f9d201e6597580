//! The Gateway API CRDs (standard channel, generated from the `gateway-api` crate's types) and
//! the `d8-alb` GatewayClass, installed by `fairlead up` so a user can apply a Gateway and
//! routes right away. A cluster may carry the upstream bundle instead; the index watches
//! whichever versions are served.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;

/// The GatewayClass served by fairlead.
pub const GATEWAY_CLASS: &str = "d8-alb";

/// The standard-channel CRDs.
pub fn gateway_api() -> Vec<CustomResourceDefinition> {
    use gateway_api::apis::standard::{
        backendtlspolicies::BackendTlsPolicy, gatewayclasses::GatewayClass, gateways::Gateway,
        grpcroutes::GrpcRoute, httproutes::HttpRoute, listenersets::ListenerSet,
        referencegrants::ReferenceGrant, tlsroutes::TlsRoute,
    };
    vec![
        GatewayClass::crd(),
        Gateway::crd(),
        HttpRoute::crd(),
        GrpcRoute::crd(),
        TlsRoute::crd(),
        ListenerSet::crd(),
        ReferenceGrant::crd(),
        BackendTlsPolicy::crd(),
    ]
    .into_iter()
    .map(with_columns)
    .collect()
}

/// The `kubectl get` columns of the upstream bundle, which the generated CRDs lack: a class's
/// controller and acceptance, a Gateway's class, address and programming, a route's
/// hostnames, and every object's age.
fn with_columns(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceColumnDefinition;
    let column = |name: &str, type_: &str, path: &str| CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: path.to_owned(),
        ..Default::default()
    };
    let condition = |type_: &str| format!(".status.conditions[?(@.type==\"{type_}\")].status");
    let mut columns = match crd.spec.names.kind.as_str() {
        "GatewayClass" => vec![
            column("Controller", "string", ".spec.controllerName"),
            column("Accepted", "string", &condition("Accepted")),
        ],
        "Gateway" => vec![
            column("Class", "string", ".spec.gatewayClassName"),
            column("Address", "string", ".status.addresses[*].value"),
            column("Programmed", "string", &condition("Programmed")),
        ],
        "ListenerSet" => vec![
            column("Accepted", "string", &condition("Accepted")),
            column("Programmed", "string", &condition("Programmed")),
        ],
        "HTTPRoute" | "GRPCRoute" | "TLSRoute" => {
            vec![column("Hostnames", "string", ".spec.hostnames")]
        }
        _ => Vec::new(),
    };
    columns.push(column("Age", "date", ".metadata.creationTimestamp"));
    for version in &mut crd.spec.versions {
        if version
            .additional_printer_columns
            .as_ref()
            .is_none_or(Vec::is_empty)
        {
            version.additional_printer_columns = Some(columns.clone());
        }
    }
    crd
}

/// Creates the CRDs and the GatewayClass that do not exist yet (existing ones are left as
/// they are: a cluster's own Gateway API bundle wins).
pub async fn install(client: &kube::Client, controller_name: &str) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in gateway_api() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let resource = ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "GatewayClass".into(),
        plural: "gatewayclasses".into(),
    };
    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let class: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": controller_name},
    }))
    .map_err(kube::Error::SerdeError)?;
    // The CRD may take a moment to be served.
    for attempt in 0..50 {
        match classes.create(&PostParams::default(), &class).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 && attempt < 49 => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
