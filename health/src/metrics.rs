//! The health module's metrics (`swh_` prefix), shared by the agent and the controller (one
//! registration per process, so both can run in `fairlead up`). Labels are low-cardinality: namespace, resource, port,
//! mode, result, state; never a pod name or an IP.

use std::time::Duration;

use fairlead_health_api::ServiceWithHealthchecks;
use fairlead_health_plan::Planned;
use fairlead_kit::metrics::{FAST_LATENCY_BUCKETS, Metrics, MetricsError, NETWORK_LATENCY_BUCKETS};
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

/// The module's metric handles. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HealthMetrics {
    probe_duration: HistogramVec,
    probes: IntCounterVec,
    endpoints: IntGaugeVec,
    slice_writes: IntCounterVec,
    status_writes: IntCounterVec,
    sync_duration: HistogramVec,
    reconcile_errors: IntCounterVec,
}

impl HealthMetrics {
    /// Registers the module's metrics. Error counters start at zero for every component and
    /// object, so dashboards and alerts see 0 rather than no data.
    pub fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let handles = Self {
            probe_duration: metrics.histogram_vec(
                "swh_probe_duration_seconds",
                "Duration of one probe, by resource, port, mode and result.",
                &["namespace", "swh", "port", "mode", "result"],
                NETWORK_LATENCY_BUCKETS,
            )?,
            probes: metrics.counter_vec(
                "swh_probe_total",
                "Probes run, by resource, port, mode and result.",
                &["namespace", "swh", "port", "mode", "result"],
            )?,
            endpoints: metrics.gauge_vec(
                "swh_endpoints",
                "Endpoints this node publishes, by resource, port and state (ready, terminating).",
                &["namespace", "swh", "port", "state"],
            )?,
            slice_writes: metrics.counter_vec(
                "swh_endpointslice_writes_total",
                "EndpointSlice writes by operation (apply, delete) and result.",
                &["operation", "result"],
            )?,
            status_writes: metrics.counter_vec(
                "swh_status_writes_total",
                "Status writes (endpointStatuses of this node) by result.",
                &["component", "result"],
            )?,
            sync_duration: metrics.histogram_vec(
                "swh_reconcile_duration_seconds",
                "Duration of planning and writing one resource.",
                &["component"],
                FAST_LATENCY_BUCKETS,
            )?,
            reconcile_errors: metrics.counter_vec(
                "swh_reconcile_errors_total",
                "Failed writes while reconciling, by component and kind of object.",
                &["component", "object"],
            )?,
        };
        for (component, object) in [
            ("agent", "endpointslice"),
            ("agent", "status"),
            ("controller", "service"),
            ("controller", "status"),
            ("controller", "endpointslice"),
        ] {
            handles
                .reconcile_errors
                .with_label_values(&[component, object]);
        }
        Ok(handles)
    }

    fn result(ok: bool) -> &'static str {
        if ok { "success" } else { "failure" }
    }

    /// Records one probe.
    pub fn observe_probe(
        &self,
        namespace: &str,
        swh: &str,
        port: i32,
        mode: &str,
        ok: bool,
        took: Duration,
    ) {
        let port = port.to_string();
        let labels = [namespace, swh, port.as_str(), mode, Self::result(ok)];
        self.probe_duration
            .with_label_values(&labels)
            .observe(took.as_secs_f64());
        self.probes.with_label_values(&labels).inc();
    }

    /// Sets the endpoint gauges of a resource from its planned slices.
    pub fn set_endpoints(&self, swh: &ServiceWithHealthchecks, planned: &Planned) {
        let namespace = swh.metadata.namespace.as_deref().unwrap_or_default();
        let name = swh.metadata.name.as_deref().unwrap_or_default();
        for port in &swh.spec.ports {
            let target = port.effective_target_port();
            let (mut ready, mut terminating) = (0, 0);
            for slice in planned.values() {
                if slice
                    .ports
                    .as_ref()
                    .and_then(|p| p.first())
                    .and_then(|p| p.port)
                    != Some(target)
                {
                    continue;
                }
                for endpoint in slice.endpoints.iter().flatten() {
                    let conditions = endpoint.conditions.clone().unwrap_or_default();
                    if conditions.terminating == Some(true) {
                        terminating += 1;
                    } else if conditions.ready == Some(true) {
                        ready += 1;
                    }
                }
            }
            let port = port.port.to_string();
            self.endpoints
                .with_label_values(&[namespace, name, port.as_str(), "ready"])
                .set(ready);
            self.endpoints
                .with_label_values(&[namespace, name, port.as_str(), "terminating"])
                .set(terminating);
        }
    }

    /// Records one EndpointSlice write.
    pub fn slice_write(&self, operation: &str, ok: bool) {
        self.slice_writes
            .with_label_values(&[operation, Self::result(ok)])
            .inc();
    }

    /// Records one status write by `component` (`agent`, `controller`).
    pub fn status_write(&self, component: &str, ok: bool) {
        self.status_writes
            .with_label_values(&[component, Self::result(ok)])
            .inc();
    }

    /// Records the duration of one resource's reconcile by `component`.
    pub fn observe_sync(&self, component: &str, took: Duration) {
        self.sync_duration
            .with_label_values(&[component])
            .observe(took.as_secs_f64());
    }

    /// Counts a failed write of `object` (`service`, `status`, `endpointslice`).
    pub fn reconcile_error(&self, component: &str, object: &str) {
        self.reconcile_errors
            .with_label_values(&[component, object])
            .inc();
    }
}
