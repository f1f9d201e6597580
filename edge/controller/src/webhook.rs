//! The admission webhooks' server and registration. Every controller replica serves
//! `POST /validate/<webhook>` over TLS with the certificate of the Secret
//! `d8-alb/alb-webhook-tls` (issued by the controller's CA for the webhook Service's names,
//! watched, so a renewal needs no restart); it looks up what a rule needs and lets
//! [`crate::admission`] decide. The leader keeps the `ValidatingWebhookConfiguration`
//! [`configuration`] (its `caBundle` the CA's certificate): `failurePolicy: Fail` for
//! instances and managed Gateways, `Ignore` for ListenerSets and routes, so a webhook that is
//! down never stops application edits.
//!
//! A review whose lookups fail (the API server unreachable) is refused by the webhooks that
//! fail closed and admitted with a warning by the others; each is counted by verdict.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use fairlead_key::ObjectKey;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::admission::{self, Request, Verdict};
use crate::instance::{CLUSTER_NAMESPACE, MANAGER};

/// The Secret of the webhooks' serving certificate.
pub const SECRET: &str = "alb-webhook-tls";

/// The name of the ValidatingWebhookConfiguration.
pub const CONFIGURATION: &str = "alb-gateway-controller";

/// The name of the webhook Service's port (the chart's Service names its port so; its
/// EndpointSlices carry the same name).
pub const SERVICE_PORT_NAME: &str = "https-webhook";

/// The controller's user name in a cluster (its ServiceAccount), the one allowed to change
/// managed Gateways.
pub const CONTROLLER_USER: &str = "system:serviceaccount:d8-alb:alb-gateway-controller";

/// One webhook: its path under `/validate/`, its name, what it reviews, and whether it fails
/// closed.
#[derive(Debug)]
pub struct Webhook {
    /// The path segment (and metrics label).
    pub path: &'static str,
    /// API groups.
    groups: &'static [&'static str],
    /// Resources.
    resources: &'static [&'static str],
    /// Operations.
    operations: &'static [&'static str],
    /// `failurePolicy: Fail`.
    fail_closed: bool,
    /// Only managed objects (`objectSelector` on the managed-by label).
    managed_only: bool,
}

/// The webhooks, in the order of the configuration.
pub const WEBHOOKS: [Webhook; 4] = [
    Webhook {
        path: "instances",
        groups: &["network.deckhouse.io"],
        resources: &["clusteralbinstances", "albinstances"],
        operations: &["CREATE", "UPDATE"],
        fail_closed: true,
        managed_only: false,
    },
    Webhook {
        path: "gateways",
        groups: &["gateway.networking.k8s.io"],
        resources: &["gateways"],
        operations: &["CREATE", "UPDATE", "DELETE"],
        fail_closed: true,
        managed_only: true,
    },
    Webhook {
        path: "listenersets",
        groups: &["gateway.networking.k8s.io", "gateway.networking.x-k8s.io"],
        resources: &["listenersets", "xlistenersets"],
        operations: &["CREATE", "UPDATE"],
        fail_closed: false,
        managed_only: false,
    },
    Webhook {
        path: "routes",
        groups: &["gateway.networking.k8s.io"],
        resources: &[
            "httproutes",
            "grpcroutes",
            "tlsroutes",
            "tcproutes",
            "udproutes",
        ],
        operations: &["CREATE", "UPDATE"],
        fail_closed: false,
        managed_only: false,
    },
];

/// Where the API server reaches the webhooks: a Service and its port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookService {
    /// The Service.
    pub service: ObjectKey,
    /// Its port.
    pub port: u16,
}

impl Default for WebhookService {
    fn default() -> Self {
        Self {
            service: ObjectKey::new(CLUSTER_NAMESPACE, "alb-gateway-controller"),
            port: 443,
        }
    }
}

