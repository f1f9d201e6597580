//! The control plane against the embedded API server, as `fairlead edge xds` runs it: the
//! server with the Gateway API CRDs and the `d8-alb` class, objects created from JSON, and
//! the translation loop publishing into a cache.

use std::sync::Arc;

use fairlead_edge_index::Index;
use fairlead_edge_xds::cache::Cache;
use fairlead_edge_xds::metrics::XdsMetrics;
use fairlead_edge_xds::server::NackForwarder;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use tokio_util::sync::CancellationToken;

/// The embedded API server with the Gateway API CRDs and the `d8-alb` GatewayClass; loopback
/// endpoints are allowed, as `fairlead up` allows them (local backends on 127.0.0.1).
pub async fn cluster() -> (fairlead_apiserver::ApiServer, kube::Client) {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config {
        allow_loopback_endpoints: true,
        ..fairlead_apiserver::Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    fairlead_edge_controller::crds::install(
        &client,
        fairlead_edge_model::CONTROLLER_NAME,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await
    .unwrap();
    (server, client)
}

/// Creates an object given as JSON in its namespace (`default` when it names none; a
/// Namespace and a ClusterALBInstance are cluster-scoped) (plural: the kind, lowercase, with `s`, or `-cy` → `-cies`).
pub async fn create(client: &kube::Client, value: serde_json::Value) {
    let kind = value["kind"].as_str().unwrap().to_owned();
    let api_version = value["apiVersion"].as_str().unwrap().to_owned();
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let lower = kind.to_lowercase();
    let plural = match lower.strip_suffix("cy") {
        Some(stem) => format!("{stem}cies"),
        None => format!("{lower}s"),
    };
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.clone(),
        kind: kind.clone(),
        plural,
    };
    let namespace = value["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let api: Api<DynamicObject> = if matches!(kind.as_str(), "Namespace" | "ClusterALBInstance") {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), &namespace, &ar)
    };
    let object: DynamicObject = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Starts the index and the translation loop publishing into `cache` (status writer Lease in
/// `default`);
/// returns its stop token and the NACK forwarder that reaches its Event writer.
pub fn control_plane(
    client: &kube::Client,
    cache: &Arc<Cache>,
) -> (CancellationToken, NackForwarder) {
    let metrics = XdsMetrics::new(&fairlead_kit::Metrics::new("test").unwrap()).unwrap();
    let stop = CancellationToken::new();
    let settings = fairlead_edge_control_plane::run::Settings {
        controller_name: fairlead_edge_model::CONTROLLER_NAME.into(),
        lease: fairlead_kit::lease::LeaseConfig::new("alb-xds", "default", "test"),
        // Rule sets taken as they are (the WAF's own tests compile them).
        waf: std::sync::Arc::new(fairlead_edge_translate::waf::Unchecked),
    };
    let (nacks_tx, nacks) = tokio::sync::mpsc::unbounded_channel();
    let index = Index::start(client.clone(), stop.clone());
    tokio::spawn(fairlead_edge_control_plane::run::run(
        client.clone(),
        index,
        cache.clone(),
        settings,
        metrics,
        nacks,
        stop.clone(),
        || {},
    ));
    (stop, NackForwarder(nacks_tx))
}
