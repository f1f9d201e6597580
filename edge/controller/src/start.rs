//! How the gateway controller starts in a process (the CLI's pod and `fairlead up` both call
//! [`start`]): the Gateway API CRDs and the `d8-alb` GatewayClass installed and their storage
//! versions checked (readiness `crds`), the admission webhooks (and, when asked, the
//! ingress-nginx converter) served on every replica, and the reconcile loop of the Lease
//! holder.

use fairlead_key::ObjectKey;
use fairlead_kit::Runtime;
use fairlead_kit::lease::LeaseConfig;

use crate::crds::{self, Channel};
use crate::metrics::ControllerMetrics;
use crate::{reconcile, webhook};

/// What the controller does when the cluster's Gateway API CRDs store other versions than the
/// ones it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageMismatch {
    /// Refuses to start, saying why: objects of another storage version would be read wrong
    /// (a cluster).
    Refuse,
    /// Says so and starts: a developer's world kept in a data directory of an older fairlead
    /// still starts (`fairlead up`).
    Warn,
}

/// How the controller runs.
#[derive(Debug)]
pub struct Settings {
    /// The GatewayClass controller name it installs `d8-alb` with.
    pub controller_name: String,
    /// The Gateway API channel installed when the CRDs are missing.
    pub channel: Channel,
    /// What to do about other storage versions.
    pub storage_mismatch: StorageMismatch,
    /// The Lease whose holder reconciles ([`reconcile::LEASE`]).
    pub lease: LeaseConfig,
    /// The reconcile loop's configuration.
    pub reconcile: reconcile::Config,
    /// Where the admission webhooks are served (the composition binds it).
    pub webhook_listener: tokio::net::TcpListener,
    /// The users whose changes to managed Gateways the webhooks admit.
    pub managed_gateway_editors: Vec<String>,
    /// Where the ingress-nginx converter is served, when the module's
    /// `migrations.ingress2Gateway.enabled` is on ([`crate::ingress2gateway`]).
    pub ingress2gateway_listener: Option<tokio::net::TcpListener>,
}

/// Why the controller could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its metrics could not be registered.
    #[error("registering the gateway controller's metrics: {0}")]
    Metrics(#[from] fairlead_kit::metrics::MetricsError),
    /// The CRDs or the GatewayClass could not be installed.
    #[error(
        "installing the Gateway API CRDs ({} {channel}) and the d8-alb GatewayClass: {source}",
        crds::GATEWAY_API_VERSION
    )]
    Install {
        /// The channel asked for.
        channel: &'static str,
        /// Why.
        source: kube::Error,
    },
    /// The cluster's CRDs store other versions ([`StorageMismatch::Refuse`]).
    #[error("the cluster's Gateway API CRDs: {0}")]
    Storage(#[from] crds::StorageError),
    /// The webhooks could not be served.
    #[error(transparent)]
    Webhooks(#[from] webhook::ListenerError),
}

/// Starts the gateway controller in `runtime` with `client`.
pub async fn start(
    runtime: &Runtime,
    client: kube::Client,
    settings: Settings,
) -> Result<(), StartError> {
    let metrics = runtime.metrics.shared(ControllerMetrics::new)?;
    let ready = runtime.readiness.register("crds");
    crds::install(&client, &settings.controller_name, settings.channel)
        .await
        .map_err(|source| StartError::Install {
            channel: settings.channel.name(),
            source,
        })?;
    match (
        crds::check_storage_versions(&client).await,
        settings.storage_mismatch,
    ) {
        (Ok(()), _) => {}
        (Err(e), StorageMismatch::Refuse) => return Err(e.into()),
        (Err(e), StorageMismatch::Warn) => tracing::warn!(
            error = %e,
            "the Gateway API CRDs stored here are not the ones fairlead needs; objects may be read wrong"
        ),
    }
    ready.ready();
    // Every replica answers reviews; the leader keeps the certificate and the registration.
    let webhook_tls = fairlead_kit::tls::watch_secret(
        client.clone(),
        ObjectKey::new(crate::instance::CLUSTER_NAMESPACE, webhook::SECRET),
        false,
        runtime.shutdown.token(),
    );
    webhook::serve(
        settings.webhook_listener,
        webhook_tls,
        client.clone(),
        settings.managed_gateway_editors,
        metrics.clone(),
        runtime.shutdown.token(),
    )?;
    if let Some(listener) = settings.ingress2gateway_listener {
        crate::ingress2gateway::serve(listener, runtime.shutdown.token());
    }
    let (leadership, _lease) =
        fairlead_kit::lease::spawn(client.clone(), settings.lease, runtime.shutdown.token());
    runtime.shutdown.spawn(reconcile::run(
        client,
        Some(leadership),
        settings.reconcile,
        metrics,
        runtime.shutdown.token(),
    ));
    Ok(())
}
