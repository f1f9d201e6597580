//! The `ext_proc` service Envoy asks: one gRPC stream per request of a WAF route, opened with
//! the route's rule set in its metadata ([`fairlead_edge_model::names::WAF_RULES_HEADER`] and
//! its digest). The headers are kept; once the body is in (or there is none), the request is
//! run through the rule set on a blocking thread (as many at once as there are cores) and
//! answered: through (the headers or body
//! message continues), or refused with the status the rules chose. Either way the rules that
//! matched go into the request's dynamic metadata, for the access log — ids and messages,
//! never the request's content. A rule set that cannot be had refuses the request (503): a WAF
//! route is never served uninspected.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::service::ext_proc::v3 as pb;
use envoy_types::pb::envoy::r#type::v3 as types;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use fairlead_edge_model::annotations::waf::RuleSet;
use fairlead_edge_model::names;
use fairlead_modsecurity::{Request, Verdict};
use pb::external_processor_server::{ExternalProcessor, ExternalProcessorServer};
use pb::processing_request::Request as Asked;
use pb::processing_response::Response as Answer;
use tokio_stream::Stream;

use crate::metrics::WafMetrics;
use crate::sets::Sets;

/// The service.
pub struct Service {
    sets: Arc<Sets>,
    metrics: WafMetrics,
    /// One transaction per core at a time: more only thrash the cores' caches and the C
    /// allocator's arenas (the engine allocates a great deal), and queue the same.
    engines: Arc<tokio::sync::Semaphore>,
}

impl Service {
    /// A service of `sets`, counted in `metrics`.
    pub fn new(sets: Arc<Sets>, metrics: WafMetrics) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self {
            sets,
            metrics,
            engines: Arc::new(tokio::sync::Semaphore::new(cores)),
        }
    }
}

/// Serves `service` on the Unix socket `socket` until `stop`.
pub async fn serve(
    socket: std::path::PathBuf,
    service: Service,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let incoming = fairlead_kit::socket::unix_incoming(&socket)?;
    tonic::transport::Server::builder()
        // A rule set travels in the stream's opening metadata.
        .http2_max_header_list_size(1 << 20)
        .add_service(ExternalProcessorServer::new(service))
        .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
        .await
        .map_err(std::io::Error::other)
}

