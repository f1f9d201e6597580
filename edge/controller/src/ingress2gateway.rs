//! The ingress-nginx → ALB converter served by the gateway controller when the module's
//! `migrations.ingress2Gateway.enabled` is on (Deckhouse's endpoint, port 8082 in the pod):
//! `POST /ingress2gateway?gateway=<ns>/<name>&scope=cluster|namespaced&ingress-class=<class>`
//! with Ingresses, Services and DexAuthenticators (one object, a `List`, or multi-document
//! YAML, at most 8 MiB: larger is 413) answers the drafted YAML ([`fairlead_edge_migrate`]);
//! a body or a parameter it cannot use is 400, saying why. Plain HTTP on the pod's address:
//! reached by `kubectl port-forward`, it reads nothing from the cluster.

use axum::extract::{DefaultBodyLimit, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use fairlead_edge_migrate::{Options, read};
use tokio_util::sync::CancellationToken;

/// The endpoint's query.
#[derive(Debug, Default, serde::Deserialize)]
struct Params {
    gateway: Option<String>,
    scope: Option<String>,
    #[serde(rename = "ingress-class")]
    ingress_class: Option<String>,
}

impl Params {
    /// The options asked for; Deckhouse's defaults for what is not.
    fn options(self) -> Result<Options, String> {
        let mut options = Options::default();
        if let Some(gateway) = self.gateway {
            options.gateway = match fairlead_key::ObjectKey::parse(&gateway) {
                Ok(key) if !key.namespace().is_empty() => key,
                _ => return Err(format!("gateway {gateway:?}: write <namespace>/<name>")),
            };
        }
        if let Some(scope) = self.scope {
            options.scope = scope.parse()?;
        }
        if let Some(class) = self.ingress_class {
            options.ingress_class = class;
        }
        Ok(options)
    }
}

async fn convert(
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
    body: String,
) -> Response {
    let options = match params
        .map_err(|e| e.to_string())
        .and_then(|Query(p)| p.options())
    {
        Ok(options) => options,
        Err(message) => return (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response(),
    };
    match read(&body) {
        Ok(inputs) => (
            [(header::CONTENT_TYPE, "application/yaml")],
            fairlead_edge_migrate::convert(&inputs, &options).yaml(),
        )
            .into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// The endpoint's routes.
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/ingress2gateway", axum::routing::post(convert))
        .layer(DefaultBodyLimit::max(fairlead_edge_migrate::read::MAX_BODY))
}

/// Serves the converter on `listener` until `stop`.
pub fn serve(listener: tokio::net::TcpListener, stop: CancellationToken) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving ingress2gateway");
    }
    tokio::spawn(async move {
        let served = axum::serve(listener, router())
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the ingress2gateway endpoint stopped");
        }
    });
}
