//! An in-process OTLP/gRPC trace receiver: what a collector would receive, kept for asserts.

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
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut received = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
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
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
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
