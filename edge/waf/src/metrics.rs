//! What the WAF counts: requests inspected by route and verdict, the rules behind blocked
//! requests and behind detection-only matches (by route and rule id), the engine's time per
//! request, the compiled sets held, and requests it could not inspect.

use fairlead_kit::metrics::{FAST_LATENCY_BUCKETS, Metrics, MetricsError};
use prometheus::{HistogramVec, IntCounterVec, IntGauge};

/// The WAF's metrics.
#[derive(Clone)]
pub struct WafMetrics {
    /// Requests inspected, by route and verdict (`passed`, `blocked`, `detected`, `error`).
    pub requests: IntCounterVec,
    /// Rules that matched a blocked request, by route and rule id.
    pub blocked: IntCounterVec,
    /// Rules that matched under detection only, by route and rule id.
    pub detected: IntCounterVec,
    /// The engine's time per request, by route.
    pub inspection: HistogramVec,
    /// Compiled rule sets held.
    pub rule_sets: IntGauge,
}

impl WafMetrics {
    /// Registers the metrics.
    pub fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        Ok(Self {
            requests: metrics.counter_vec(
                "fairlead_waf_requests_total",
                "Requests the WAF inspected, by route and verdict (passed, blocked, detected, error).",
                &["route", "verdict"],
            )?,
            blocked: metrics.counter_vec(
                "fairlead_waf_blocked_rules_total",
                "Rules that matched requests the WAF blocked, by route and rule id.",
                &["route", "rule"],
            )?,
            detected: metrics.counter_vec(
                "fairlead_waf_detected_rules_total",
                "Rules that matched requests under detection only (passed and logged), by route and rule id.",
                &["route", "rule"],
            )?,
            inspection: metrics.histogram_vec(
                "fairlead_waf_inspection_seconds",
                "Time the engine took for a request (headers and body), by route.",
                &["route"],
                FAST_LATENCY_BUCKETS,
            )?,
            rule_sets: metrics
                .gauge_vec(
                    "fairlead_waf_rule_sets",
                    "Compiled rule sets the WAF holds.",
                    &[],
                )?
                .with_label_values(&[] as &[&str]),
        })
    }
}
