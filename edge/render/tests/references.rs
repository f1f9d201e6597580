//! No Secret or ConfigMap crosses a namespace without a ReferenceGrant, through any reference
//! that can name a namespace: a listener's certificate, a Gateway's client certificate for
//! its backends and its frontend client-validation CA, and the route annotations that name a
//! Secret or ConfigMap (`basic-auth-secret`, `backend-tls-settings`' `secret`,
//! `mod-security`'s `configRef`). For each, the object in namespace `vault` carries a marker;
//! without a grant the reference is refused by name (`RefNotPermitted`) and the marker is in
//! none of the Envoy resources rendered; with a grant in `vault` it is (so the check would see
//! a leak). A BackendTLSPolicy's CA references cannot name a namespace (they are local), and
//! an instance's GeoIP licence is read by the controller (`edge/controller`'s tests). And no
//! backend of another namespace without the grant for it: the ReferenceGrant bypasses of a
//! backend reference.

use std::sync::Arc;

use fairlead_edge_model::CONTROLLER_NAME;
use fairlead_edge_model::input::Input;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn meta(namespace: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn secret(namespace: &str, name: &str, type_: &str, data: &[(&str, &str)]) -> Arc<Secret> {
    Arc::new(Secret {
        metadata: meta(namespace, name),
        type_: Some(type_.into()),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    })
}

fn config_map(namespace: &str, name: &str, data: &[(&str, &str)]) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: meta(namespace, name),
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Default::default()
    })
}

/// The world every case shares: the class, namespaces `app` and `vault`, and a Service `web`
/// in `app` with an endpoint.
const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: d8-alb}
spec: {controllerName: alb.network.deckhouse.io/gateway-controller}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: app}
spec: {ports: [{name: https, port: 443}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web, namespace: app, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: https, port: 8443}]
endpoints: [{addresses: [10.0.0.1]}]
"#;

/// A case: what it names, its objects in `app` (YAML), the objects of `vault` holding the
/// marker, and the kind a grant in `vault` must allow from what kind in `app`.
struct Case {
    name: &'static str,
    yaml: String,
    vault: Vec<Object>,
    /// (from kind, to kind).
    grant: (&'static str, &'static str),
    marker: String,
}

enum Object {
    Secret(Arc<Secret>),
    ConfigMap(Arc<ConfigMap>),
}

fn route(annotations: &str) -> String {
    format!(
        r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: app}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: app
  annotations: {{{annotations}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: web, port: 443}}]}}]
"#
    )
}

fn cases() -> Vec<Case> {
    let ca = fairlead_kit::pki::Ca::generate("references CA").unwrap();
    let leaf = ca.issue_server(&["a.example.com"], &[]).unwrap();
    let local_cert = ca.issue_server(&["local.example.com"], &[]).unwrap();
    let tls = |namespace: &str, name: &str, c: &fairlead_kit::pki::CertifiedKey| {
        secret(
            namespace,
            name,
            "kubernetes.io/tls",
            &[("tls.crt", &c.cert_pem), ("tls.key", &c.key_pem)],
        )
    };
    let other_ca = fairlead_kit::pki::Ca::generate("vault's CA").unwrap();
    vec![
        Case {
            name: "a listener's certificateRefs",
            yaml: r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: app}
spec:
  gatewayClassName: d8-alb
  listeners: [{name: https, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: cert, namespace: vault}]}}]
"#
            .into(),
            vault: vec![Object::Secret(tls("vault", "cert", &leaf))],
            grant: ("Gateway", "Secret"),
            marker: leaf.cert_pem.clone(),
        },
        Case {
            name: "a Gateway's frontend caCertificateRefs",
            yaml: r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: app}
spec:
  gatewayClassName: d8-alb
  tls:
    frontend:
      default:
        validation:
          caCertificateRefs: [{group: "", kind: ConfigMap, name: clients-ca, namespace: vault}]
  listeners: [{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: local}]}}]