type Answers = Pin<Box<dyn Stream<Item = Result<pb::ProcessingResponse, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl ExternalProcessor for Service {
    type ProcessStream = Answers;

    async fn process(
        &self,
        request: tonic::Request<tonic::Streaming<pb::ProcessingRequest>>,
    ) -> Result<tonic::Response<Answers>, tonic::Status> {
        let metadata = request.metadata();
        let text = |key: &str| {
            metadata
                .get(key)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let route = text(names::WAF_ROUTE_HEADER);
        let digest = text(names::WAF_DIGEST_HEADER);
        let rules = text(names::WAF_RULES_HEADER);
        let compiled = self
            .sets
            .get(&digest, || {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(rules.trim_end_matches('='))
                    .map_err(|e| format!("the rule set's encoding: {e}"))?;
                serde_json::from_slice::<RuleSet>(&bytes).map_err(|e| format!("the rule set: {e}"))
            })
            .await;
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let (metrics, engines) = (self.metrics.clone(), self.engines.clone());
        tokio::spawn(async move {
            let mut held: Option<Held> = None;
            while let Ok(Some(message)) = inbound.message().await {
                let asked = message.request;
                let answer = match asked {
                    Some(Asked::RequestHeaders(headers)) => {
                        let mut attributes = message.attributes;
                        attributes.extend(headers.attributes.clone());
                        let h = Held::new(&headers, &attributes);
                        if headers.end_of_stream {
                            decide(
                                &compiled,
                                h,
                                Vec::new(),
                                &route,
                                (&metrics, &engines),
                                false,
                            )
                            .await
                        } else {
                            held = Some(h);
                            continue_headers()
                        }
                    }
                    Some(Asked::RequestBody(body)) if body.end_of_stream => {
                        let h = held.take().unwrap_or_default();
                        decide(&compiled, h, body.body, &route, (&metrics, &engines), true).await
                    }
                    Some(Asked::RequestBody(_)) => continue_body(),
                    // The filter sends nothing else (responses are never inspected).
                    _ => continue_headers(),
                };
                if tx.send(Ok(answer)).await.is_err() {
                    break;
                }
            }
        });
        Ok(tonic::Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

/// A request's headers and addresses, kept until its body is in.
#[derive(Default)]
struct Held {
    method: String,
    uri: String,
    version: String,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    client: Option<(IpAddr, u16)>,
    server: Option<(IpAddr, u16)>,
}

impl Held {
    fn new(headers: &pb::HttpHeaders, attributes: &HashMap<String, Struct>) -> Self {
        let mut held = Self {
            version: "1.1".into(),
            ..Self::default()
        };
        for header in headers.headers.iter().flat_map(|h| &h.headers) {
            let value = if header.raw_value.is_empty() {
                header.value.as_bytes().to_vec()
            } else {
                header.raw_value.clone()
            };
            match header.key.as_str() {
                ":method" => held.method = String::from_utf8_lossy(&value).into_owned(),
                ":path" => held.uri = String::from_utf8_lossy(&value).into_owned(),
                ":authority" => held.headers.push((b"Host".to_vec(), value)),
                key if key.starts_with(':') => {}
                key => held.headers.push((key.as_bytes().to_vec(), value)),
            }
        }
        let attribute = |name: &str| {
            attributes
                .values()
                .find_map(|s| s.fields.get(name))
                .and_then(|v| v.kind.clone())
        };
        let address = |name: &str| match attribute(name) {
            Some(Kind::StringValue(s)) => s
                .parse::<std::net::SocketAddr>()
                .map(|a| (a.ip(), a.port()))
                .ok()
                .or_else(|| s.parse::<IpAddr>().ok().map(|ip| (ip, 0))),
            _ => None,
        };
        held.client = address("source.address");
        held.server = address("destination.address");
        if let Some(Kind::StringValue(protocol)) = attribute("request.protocol") {
            held.version = protocol.trim_start_matches("HTTP/").to_owned();
        }
        held
    }
}

/// Runs the request through its rule set and answers it.
async fn decide(
    compiled: &crate::sets::Compiled,
    held: Held,
    body: Vec<u8>,
    route: &str,
    (metrics, engines): (&WafMetrics, &tokio::sync::Semaphore),
    at_body: bool,
) -> pb::ProcessingResponse {
    let rules = match compiled {
        Ok(rules) => rules.clone(),
        Err(message) => {
            metrics.requests.with_label_values(&[route, "error"]).inc();
            tracing::error!(route, error = %message, "no rule set: the request is refused");
            return refuse(503, "waf_unavailable", None);
        }
    };
    // The semaphore is never closed: a permit always comes.
    let _engine = engines.acquire().await.ok();
    let timer = metrics.inspection.with_label_values(&[route]).start_timer();
    let verdict = tokio::task::spawn_blocking(move || {
        let headers: Vec<(&[u8], &[u8])> = held
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        let unknown = (IpAddr::from([0, 0, 0, 0]), 0);
        let (client, client_port) = held.client.unwrap_or(unknown);
        let (server, server_port) = held.server.unwrap_or(unknown);
        rules.inspect(&Request {
            client,
            client_port,
            server,
            server_port,
            method: &held.method,
            uri: &held.uri,
            http_version: &held.version,
            headers: &headers,
            body: &body,
        })
    })
    .await;
    timer.observe_duration();
    let Ok(verdict) = verdict else {
        metrics.requests.with_label_values(&[route, "error"]).inc();
        return refuse(503, "waf_failed", None);
    };
    answer(&verdict, route, metrics, at_body)
}

/// The answer to `verdict`, counted.
fn answer(
    verdict: &Verdict,
    route: &str,
    metrics: &WafMetrics,
    at_body: bool,
) -> pb::ProcessingResponse {
    let ids: Vec<&str> = verdict.matches.iter().map(|m| m.id.as_str()).collect();
    match verdict.status {
        Some(status) => {
            metrics
                .requests
                .with_label_values(&[route, "blocked"])
                .inc();
            for id in &ids {
                metrics.blocked.with_label_values(&[route, id]).inc();
            }
            tracing::info!(route, status, rules = ?ids, messages = ?verdict.matches.iter().map(|m| m.message.as_str()).collect::<Vec<_>>(), "request blocked");
            refuse(status, "waf_blocked", Some(audit(verdict, "blocked")))
        }
        None => {
            let action = if ids.is_empty() {
                metrics.requests.with_label_values(&[route, "passed"]).inc();
                None
            } else {
                metrics
                    .requests
                    .with_label_values(&[route, "detected"])
                    .inc();
                for id in &ids {
                    metrics.detected.with_label_values(&[route, id]).inc();
                }
                Some(audit(verdict, "detected"))
            };
            let mut response = if at_body {
                continue_body()
            } else {
                continue_headers()
            };
            response.dynamic_metadata = action;
            response
        }
    }
}

/// The verdict as the request's dynamic metadata: the rule ids and messages, and `action`.
fn audit(verdict: &Verdict, action: &str) -> Struct {
    let string = |s: String| Value {
        kind: Some(Kind::StringValue(s)),
    };
    let ids: Vec<&str> = verdict.matches.iter().map(|m| m.id.as_str()).collect();
    let messages: Vec<&str> = verdict
        .matches
        .iter()
        .map(|m| m.message.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    let inner = Struct {
        fields: [
            ("action".to_owned(), string(action.to_owned())),
            ("rules".to_owned(), string(ids.join(" "))),
            ("messages".to_owned(), string(messages.join("; "))),
        ]
        .into(),
    };
    Struct {
        fields: [(
            names::WAF_METADATA.to_owned(),
            Value {
                kind: Some(Kind::StructValue(inner)),
            },
        )]
        .into(),
    }
}

fn continue_headers() -> pb::ProcessingResponse {
    pb::ProcessingResponse {
        response: Some(Answer::RequestHeaders(pb::HeadersResponse {
            response: Some(pb::CommonResponse::default()),
        })),
        ..Default::default()
    }
}

fn continue_body() -> pb::ProcessingResponse {
    pb::ProcessingResponse {
        response: Some(Answer::RequestBody(pb::BodyResponse {
            response: Some(pb::CommonResponse::default()),
        })),
        ..Default::default()
    }
}

/// Refuses the request with `status` (`details` in the access log's response code details).
fn refuse(status: u16, details: &str, metadata: Option<Struct>) -> pb::ProcessingResponse {
    pb::ProcessingResponse {
        response: Some(Answer::ImmediateResponse(pb::ImmediateResponse {
            status: Some(types::HttpStatus {
                code: i32::from(status),
            }),
            headers: Some(pb::HeaderMutation {
                set_headers: vec![core::HeaderValueOption {
                    header: Some(core::HeaderValue {
                        key: "content-type".into(),
                        value: "text/plain".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            body: if status == 503 {
                b"the web application firewall cannot inspect this request\n".to_vec()
            } else {
                b"request blocked by the web application firewall\n".to_vec()
            },
            details: details.to_owned(),
            ..Default::default()
        })),
        dynamic_metadata: metadata,
        ..Default::default()
    }
}
