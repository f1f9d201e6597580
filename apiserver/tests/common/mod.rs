//! Shared fixtures of the API server's integration tests: a server with a client, and raw
//! requests through that client (same TLS and token as the components use).

#![allow(dead_code)]

use fairlead_apiserver::{ApiServer, Config};

/// The JSON content type.
pub const JSON: &str = "application/json";

/// A server on its own port, and a client of it.
pub async fn server(config: Config) -> (ApiServer, kube::Client) {
    let server = ApiServer::start(config).await.unwrap();
    let client = server.client().await.unwrap();
    (server, client)
}

/// One raw request with a body of `content_type`; the answer's code, headers and JSON body
/// (null when it is not JSON).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    content_type: &str,
    path: &str,
    body: Vec<u8>,
) -> (u16, http::HeaderMap, serde_json::Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (
        status,
        headers,
        serde_json::from_slice(&bytes).unwrap_or_default(),
    )
}
