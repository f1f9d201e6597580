//! Invalid objects of the kinds upstream's own CEL tests (kubernetes-sigs/gateway-api
//! `tests/cel/*_test.go`, v1.6.1) refuse are refused by the embedded API server with the
//! vendored standard bundle installed, with upstream's message; and a valid object of each
//! kind is accepted, so the refusals are the rules', not a broken schema's.

mod common;

use common::cluster;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// Creates `object` (namespace `default`), its message when refused.
async fn create(client: &kube::Client, object: Value) -> Result<(), String> {
    let kind = object["kind"].as_str().unwrap().to_owned();
    let api_version = object["apiVersion"].as_str().unwrap().to_owned();
    let (group, version) = api_version.split_once('/').unwrap();
    let lower = kind.to_lowercase();
    let plural = match lower.strip_suffix("cy") {
        Some(stem) => format!("{stem}cies"),
        None => format!("{lower}s"),
    };
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.clone(),
        kind,
        plural,
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(e.message),
        Err(e) => panic!("{e}"),
    }
}

fn gateway(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": name}, "spec": spec})
}

fn route(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "spec": spec})
}

fn http_path(name: &str, kind: &str, value: &str) -> Value {
    route(
        "HTTPRoute",
        name,
        json!({"rules": [{"matches": [{"path": {"type": kind, "value": value}}]}]}),
    )
}

fn http_filter(name: &str, filter: Value) -> Value {
    route("HTTPRoute", name, json!({"rules": [{"filters": [filter]}]}))
}

