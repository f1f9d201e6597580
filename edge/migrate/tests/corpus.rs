//! The converter on a corpus of ingress-nginx Ingress shapes (`corpus/ingresses.yaml`: TLS
//! hosts, a default backend, each path type, regular expression paths with
//! `rewrite-target`, `auth-*`, basic auth, `whitelist-source-range`, `limit-rps`,
//! `affinity`, `proxy-body-size`, a snippet, a named port, another ingress class): its
//! output for both scopes is kept beside it (`UPDATE_GOLDEN=1` rewrites, then review), and
//! fairlead's own translator accepts every drafted object — each route `Accepted` with its
//! references resolved on the Gateway it was drafted for.

use std::path::Path;

use fairlead_edge_migrate::{Options, Scope, convert, read};
use fairlead_key::ObjectKey;

fn corpus() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/ingresses.yaml"),
    )
    .unwrap()
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        expected, actual,
        "{name} differs (UPDATE_GOLDEN=1 to regenerate, then review)"
    );
}

/// What the drafted objects need around them: the class, the instance's Gateway, the
/// Services, the certificates and the users they name.
fn world(gateway: &ObjectKey, from: &str) -> String {
    let cert = "tls.crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ3akNDQVdpZ0F3SUJBZ0lVVkdTMWFQOS9GYTBSc3UwMXZ3UGpTd1FYdVZjd0NnWUlLb1pJemowRUF3SXcKSWpFZ01CNEdBMVVFQXd3WFptRnBjbXhsWVdRZ1oyOXNaR1Z1SUNoRlEwUlRRU2t3SUJjTk1qWXhNakF4TVRJeApNelExV2hnUE1qRXlOakV4TURjeE1qRXpORFZhTUNJeElEQWVCZ05WQkFNTUYyWmhhWEpzWldGa0lHZHZiR1JsCmJpQW9SVU5FVTBFcE1Ga3dFd1lIS29aSXpqMENBUVlJS29aSXpqMERBUWNEUWdBRXBGMkpaQW50Rm5JTEpZd20KamJLajRRdjV2bnkxclF1RUFBczYxdE9QTzYrVFJjVFhVRDNhQ1FYNytzRGxqU1dxRVVCWTljQUNFT2VoZ2gwSgo0S1dwN2FONk1IZ3dIUVlEVlIwT0JCWUVGT0R2ZnZnTCtiQTF5WTNNUzBUN1huY0VTT2MyTUI4R0ExVWRJd1FZCk1CYUFGT0R2ZnZnTCtiQTF5WTNNUzBUN1huY0VTT2MyTUE4R0ExVWRFd0VCL3dRRk1BTUJBZjh3SlFZRFZSMFIKQkI0d0hJSU5LaTVsZUdGdGNHeGxMbU52YllJTFpYaGhiWEJzWlM1amIyMHdDZ1lJS29aSXpqMEVBd0lEU0FBdwpSUUloQUlmTHc5K1J6Y0MxOUpwa3FQS1RkM3BscEJDZDNpR01PTVdBVUo0WFI2RTRBaUJlT2NneTZxZmJwQmpTCjNUUUxoRFZpZThUUlkzb1hSbzJ1aFo0cDYrR1UrUT09Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K, tls.key: LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JR0hBZ0VBTUJNR0J5cUdTTTQ5QWdFR0NDcUdTTTQ5QXdFSEJHMHdhd0lCQVFRZ3QvVnZieXV1SzQxWlc1bkcKc2RwUC9DUCt4YWREUkErVFF6aEkxV05QckhPaFJBTkNBQVNrWFlsa0NlMFdjZ3NsakNhTnNxUGhDL20rZkxXdApDNFFBQ3pyVzA0ODdyNU5GeE5kUVBkb0pCZnY2d09XTkphb1JRRmoxd0FJUTU2R0NIUW5ncGFudAotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==";
    let mut yaml = format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: d8-alb}}
spec: {{controllerName: {}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {}, namespace: {}}}
spec:
  gatewayClassName: d8-alb
  allowedListeners: {{namespaces: {{from: {from}}}}}
  listeners: [{{name: d8-http, port: 80, protocol: HTTP}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: users, namespace: ops}}
