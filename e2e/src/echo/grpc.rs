//! echo-basic's gRPC server (`GRPC_ECHO_SERVER`) and the suite's gRPC client: the service
//! `gateway_api_conformance.echo_basic.grpcecho.GrpcEcho` of its `grpcecho.proto`, whose
//! `Echo` and `EchoTwo` answer with what the server saw (the method, the request's metadata,
//! its authority, the pod it plays) and whose `EchoThree` is unimplemented. The server speaks
//! gRPC over cleartext HTTP/2 as the suite's `kubernetes.io/h2c` Service ports ask; the
//! client is tonic's, a new connection per call as the suite's default client makes for its
//! weighted calls.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::{Request, Response};
use prost::Message as _;

use super::Pod;

/// The service's full name.
pub const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// A request's header, as the server saw it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Header {
    /// Its name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// The pod that answered.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Context {
    /// Its namespace.
    #[prost(string, tag = "1")]
    pub namespace: String,
    /// The ingress under test (empty here, as the suite's Deployments leave it).
    #[prost(string, tag = "2")]
    pub ingress: String,
    /// The Service (empty here, as the suite's Deployments leave it).
    #[prost(string, tag = "3")]
    pub service_name: String,
    /// Its name.
    #[prost(string, tag = "4")]
    pub pod: String,
}

/// What the server saw of a call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Assertions {
    /// `/<service>/<method>`.
    #[prost(string, tag = "1")]
    pub fully_qualified_method: String,
    /// The request's metadata.
    #[prost(message, repeated, tag = "2")]
    pub headers: Vec<Header>,
    /// Its `:authority`.
    #[prost(string, tag = "3")]
    pub authority: String,
    /// The pod that answered.
    #[prost(message, optional, tag = "4")]
    pub context: Option<Context>,
}

/// A call's request (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoRequest {}

/// A call's answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EchoResponse {
    /// What the server saw.
    #[prost(message, optional, tag = "1")]
    pub assertions: Option<Assertions>,
    /// The request.
    #[prost(message, optional, tag = "2")]
    pub request: Option<EchoRequest>,
}

type Body = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// Starts the gRPC echo playing `pod` on `127.0.0.1` (HTTP/2 without TLS); its port.
pub async fn serve(pod: Pod) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let pod = pod.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let pod = pod.clone();
                    async move { Ok::<_, Infallible>(answer(&pod, request).await) }
                });
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                        .await;
            });
        }
    });
    port
}

/// The answer to one call: `Echo` and `EchoTwo` echoed, anything else `UNIMPLEMENTED` (12)
/// with no message, as a gRPC server answers a method it does not have.
async fn answer(pod: &Pod, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let _ = body.collect().await;
    let method = parts.uri.path().to_owned();
    let known = [format!("/{SERVICE}/Echo"), format!("/{SERVICE}/EchoTwo")];
    let response = Response::builder().header("content-type", "application/grpc");
    if !known.contains(&method) {
        return response
            .header("grpc-status", "12")
            .body(StreamBody::new(futures::stream::iter(Vec::new())))
            .expect("a response");
    }
    let authority = parts
        .uri
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut headers = vec![Header {
        key: ":authority".into(),
        value: authority.clone(),
    }];
    headers.extend(parts.headers.iter().map(|(name, value)| Header {
        key: name.as_str().to_owned(),
        value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
    }));
    let echoed = EchoResponse {
        assertions: Some(Assertions {
            fully_qualified_method: method,
            headers,
            authority,
            context: Some(Context {
                namespace: pod.namespace.clone(),
                pod: pod.name.clone(),
                ..Context::default()
            }),
        }),
        request: Some(EchoRequest {}),
    };
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    let frames = vec![
        Ok(Frame::data(Bytes::from(frame(&echoed.encode_to_vec())))),
        Ok(Frame::trailers(trailers)),
    ];
    response
        .body(StreamBody::new(futures::stream::iter(frames)))
        .expect("a response")
}

/// A gRPC message on the wire: uncompressed, its length, itself.
fn frame(message: &[u8]) -> Vec<u8> {
    let length = u32::try_from(message.len()).expect("a small message");
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(0);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// What a call of the suite's client asks: the method (`Echo`, `EchoTwo`, `EchoThree`), the
/// authority (the address's when `None`), the metadata.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The method.
    pub method: &'a str,
    /// The `:authority`.
    pub authority: Option<&'a str>,
    /// Metadata to send (names as the suite writes them; gRPC sends them lower-case).
    pub metadata: &'a [(&'a str, &'a str)],
}

/// How a call ended: its answer, or the status it failed with; `Err` when no call was made
/// (no connection).
pub type Called = Result<Result<EchoResponse, tonic::Status>, String>;

/// Calls `call` on `address` (`ip:port`) over a new connection, within `timeout`.
pub async fn call(address: &str, call: Call<'_>, timeout: Duration) -> Called {
    let mut endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .map_err(|e| e.to_string())?
        .connect_timeout(timeout)
        .timeout(timeout);
    if let Some(authority) = call.authority {
        endpoint = endpoint.origin(
            format!("http://{authority}")
                .parse()
                .map_err(|e: http::uri::InvalidUri| e.to_string())?,
        );
    }
    let channel = endpoint.connect().await.map_err(|e| e.to_string())?;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.map_err(|e| e.to_string())?;
    let mut request = tonic::Request::new(EchoRequest {});
    for (name, value) in call.metadata {
        let name = tonic::metadata::MetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes())
            .map_err(|e| e.to_string())?;
        request
            .metadata_mut()
            .insert(name, value.parse().map_err(|e| format!("{e:?}"))?);
    }
    let path = http::uri::PathAndQuery::try_from(format!("/{SERVICE}/{}", call.method))
        .map_err(|e| e.to_string())?;
    let codec = tonic_prost::ProstCodec::<EchoRequest, EchoResponse>::default();
    Ok(client
        .unary(request, path, codec)
        .await
        .map(tonic::Response::into_inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The echo answers its two methods with what it saw and refuses the third, as tonic's
    /// client reads it.
    #[tokio::test]
    async fn the_echo_answers_echo_and_echo_two_and_not_echo_three() {
        let port = serve(Pod {
            namespace: "ns".into(),
            name: "grpc-v1-abc-def".into(),
        })
        .await;
        let address = format!("127.0.0.1:{port}");
        let ask = |method| Call {
            method,
            authority: Some("foo.example"),
            metadata: &[("Version", "two")],
        };
        let got = call(&address, ask("EchoTwo"), Duration::from_secs(5))
            .await
            .expect("a call")
            .expect("an answer");
        let seen = got.assertions.expect("assertions");
        assert_eq!(seen.fully_qualified_method, format!("/{SERVICE}/EchoTwo"));
        assert_eq!(seen.authority, "foo.example");
        assert!(
            seen.headers
                .iter()
                .any(|h| h.key == "version" && h.value == "two")
        );
        assert_eq!(seen.context.expect("a context").pod, "grpc-v1-abc-def");
        let refused = call(&address, ask("EchoThree"), Duration::from_secs(5))
            .await
            .expect("a call")
            .expect_err("unimplemented");
        assert_eq!(refused.code(), tonic::Code::Unimplemented);
    }
}
