//! Logs and traces: `tracing` for both, OpenTelemetry over OTLP/gRPC for traces.
//!
//! Logs go to standard error, as text on a terminal and as JSON lines in a cluster. Traces are
//! exported only when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is
//! set; the standard variables are honoured: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
//! (the component's name is the default service name), `OTEL_TRACES_SAMPLER` and its argument,
//! `OTEL_EXPORTER_OTLP_HEADERS`/`_TIMEOUT`, `OTEL_BSP_*`, and `OTEL_SDK_DISABLED`.
//!
//! Export runs on a background batch processor, and the gRPC channel connects lazily, so an
//! unreachable collector never blocks or crashes a component: the first failure is logged once,
//! later batches are tried again as they come, and a recovery is logged too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::cli::{GlobalArgs, LogFormat};

/// Errors from setting telemetry up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("invalid log filter {filter:?}: {source}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// What the parser reported.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// The OTLP exporter could not be built (a malformed endpoint, say).
    #[error("OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed: {0}")]
    AlreadyInstalled(#[from] tracing_subscriber::util::TryInitError),
}

/// What to set up: resolved from [`GlobalArgs`] and the environment by
/// [`TelemetryConfig::from_args`], or built directly (tests point it at a local receiver).
#[derive(Clone, Debug)]
pub struct TelemetryConfig {
    /// Default `service.name` when `OTEL_SERVICE_NAME` does not set one.
    pub service_name: String,
    /// Log line format.
    pub log_format: LogFormat,
    /// Log filter; `RUST_LOG`, then `info`, when absent.
    pub log_filter: Option<String>,
    /// OTLP/gRPC endpoint; traces are not exported when absent.
    pub otlp_endpoint: Option<String>,
}

impl TelemetryConfig {
    /// Resolves the configuration of a component from the command line and the `OTEL_*`
    /// environment.
    pub fn from_args(args: &GlobalArgs, service_name: &str) -> Self {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
        let otlp_endpoint = if disabled {
            None
        } else {
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        };
        Self {
            service_name: service_name.to_owned(),
            log_format: args.log_format,
            log_filter: args.log_level.clone().or_else(|| env("RUST_LOG")),
            otlp_endpoint,
        }
    }
}

/// Installed telemetry; call [`Telemetry::shutdown`] before exit so buffered spans are flushed.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    export: Option<Arc<ExportHealth>>,
}

impl Telemetry {
    /// Installs the global subscriber and, with an endpoint, the OTLP trace pipeline, and sets
    /// the W3C trace-context propagator. Must be called inside a Tokio runtime when traces are
    /// exported (the gRPC channel runs on it).
    pub fn init(config: &TelemetryConfig) -> Result<Self, TelemetryError> {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let filter_text = config.log_filter.as_deref().unwrap_or("info");
        let filter =
            EnvFilter::builder()
                .parse(filter_text)
                .map_err(|source| TelemetryError::Filter {
                    filter: filter_text.to_owned(),
                    source,
                })?;
        let stderr_is_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let fmt = match config.log_format.resolve(stderr_is_terminal) {
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_writer(std::io::stderr)
                .boxed(),
            _ => tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(stderr_is_terminal)
                .boxed(),
        };

        let (provider, export, otel) = match &config.otlp_endpoint {
            Some(endpoint) => {
                let (provider, export) = tracer_provider(endpoint, &config.service_name)?;
                let tracer = provider.tracer("fairlead");
                // Spans are exported at INFO and above whatever the log filter says, so that
                // `--log-level warn` quiets logs without silencing traces.
                let layer = tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
                (Some(provider), Some(export), Some(layer))
            }
            None => (None, None, None),
        };
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .with(otel)
            .try_init()?;
        if let Some(provider) = &provider {
            opentelemetry::global::set_tracer_provider(provider.clone());
            tracing::info!(
                endpoint = config.otlp_endpoint.as_deref(),
                "exporting traces over OTLP/gRPC"
            );
        }
        Ok(Self { provider, export })
    }

    /// Whether traces are being exported.
    pub fn exports_traces(&self) -> bool {
        self.provider.is_some()
    }

    /// How many span batches failed to export so far.
    pub fn export_failures(&self) -> u64 {
        self.export
            .as_ref()
            .map_or(0, |e| e.failures.load(Ordering::Relaxed))
    }

    /// Flushes buffered spans and stops the exporter. Blocking work runs off the async threads.
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            let result = tokio::task::spawn_blocking(move || provider.shutdown()).await;
            match result {
                Ok(Ok(())) => {}
                Ok(Err(err)) => tracing::warn!(error = %err, "flushing traces at shutdown"),
                Err(err) => tracing::warn!(error = %err, "flushing traces at shutdown"),
            }
        }
    }
}

/// Builds the tracer provider: OTLP/gRPC exporter behind the reporting wrapper, batch processor,
/// resource from the environment with the component name as default `service.name`.
fn tracer_provider(
    endpoint: &str,
    service_name: &str,
) -> Result<(SdkTracerProvider, Arc<ExportHealth>), TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()?;
    let health = Arc::new(ExportHealth::default());
    let exporter = ReportingExporter {
        inner: exporter,
        health: health.clone(),
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(service_name))
        .build();
    Ok((provider, health))
}

/// The resource: `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` win; otherwise the
/// component's name is the service name.
fn resource(default_service_name: &str) -> Resource {
    let detected = Resource::builder().build();
    let named_by_env = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    let builder = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if named_by_env {
        builder.build()
    } else {
        builder
            .with_service_name(default_service_name.to_owned())
            .build()
    }
}

/// Whether exporting works, shared by the exporter wrapper and [`Telemetry`].
#[derive(Debug, Default)]
struct ExportHealth {
    failing: AtomicBool,
    failures: AtomicU64,
}

/// Wraps the OTLP exporter so that a collector outage is logged once (and its end once), not
/// once per batch.
#[derive(Debug)]
struct ReportingExporter<E> {
    inner: E,
    health: Arc<ExportHealth>,
}

impl<E: SpanExporter> SpanExporter for ReportingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                if self.health.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("OTLP trace export recovered");
                }
            }
            Err(err) => {
                self.health.failures.fetch_add(1, Ordering::Relaxed);
                if !self.health.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %err,
                        spans,
                        "OTLP trace export failing; spans are dropped and later batches are \
                         retried in the background (logged once until it recovers)"
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