"#
            .into(),
            vault: vec![Object::ConfigMap(config_map(
                "vault",
                "clients-ca",
                &[("ca.crt", other_ca.cert_pem())],
            ))],
            grant: ("Gateway", "ConfigMap"),
            marker: other_ca.cert_pem().to_owned(),
        },
        Case {
            name: "a Gateway's backend clientCertificateRef",
            yaml: r#"
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: app}
spec:
  gatewayClassName: d8-alb
  listeners: [{name: http, port: 80, protocol: HTTP}]
  tls:
    backend:
      clientCertificateRef: {group: "", kind: Secret, name: proxy-client, namespace: vault}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: app}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: web, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: web-tls, namespace: app}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {wellKnownCACertificates: System, hostname: web.app.svc}
"#
            .into(),
            vault: vec![Object::Secret(tls("vault", "proxy-client", &leaf))],
            grant: ("Gateway", "Secret"),
            marker: leaf.cert_pem.clone(),
        },
        Case {
            name: "the basic-auth-secret annotation",
            yaml: route(r#"alb.network.deckhouse.io/basic-auth-secret: vault/users"#),
            vault: vec![Object::Secret(secret(
                "vault",
                "users",
                "Opaque",
                &[(
                    "auth",
                    "vaultuser:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n",
                )],
            ))],
            grant: ("HTTPRoute", "Secret"),
            marker: "vaultuser".into(),
        },
        Case {
            name: "the backend-tls-settings annotation's secret",
            yaml: route(
                r#"alb.network.deckhouse.io/backend-tls-settings: '{"mode": "SIMPLE", "secret": "vault/upstream"}'"#,
            ),
            vault: vec![Object::Secret(secret(
                "vault",
                "upstream",
                "Opaque",
                &[("ca.crt", other_ca.cert_pem())],
            ))],
            grant: ("HTTPRoute", "Secret"),
            marker: other_ca.cert_pem().to_owned(),
        },
        Case {
            name: "the mod-security annotation's configRef",
            yaml: route(
                r#"alb.network.deckhouse.io/mod-security: '{"mode": "on", "configRef": {"name": "rules", "namespace": "vault"}}'"#,
            ),
            vault: vec![Object::ConfigMap(config_map(
                "vault",
                "rules",
                &[(
                    "rules.conf",
                    "SecRule ARGS \"@contains vaultmarker\" \"id:4242,phase:2,deny,status:403\"\n",
                )],
            ))],
            grant: ("HTTPRoute", "ConfigMap"),
            marker: "vaultmarker".into(),
        },
    ]
    .into_iter()
    .map(|mut case| {
        // A certificate of `app`'s own for listeners the case does not test.
        case.vault.push(Object::Secret(tls("app", "local", &local_cert)));
        case
    })
    .collect()
}

/// The case's input, with a ReferenceGrant in `vault` when `granted`.
fn input(case: &Case, granted: bool) -> Input {
    let mut yaml = format!("{BASE}{}", case.yaml);
    if granted {
        let (from, to) = case.grant;
        yaml.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: app, namespace: vault}}\nspec:\n  from: [{{group: {group}, kind: {from}, namespace: app}}]\n  to: [{{group: \"\", kind: {to}}}]\n",
            group = "gateway.networking.k8s.io",
        ));
    }
    let mut input = Input::from_yaml(&yaml).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    for object in &case.vault {
        match object {
            Object::Secret(s) => input.secrets.push(s.clone()),
            Object::ConfigMap(c) => input.config_maps.push(c.clone()),
        }
    }
    input
}

