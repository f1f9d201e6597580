//! How each component of the module starts in a process (the CLI's pods and `fairlead up`
//! both call these): its metrics (shared by the two when one process runs both), its
//! readiness, and its loop on the process's shutdown.

use fairlead_kit::Runtime;
use fairlead_kit::lease::LeaseConfig;

use crate::metrics::HealthMetrics;
use crate::{agent, controller};

/// Why a component could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its metrics could not be registered.
    #[error("registering the health module's metrics: {0}")]
    Metrics(#[from] fairlead_kit::metrics::MetricsError),
    /// The controller could not bring the CRD to this version.
    #[error("updating the ServiceWithHealthchecks CRD (installed by the chart's crds/): {0}")]
    Crd(#[source] kube::Error),
}

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// The Lease whose holder reconciles ([`controller::LEASE`] in the pod's namespace).
    pub lease: LeaseConfig,
}

/// Starts the agent of one node: readiness `health-agent` once its caches list.
pub fn agent(
    runtime: &Runtime,
    client: kube::Client,
    settings: agent::Settings,
) -> Result<(), StartError> {
    let metrics = runtime.metrics.shared(HealthMetrics::new)?;
    let ready = runtime.readiness.register("health-agent");
    let stop = runtime.shutdown.token();
    runtime
        .shutdown
        .spawn(agent::run(client, settings, metrics, stop, move || {
            ready.ready()
        }));
    Ok(())
}

/// Starts the controller: brings the CRD to this version, then reconciles while it holds the
/// Lease; readiness `health-controller` once its caches list.
pub async fn controller(
    runtime: &Runtime,
    client: kube::Client,
    settings: ControllerSettings,
) -> Result<(), StartError> {
    let metrics = runtime.metrics.shared(HealthMetrics::new)?;
    let ready = runtime.readiness.register("health-controller");
    controller::ensure_crd(&client)
        .await
        .map_err(StartError::Crd)?;
    let stop = runtime.shutdown.token();
    runtime.shutdown.spawn(controller::run(
        client,
        settings.lease,
        metrics,
        stop,
        move || ready.ready(),
    ));
    Ok(())
}
