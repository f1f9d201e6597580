//! The WAF (`alb.network.deckhouse.io/mod-security`) through a real Envoy in `fairlead up`,
//! with the real OWASP Core Rule Set on libmodsecurity in the proxy pod's `waf` container: the
//! CRS's attack classes (SQL injection in a query string, XSS in a parameter, a path
//! traversal, a scanner's User-Agent) get 403 and ordinary requests pass; detection only
//! passes both; paranoia 4 blocks what paranoia 1 lets through; a ConfigMap's rules apply and
//! an inline directive removes one of them; a route without the annotation on the same
//! listener is never asked about (the WAF's metrics name no such route); a rule set that does
//! not compile and a ConfigMap of another namespace without a ReferenceGrant are named in the
//! route's status and answer 503, never the backend; a ConfigMap's change reaches its route;
//! a WAF that hangs gets its routes' requests refused (504), counted by Envoy, while the
//! other routes serve.

use std::time::Duration;

use fairlead_e2e::{Up, backends, until};
use fairlead_kit::testing::free_port;

const PREFIX: &str = "alb.network.deckhouse.io/";

/// An HTTPRoute `name` (host `<name>.example.com`) in `namespace` asking for `waf` (none when
/// empty), to the backend on `port`.
fn route(namespace: &str, name: &str, waf: &str, port: u16) -> String {
    let annotations = if waf.is_empty() {
        String::new()
    } else {
        format!("{PREFIX}mod-security: '{waf}'")
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: {name}
  namespace: {namespace}
  annotations: {{{annotations}}}
spec:
  parentRefs: [{{name: firewalled, namespace: d8-alb}}]
  hostnames: [{name}.example.com]
  rules:
  - backendRefs: [{{name: backend, port: 80}}]
---
{}",
        backends::service(namespace, "backend", 80, port)
    )
}

/// The custom rules: a token refused with 418, another with 419.
fn rules(first: u16) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata: {{name: waf-rules, namespace: default}}
data:
  a.conf: |
    SecRule ARGS:token \"@streq letmein\" \\
        \"id:10001,phase:1,deny,status:{first},log,msg:'a known token'\"
  b.conf: |
    SecRule ARGS:token \"@streq other\" \"id:10002,phase:1,deny,status:419,log,msg:'another token'\"
---
"
    )
}

const SQL_INJECTION: &str = "/products?id=1%27%20OR%20%271%27=%271";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

struct World {
    http: reqwest::Client,
    port: u16,
}

impl World {
    async fn apply(up: &Up) -> Self {
        up.wait_ready().await;
        let port = free_port();
        let backend = backends::echo().await;
        let mut yaml = format!(
            "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: firewalled}}
spec:
  gatewayName: firewalled
  inlet: {{type: HostPort, hostPort: {{httpPort: {port}}}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: other}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: their-rules, namespace: other}}
data:
  rules.conf: 'SecRule ARGS \"@streq x\" \"id:20001,phase:1,deny\"'
---
"
        );
        yaml += &rules(418);
        for (name, waf) in [
            ("plain", ""),
            (
                "shop",
                r#"{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 1}"#,
            ),
            (
                "watch",
                r#"{"mode": "DetectionOnly", "preset": "owasp-crs"}"#,
            ),
            (
                "strict",
                r#"{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 4}"#,
            ),
            (
                "custom",
                r#"{"mode": "on", "configRef": {"name": "waf-rules"}, "directives": ["SecRuleRemoveById 10002"]}"#,
            ),
            (
                "broken",
                r#"{"mode": "on", "directives": ["SecRule ARGS \"@rx a\" \"phase:1,deny\""]}"#,
            ),
            (
                "borrowed",
                r#"{"mode": "on", "configRef": {"namespace": "other", "name": "their-rules"}}"#,
            ),
        ] {
            yaml += &route("default", name, waf, backend);
        }
        up.apply(&yaml);
        let world = Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            port,
        };
        // The WAF container starts once the control plane has said the Gateway needs it.
        until("the WAF route served", async || {
            (world.get("shop", "/", BROWSER).await? == 200).then_some(())
        })
        .await;
        world
    }

    async fn get(&self, name: &str, path: &str, agent: &str) -> Option<u16> {
        let response = self
            .http
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .header("host", format!("{name}.example.com"))
            .header("user-agent", agent)
            .header("accept", "text/html")
            .send()
            .await
            .ok()?;
        Some(response.status().as_u16())
    }

    async fn status(&self, name: &str, path: &str) -> u16 {
        self.get(name, path, BROWSER).await.unwrap_or(0)
    }
}

/// The condition `type_` of route `name`'s first parent.
async fn condition(up: &Up, name: &str, type_: &str) -> serde_json::Value {
    let routes = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        up.client().await,
        "default",
        &fairlead_edge_controller::crds::resource("HTTPRoute"),
    );
    until(&format!("{name}'s {type_}"), async || {
        let r = routes.get(name).await.ok()?;
        r.data["status"]["parents"][0]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
    })
    .await
}

/// The proxy pod's address (the runner gives each pod its own loopback address).
async fn pod_ip(up: &Up) -> String {
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(
        up.client().await,
        fairlead_edge_model::names::CLUSTER_NAMESPACE,
    );
    let list = pods
        .list(&kube::api::ListParams::default().labels("alb.deckhouse.io/gateway=firewalled"))
        .await
        .unwrap();
    list.items
        .iter()
        .find_map(|p| p.status.as_ref()?.pod_ip.clone())
        .expect("a proxy pod with an address")
}

