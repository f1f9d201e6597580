//! W3C trace-context propagation across HTTP (axum/hyper) and gRPC (tonic).
//!
//! Incoming requests continue the caller's trace ([`extract_http`], [`extract_grpc`], and the
//! [`http_server_span`] middleware); outgoing requests carry ours ([`inject_http`],
//! [`inject_grpc`]). The propagator is the global one, which [`crate::telemetry::Telemetry::init`]
//! sets to W3C `traceparent`/`tracestate`.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

struct MetadataExtractor<'a>(&'a tonic::metadata::MetadataMap);

impl Extractor for MetadataExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(key.as_bytes()),
            value.parse(),
        ) {
            self.0.insert(key, value);
        }
    }
}

/// The caller's trace context from HTTP headers (empty when there is none).
pub fn extract_http(headers: &HeaderMap) -> Context {
    opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)))
}

/// Writes the current span's trace context into HTTP headers.
pub fn inject_http(headers: &mut HeaderMap) {
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut HeaderInjector(headers))
    });
}

/// The caller's trace context from gRPC metadata (empty when there is none).
pub fn extract_grpc(metadata: &tonic::metadata::MetadataMap) -> Context {
    opentelemetry::global::get_text_map_propagator(|p| p.extract(&MetadataExtractor(metadata)))
}

/// Writes the current span's trace context into gRPC metadata.
pub fn inject_grpc(metadata: &mut tonic::metadata::MetadataMap) {
    let cx = tracing::Span::current().context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut MetadataInjector(metadata))
    });
}

/// Axum middleware: one server span per request (`GET /metrics`), a child of the caller's
/// trace when the request carries `traceparent`, with the OpenTelemetry HTTP attributes.
///
/// Use with `axum::middleware::from_fn(http_server_span)`.
pub async fn http_server_span(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    let method = request.method().as_str().to_owned();
    let span = tracing::info_span!(
        "http.request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    if let Err(err) = span.set_parent(extract_http(request.headers())) {
        tracing::debug!(error = %err, "ignoring the caller's trace context");
    }
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;

    fn with_w3c() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
    }

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn http_headers_round_trip() {
        with_w3c();
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", TRACEPARENT.parse().unwrap());
        let cx = extract_http(&headers);
        let span = cx.span();
        let sc = span.span_context();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_remote() && sc.is_sampled());

        let mut out = HeaderMap::new();
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut HeaderInjector(&mut out))
        });
        assert_eq!(out.get("traceparent").unwrap(), TRACEPARENT);
    }

    #[test]
    fn grpc_metadata_round_trip() {
        with_w3c();
        let mut metadata = tonic::metadata::MetadataMap::new();
        metadata.insert("traceparent", TRACEPARENT.parse().unwrap());
        let cx = extract_grpc(&metadata);
        let mut out = tonic::metadata::MetadataMap::new();
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&cx, &mut MetadataInjector(&mut out))
        });
        assert_eq!(out.get("traceparent").unwrap(), TRACEPARENT);
    }

    #[test]
    fn missing_or_garbage_context_is_empty() {
        with_w3c();
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", "not-a-trace".parse().unwrap());
        assert!(!extract_http(&headers).span().span_context().is_valid());
        assert!(
            !extract_http(&HeaderMap::new())
                .span()
                .span_context()
                .is_valid()
        );
    }
}
