//! One Prometheus registry per process, with the helpers every component uses to add to it.
//!
//! Naming follows the component prefixes of the architecture (`swh_`, `alb_xds_`, …); the kit's
//! own metrics use `fairlead_`. Histograms get bucket layouts chosen for what they measure, and
//! labels stay low-cardinality: never a pod name or an IP on a histogram.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Errors from registering or encoding metrics.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A metric could not be created or registered (bad name, duplicate registration).
    #[error("metric {name}: {source}")]
    Register {
        /// The metric's full name.
        name: String,
        /// What Prometheus reported.
        #[source]
        source: prometheus::Error,
    },
    /// The registry could not be encoded in the text format.
    #[error("encoding metrics: {0}")]
    Encode(#[from] prometheus::Error),
}

/// Buckets for latencies of in-process work and loopback I/O: 100 µs to 10 s.
pub const FAST_LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Buckets for network calls that may time out (probes, API requests): 1 ms to 60 s.
pub const NETWORK_LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The process's metric registry. Cheap to clone; clones share the registry.
#[derive(Clone, Debug)]
pub struct Metrics {
    registry: Registry,
    /// The metric families components registered through [`Metrics::shared`], by type.
    families: std::sync::Arc<std::sync::Mutex<Families>>,
}

/// Registered families by their type.
#[derive(Default)]
struct Families(std::collections::HashMap<std::any::TypeId, Box<dyn std::any::Any + Send + Sync>>);

impl std::fmt::Debug for Families {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} families", self.0.len())
    }
}

impl Metrics {
    /// Creates a registry holding `fairlead_build_info` and, on Linux, the process metrics
    /// (`process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`, …).
    pub fn new(component: &str) -> Result<Self, MetricsError> {
        let metrics = Self {
            registry: Registry::new(),
            families: std::sync::Arc::default(),
        };
        #[cfg(target_os = "linux")]
        metrics
            .registry
            .register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ))
            .map_err(|source| MetricsError::Register {
                name: "process_*".into(),
                source,
            })?;
        let build_info = metrics.gauge_vec(
            "fairlead_build_info",
            "Constant 1, labelled with the running fairlead version and component.",
            &["version", "component"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), component])
            .set(1);
        Ok(metrics)
    }

    /// A component's metric families of type `T` (a struct of its counters, gauges and
    /// histograms): registered by `register` the first time any component of the process asks,
    /// the same families (clones) after. Components that share families (the health agent and
    /// controller in one process, say) each ask for them; none registers them twice.
    pub fn shared<T: Clone + Send + Sync + 'static>(
        &self,
        register: impl FnOnce(&Self) -> Result<T, MetricsError>,
    ) -> Result<T, MetricsError> {
        let mut families = self
            .families
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = std::any::TypeId::of::<T>();
        if let Some(held) = families.0.get(&id).and_then(|f| f.downcast_ref::<T>()) {
            return Ok(held.clone());
        }
        let made = register(self)?;
        families.0.insert(id, Box::new(made.clone()));
        Ok(made)
    }

    /// The underlying registry, for collectors the helpers do not cover.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Registers a counter family.
    pub fn counter_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntCounterVec, MetricsError> {
        let counter = IntCounterVec::new(Opts::new(name, help), labels).map_err(|source| {
            MetricsError::Register {
                name: name.into(),
                source,
            }
        })?;
        self.register(name, counter)
    }

    /// Registers a gauge family.
    pub fn gauge_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntGaugeVec, MetricsError> {
        let gauge = IntGaugeVec::new(Opts::new(name, help), labels).map_err(|source| {
            MetricsError::Register {
                name: name.into(),
                source,
            }
        })?;
        self.register(name, gauge)
    }

    /// Registers a histogram family with the given buckets (seconds for latencies; see
    /// [`FAST_LATENCY_BUCKETS`] and [`NETWORK_LATENCY_BUCKETS`]).
    pub fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> Result<HistogramVec, MetricsError> {
        let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
        let histogram =
            HistogramVec::new(opts, labels).map_err(|source| MetricsError::Register {
                name: name.into(),
                source,
            })?;
        self.register(name, histogram)
    }

    /// Encodes every metric in the Prometheus text exposition format (version 0.0.4).
    pub fn encode(&self) -> Result<String, MetricsError> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    fn register<C>(&self, name: &str, collector: C) -> Result<C, MetricsError>
    where
        C: prometheus::core::Collector + Clone + 'static,
    {
        self.registry
            .register(Box::new(collector.clone()))
            .map_err(|source| MetricsError::Register {
                name: name.into(),
                source,
            })?;
        Ok(collector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_strictly_increasing() {
        for buckets in [FAST_LATENCY_BUCKETS, NETWORK_LATENCY_BUCKETS] {
            assert!(buckets.windows(2).all(|w| w[0] < w[1]), "{buckets:?}");
        }
    }

    #[test]
    fn duplicate_registration_names_the_metric() {
        let metrics = Metrics::new("test").unwrap();
        metrics.counter_vec("x_total", "x", &["a"]).unwrap();
        let err = metrics.counter_vec("x_total", "x", &["a"]).unwrap_err();
        assert!(err.to_string().contains("x_total"), "{err}");
    }

    #[test]
    fn shared_families_are_registered_once() {
        #[derive(Clone)]
        struct Component(IntCounterVec);
        let metrics = Metrics::new("test").unwrap();
        let register = |m: &Metrics| m.counter_vec("y_total", "y", &["a"]).map(Component);
        let first = metrics.shared(register).unwrap();
        let again = metrics.shared(register).expect("not registered twice");
        first.0.with_label_values(&["1"]).inc();
        assert_eq!(
            again.0.with_label_values(&["1"]).get(),
            1,
            "the same family"
        );
        assert_eq!(
            metrics.encode().unwrap().matches("# TYPE y_total").count(),
            1
        );
    }

    #[test]
    fn encodes_build_info_and_process_metrics() {
        let text = Metrics::new("unit").unwrap().encode().unwrap();
        assert!(text.contains("fairlead_build_info{component=\"unit\",version=\""));
        #[cfg(target_os = "linux")]
        assert!(text.contains("process_resident_memory_bytes"));
    }
}