/// `path` of the proxy supervisor's metrics port (what kube-rbac-proxy fronts): the WAF's
/// metrics (`/waf/metrics`), Envoy's (`/stats/prometheus`).
async fn scraped(up: &Up, path: &str) -> String {
    let ip = pod_ip(up).await;
    reqwest::get(format!("http://{ip}:19001{path}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Envoy's count of `stat` of the WAF's `ext_proc` filter.
async fn envoy_count(up: &Up, stat: &str) -> u64 {
    let name = format!("envoy_http_ext_proc_waf_{stat}{{");
    scraped(up, "/stats/prometheus")
        .await
        .lines()
        .filter(|l| l.starts_with(&name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The WAF stopped (SIGSTOP: it hangs, as a stuck process would): its routes' requests get
/// 504 after Envoy's message timeout, counted; the other routes serve. Then it goes on.
async fn a_hanging_waf_closes_its_routes(up: &Up, world: &World) {
    // The WAF container's process: a child of this `up` (its local runner's).
    let pgrep = std::process::Command::new("pgrep")
        .args(["-P", &up.pid().to_string(), "-f", "edge waf --socket "])
        .output()
        .unwrap();
    let pid = String::from_utf8(pgrep.stdout).unwrap();
    let pid = pid.lines().next().expect("the WAF's process").to_owned();
    let signal = |name: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([name, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    let before = envoy_count(up, "message_timeouts").await;
    signal("-STOP");
    // Envoy's answer to a processor that misses its message timeout is 504 (one it cannot
    // reach gets the filter's `status_on_error`, 503).
    assert_eq!(
        world.status("shop", "/").await,
        504,
        "never served uninspected"
    );
    assert_eq!(
        world.status("plain", "/").await,
        200,
        "other routes unaffected"
    );
    signal("-CONT");
    assert!(
        envoy_count(up, "message_timeouts").await > before,
        "counted by Envoy"
    );
    assert_eq!(world.status("shop", "/").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crs_guards_its_routes_only() {
    let up = Up::start();
    let world = World::apply(&up).await;

    // The CRS's attack classes are blocked at paranoia 1; ordinary requests pass.
    for (path, agent) in [
        (SQL_INJECTION, BROWSER),
        ("/search?q=%3Cscript%3Ealert(1)%3C/script%3E", BROWSER),
        ("/download?file=../../../../etc/passwd", BROWSER),
        ("/", "sqlmap/1.7.2#stable (https://sqlmap.org)"),
    ] {
        assert_eq!(
            world.get("shop", path, agent).await,
            Some(403),
            "{path} {agent}"
        );
    }
    assert_eq!(
        world.status("shop", "/search?q=blue+shoes&page=2").await,
        200
    );
    // Detection only: passed, and counted as detected.
    assert_eq!(world.status("watch", SQL_INJECTION).await, 200);
    // Paranoia 4 blocks a lone SQL keyword that paranoia 1 lets through.
    let keyword = "/notes?text=select%20everything%20from%20the%20menu";
    assert_eq!(world.status("shop", keyword).await, 200);
    assert_eq!(world.status("strict", keyword).await, 403);
    // The ConfigMap's rules, the inline directive removing one of them.
    assert_eq!(world.status("custom", "/?token=letmein").await, 418);
    assert_eq!(world.status("custom", "/?token=other").await, 200);
    // The route without the annotation is not inspected: served, and never asked about.
    assert_eq!(world.status("plain", SQL_INJECTION).await, 200);
    let metrics = scraped(&up, "/waf/metrics").await;
    assert!(
        metrics
            .contains(r#"fairlead_waf_requests_total{route="default/shop",verdict="blocked"} 4"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"fairlead_waf_requests_total{route="default/watch",verdict="detected"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"route="default/shop",rule="949110""#),
        "{metrics}"
    );
    assert!(!metrics.contains("default/plain"), "{metrics}");
    assert!(
        !metrics.contains("process_"),
        "the supervisor's process metrics are its own"
    );

    // A rule set that does not compile, a ConfigMap not granted: named, and 503.
    let broken = condition(&up, "broken", "Accepted").await;
    assert_eq!(broken["status"], "False", "{broken}");
    assert_eq!(broken["reason"], "InvalidWAFConfiguration", "{broken}");
    assert!(
        broken["message"]
            .as_str()
            .unwrap()
            .contains("do not compile"),
        "{broken}"
    );
    assert_eq!(world.status("broken", "/").await, 503);
    let borrowed = condition(&up, "borrowed", "ResolvedRefs").await;
    assert_eq!(borrowed["reason"], "RefNotPermitted", "{borrowed}");
    assert_eq!(world.status("borrowed", "/").await, 503);

    // A ConfigMap's change reaches its route; the others keep serving.
    up.apply(&rules(420));
    until("the changed rule", async || {
        (world.status("custom", "/?token=letmein").await == 420).then_some(())
    })
    .await;
    assert_eq!(world.status("shop", "/").await, 200);
    assert_eq!(world.status("shop", SQL_INJECTION).await, 403);

    a_hanging_waf_closes_its_routes(&up, &world).await;

    let output = up.stopped().await;
    assert!(output.status.success(), "{output:?}");
}
