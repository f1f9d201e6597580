//! Validating admission: webhooks (`ValidatingWebhookConfiguration`, AdmissionReview v1 over
//! HTTPS to a `url`) and `ValidatingAdmissionPolicy` with its bindings (CEL, evaluated with
//! [`crate::objects::cel`]).
//!
//! Webhooks: rules on operations, groups, versions, resources (with subresources) and scope;
//! `namespaceSelector` and `objectSelector`; `failurePolicy` (`Fail` by default) and
//! `timeoutSeconds` (10 s by default, at most 30). A webhook is reached at `clientConfig.url`,
//! or at `clientConfig.service` the way the real server does with aggregator routing: the
//! Service's port leads to a ready endpoint of its EndpointSlices (so a selector-less Service
//! with a slice at `127.0.0.1` reaches a webhook on this machine), and the certificate must
//! name `<service>.<namespace>.svc`.
//!
//! The requester in `userInfo` is who [`crate::serve::authn`] found the request to come from.
//!
//! Policies: `matchConstraints` (resource rules, selectors), `validations` (`expression`,
//! `message`, `reason`), bindings with `validationActions` `Deny` and `Warn` (`Audit` is
//! recorded in the log), and their own `matchResources`. Policies with `paramKind` are skipped
//! (and logged): parameter resources are not resolved.
//!
//! Neither is consulted for the admission registration kinds themselves, as in the real
//! server, so a broken webhook can always be removed.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::{Value, json};

use crate::access::user::UserInfo;
use crate::objects::errors::ApiError;
use crate::objects::resources::ResourceType;
use crate::objects::selectors::LabelSelector;
use crate::storage::store::{Store, StoreKey};

const WEBHOOKS: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";
const POLICIES: &str = "validatingadmissionpolicies.admissionregistration.k8s.io";
const BINDINGS: &str = "validatingadmissionpolicybindings.admissionregistration.k8s.io";

/// One request to admit.
#[derive(Debug)]
pub struct Attributes<'a> {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// The type.
    pub rt: &'a ResourceType,
    /// `status`, or empty.
    pub subresource: &'a str,
    /// Object name.
    pub name: &'a str,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// The new object (absent on delete).
    pub object: Option<&'a Value>,
    /// The stored object (absent on create).
    pub old_object: Option<&'a Value>,
    /// Who asks.
    pub user: &'a UserInfo,
    /// A dry run (`dryRun=All`): webhooks are told, and one that may have side effects on
    /// a dry run refuses the request.
    pub dry_run: bool,
}

fn list_contains(list: &Value, wanted: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|v| v == "*" || v == wanted)
}

/// Whether a rule (webhook `rules[]` or policy `resourceRules[]`) covers the request.
fn rule_matches(rule: &Value, attrs: &Attributes<'_>) -> bool {
    let rt = attrs.rt;
    let resource_ok = rule["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            let res_ok = res == "*" || res == rt.plural;
            let sub_ok = sub == "*" || sub == attrs.subresource;
            res_ok && sub_ok
        });
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !rt.namespaced,
        "Namespaced" => rt.namespaced,
        _ => true,
    };
    list_contains(&rule["operations"], attrs.operation)
        && list_contains(&rule["apiGroups"], &rt.group)
        && list_contains(&rule["apiVersions"], &rt.version)
        && resource_ok
        && scope_ok
}

/// Whether the selectors of a webhook or policy admit the request.
fn selectors_match(
    store: &Store,
    namespace_selector: &Value,
    object_selector: &Value,
    attrs: &Attributes<'_>,
) -> Result<bool, ApiError> {
    let parse = |s: &Value| LabelSelector::from_object(s).map_err(|e| ApiError::internal(e.0));
    let object_selector = parse(object_selector)?;
    let object_ok = [attrs.object, attrs.old_object]
        .into_iter()
        .flatten()
        .any(|o| object_selector.matches(o));
    let namespace_selector = parse(namespace_selector)?;
    let namespace_ok = if attrs.rt.kind == "Namespace" {
        [attrs.object, attrs.old_object]
            .into_iter()
            .flatten()
            .any(|o| namespace_selector.matches(o))
    } else if attrs.rt.namespaced {
        let key = StoreKey::new("namespaces", "", attrs.namespace);
        store
            .get(&key)
            .is_some_and(|ns| namespace_selector.matches(&ns))
    } else {
        true
    };
    Ok(object_ok && namespace_ok)
}

fn exempt(rt: &ResourceType) -> bool {
    rt.group == "admissionregistration.k8s.io"
}