type: Opaque
data: {{auth: YWxpY2U6e1NIQX01ZW42RzZNZXpScm9UM1hLcWtkUE9tWS9CZlE9}}
---
",
        fairlead_edge_model::names::CONTROLLER_NAME,
        gateway.name(),
        gateway.namespace()
    );
    for (namespace, secret) in [("shop", "shop-tls"), ("ops", "dash-tls")] {
        yaml += &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {secret}, namespace: {namespace}}}\ntype: kubernetes.io/tls\ndata: {{{cert}}}\n---\n"
        );
    }
    for (namespace, service, port) in [
        ("shop", "web", 80),
        ("shop", "api", 8080),
        ("ops", "dashboard", 443),
        ("ops", "fallback", 80),
    ] {
        yaml += &format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: {namespace}}}\nspec: {{ports: [{{name: p, port: {port}}}]}}\n---\n"
        );
    }
    yaml
}

/// Converts the corpus for `options`, and translates it with `world`: the YAML, and every
/// route's conditions that are not True.
fn converted(options: &Options, from: &str) -> (String, Vec<String>) {
    let inputs = read(&corpus()).unwrap();
    let yaml = convert(&inputs, options).yaml();
    let input = fairlead_edge_model::input::Input::from_yaml(&format!(
        "{}{yaml}",
        world(&options.gateway, from)
    ))
    .unwrap();
    let statuses =
        fairlead_edge_translate::statuses(&input, fairlead_edge_model::names::CONTROLLER_NAME);
    assert!(!statuses.routes.is_empty());
    let mut problems = Vec::new();
    for (route, parents) in &statuses.routes {
        for parent in parents {
            for c in &parent.conditions {
                if c.status != "True" {
                    problems.push(format!("{route}: {} {}: {}", c.type_, c.reason, c.message));
                }
            }
        }
    }
    assert!(!statuses.listener_sets.is_empty());
    for (set, status) in &statuses.listener_sets {
        let mut conditions = Vec::new();
        collect(&serde_json::to_value(status).unwrap(), &mut conditions);
        for (type_, state) in conditions {
            if matches!(type_.as_str(), "Accepted" | "Programmed" | "ResolvedRefs")
                && state != "True"
            {
                problems.push(format!(
                    "ListenerSet {set}: {type_} {state}: {}",
                    serde_json::to_string(status).unwrap()
                ));
            }
        }
    }
    (yaml, problems)
}

/// Every condition's type and status in `value`, however deep.
fn collect(value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(map) => {
            let type_ = map.get("type").and_then(|t| t.as_str());
            if let (Some(t), Some(s)) = (type_, map.get("status").and_then(|s| s.as_str())) {
                out.push((t.to_owned(), s.to_owned()));
            }
            map.values().for_each(|v| collect(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        _ => {}
    }
}

#[test]
fn a_cluster_instance_gets_a_listener_set_per_namespace() {
    let options = Options {
        gateway: ObjectKey::new("d8-alb", "main"),
        ..Options::default()
    };
    let (yaml, problems) = converted(&options, "All");
    assert!(problems.is_empty(), "{problems:#?}\n{yaml}");
    golden("cluster.yaml", &yaml);
    for expected in [
        "internal: class internal-nginx, not nginx: not converted",
        "1 ConfigMap object(s) ignored",
        "configuration-snippet: nginx configuration has no equivalent",
        "alb.network.deckhouse.io/rewrite-target: /\\2",
        "alb.network.deckhouse.io/auth-signin: https://dash.example.com/dex-authenticator/sign_in",
        "statusCode: 308",
    ] {
        assert!(yaml.contains(expected), "{expected:?} in\n{yaml}");
    }
}

#[test]
fn a_namespaced_instance_takes_the_listener_sets_in_its_namespace_with_grants() {
    let options = Options {
        gateway: ObjectKey::new("shop", "main"),
        scope: Scope::Namespaced,
        ..Options::default()
    };
    let (yaml, problems) = converted(&options, "Same");
    assert!(problems.is_empty(), "{problems:#?}\n{yaml}");
    golden("namespaced.yaml", &yaml);
    assert_eq!(yaml.matches("\nkind: ListenerSet\n").count(), 1, "{yaml}");
    assert!(yaml.contains("kind: ReferenceGrant"), "{yaml}");
}
