//! What the gateway controller's tests share: the embedded API server with the CRDs
//! `crds::install` puts there (the ALB instances', the standard Gateway API bundle, the
//! GatewayClass of `controller`), API resources by name, and waiting for a condition.
#![allow(dead_code, reason = "each test binary uses some of these")]

use std::time::{Duration, Instant};

use kube::discovery::ApiResource;

/// The API resource of `kind` (`plural`) in `group`/`version` (the core group: `""`).
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// What `check` returns once it returns something, within 20 s (else the test fails
/// naming `what`).
pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The embedded API server (loopback endpoints allowed, as in `fairlead up`) and a client,
/// the CRDs installed.
pub async fn cluster(controller: &str) -> (fairlead_apiserver::ApiServer, kube::Client) {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config {
        allow_loopback_endpoints: true,
        ..fairlead_apiserver::Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    fairlead_edge_controller::crds::install(
        &client,
        controller,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await
    .unwrap();
    (server, client)
}

/// The controller's reconciles against `client` with the default settings, until the token
/// returned is cancelled.
pub fn reconciling(client: &kube::Client) -> tokio_util::sync::CancellationToken {
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(fairlead_edge_controller::reconcile::run(
        client.clone(),
        None,
        Default::default(),
        fairlead_edge_controller::metrics::ControllerMetrics::unregistered(),
        stop.clone(),
    ));
    stop
}