/// Runs every matching webhook and policy; returns the warnings to pass on, or the refusal.
pub async fn admit(store: &Store, attrs: &Attributes<'_>) -> Result<Vec<String>, ApiError> {
    if exempt(attrs.rt) {
        return Ok(Vec::new());
    }
    let mut warnings = policies(store, attrs)?;
    let (configurations, _) = store.list(WEBHOOKS, None);
    for configuration in configurations {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            let covered = webhook["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| rule_matches(r, attrs));
            if !covered
                || !selectors_match(
                    store,
                    &webhook["namespaceSelector"],
                    &webhook["objectSelector"],
                    attrs,
                )?
            {
                continue;
            }
            // As the real server: a dry run reaches only webhooks that say it has no side
            // effects there; any other refuses it rather than act on a request never made.
            if attrs.dry_run
                && !matches!(
                    webhook["sideEffects"].as_str(),
                    Some("None" | "NoneOnDryRun")
                )
            {
                return Err(ApiError::bad_request(format!(
                    "admission webhook {:?} does not support dry run",
                    webhook["name"].as_str().unwrap_or_default()
                )));
            }
            warnings.extend(call_webhook(store, webhook, attrs).await?);
        }
    }
    Ok(warnings)
}

fn review(attrs: &Attributes<'_>, uid: &str) -> Value {
    let rt = attrs.rt;
    let mut request = json!({
        "uid": uid,
        "kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
        "requestKind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "requestResource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": attrs.user.to_json(),
        "object": attrs.object.map(|o| crate::objects::resources::present(rt, o)),
        "oldObject": attrs.old_object.map(|o| crate::objects::resources::present(rt, o)),
        "dryRun": attrs.dry_run,
    });
    if !attrs.namespace.is_empty() {
        request["namespace"] = json!(attrs.namespace);
    }
    if !attrs.subresource.is_empty() {
        request["subResource"] = json!(attrs.subresource);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

async fn call_webhook(
    store: &Store,
    webhook: &Value,
    attrs: &Attributes<'_>,
) -> Result<Vec<String>, ApiError> {
    let name = webhook["name"].as_str().unwrap_or("<unnamed>");
    let fail_closed = webhook["failurePolicy"].as_str() != Some("Ignore");
    let timeout = Duration::from_secs(
        webhook["timeoutSeconds"]
            .as_u64()
            .unwrap_or(10)
            .clamp(1, 30),
    );
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review(attrs, &uid);
    let outcome = async {
        let target = Target::of(store, &webhook["clientConfig"])?;
        post(&target, &webhook["clientConfig"]["caBundle"], &body).await
    };
    let outcome = tokio::time::timeout(timeout, outcome)
        .await
        .unwrap_or_else(|_| Err(format!("context deadline exceeded after {timeout:?}")));
    let response = match outcome {
        Ok(response) => response,
        Err(error) if fail_closed => {
            return Err(ApiError::internal(format!(
                "Internal error occurred: failed calling webhook \"{name}\": {error}"
            )));
        }
        Err(error) => {
            tracing::warn!(webhook = name, %error, "webhook failed; ignored (failurePolicy Ignore)");
            return Ok(Vec::new());
        }
    };
    answer(&response, &uid, name, fail_closed)
}

/// What a webhook's AdmissionReview `response` to the review `uid` says: the warnings to
/// pass on when it admits, the refusal (its code when 4xx or 5xx, 400 otherwise) when it
/// does not. A response to another review is an error, unless the webhook's failures are
/// ignored.
pub fn answer(
    response: &Value,
    uid: &str,
    name: &str,
    fail_closed: bool,
) -> Result<Vec<String>, ApiError> {
    let verdict = &response["response"];
    if verdict["uid"].as_str() != Some(uid) && fail_closed {
        return Err(ApiError::internal(format!(
            "Internal error occurred: failed calling webhook \"{name}\": expected response.uid=\"{uid}\", got {}",
            verdict["uid"]
        )));
    }
    let warnings: Vec<String> = verdict["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    if verdict["allowed"] == true {
        return Ok(warnings);
    }
    let status = &verdict["status"];
    let message = status["message"].as_str().unwrap_or_default();
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    Err(ApiError {
        code,
        reason: match code {
            403 => "Forbidden",
            422 => "Invalid",
            _ => "BadRequest",
        },
        message: format!("admission webhook \"{name}\" denied the request: {message}"),
        details: None,
        causes: Vec::new(),
    })
}

/// Where a webhook is reached: the address to dial, the name its certificate must carry,
/// the path, and how errors name it.
#[derive(Debug)]
struct Target {
    host: String,
    port: u16,
    server_name: String,
    path: String,
    shown: String,
}

impl Target {
    /// The target of `clientConfig`: its `url`, or its `service` through the Service's
    /// EndpointSlices.
    fn of(store: &Store, client_config: &Value) -> Result<Self, String> {
        if let Some(url) = client_config["url"].as_str() {
            let parsed = url::Url::parse(url).map_err(|e| format!("invalid url {url:?}: {e}"))?;
            if parsed.scheme() != "https" {
                return Err(format!("webhook url {url} must use https"));
            }
            let host = parsed
                .host_str()
                .ok_or("url without host")?
                .trim_matches(['[', ']'])
                .to_owned();
            let path = match parsed.query() {
                Some(q) => format!("{}?{q}", parsed.path()),
                None => parsed.path().to_owned(),
            };
            return Ok(Self {
                server_name: host.clone(),
                port: parsed.port_or_known_default().unwrap_or(443),
                host,
                path,
                shown: url.to_owned(),
            });
        }
        let service = &client_config["service"];
        let (Some(namespace), Some(name)) =
            (service["namespace"].as_str(), service["name"].as_str())
        else {
            return Err(
                "clientConfig has neither url nor service.namespace and service.name".into(),
            );
        };
        let port = service["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(443);
        let path = service["path"].as_str().unwrap_or("/").to_owned();
        let shown = format!("https://{name}.{namespace}.svc:{port}{path}");
        let (host, target_port) = endpoint(store, namespace, name, port)
            .map_err(|why| format!("Post \"{shown}\": service \"{namespace}/{name}\": {why}"))?;
        Ok(Self {
            host,
            port: target_port,
            server_name: format!("{name}.{namespace}.svc"),
            path,
            shown,
        })
    }
}

/// A ready endpoint of Service `namespace/name` for its `port`: the address and the port it
/// listens on, found as kube-proxy finds them (the Service port's name in the slices).
fn endpoint(
    store: &Store,
    namespace: &str,
    name: &str,
    port: u16,
) -> Result<(String, u16), String> {
    let key = StoreKey::new("services", namespace, name);
    let service = store.get(&key).ok_or("not found")?;
    let service_port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"].as_u64() == Some(u64::from(port)))
        .ok_or_else(|| format!("has no port {port}"))?;
    let port_name = service_port["name"].as_str().unwrap_or_default();
    let selector =
        LabelSelector::from_object(&json!({"matchLabels": {"kubernetes.io/service-name": name}}))
            .map_err(|e| e.0)?;
    let (slices, _) = store.list("endpointslices.discovery.k8s.io", Some(namespace));
    slices
        .iter()
        .filter(|slice| selector.matches(slice))
        .find_map(|slice| {
            let port = slice["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str().unwrap_or_default() == port_name)?["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())?;
            let address = slice["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["conditions"]["ready"] != false)
                .find_map(|e| e["addresses"][0].as_str())?;
            Some((address.to_owned(), port))
        })
        .ok_or_else(|| "no endpoints available".to_owned())
}

/// POSTs an AdmissionReview to `target` over HTTPS, trusting `ca_bundle`.
async fn post(target: &Target, ca_bundle: &Value, body: &Value) -> Result<Value, String> {
    let Target {
        host,
        port,
        server_name,
        path,
        shown: url,
    } = target;
    let port = *port;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(bundle) = ca_bundle.as_str() {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle.trim())
            .map_err(|e| format!("caBundle is not base64: {e}"))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let authority = format!("{server_name}:{port}");
    let server_name = rustls_pki_types::ServerName::try_from(server_name.clone())
        .map_err(|e| format!("invalid host {server_name:?}: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("Post \"{url}\": dial tcp {host}:{port}: {e}"))?;
    let tls = connector
        .connect(server_name, tcp)
        .await
        .map_err(|e| format!("Post \"{url}\": tls: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| format!("Post \"{url}\": {e}"))?;
    tokio::spawn(connection);
    let request = http::Request::post(path.as_str())
        .header(http::header::HOST, authority)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes::Bytes::from(
            serde_json::to_vec(body).expect("values serialize"),
        )))
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("Post \"{url}\": {e}"))?;
    let status = response.status();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the response: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("received invalid webhook response: HTTP {status}"));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("received invalid webhook response: {e}"))
}

