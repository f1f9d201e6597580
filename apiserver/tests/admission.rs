//! Validating admission through `kube::Client`: a real HTTPS webhook (AdmissionReview v1) and
//! ValidatingAdmissionPolicies with CEL.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use fairlead_apiserver::{ApiServer, Config};
use fairlead_kit::pki::{self, Ca};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// A webhook that denies objects labelled `deny=true`, hangs on `slow=true`, counts calls.
struct Webhook {
    url: String,
    ca_bundle: String,
    calls: Arc<AtomicUsize>,
}

async fn webhook(names: &[&str]) -> Webhook {
    let ca = Ca::generate("webhook-ca").unwrap();
    let cert = ca
        .issue_server(names, &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let tls = tokio_rustls::TlsAcceptor::from(pki::server_config(&cert, &[b"http/1.1"]).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let tls = tls.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(stream) = tls.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| {
                        let counter = counter.clone();
                        async move {
                            counter.fetch_add(1, Ordering::SeqCst);
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let review: Value = serde_json::from_slice(&body).unwrap();
                            let req = &review["request"];
                            let object = if req["object"].is_null() {
                                &req["oldObject"]
                            } else {
                                &req["object"]
                            };
                            let labels = &object["metadata"]["labels"];
                            if labels["slow"] == "true" {
                                tokio::time::sleep(Duration::from_secs(5)).await;
                            }
                            let allowed = labels["deny"] != "true";
                            let response = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": req["uid"], "allowed": allowed,
                                "warnings": [format!("seen {} {}", req["operation"].as_str().unwrap(), req["name"].as_str().unwrap())],
                                "status": {"code": 403, "message": format!("labelled deny, asked by {}{}", req["userInfo"]["username"].as_str().unwrap(),
                                    if req["dryRun"] == true { " (a dry run)" } else { "" })}}});
                            Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                                bytes::Bytes::from(serde_json::to_vec(&response).unwrap()),
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Webhook {
        url: format!("https://127.0.0.1:{}/validate", addr.port()),
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca.cert_pem()),
        calls,
    }
}

fn configuration(name: &str, url: &str, ca_bundle: &str, extra: Value) -> DynamicObject {
    let mut hook = json!({"name": format!("{name}.example.com"),
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 1});
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    serde_json::from_value(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name}, "webhooks": [hook]}))
    .unwrap()
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        plural,
    )
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

