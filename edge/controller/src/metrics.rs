//! The gateway controller's metrics (`alb_controller_` prefix): its reconciles (of an
//! instance's Gateway, and the cluster-wide jobs' rounds) and their duration, each instance's
//! failures in a row, instances by kind and state, each certificate it keeps, by Secret (when
//! it expires and how often it was issued), and its admission reviews by webhook and verdict.
//! Labels are kinds, instances, states and Secret names, never a pod's.

use fairlead_kit::metrics::{Metrics, MetricsError, NETWORK_LATENCY_BUCKETS};
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

/// The `alb_controller_*` families.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// Reconciles (of an instance's Gateway, and the jobs' rounds), by result (`ok`,
    /// `error`).
    pub reconciles: IntCounterVec,
    /// How long a reconcile of an instance's Gateway took.
    pub duration: HistogramVec,
    /// Each instance's failed reconciles in a row (0 once one succeeds), by kind and instance.
    pub instance_failures: IntGaugeVec,
    /// Instances by kind and state (`ready`, `not_ready`, `conflict`).
    pub instances: IntGaugeVec,
    /// Each controlling instance's readiness (1 or 0), by kind and instance (few: one per
    /// Gateway).
    pub instance_ready: IntGaugeVec,
    /// Each kept certificate's expiry, Unix seconds, by Secret (set through [`Self::expires`]).
    expiry: IntGaugeVec,
    /// Certificates issued, by Secret and reason.
    pub issued: IntCounterVec,
    /// Admission reviews, by webhook and verdict (`allowed`, `denied`, `error`).
    pub webhook_requests: IntCounterVec,
    /// How long a review took, by webhook.
    pub webhook_duration: HistogramVec,
    /// The Secrets `expiry` has a series for.
    expiring: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

/// The states an instance is counted in.
pub const STATES: [&str; 3] = ["ready", "not_ready", "conflict"];

/// The instance kinds.
pub const KINDS: [&str; 2] = ["ClusterALBInstance", "ALBInstance"];

impl ControllerMetrics {
    /// Registers the families, every series of fixed labels present from the start.
    pub fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let this = Self {
            reconciles: metrics.counter_vec(
                "alb_controller_reconciles_total",
                "Reconciles of the gateway controller (of an instance's Gateway, and rounds of its cluster-wide jobs: certificates, the proxies' binding, HTTP-01, cleanup), by result.",
                &["result"],
            )?,
            duration: metrics.histogram_vec(
                "alb_controller_reconcile_duration_seconds",
                "Duration of one reconcile of an instance's Gateway by the gateway controller.",
                &[],
                NETWORK_LATENCY_BUCKETS,
            )?,
            instance_failures: metrics.gauge_vec(
                "alb_controller_instance_reconcile_failures",
                "Failed reconciles in a row of the instance's Gateway (0 once one succeeds; retried with backoff), by kind and instance (namespace/name for an ALBInstance).",
                &["kind", "instance"],
            )?,
            instances: metrics.gauge_vec(
                "alb_controller_instances",
                "ALB instances, by kind and state (ready, not_ready, conflict).",
                &["kind", "state"],
            )?,
            instance_ready: metrics.gauge_vec(
                "alb_controller_instance_ready",
                "1 when the instance's Gateway is programmed and a proxy is ready, else 0; by kind and instance (namespace/name for an ALBInstance).",
                &["kind", "instance"],
            )?,
            expiry: metrics.gauge_vec(
                "alb_controller_certificate_expiry_timestamp_seconds",
                "When each certificate the controller keeps expires (Unix time), by Secret.",
                &["secret"],
            )?,
            issued: metrics.counter_vec(
                "alb_controller_certificates_issued_total",
                "Certificates the controller issued, by Secret and reason.",
                &["secret", "reason"],
            )?,
            webhook_requests: metrics.counter_vec(
                "alb_controller_webhook_requests_total",
                "Admission reviews the controller's webhooks answered, by webhook and verdict (allowed, denied, error: what it needed could not be read).",
                &["webhook", "verdict"],
            )?,
            webhook_duration: metrics.histogram_vec(
                "alb_controller_webhook_duration_seconds",
                "How long an admission review took, by webhook.",
                &["webhook"],
                NETWORK_LATENCY_BUCKETS,
            )?,
            expiring: Default::default(),
        };

        for result in ["ok", "error"] {
            this.reconciles.with_label_values(&[result]);
        }
        for kind in KINDS {
            for state in STATES {
                this.instances.with_label_values(&[kind, state]);
            }
        }
        this.duration.with_label_values(&[] as &[&str]);
        Ok(this)
    }

    /// Sets the expiry of the certificate in `secret` (Unix seconds).
    pub fn expires(&self, secret: &str, at: i64) {
        self.expiry.with_label_values(&[secret]).set(at);
        self.expiring
            .lock()
            .expect("expiring")
            .insert(secret.to_owned());
    }

    /// Drops the expiry series of Secrets not in `kept` (their Gateways went), so no alert
    /// fires for a certificate that is gone.
    pub fn retain_expiry(&self, kept: &std::collections::BTreeSet<String>) {
        let mut expiring = self.expiring.lock().expect("expiring");
        for gone in expiring.iter().filter(|s| !kept.contains(*s)) {
            let _ = self.expiry.remove_label_values(&[gone.as_str()]);
        }
        expiring.retain(|s| kept.contains(s));
    }

    /// A private registry's families, for tests and tools that do not export them.
    pub fn unregistered() -> Self {
        Self::new(&Metrics::new("unregistered").expect("a fresh registry registers"))
            .expect("a fresh registry registers")
    }
}