/// Evaluates the policies bound to this request.
fn policies(store: &Store, attrs: &Attributes<'_>) -> Result<Vec<String>, ApiError> {
    let (bindings, _) = store.list(BINDINGS, None);
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let (policies, _) = store.list(POLICIES, None);
    let mut warnings = Vec::new();
    for binding in bindings {
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let Some(policy) = policies
            .iter()
            .find(|p| p["metadata"]["name"] == binding["spec"]["policyName"])
        else {
            continue;
        };
        let policy_name = policy["metadata"]["name"].as_str().unwrap_or_default();
        let spec = &policy["spec"];
        if !constraints_match(store, &spec["matchConstraints"], attrs)? {
            continue;
        }
        if binding["spec"]["matchResources"].is_object()
            && !constraints_match(store, &binding["spec"]["matchResources"], attrs)?
        {
            continue;
        }
        if spec["paramKind"].is_object() {
            tracing::warn!(
                policy = policy_name,
                "ValidatingAdmissionPolicy with paramKind skipped: parameters are not resolved by the embedded API server"
            );
            continue;
        }
        let actions: Vec<&str> = binding["spec"]["validationActions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let variables = [
            (
                "object",
                attrs
                    .object
                    .map(|o| crate::objects::resources::present(attrs.rt, o))
                    .unwrap_or(Value::Null),
            ),
            (
                "oldObject",
                attrs
                    .old_object
                    .map(|o| crate::objects::resources::present(attrs.rt, o))
                    .unwrap_or(Value::Null),
            ),
            (
                "request",
                json!({"operation": attrs.operation, "name": attrs.name, "namespace": attrs.namespace,
                "kind": {"group": attrs.rt.group, "version": attrs.rt.version, "kind": attrs.rt.kind},
                "userInfo": {"username": "fairlead-admin"}}),
            ),
            ("params", Value::Null),
        ];
        for validation in spec["validations"].as_array().into_iter().flatten() {
            let expression = validation["expression"].as_str().unwrap_or("true");
            let passed = match crate::objects::cel::evaluate(expression, &variables) {
                Ok(b) => b,
                Err(_) if spec["failurePolicy"].as_str() == Some("Ignore") => true,
                Err(error) => {
                    tracing::warn!(policy = policy_name, expression, %error, "policy expression failed");
                    false
                }
            };
            if passed {
                continue;
            }
            let message = validation["message"]
                .as_str()
                .map_or_else(|| format!("failed expression: {expression}"), str::to_owned);
            let text = format!(
                "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
            );
            if actions.contains(&"Warn") {
                warnings.push(text.clone());
            }
            if actions.contains(&"Audit") {
                tracing::info!(policy = policy_name, binding = binding_name, "{text}");
            }
            if actions.contains(&"Deny") {
                let reason = validation["reason"].as_str().unwrap_or("Invalid");
                let (code, reason) = match reason {
                    "Forbidden" => (403, "Forbidden"),
                    "Unauthorized" => (401, "Unauthorized"),
                    "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
                    _ => (422, "Invalid"),
                };
                return Err(ApiError {
                    code,
                    reason,
                    message: text,
                    details: None,
                    causes: Vec::new(),
                });
            }
        }
    }
    Ok(warnings)
}

