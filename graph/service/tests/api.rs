//! The graph API against the embedded API server, its index and its RBAC: who sees what
//! (SubjectAccessReviews for users sent as kube-rbac-proxy sends them), ETags and 304s,
//! filters and formats, and the watch's diffs with resume by `Last-Event-ID`.

use std::sync::Arc;
use std::time::Duration;

use fairlead_graph_service::{Settings, metrics::GraphMetrics};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct World {
    _server: fairlead_apiserver::ApiServer,
    admin: kube::Client,
    base: String,
    http: reqwest::Client,
    _stop: tokio_util::sync::DropGuard,
}

/// Creates `object` (its kind decides where).
async fn create(client: &kube::Client, object: Value) {
    let kind = object["kind"].as_str().unwrap().to_owned();
    let (group, version, plural) = match kind.as_str() {
        "Namespace" => ("", "v1", "namespaces"),
        "Service" => ("", "v1", "services"),
        "GatewayClass" => ("gateway.networking.k8s.io", "v1", "gatewayclasses"),
        "Gateway" => ("gateway.networking.k8s.io", "v1", "gateways"),
        "HTTPRoute" => ("gateway.networking.k8s.io", "v1", "httproutes"),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        "ClusterRoleBinding" => ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
        "RoleBinding" => ("rbac.authorization.k8s.io", "v1", "rolebindings"),
        other => panic!("no resource for {other}"),
    };
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &kind), plural);
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {kind}: {e}"));
}

fn route(namespace: &str, name: &str, backend: &str) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"parentRefs": [{"name": "gw", "namespace": "team-a"}],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}})
}

fn service(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"ports": [{"name": "http", "port": 80}]}})
}

async fn world() -> World {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let admin = server.client().await.unwrap();
    fairlead_edge_controller::crds::install(
        &admin,
        fairlead_edge_model::CONTROLLER_NAME,
        fairlead_edge_controller::crds::Channel::Standard,
    )
    .await
    .unwrap();
    for ns in ["team-a", "team-b"] {
        create(
            &admin,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    create(&admin, json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "team-a"},
        "spec": {"gatewayClassName": "d8-alb", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
            "allowedRoutes": {"namespaces": {"from": "All"}}}]}})).await;
    create(&admin, route("team-a", "web", "web")).await;
    create(&admin, service("team-a", "web")).await;
    create(&admin, route("team-b", "api", "api")).await;
    create(&admin, service("team-b", "api")).await;
    // Readers: alice in team-a only, bob everywhere (and cluster-scoped kinds), carol nothing.
    create(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "graph-reader"},
        "rules": [
            {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["*"], "verbs": ["list"]},
            {"apiGroups": [""], "resources": ["services"], "verbs": ["list"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
        ]}),
    )
    .await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice", "namespace": "team-a"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "graph-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})).await;
    create(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "ops"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "graph-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"}]})).await;
    let stop = CancellationToken::new();
    let index = fairlead_edge_index::Index::start(admin.clone(), stop.clone());
    let registry = fairlead_kit::metrics::Metrics::new("graph-test").unwrap();
    let (addr, _feed) = fairlead_graph_service::start(
        admin.clone(),
        index,
        Settings {
            addr: "127.0.0.1:0".parse().unwrap(),
            prometheus_url: None,
            anonymous: None,
            reviews: true,
        },
        GraphMetrics::new(&registry).unwrap(),
        stop.clone(),
    )
    .await
    .unwrap();
    let world = World {
        _server: server,
        admin,
        base: format!("http://{addr}"),
        http: reqwest::Client::new(),
        _stop: stop.drop_guard(),
    };
    // Until the graph holds what was created, and the EndpointSlice the server's controller
    // makes for it (watched apart, so it may come later than the Service).
    world
        .until("bob", "", |g| {
            let ids = ids(g);
            ids.iter().any(|id| id.ends_with("/Service/team-b/api"))
                && ids
                    .iter()
                    .any(|id| id == "discovery.k8s.io/EndpointSlice/team-b/api/80")
        })
        .await;
    world
}