/// Every byte of every resource rendered for every Gateway, after the Gateways' IR (JSON:
/// a WAF's rules travel in Envoy's resources base64-encoded, and come from the IR).
fn rendered(input: &Input) -> (Vec<u8>, String) {
    let t = fairlead_edge_render::run(input, CONTROLLER_NAME);
    let mut bytes = serde_json::to_vec(&fairlead_edge_translate::intermediate(
        input,
        CONTROLLER_NAME,
    ))
    .unwrap();
    for resources in t.gateways.values() {
        for e in resources
            .listeners
            .iter()
            .chain(&resources.routes)
            .chain(&resources.clusters)
            .chain(&resources.endpoints)
            .chain(&resources.secrets)
        {
            bytes.extend_from_slice(&e.bytes);
        }
    }
    (bytes, serde_json::to_string(&t.statuses).unwrap())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn nothing_crosses_a_namespace_without_a_reference_grant() {
    for case in cases() {
        let (bytes, statuses) = rendered(&input(&case, false));
        assert!(
            !contains(&bytes, case.marker.as_bytes()),
            "{}: the object of namespace vault reached Envoy without a ReferenceGrant",
            case.name
        );
        assert!(
            statuses.contains("RefNotPermitted"),
            "{}: the refusal is not said: {statuses}",
            case.name
        );
        let (bytes, statuses) = rendered(&input(&case, true));
        assert!(
            contains(&bytes, case.marker.as_bytes()),
            "{}: with the grant the object is used (the check sees a leak): {statuses}",
            case.name
        );
        assert!(
            !statuses.contains("RefNotPermitted"),
            "{}: refused despite the grant: {statuses}",
            case.name
        );
    }
}

/// An HTTPRoute in `app` naming `backend` in `vault`, with `grant` (a ReferenceGrant's YAML,
/// or none).
fn backend_input(backend: &str, grant: Option<&str>) -> Input {
    let mut yaml = format!(
        r#"{BASE}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: app}}
spec:
  gatewayClassName: d8-alb
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: app}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{backend}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: secret-svc, namespace: vault}}
spec: {{ports: [{{name: http, port: 80}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: secret-svc, namespace: vault, labels: {{kubernetes.io/service-name: secret-svc}}}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints: [{{addresses: [10.9.9.9]}}]
"#
    );
    if let Some(grant) = grant {
        yaml.push_str("---\n");
        yaml.push_str(grant);
    }
    Input::from_yaml(&yaml).unwrap()
}

/// ReferenceGrant bypasses of a backend reference: a custom kind, a grant in the wrong
/// namespace, for another kind or name, from another route kind. None reaches the Service
/// of `vault` (its cluster is in no resource) and each is refused by name; the grant as the
/// spec writes it does reach it.
#[test]
fn no_backend_of_another_namespace_without_the_grant_for_it() {
    let service = "{group: \"\", kind: Service, name: secret-svc, namespace: vault, port: 80}";
    let grant = |namespace: &str, from: &str, to: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: {namespace}}}\nspec:\n  from: [{{group: gateway.networking.k8s.io, kind: {from}, namespace: app}}]\n  to: [{to}]\n"
        )
    };
    let cluster = b"vault/secret-svc/80";
    let cases: Vec<(&str, String, Option<String>, &str)> = vec![
        ("no grant", service.into(), None, "RefNotPermitted"),
        (
            "a custom kind under a grant to Services",
            "{group: example.com, kind: Backend, name: secret-svc, namespace: vault, port: 80}"
                .into(),
            Some(grant("vault", "HTTPRoute", "{group: \"\", kind: Service}")),
            "InvalidKind",
        ),
        (
            "a grant in the route's namespace",
            service.into(),
            Some(grant("app", "HTTPRoute", "{group: \"\", kind: Service}")),
            "RefNotPermitted",
        ),
        (
            "a grant to another kind",
            service.into(),
            Some(grant("vault", "HTTPRoute", "{group: \"\", kind: Secret}")),
            "RefNotPermitted",
        ),
        (
            "a grant to another name",
            service.into(),
            Some(grant(
                "vault",
                "HTTPRoute",
                "{group: \"\", kind: Service, name: other}",
            )),
            "RefNotPermitted",
        ),
        (
            "a grant from another route kind",
            service.into(),
            Some(grant("vault", "GRPCRoute", "{group: \"\", kind: Service}")),
            "RefNotPermitted",
        ),
    ];
    for (name, backend, grant, reason) in &cases {
        let (bytes, statuses) = rendered(&backend_input(backend, grant.as_deref()));
        assert!(
            !contains(&bytes, cluster),
            "{name}: the Service of namespace vault is reached"
        );
        assert!(
            statuses.contains(reason),
            "{name}: not refused as {reason}: {statuses}"
        );
    }
    let granted = grant(
        "vault",
        "HTTPRoute",
        "{group: \"\", kind: Service, name: secret-svc}",
    );
    let (bytes, statuses) = rendered(&backend_input(service, Some(&granted)));
    assert!(
        contains(&bytes, cluster),
        "the grant as the spec writes it reaches the Service: {statuses}"
    );
}