fn constraints_match(
    store: &Store,
    constraints: &Value,
    attrs: &Attributes<'_>,
) -> Result<bool, ApiError> {
    let rules = constraints["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let covered = rules.iter().any(|r| rule_matches(r, attrs));
    let excluded = constraints["excludeResourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| rule_matches(r, attrs));
    if !covered || excluded {
        return Ok(false);
    }
    selectors_match(
        store,
        &constraints["namespaceSelector"],
        &constraints["objectSelector"],
        attrs,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::resources::Registry;

    fn attrs<'a>(rt: &'a ResourceType, op: &'static str, sub: &'a str) -> Attributes<'a> {
        Attributes {
            operation: op,
            rt,
            subresource: sub,
            name: "x",
            namespace: "default",
            object: None,
            old_object: None,
            user: Box::leak(Box::new(UserInfo::admin())),
            dry_run: false,
        }
    }

    #[test]
    fn rules_match_operations_resources_and_scope() {
        let registry = Registry::new();
        let pods = registry.lookup("", "v1", "pods").unwrap();
        let rule = json!({"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]});
        assert!(rule_matches(&rule, &attrs(&pods, "CREATE", "")));
        assert!(!rule_matches(&rule, &attrs(&pods, "UPDATE", "")));
        assert!(
            !rule_matches(&rule, &attrs(&pods, "CREATE", "status")),
            "subresources need their own rule"
        );
        let status = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/status"]});
        assert!(rule_matches(&status, &attrs(&pods, "UPDATE", "status")));
        let cluster = json!({"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Cluster"});
        assert!(!rule_matches(&cluster, &attrs(&pods, "CREATE", "")));
    }
}