impl WebhookService {
    /// The names the serving certificate carries (the API server checks
    /// `<service>.<namespace>.svc`).
    pub fn names(&self) -> Vec<String> {
        let (namespace, name) = (self.service.namespace(), self.service.name());
        vec![
            name.to_owned(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]
    }
}

/// The ValidatingWebhookConfiguration of [`WEBHOOKS`] at `service`, trusting `ca_pem`.
pub fn configuration(service: &WebhookService, ca_pem: &str) -> ValidatingWebhookConfiguration {
    let strings = |values: &[&str]| Some(values.iter().map(|v| (*v).to_owned()).collect());
    let managed = || {
        Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_owned(),
            MANAGER.to_owned(),
        )]))
    };
    let webhooks = WEBHOOKS
        .iter()
        .map(|w| ValidatingWebhook {
            name: format!("{}.alb.deckhouse.io", w.path),
            client_config: WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: service.service.namespace().to_owned(),
                    name: service.service.name().to_owned(),
                    port: Some(i32::from(service.port)),
                    path: Some(format!("/validate/{}", w.path)),
                }),
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                url: None,
            },
            rules: Some(vec![RuleWithOperations {
                api_groups: strings(w.groups),
                api_versions: strings(&["*"]),
                resources: strings(w.resources),
                operations: strings(w.operations),
                scope: Some("*".to_owned()),
            }]),
            failure_policy: Some(if w.fail_closed { "Fail" } else { "Ignore" }.to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            side_effects: "None".to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            timeout_seconds: Some(if w.fail_closed { 10 } else { 5 }),
            object_selector: w.managed_only.then(|| LabelSelector {
                match_labels: managed(),
                match_expressions: None,
            }),
            ..ValidatingWebhook::default()
        })
        .collect();
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(CONFIGURATION.to_owned()),
            labels: managed(),
            ..ObjectMeta::default()
        },
        webhooks: Some(webhooks),
    }
}

/// Applies the [`configuration`] (field manager [`MANAGER`]).
pub async fn register(
    client: &kube::Client,
    service: &WebhookService,
    ca_pem: &str,
) -> Result<(), kube::Error> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(
        CONFIGURATION,
        &kube::api::PatchParams::apply(MANAGER).force(),
        &kube::api::Patch::Apply(configuration(service, ca_pem)),
    )
    .await?;
    Ok(())
}

/// What the server's handlers share.
struct Shared {
    client: kube::Client,
    editors: Vec<String>,
    metrics: crate::metrics::ControllerMetrics,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("the admission webhook server's listener: {0}")]
pub struct ListenerError(#[source] std::io::Error);

/// Serves the webhooks on `listener` (the composition binds it) with what `tls` holds at each
/// handshake until `stop`; `editors` are the users whose changes to managed Gateways are
/// admitted (the controller's). Returns the listener's address.
pub fn serve(
    listener: tokio::net::TcpListener,
    tls: watch::Receiver<Option<fairlead_kit::tls::ServingTls>>,
    client: kube::Client,
    editors: Vec<String>,
    metrics: crate::metrics::ControllerMetrics,
    stop: CancellationToken,
) -> Result<SocketAddr, ListenerError> {
    use futures::StreamExt as _;
    // Every series from the start, so a dashboard shows zeros rather than nothing.
    for webhook in &WEBHOOKS {
        for verdict in ["allowed", "denied", "error"] {
            metrics
                .webhook_requests
                .with_label_values(&[webhook.path, verdict]);
        }
        metrics.webhook_duration.with_label_values(&[webhook.path]);
    }
    let bound = listener.local_addr().map_err(ListenerError)?;
    let app = axum::Router::new()
        .route("/validate/{webhook}", axum::routing::post(review))
        .with_state(Arc::new(Shared {
            client,
            editors,
            metrics,
        }));
    tracing::info!(addr = %bound, "admission webhooks listening (TLS)");
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(fairlead_kit::tls::incoming(
            listener,
            tls,
            &[b"h2", b"http/1.1"],
            "webhook"
        ));
        loop {
            let accepted = tokio::select! {
                () = stop.cancelled() => return,
                next = incoming.next() => next,
            };
            let Some(Ok(connection)) = accepted else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                );
                let serving = builder
                    .serve_connection(hyper_util::rt::TokioIo::new(connection.stream), service);
                tokio::select! {
                    () = stop.cancelled() => {}
                    served = serving => if let Err(e) = served {
                        tracing::debug!(remote = %connection.remote, error = %e, "a webhook connection ended");
                    },
                }
            });
        }
    });
    Ok(bound)
}