fn api_error(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_denies_allows_and_fails_closed_or_open() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let hook = webhook(&["localhost"]).await;
    let configs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    configs
        .create(&PostParams::default(), &configuration("deny", &hook.url, &hook.ca_bundle,
            json!({"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["default"]}]}})))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    cms.create(&PostParams::default(), &cm("fine", json!({})))
        .await
        .unwrap();
    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    let (code, message) = api_error(
        cms.create(&PostParams::default(), &cm("bad", json!({"deny": "true"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "admission webhook \"deny.example.com\" denied the request: labelled deny, asked by fairlead-admin"
    );
    assert!(
        cms.get_opt("bad").await.unwrap().is_none(),
        "nothing stored"
    );

    let (code, _) = api_error(
        cms.patch(
            "fine",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"deny": "true"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 403, "updates are reviewed with the new object");

    let (code, message) = api_error(
        cms.patch(
            "fine",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"slow": "true"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 500, "timeout with failurePolicy Fail: {message}");
    assert!(
        message.contains("failed calling webhook \"deny.example.com\""),
        "{message}"
    );

    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    other
        .create(
            &PostParams::default(),
            &cm("elsewhere", json!({"deny": "true"})),
        )
        .await
        .expect("namespaceSelector excludes kube-system");

    cms.delete("fine", &DeleteParams::default()).await.unwrap();

    configs
        .create(
            &PostParams::default(),
            &configuration(
                "dead",
                "https://127.0.0.1:1/x",
                &hook.ca_bundle,
                json!({"failurePolicy": "Ignore"}),
            ),
        )
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("ignored", json!({})))
        .await
        .expect("an unreachable Ignore webhook lets requests through");
    configs
        .create(
            &PostParams::default(),
            &configuration(
                "closed",
                "https://127.0.0.1:1/x",
                &hook.ca_bundle,
                json!({"objectSelector": {"matchLabels": {"guarded": "yes"}}}),
            ),
        )
        .await
        .unwrap();
    let (code, _) = api_error(
        cms.create(
            &PostParams::default(),
            &cm("guarded", json!({"guarded": "yes"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        code, 500,
        "an unreachable Fail webhook refuses what it selects"
    );
    cms.create(&PostParams::default(), &cm("unguarded", json!({})))
        .await
        .expect("objectSelector leaves others alone");
    configs
        .delete("closed", &DeleteParams::default())
        .await
        .expect("admission objects are never reviewed");
}

/// A dry run is reviewed as the request would be, and the webhook is told; a webhook that
/// may have side effects on a dry run refuses it without being called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_reaches_only_webhooks_without_side_effects() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let hook = webhook(&["localhost"]).await;
    let configs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    configs
        .create(
            &PostParams::default(),
            &configuration("deny", &hook.url, &hook.ca_bundle, json!({})),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let (code, message) = api_error(
        cms.create(&dry, &cm("bad", json!({"deny": "true"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(message.ends_with("(a dry run)"), "{message}");
    cms.create(&dry, &cm("fine", json!({}))).await.unwrap();
    assert_eq!(hook.calls.load(Ordering::SeqCst), 2);
    assert!(cms.get_opt("fine").await.unwrap().is_none(), "stored");

    configs
        .create(
            &PostParams::default(),
            &configuration(
                "acting",
                &hook.url,
                &hook.ca_bundle,
                json!({"sideEffects": "Unknown"}),
            ),
        )
        .await
        .unwrap();
    let (code, message) = api_error(cms.create(&dry, &cm("fine", json!({}))).await.unwrap_err());
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "admission webhook \"acting.example.com\" does not support dry run"
    );
    cms.create(&PostParams::default(), &cm("fine", json!({})))
        .await
        .expect("a request that is not a dry run reaches it");
}

/// A webhook named by `clientConfig.service` is reached through the Service's EndpointSlice,
/// its certificate checked for `<service>.<namespace>.svc`, and it sees who asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_behind_a_service_is_reached_at_its_endpoint_and_sees_who_asks() {
    // As `fairlead up` runs it: endpoints on this machine's loopback are allowed.
    let server = ApiServer::start(Config {
        allow_loopback_endpoints: true,
        ..Config::default()
    })
    .await
    .unwrap();
    let client = server.client().await.unwrap();
    let hook = webhook(&["hooks.tools.svc"]).await;
    let port: u16 = hook
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "tools"}})).unwrap(),
        )
        .await
        .unwrap();
    let apply = |kind: &str, plural: &str, group: &str, object: Value| {
        let gvk = kube::core::GroupVersionKind::gvk(group, "v1", kind);
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            "tools",
            &ApiResource::from_gvk_with_plural(&gvk, plural),
        );
        async move {
            let name = object["metadata"]["name"].as_str().unwrap().to_owned();
            api.patch(&name, &PatchParams::apply("test"), &Patch::Apply(object))
                .await
                .unwrap();
        }
    };
    apply(
        "Service",
        "services",
        "",
        json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "hooks", "namespace": "tools"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}),
    )
    .await;
    let mut hook_config = configuration("svc", "unused", &hook.ca_bundle, json!({}));
    hook_config.data["webhooks"][0]["clientConfig"] = json!({"service": {"namespace": "tools", "name": "hooks", "path": "/validate"}, "caBundle": hook.ca_bundle});
    let configs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
    );
    configs
        .create(&PostParams::default(), &hook_config)
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (code, message) = api_error(
        cms.create(&PostParams::default(), &cm("early", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 500);
    assert!(
        message.contains("service \"tools/hooks\": no endpoints available"),
        "{message}"
    );
    apply("EndpointSlice", "endpointslices", "discovery.k8s.io", json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "hooks-local", "namespace": "tools", "labels": {"kubernetes.io/service-name": "hooks"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port}]})).await;
    cms.create(&PostParams::default(), &cm("reached", json!({})))
        .await
        .expect("the endpoint's webhook admits it");
    assert_eq!(hook.calls.load(Ordering::SeqCst), 1);
    let controller = server
        .client_as("system:serviceaccount:tools:bot", &["system:masters"])
        .await
        .unwrap();
    let (code, message) = api_error(
        Api::<ConfigMap>::namespaced(controller, "default")
            .create(&PostParams::default(), &cm("bad", json!({"deny": "true"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 403);
    assert!(
        message.ends_with("asked by system:serviceaccount:tools:bot"),
        "{message}"
    );
}

#[tokio::test]
async fn an_admission_policy_denies_with_cel() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let policies: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let bindings: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    );
    let policy: DynamicObject = serde_json::from_value(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "replicas"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5", "message": "at most 5 replicas"}]}}))
    .unwrap();
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let binding: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "replicas-binding"},
        "spec": {"policyName": "replicas", "validationActions": ["Deny"]}}))
        .unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let deployment = |replicas: i32| -> Deployment {
        serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}))
        .unwrap()
    };
    deployments
        .create(&PostParams::default(), &deployment(3))
        .await
        .unwrap();
    let (code, message) = api_error(
        deployments
            .replace("web", &PostParams::default(), &{
                let mut d = deployments.get("web").await.unwrap();
                d.spec.as_mut().unwrap().replicas = Some(9);
                d
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "ValidatingAdmissionPolicy 'replicas' with binding 'replicas-binding' denied request: at most 5 replicas"
    );
}
