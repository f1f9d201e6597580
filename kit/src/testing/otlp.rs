//! An in-process OTLP trace receiver: what a collector would receive, kept for asserts.
//! [`OtlpReceiver::start`] serves OTLP/gRPC in plaintext; [`OtlpReceiver::start_tls`] serves
//! OTLP/gRPC and OTLP/HTTP (protobuf, on any other path, which it records) over TLS.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};

/// One received span, flattened with its resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedSpan {
    /// Span name.
    pub name: String,
    /// Trace id, lowercase hex.
    pub trace_id: String,
    /// Span id, lowercase hex.
    pub span_id: String,
    /// Parent span id, lowercase hex; empty for a root span.
    pub parent_span_id: String,
    /// Span kind as the proto names it (`SPAN_KIND_SERVER`, …).
    pub kind: String,
    /// Span attributes, values rendered as strings.
    pub attributes: BTreeMap<String, String>,
    /// Names of the span's events.
    pub events: Vec<String>,
    /// Attributes of the resource that sent the span (`service.name`, …).
    pub resource: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    /// The paths OTLP/HTTP exports were posted to.
    paths: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.record(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Collector {
    fn record(&self, request: ExportTraceServiceRequest) {
        let mut received = Vec::new();
        for resource_spans in request.resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| attributes(&r.attributes))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    received.push(ReceivedSpan {
                        kind: span.kind().as_str_name().to_owned(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        attributes: attributes(&span.attributes),
                        events: span.events.into_iter().map(|e| e.name).collect(),
                        resource: resource.clone(),
                    });
                }
            }
        }
        self.spans.lock().expect("receiver lock").extend(received);
    }
}

/// An OTLP/HTTP export (`application/x-protobuf`), on any path but gRPC's.
async fn http_export(
    axum::extract::State(collector): axum::extract::State<Collector>,
    uri: http::Uri,
    body: axum::body::Bytes,
) -> (
    http::StatusCode,
    [(http::header::HeaderName, &'static str); 1],
    Vec<u8>,
) {
    use prost::Message as _;
    let protobuf = [(http::header::CONTENT_TYPE, "application/x-protobuf")];
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            collector
                .paths
                .lock()
                .expect("receiver lock")
                .push(uri.path().to_owned());
            collector.record(request);
            (
                http::StatusCode::OK,
                protobuf,
                ExportTraceServiceResponse::default().encode_to_vec(),
            )
        }
        Err(_) => (http::StatusCode::BAD_REQUEST, protobuf, Vec::new()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| {
            (
                kv.key.clone(),
                kv.value.as_ref().map(render).unwrap_or_default(),
            )
        })
        .collect()
}

fn render(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// A running receiver; stops when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    collector: Collector,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let collector = Collector::default();
        let service = TraceServiceServer::new(collector.clone());
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move {
            if let Err(err) = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await
            {
                eprintln!("OTLP receiver stopped: {err}");
            }
        });
        Ok(Self {
            addr,
            collector,
            task,
        })
    }

    /// Starts a receiver over TLS with `tls` (HTTP/2 and HTTP/1.1) on a free loopback port:
    /// OTLP/gRPC, and OTLP/HTTP on every other path.
    pub async fn start_tls(tls: crate::tls::ServingTls) -> std::io::Result<Self> {
        use futures::StreamExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let collector = Collector::default();
        let app = axum::Router::new()
            .route_service(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                TraceServiceServer::new(collector.clone()),
            )
            .fallback(axum::routing::post(http_export))
            .with_state(collector.clone());
        let (_keep, source) = tokio::sync::watch::channel(Some(tls));
        let task = tokio::spawn(async move {
            let _keep = _keep;
            let mut incoming = std::pin::pin!(crate::tls::incoming(
                listener,
                source,
                &[b"h2", b"http/1.1"],
                "otlp receiver"
            ));
            while let Some(Ok(connection)) = incoming.next().await {
                let service = hyper_util::service::TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(connection.stream), service)
                    .await;
                });
            }
        });
        Ok(Self {
            addr,
            collector,
            task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The paths OTLP/HTTP exports were posted to, in order.
    pub fn http_paths(&self) -> Vec<String> {
        self.collector.paths.lock().expect("receiver lock").clone()
    }

    /// The endpoint to give an exporter (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.collector.spans.lock().expect("receiver lock").clone()
    }

    /// Waits until a span named `name` has arrived, or `timeout` passes.
    pub async fn wait_for_span(&self, name: &str, timeout: Duration) -> Option<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(span) = self.spans().into_iter().find(|s| s.name == name) {
                return Some(span);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
