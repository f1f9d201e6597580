//! The control plane's metrics (`alb_xds_` prefix): connected proxies, pushes (responses and
//! the resources they carried) and their latency, ACKs and NACKs by type, translation
//! duration and errors, snapshot sizes. Labels are the resource type (short: `cluster`,
//! `listener`…) and the Gateway; never a proxy's id or address.

use std::time::Duration;

use fairlead_kit::metrics::{FAST_LATENCY_BUCKETS, Metrics, MetricsError};
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

use crate::cache::short;
use crate::server::Observer;
use crate::sotw::Verdict;
use fairlead_key::ObjectKey;

/// The `alb_xds_*` families.
#[derive(Clone)]
pub struct XdsMetrics {
    connected: IntGaugeVec,
    pushes: IntCounterVec,
    pushed_resources: IntCounterVec,
    push_latency: HistogramVec,
    verdicts: IntCounterVec,
    /// Translation duration.
    pub translation: HistogramVec,
    /// Translations that failed to publish or write status.
    pub errors: IntCounterVec,
    /// Resources per Gateway and type.
    pub snapshot: IntGaugeVec,
    /// Status writes by result.
    pub status_writes: IntCounterVec,
    refused: IntCounterVec,
    without_geoip: IntGaugeVec,
}

impl XdsMetrics {
    /// Registers the families, with every series of fixed labels present from the start (an
    /// alert on a rate must not wait for the first error to have a series).
    pub fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let this = Self {
            connected: metrics.gauge_vec(
                "alb_xds_connected_proxies",
                "Proxies with an open xDS stream, by Gateway.",
                &["gateway"],
            )?,
            pushes: metrics.counter_vec(
                "alb_xds_pushes_total",
                "xDS responses sent, by Gateway and type.",
                &["gateway", "type"],
            )?,
            pushed_resources: metrics.counter_vec(
                "alb_xds_pushed_resources_total",
                "Resources sent in xDS responses, by Gateway and type (over delta xDS only the ones a change touched).",
                &["gateway", "type"],
            )?,
            push_latency: metrics.histogram_vec(
                "alb_xds_push_latency_seconds",
                "Time from a snapshot being published to its response going out on a stream.",
                &["type"],
                FAST_LATENCY_BUCKETS,
            )?,
            verdicts: metrics.counter_vec(
                "alb_xds_responses_total",
                "Proxies' answers to xDS responses, by type and verdict (ack, nack).",
                &["gateway", "type", "verdict"],
            )?,
            translation: metrics.histogram_vec(
                "alb_xds_translation_duration_seconds",
                "Duration of one translation of every Gateway.",
                &[],
                FAST_LATENCY_BUCKETS,
            )?,
            errors: metrics.counter_vec(
                "alb_xds_translation_errors_total",
                "Objects the translator could not read or statuses it could not write, by stage.",
                &["stage"],
            )?,
            snapshot: metrics.gauge_vec(
                "alb_xds_snapshot_resources",
                "Resources in the current snapshot, by Gateway and type.",
                &["gateway", "type"],
            )?,
            status_writes: metrics.counter_vec(
                "alb_xds_status_writes_total",
                "Gateway API status writes, by result.",
                &["result"],
            )?,
            refused: metrics.counter_vec(
                "alb_xds_streams_refused_total",
                "xDS streams refused because the client certificate names another Gateway than the one asked for.",
                &["gateway"],
            )?,
            without_geoip: metrics.gauge_vec(
                "alb_xds_proxies_without_geoip",
                "Proxies served their Gateway's listeners without the GeoIP filter, lacking one of its databases, by Gateway.",
                &["gateway"],
            )?,
        };
        for stage in ["read", "status"] {
            this.errors.with_label_values(&[stage]);
        }
        for result in ["ok", "error"] {
            this.status_writes.with_label_values(&[result]);
        }
        for type_url in crate::cache::ORDER {
            this.push_latency.with_label_values(&[short(type_url)]);
        }
        this.translation.with_label_values(&[] as &[&str]);
        Ok(this)
    }
}

impl Observer for XdsMetrics {
    fn connected(&self, group: &ObjectKey) {
        self.connected.with_label_values(&[group.as_str()]).inc();
        // Present at 0 for every Gateway with proxies, for alerts and dashboards.
        self.without_geoip.with_label_values(&[group.as_str()]);
    }

    fn disconnected(&self, group: &ObjectKey) {
        self.connected.with_label_values(&[group.as_str()]).dec();
    }

    fn pushed(
        &self,
        group: &ObjectKey,
        type_url: &str,
        resources: usize,
        latency: Option<Duration>,
    ) {
        let kind = short(type_url);
        self.pushes.with_label_values(&[group.as_str(), kind]).inc();
        self.pushed_resources
            .with_label_values(&[group.as_str(), kind])
            .inc_by(resources as u64);
        if let Some(latency) = latency {
            self.push_latency
                .with_label_values(&[kind])
                .observe(latency.as_secs_f64());
        }
    }

    fn refused(&self, group: &ObjectKey, _reason: &str) {
        self.refused.with_label_values(&[group.as_str()]).inc();
    }

    fn without_geoip(&self, group: &ObjectKey, without: bool) {
        let gauge = self.without_geoip.with_label_values(&[group.as_str()]);
        if without {
            gauge.inc();
        } else {
            gauge.dec();
        }
    }

    fn verdict(&self, group: &ObjectKey, verdict: &Verdict) {
        let (type_url, what) = match verdict {
            Verdict::Ack { type_url, .. } => (type_url, "ack"),
            Verdict::Nack { type_url, .. } => (type_url, "nack"),
        };
        self.verdicts
            .with_label_values(&[group.as_str(), short(type_url), what])
            .inc();
    }
}