#[tokio::test]
async fn objects_upstream_refuses_are_refused_with_its_message() {
    let (_server, client) = cluster("example.com/controller").await;
    let listener = |name: &str, protocol: &str, port: u16| -> Value {
        json!({"name": name, "protocol": protocol, "port": port})
    };
    let refused: Vec<(Value, &[&str])> = vec![
        // httproute_test.go: paths.
        (
            http_path("relative", "Exact", "foo"),
            &[
                "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
            ],
        ),
        (
            http_path("dot-end", "PathPrefix", "/foo/."),
            &["must not end with '/.' when type one of ['Exact', 'PathPrefix']"],
        ),
        (
            http_path("dot-dot-end", "PathPrefix", "/foo/.."),
            &["must not end with '/..' when type one of ['Exact', 'PathPrefix']"],
        ),
        (
            http_path("dot-inside", "Exact", "/foo/./bar"),
            &["must not contain '/./' when type one of ['Exact', 'PathPrefix']"],
        ),
        (
            http_path("double-slash", "PathPrefix", "/foo//bar"),
            &["must not contain '//' when type one of ['Exact', 'PathPrefix']"],
        ),
        (
            http_path("escaped-slash", "Exact", "/foo%2fbar"),
            &["must not contain '%2f' when type one of ['Exact', 'PathPrefix']"],
        ),
        (
            http_path("brackets", "PathPrefix", "/[]"),
            &[
                "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']",
            ],
        ),
        // httproute_test.go: backendRefs and filters.
        (
            route(
                "HTTPRoute",
                "no-port",
                json!({"rules": [{"backendRefs": [{"name": "svc"}]}]}),
            ),
            &["Must have port for Service reference"],
        ),
        (
            http_filter(
                "mismatched-filter",
                json!({"type": "RequestHeaderModifier",
                    "requestMirror": {"backendRef": {"name": "svc", "port": 80}}}),
            ),
            &[
                "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type",
                "filter.requestMirror must be nil if the filter.type is not RequestMirror",
            ],
        ),
        (
            http_filter("empty-rewrite", json!({"type": "URLRewrite"})),
            &["filter.urlRewrite must be specified for URLRewrite filter.type"],
        ),
        // gateway_test.go.
        (
            gateway(
                "http-with-tls",
                json!({"gatewayClassName": "d8-alb", "listeners": [
                    {"name": "http", "protocol": "HTTP", "port": 80,
                     "tls": {"mode": "Terminate", "certificateRefs": [{"name": "c"}]}}]}),
            ),
            &["tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"],
        ),
        (
            gateway(
                "tcp-with-hostname",
                json!({"gatewayClassName": "d8-alb", "listeners": [
                    {"name": "tcp", "protocol": "TCP", "port": 9000, "hostname": "foo.com"}]}),
            ),
            &["hostname must not be specified for protocols ['TCP', 'UDP']"],
        ),
        (
            gateway(
                "terminate-without-certificates",
                json!({"gatewayClassName": "d8-alb", "listeners": [
                    {"name": "https", "protocol": "HTTPS", "port": 443, "tls": {"mode": "Terminate"}}]}),
            ),
            &["certificateRefs or options must be specified when mode is Terminate"],
        ),
        (
            gateway(
                "duplicate-names",
                json!({"gatewayClassName": "d8-alb", "listeners": [
                    listener("l", "HTTP", 80), listener("l", "HTTP", 81)]}),
            ),
            &["Listener name must be unique within the Gateway"],
        ),
        (
            gateway(
                "duplicate-combination",
                json!({"gatewayClassName": "d8-alb", "listeners": [
                    listener("a", "HTTP", 80), listener("b", "HTTP", 80)]}),
            ),
            &["Combination of port, protocol and hostname must be unique for each listener"],
        ),
        (
            gateway(
                "infrastructure-label-prefix",
                json!({"gatewayClassName": "d8-alb", "listeners": [listener("l", "HTTP", 80)],
                    "infrastructure": {"labels": {format!("{}/key", "a".repeat(253)): "v"}}}),
            ),
            &[
                "the label key's prefix must be a DNS subdomain not longer than 253 characters in total",
            ],
        ),
        // grpcroute_test.go.
        (
            route(
                "GRPCRoute",
                "neither-service-nor-method",
                json!({"rules": [{"matches": [{"method": {"type": "Exact"}}]}]}),
            ),
            &["One or both of 'service' or 'method"],
        ),
        (
            route(
                "GRPCRoute",
                "repeated-filter",
                json!({"rules": [{"filters": [
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "1"}]}},
                    {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "b", "value": "2"}]}}]}]}),
            ),
            &["RequestHeaderModifier filter cannot be repeated"],
        ),
        // TLSRoute v1 (its hostname rules; hostnames are required).
        (
            route(
                "TLSRoute",
                "inner-wildcard",
                json!({"parentRefs": [{"name": "gw"}], "hostnames": ["foo.*.example.com"],
                    "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}),
            ),
            &[
                "Wildcards on hostnames must be the first label, and the rest of hostname must be valid based on RFC-1123",
            ],
        ),
        (
            route(
                "TLSRoute",
                "no-hostnames",
                json!({"parentRefs": [{"name": "gw"}],
                    "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}),
            ),
            &["spec.hostnames: Required value"],
        ),
        // backendtlspolicy_test.go.
        (
            route(
                "BackendTLSPolicy",
                "both-ca-sources",
                json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
                    "validation": {"hostname": "svc.example.com", "wellKnownCACertificates": "System",
                        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}}),
            ),
            &["must not contain both CACertificateRefs and WellKnownCACertificates"],
        ),
        (
            route(
                "BackendTLSPolicy",
                "san-without-hostname",
                json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
                    "validation": {"hostname": "svc.example.com", "wellKnownCACertificates": "System",
                        "subjectAltNames": [{"type": "Hostname"}]}}),
            ),
            &["SubjectAltName element must contain Hostname, if Type is set to Hostname"],
        ),
    ];
    let mut wrong = Vec::new();
    for (object, messages) in &refused {
        let name = object["metadata"]["name"].as_str().unwrap();
        match create(&client, object.clone()).await {
            Ok(()) => wrong.push(format!("{name}: accepted")),
            Err(said) => {
                for message in *messages {
                    if !said.contains(message) {
                        wrong.push(format!("{name}: {said:?} lacks {message:?}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // What upstream accepts is accepted: the same kinds, valid.
    for valid in [
        gateway(
            "valid",
            json!({"gatewayClassName": "d8-alb", "listeners": [listener("http", "HTTP", 80),
                {"name": "tcp", "protocol": "TCP", "port": 9000}],
                "infrastructure": {"labels": {"example.com/team": "edge"}}}),
        ),
        http_path("valid-path", "PathPrefix", "/foo/bar.baz"),
        http_path("valid-regex", "RegularExpression", "foo/.*"),
        route(
            "GRPCRoute",
            "valid-grpc",
            json!({"rules": [{"matches": [{"method": {"service": "echo.Echo"}}]}]}),
        ),
        route(
            "TLSRoute",
            "valid-tls",
            json!({"parentRefs": [{"name": "gw"}], "hostnames": ["*.example.com"],
                "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}),
        ),
        route(
            "TCPRoute",
            "valid-tcp",
            json!({"parentRefs": [{"name": "gw"}],
                "rules": [{"backendRefs": [{"name": "svc", "port": 9000}]}]}),
        ),
        json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "valid-grant"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "apps"}],
                     "to": [{"group": "", "kind": "Service"}]}}),
    ] {
        let name = valid["metadata"]["name"].as_str().unwrap().to_owned();
        create(&client, valid)
            .await
            .unwrap_or_else(|e| panic!("{name} is refused: {e}"));
    }
}
