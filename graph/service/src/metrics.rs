//! The graph service's metrics.

use fairlead_kit::metrics::{FAST_LATENCY_BUCKETS, Metrics, MetricsError};
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge};

/// The graph service's metrics.
#[derive(Clone)]
pub struct GraphMetrics {
    /// Seconds to build the graph.
    pub build_seconds: Histogram,
    /// Nodes and edges in the graph.
    pub elements: IntGauge,
    /// Graph versions published.
    pub versions: IntCounter,
    /// Open watches.
    pub watchers: IntGauge,
    /// Requests by endpoint and code.
    pub requests: IntCounterVec,
    /// SubjectAccessReviews asked, by result (`allowed`, `denied`, `error`).
    pub reviews: IntCounterVec,
    /// Failed Prometheus queries of the traffic overlay.
    pub traffic_errors: IntCounter,
}

impl GraphMetrics {
    /// Registers them.
    pub fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let reviews = metrics.counter_vec(
            "alb_graph_access_reviews_total",
            "SubjectAccessReviews the graph asked (cache misses), by result",
            &["result"],
        )?;
        for result in ["allowed", "denied", "error"] {
            reviews.with_label_values(&[result]);
        }
        Ok(Self {
            build_seconds: metrics
                .histogram_vec(
                    "alb_graph_build_seconds",
                    "Seconds to build the relationship graph",
                    &[],
                    FAST_LATENCY_BUCKETS,
                )?
                .with_label_values(&[] as &[&str]),
            elements: metrics
                .gauge_vec("alb_graph_elements", "Nodes and edges in the graph", &[])?
                .with_label_values(&[] as &[&str]),
            versions: metrics
                .counter_vec("alb_graph_versions_total", "Graph versions published", &[])?
                .with_label_values(&[] as &[&str]),
            watchers: metrics
                .gauge_vec(
                    "alb_graph_watchers",
                    "Open graph watches (Server-Sent Events)",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
            requests: metrics.counter_vec(
                "alb_graph_requests_total",
                "Graph API requests by endpoint and status code",
                &["endpoint", "code"],
            )?,
            reviews,
            traffic_errors: metrics
                .counter_vec(
                    "alb_graph_traffic_errors_total",
                    "Prometheus queries of the traffic overlay that failed",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
        })
    }
}