/// Checks `graph` against the checked-in JSON Schema.
fn valid(graph: &Value) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schema/graph.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource("graph.schema.json", schema).unwrap();
    let index = compiler.compile("graph.schema.json", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(graph, index) {
        panic!("the served graph fails the schema: {e:#}\n{graph}");
    }
}

fn ids(graph: &Value) -> Vec<String> {
    graph["elements"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["data"]["id"].as_str().unwrap().to_owned())
        .collect()
}

impl World {
    fn get(&self, user: &str, query: &str) -> reqwest::RequestBuilder {
        let mut request = self.http.get(format!("{}/api/v1/graph{query}", self.base));
        match user {
            "" => {}
            "bob" => {
                request = request
                    .header("x-remote-user", "bob")
                    .header("x-remote-groups", "system:authenticated|ops")
            }
            name => {
                request = request
                    .header("x-remote-user", name)
                    .header("x-remote-groups", "system:authenticated")
            }
        }
        request
    }

    async fn graph(&self, user: &str, query: &str) -> Value {
        let response = self.get(user, query).send().await.unwrap();
        assert_eq!(
            response.status(),
            200,
            "{query}: {}",
            response.text().await.unwrap()
        );
        response.json().await.unwrap()
    }

    async fn until(&self, user: &str, query: &str, check: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..200 {
            let graph = self.graph(user, query).await;
            if check(&graph) {
                return graph;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the graph never got there: {}",
            self.graph(user, query).await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_see_only_what_they_may_list() {
    let w = world().await;
    let anonymous = w.get("", "").send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "no user headers, no graph");

    let bob_graph = w.graph("bob", "").await;
    valid(&bob_graph);
    let bob = ids(&bob_graph);
    for id in [
        "gateway.networking.k8s.io/GatewayClass//d8-alb",
        "gateway.networking.k8s.io/Gateway/team-a/gw",
        "gateway.networking.k8s.io/Gateway/team-a/gw/http",
        "gateway.networking.k8s.io/HTTPRoute/team-b/api",
        "/Service/team-b/api",
        "discovery.k8s.io/EndpointSlice/team-b/api/80",
    ] {
        assert!(bob.contains(&id.to_owned()), "bob sees {id}: {bob:?}");
    }
    let alice = w.graph("alice", "").await;
    let seen = ids(&alice);
    assert!(
        seen.contains(&"gateway.networking.k8s.io/HTTPRoute/team-a/web".to_owned()),
        "{seen:?}"
    );
    assert!(
        seen.iter().all(|id| id.split('/').nth(2) == Some("team-a")),
        "alice sees nothing outside team-a, not even cluster-scoped classes: {seen:?}"
    );
    for edge in alice["elements"]["edges"].as_array().unwrap() {
        for end in ["source", "target"] {
            let id = edge["data"][end].as_str().unwrap();
            assert!(
                seen.contains(&id.to_owned()),
                "an edge to what alice cannot see: {edge}"
            );
        }
    }
    let carol = w.graph("carol", "").await;
    assert!(ids(&carol).is_empty(), "carol may list nothing: {carol}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etags_answer_304_until_the_users_graph_changes() {
    let w = world().await;
    // Until bob's graph has settled: the index may still deliver a kind after the world's
    // last object is drawn (CI saw the version move between two requests), and a moved
    // version rightly answers 200.
    let version = async || {
        let r = w.get("bob", "").send().await.unwrap();
        r.headers()["etag"].to_str().unwrap().to_owned()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut last = version().await;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let now = version().await;
        if now == last {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "bob's graph never settled"
        );
        last = now;
    }
    let first = w.get("bob", "").send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let body: Value = first.json().await.unwrap();
    assert_eq!(etag, format!("\"{}\"", body["version"].as_str().unwrap()));
    let again = w
        .get("bob", "")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    let alice = w.get("alice", "").send().await.unwrap();
    assert_ne!(alice.headers()["etag"].to_str().unwrap(), etag, "per user");

    // A change in team-b changes bob's graph, not alice's.
    let alice_etag = alice.headers()["etag"].to_str().unwrap().to_owned();
    create(&w.admin, service("team-b", "extra")).await;
    create(&w.admin, route("team-b", "extra", "extra")).await;
    w.until("bob", "", |g| {
        ids(g)
            .iter()
            .any(|id| id.ends_with("HTTPRoute/team-b/extra"))
    })
    .await;
    let changed = w
        .get("bob", "")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    assert_ne!(changed.headers()["etag"].to_str().unwrap(), etag);
    let unchanged = w
        .get("alice", "")
        .header("if-none-match", &alice_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(unchanged.status(), 304, "alice's view did not change");
    let dot = w
        .get("bob", "?format=dot")
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_ne!(
        dot.headers()["etag"].to_str().unwrap(),
        etag,
        "each format has its own tag"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_formats_and_bad_parameters() {
    let w = world().await;
    let team_b = ids(&w.graph("bob", "?namespace=team-b").await);
    assert!(
        !team_b.is_empty()
            && team_b.iter().all(
                |id| id.split('/').nth(2) == Some("team-b") || id.split('/').nth(2) == Some("")
            ),
        "{team_b:?}"
    );
    let routes = ids(&w.graph("bob", "?kinds=HTTPRoute,Service").await);
    assert!(
        routes
            .iter()
            .all(|id| id.contains("/HTTPRoute/") || id.contains("/Service/")),
        "{routes:?}"
    );
    assert!(routes.len() >= 4, "{routes:?}");
    // No endpoints behind either Service here: both routes fail (whatever their parents say).
    // (Until the index has listed the EndpointSlices too: before that a route's Service
    // may read as missing.)
    let failing = w
        .until("bob", "?health=failing&kinds=HTTPRoute", |g| {
            let text = g.to_string();
            ids(g).len() == 2 && text.contains("NoEndpoints") && !text.contains("BackendNotFound")
        })
        .await;
    assert_eq!(ids(&failing).len(), 2, "{failing}");
    let healthy = ids(&w.graph("bob", "?health=healthy&kinds=HTTPRoute").await);
    assert!(healthy.is_empty(), "{healthy:?}");
    let near = ids(&w.graph("bob", "?root=/Service/team-b/api&depth=1").await);
    assert!(
        near.contains(&"gateway.networking.k8s.io/HTTPRoute/team-b/api".to_owned()),
        "{near:?}"
    );
    assert!(
        !near.iter().any(|id| id.contains("team-a")),
        "depth 1 from the Service: {near:?}"
    );

    let dot = w.get("bob", "?format=dot").send().await.unwrap();
    assert_eq!(
        dot.headers()["content-type"],
        "text/vnd.graphviz; charset=utf-8"
    );
    assert!(
        dot.text()
            .await
            .unwrap()
            .starts_with("digraph gateway_api {")
    );
    let mermaid = w
        .get("bob", "?format=mermaid")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(mermaid.starts_with("flowchart LR"), "{mermaid}");

    for (query, code, names) in [
        ("?format=svg", 400, "parameter format"),
        ("?health=sad", 400, "parameter health"),
        ("?root=nope", 400, "parameter root"),
        ("?depth=2", 400, "parameter depth"),
        ("?colour=red", 400, "unknown field `colour`"),
        ("?root=/Service/team-b/nothing", 404, "not in the graph"),
    ] {
        let response = w.get("bob", query).send().await.unwrap();
        assert_eq!(response.status(), code, "{query}");
        let text = response.text().await.unwrap();
        assert!(text.contains(names), "{query}: {text}");
    }
    // Alice may not learn of team-b's Service even as a root.
    let hidden = w
        .get("alice", "?root=/Service/team-b/api")
        .send()
        .await
        .unwrap();
    assert_eq!(hidden.status(), 404);
}

/// Reads Server-Sent Events from a response.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn next(&mut self) -> (String, String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                    }
                }
                if event.is_empty() {
                    continue; // a keep-alive comment
                }
                return (event, id, serde_json::from_str(&data).unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.response.chunk())
                .await
                .expect("an event in time")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

impl World {
    async fn watch(&self, user: &str, resume: Option<&str>) -> Events {
        let mut request = self.http.get(format!("{}/api/v1/graph/watch", self.base));
        request = if user == "bob" {
            request
                .header("x-remote-user", "bob")
                .header("x-remote-groups", "ops")
        } else {
            request.header("x-remote-user", user)
        };
        if let Some(id) = resume {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            response,
            buffer: String::new(),
        }
    }
}

fn added(diff: &Value) -> Vec<String> {
    diff["addedNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_sends_the_graph_then_diffs_and_resumes() {
    let w = world().await;
    let mut bob = w.watch("bob", None).await;
    let mut alice = w.watch("alice", None).await;
    let (event, first_id, graph) = bob.next().await;
    assert_eq!(event, "graph");
    assert!(ids(&graph).contains(&"/Service/team-b/api".to_owned()));
    let (event, _, graph) = alice.next().await;
    assert_eq!(event, "graph");
    assert!(!ids(&graph).iter().any(|id| id.contains("team-b")));

    create(&w.admin, service("team-b", "late")).await;
    create(&w.admin, route("team-b", "late", "late")).await;
    let mut seen = Vec::new();
    let mut last_id = first_id.clone();
    while !seen.contains(&"gateway.networking.k8s.io/HTTPRoute/team-b/late".to_owned()) {
        let (event, id, diff) = bob.next().await;
        assert_eq!(event, "diff");
        assert!(
            id.parse::<u64>().unwrap() > last_id.parse::<u64>().unwrap(),
            "ids grow"
        );
        last_id = id;
        seen.extend(added(&diff));
    }
    // Alice's next event is about team-a, never team-b's change.
    create(&w.admin, service("team-a", "mine")).await;
    create(&w.admin, route("team-a", "mine", "mine")).await;
    let mut alice_seen = Vec::new();
    while !alice_seen.contains(&"gateway.networking.k8s.io/HTTPRoute/team-a/mine".to_owned()) {
        let (event, _, diff) = alice.next().await;
        assert_eq!(event, "diff");
        let names = added(&diff);
        assert!(!names.iter().any(|id| id.contains("team-b")), "{names:?}");
        alice_seen.extend(names);
    }
    drop(bob);

    // What changes while bob is away arrives as one diff when he comes back.
    create(&w.admin, service("team-b", "while-away")).await;
    create(&w.admin, route("team-b", "while-away", "while-away")).await;
    w.until("bob", "", |g| {
        ids(g)
            .iter()
            .any(|id| id.ends_with("HTTPRoute/team-b/while-away"))
    })
    .await;
    let mut back = w.watch("bob", Some(&last_id)).await;
    let (event, _, diff) = back.next().await;
    assert_eq!(event, "diff", "resumed with a diff, not the whole graph");
    let names = added(&diff);
    assert!(
        names.contains(&"gateway.networking.k8s.io/HTTPRoute/team-b/while-away".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"gateway.networking.k8s.io/HTTPRoute/team-a/mine".to_owned()),
        "everything since {last_id}: {names:?}"
    );
    assert!(
        !names.contains(&"gateway.networking.k8s.io/HTTPRoute/team-b/late".to_owned()),
        "not what bob had"
    );
    // An id that is no longer kept gets the whole graph.
    let mut fresh = w.watch("bob", Some("0")).await;
    assert_eq!(fresh.next().await.0, "graph");
    let _ = Arc::new(());
}