/// Why a review could not be decided.
#[derive(Debug, thiserror::Error)]
enum ReviewError {
    #[error("the request is not an AdmissionReview v1 request: {0}")]
    Malformed(&'static str),
    #[error("no webhook {0:?}")]
    Unknown(String),
    #[error("reading {what}: {source}")]
    Lookup { what: String, source: kube::Error },
}

async fn review(
    State(shared): State<Arc<Shared>>,
    Path(webhook): Path<String>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let started = Instant::now();
    let request = &body["request"];
    let uid = request["uid"].clone();
    let Some(hook) = WEBHOOKS.iter().find(|w| w.path == webhook) else {
        let error = ReviewError::Unknown(webhook);
        return Json(response(&uid, &Verdict::Deny(404, error.to_string())));
    };
    let span = tracing::info_span!("admission review", webhook = hook.path,
        operation = request["operation"].as_str().unwrap_or_default(),
        kind = request["kind"]["kind"].as_str().unwrap_or_default(),
        object = %format!("{}/{}", request["namespace"].as_str().unwrap_or_default(), request["name"].as_str().unwrap_or_default()),
        user = request["userInfo"]["username"].as_str().unwrap_or_default());
    let decided = {
        use tracing::Instrument as _;
        decide(&shared, hook, request)
            .instrument(span.clone())
            .await
    };
    let _entered = span.enter();
    let (verdict, label) = match decided {
        Ok(verdict) => {
            let label = match &verdict {
                Verdict::Allow(_) => "allowed",
                Verdict::Deny(..) => "denied",
            };
            if let Verdict::Deny(code, message) = &verdict {
                tracing::info!(code, %message, "admission denied");
            }
            (verdict, label)
        }
        Err(e) => {
            tracing::warn!(error = %e, "an admission review could not be decided");
            let message = format!("the ALB gateway controller could not check this request: {e}");
            let verdict = if hook.fail_closed {
                Verdict::Deny(500, message)
            } else {
                Verdict::Allow(vec![message])
            };
            (verdict, "error")
        }
    };
    shared
        .metrics
        .webhook_requests
        .with_label_values(&[hook.path, label])
        .inc();
    shared
        .metrics
        .webhook_duration
        .with_label_values(&[hook.path])
        .observe(started.elapsed().as_secs_f64());
    Json(response(&uid, &verdict))
}

/// The AdmissionReview answering `uid`.
fn response(uid: &Value, verdict: &Verdict) -> Value {
    let body = match verdict {
        Verdict::Allow(warnings) => json!({"uid": uid, "allowed": true, "warnings": warnings}),
        Verdict::Deny(code, message) => json!({"uid": uid, "allowed": false,
            "status": {"code": code, "message": message,
                "reason": if *code == 403 { "Forbidden" } else { "Invalid" }}}),
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": body})
}

async fn decide(shared: &Shared, hook: &Webhook, review: &Value) -> Result<Verdict, ReviewError> {
    let read = admission::Review::decode(review).map_err(ReviewError::Malformed)?;
    let request = read.request();
    let client = &shared.client;
    Ok(match hook.path {
        "instances" => {
            let gateway = match admission::instance_gateway(&request) {
                Some(key) => get(client, &crate::apply::resource("Gateway"), &key).await?,
                None => None,
            };
            admission::instance(&request, gateway.as_ref())
        }
        "gateways" => admission::gateway(&request, &shared.editors),
        "listenersets" => {
            let Some(parent_key) = admission::listener_set_parent(&request) else {
                return Ok(admission::listener_set(&request, None, &[]));
            };
            let parent = get(client, &crate::apply::resource("Gateway"), &parent_key).await?;
            let resource = reviewed_resource(review);
            let siblings: Vec<Value> = Api::<DynamicObject>::all_with(client.clone(), &resource)
                .list(&ListParams::default())
                .await
                .map_err(|source| ReviewError::Lookup {
                    what: format!("the {}", resource.plural),
                    source,
                })?
                .items
                .into_iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .filter(|o| {
                    let sibling = Request {
                        namespace: o["metadata"]["namespace"].as_str().unwrap_or_default(),
                        object: Some(o),
                        ..request
                    };
                    admission::listener_set_parent(&sibling).as_ref() == Some(&parent_key)
                })
                .collect();
            admission::listener_set(&request, parent.as_ref(), &siblings)
        }
        _ => {
            let mut parents = Vec::new();
            for (n, key) in admission::route_parents(&request) {
                if let Some(gateway) = get(client, &crate::apply::resource("Gateway"), &key).await?
                {
                    parents.push((n, gateway));
                }
            }
            admission::route(&request, &parents)
        }
    })
}

/// The API resource a review is about (`request.resource`, with its kind).
fn reviewed_resource(review: &Value) -> ApiResource {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let gvk = kube::core::GroupVersionKind::gvk(
        review["kind"]["group"].as_str().unwrap_or_default(),
        review["kind"]["version"].as_str().unwrap_or_default(),
        review["kind"]["kind"].as_str().unwrap_or_default(),
    );
    ApiResource::from_gvk_with_plural(&gvk, &text(&review["resource"]["resource"]))
}

/// The object `key` of `resource`, if it exists.
async fn get(
    client: &kube::Client,
    resource: &ApiResource,
    key: &ObjectKey,
) -> Result<Option<Value>, ReviewError> {
    Api::<DynamicObject>::namespaced_with(client.clone(), key.namespace(), resource)
        .get_opt(key.name())
        .await
        .map(|o| o.and_then(|o| serde_json::to_value(o).ok()))
        .map_err(|source| ReviewError::Lookup {
            what: format!("{} {key}", resource.kind),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_user_is_its_service_account() {
        assert_eq!(
            CONTROLLER_USER,
            format!(
                "system:serviceaccount:{}:{}",
                crate::instance::CLUSTER_NAMESPACE,
                crate::rbac::CONTROLLER.0
            )
        );
    }

    #[test]
    fn the_configuration_fails_closed_only_where_it_must() {
        let config =
            serde_json::to_value(configuration(&WebhookService::default(), "PEM")).unwrap();
        let hooks = config["webhooks"].as_array().unwrap();
        let policy = |name: &str| {
            hooks
                .iter()
                .find(|h| h["name"] == name)
                .map(|h| h["failurePolicy"].as_str().unwrap().to_owned())
        };
        assert_eq!(
            policy("instances.alb.deckhouse.io").as_deref(),
            Some("Fail")
        );
        assert_eq!(policy("gateways.alb.deckhouse.io").as_deref(), Some("Fail"));
        assert_eq!(
            policy("listenersets.alb.deckhouse.io").as_deref(),
            Some("Ignore")
        );
        assert_eq!(policy("routes.alb.deckhouse.io").as_deref(), Some("Ignore"));
        assert_eq!(
            hooks[1]["objectSelector"]["matchLabels"]["app.kubernetes.io/managed-by"], MANAGER,
            "only managed Gateways are reviewed"
        );
        assert_eq!(
            hooks[0]["clientConfig"]["service"],
            json!({"namespace": "d8-alb", "name": "alb-gateway-controller", "port": 443, "path": "/validate/instances"})
        );
        assert_eq!(hooks[0]["clientConfig"]["caBundle"], "UEVN");
        assert!(
            WebhookService::default()
                .names()
                .contains(&"alb-gateway-controller.d8-alb.svc".to_owned())
        );
    }
}
