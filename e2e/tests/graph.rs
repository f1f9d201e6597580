//! The relationship graph in `fairlead up`, end to end: the demo world (`graph/demo`) applied
//! at start, the real control plane's statuses, the graph API, `fairlead graph` against the
//! kubeconfig, and the viewer in headless Chromium (Debian `chromium`): a screenshot and the
//! drawn page show the failing route in its colour, and a change applied with kubectl reaches
//! the open page without a reload.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fairlead_e2e::Up;
use fairlead_kit::testing::free_port;

/// The failing colour of the viewer (and of the DOT rendering).
const FAILING: &str = "#c62828";

/// A headless Chromium driven over the DevTools protocol by `tests/tools/cdp.py`.
struct Browser {
    child: Child,
    commands: std::process::ChildStdin,
    answers: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl Browser {
    fn open(url: &str) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/cdp.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([url, "1800", "760"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 and chromium (scripts/setup installs Debian's)");
        let commands = child.stdin.take().unwrap();
        let mut answers =
            std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let opened = answers
            .next()
            .expect("the browser opened the page")
            .unwrap();
        assert!(opened.contains("opened"), "{opened}");
        Self {
            child,
            commands,
            answers,
        }
    }

    fn ask(&mut self, command: serde_json::Value) -> serde_json::Value {
        std::io::Write::write_all(&mut self.commands, format!("{command}\n").as_bytes()).unwrap();
        let line = self.answers.next().expect("an answer").unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> serde_json::Value {
        let answer = self.ask(serde_json::json!({"eval": expression}));
        assert!(answer.get("error").is_none(), "{expression}: {answer}");
        answer["value"].clone()
    }

    fn screenshot(&mut self, path: &Path) {
        self.ask(serde_json::json!({"screenshot": path}));
        assert!(
            std::fs::metadata(path).unwrap().len() > 20_000,
            "{}",
            path.display()
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::io::Write::write_all(&mut self.commands, b"{\"quit\": true}\n");
        let _ = self.child.wait();
    }
}

/// The health the page draws node or edge `id` with (`null` when it is not drawn).
fn drawn(id: &str) -> String {
    format!("window.fairlead ? fairlead.drawn({id:?}) : null")
}

/// Where the page draws node `id`, left to right.
fn drawn_x(page: &mut Browser, id: &str) -> f64 {
    page.eval(&format!("fairlead.cy.getElementById({id:?}).position('x')"))
        .as_f64()
        .unwrap_or_else(|| panic!("{id} is drawn"))
}

/// `fairlead up` with the demo world, its data kept, its proxies not run, and its graph on
/// a port of the test's: the base URL of the graph.
fn start() -> (Up, String) {
    let graph = format!("127.0.0.1:{}", free_port());
    let up = Up::builder()
        .option("--graph-addr", &graph)
        .keep_data()
        .manifests(&fairlead_e2e::workspace().join("graph/demo"))
        .flag("--no-local-proxies")
        .start();
    (up, format!("http://{graph}"))
}

fn get(url: &str) -> Option<String> {
    let output = Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Waits for `check` (60 s), failing with `what`.
fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn node<'a>(graph: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    graph["elements"]["nodes"]
        .as_array()?
        .iter()
        .map(|n| &n["data"])
        .find(|n| n["id"] == id)
}

#[test]
fn the_demo_graph_is_served_drawn_and_followed_live() {
    let (up, base) = start();
    let checkout = "gateway.networking.k8s.io/HTTPRoute/shop/checkout";
    // The control plane's statuses are in, the payments backend has no ready endpoint.
    let graph = until(
        "the demo's graph, with the route to payments failing",
        || {
            let graph: serde_json::Value =
                serde_json::from_str(&get(&format!("{base}/api/v1/graph"))?).ok()?;
            let route = node(&graph, checkout)?;
            let accepted = route["status"]["parents"][0]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Accepted" && c["status"] == "True");
            (accepted && route["health"] == "failing").then_some(graph)
        },
    );
    let legacy = node(&graph, "/Service/shop/retired").unwrap();
    assert_eq!(legacy["missing"], true, "{legacy}");
    assert!(
        legacy["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("BackendNotFound")
    );

    // `fairlead graph` against the kubeconfig draws the same objects.
    let cli = Command::new(fairlead_e2e::binary::path())
        .args(["graph", "-o", "dot", "--namespace", "shop"])
        .env("KUBECONFIG", &up.kubeconfig)
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let dot = String::from_utf8_lossy(&cli.stdout);
    assert!(
        dot.contains(&format!(
            "\"{checkout}\" [label=\"HTTPRoute\\nshop/checkout\", color=\"{FAILING}\""
        )),
        "{dot}"
    );

    // The viewer draws the failing route in the failing colour.
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph");
    std::fs::create_dir_all(&shots).unwrap();
    let mut page = Browser::open(&format!("{base}/graph/"));
    until("the page draws the failing route", || {
        (page.eval(&drawn(checkout)) == "failing").then_some(())
    });
    let border = page.eval(&format!(
        "fairlead.cy.getElementById({checkout:?}).style('border-color')"
    ));
    assert_eq!(border, "rgb(198,40,40)", "{FAILING} on the canvas");
    // Laid out in layers along the traffic: Gateway, listener, route, Service, slices.
    let layers = [
        "gateway.networking.k8s.io/Gateway/shop/shop",
        "gateway.networking.k8s.io/Gateway/shop/shop/d8-http",
        checkout,
        "/Service/shop/payments",
    ]
    .map(|id| drawn_x(&mut page, id));
    assert!(layers.is_sorted() && layers[0] < layers[3], "{layers:?}");
    let opened = page.eval("performance.timeOrigin");
    page.screenshot(&shots.join("demo.png"));

    selected_and_explained(&mut page, checkout, &shots);
    filtered_and_found(&mut page);
    exported(&mut page, &shots);

    followed_live(&mut page, &up, checkout, &opened, &shots);
}

/// The user's pan and zoom, and where the Gateway is drawn.
const VIEW: &str = "({pan: fairlead.cy.pan(), zoom: fairlead.cy.zoom(), gateway: fairlead.cy.getElementById('gateway.networking.k8s.io/Gateway/shop/shop').position()})";

/// Left open, zoomed and panned by the user, the page follows a change applied with kubectl
/// without a reload and without moving what is drawn; the new route lands on a free spot.
fn followed_live(
    page: &mut Browser,
    up: &Up,
    checkout: &str,
    opened: &serde_json::Value,
    shots: &Path,
) {
    page.eval("fairlead.cy.zoom(0.8); fairlead.cy.pan({x: 40, y: 30}); true");
    let before = page.eval(VIEW);
    up.take_over(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: payments-1
  namespace: shop
  labels: {kubernetes.io/service-name: payments}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.20.3.1], conditions: {ready: true}}
- {addresses: [10.20.3.2], conditions: {ready: true}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: search, namespace: shop}
spec:
  parentRefs: [{name: shop}]
  hostnames: [search.example.com]
  rules: [{backendRefs: [{name: catalog, port: 9000}]}]
",
    );
    let search = "gateway.networking.k8s.io/HTTPRoute/shop/search";
    until("the page follows the change", || {
        let drawn_search = page.eval(&drawn(search));
        (page.eval(&drawn(checkout)) == "healthy" && drawn_search == "healthy").then_some(())
    });
    assert_eq!(
        page.eval("performance.timeOrigin"),
        *opened,
        "the same page, not reloaded"
    );
    let after = page.eval(VIEW);
    assert_eq!(after, before, "the user's view and what was drawn stay");
    // The new route is put beside its listener, right of it, on a free spot.
    let listener = drawn_x(page, "gateway.networking.k8s.io/Gateway/shop/shop/d8-http");
    assert!(drawn_x(page, search) > listener);
    let overlapped = page.eval(&format!(
        "(() => {{ const a = fairlead.cy.getElementById({search:?}).boundingBox(); return fairlead.cy.nodes().filter(n => n.id() !== {search:?}).filter(n => {{ const b = n.boundingBox(); return a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2; }}).map(n => n.id()); }})()"
    ));
    assert_eq!(
        overlapped,
        serde_json::json!([]),
        "the new route covers none"
    );
    page.eval("fairlead.cy.fit(undefined, 24); true");
    page.screenshot(&shots.join("demo-after.png"));
}

/// A tap on the failing route shows its health, reasons and conditions; a tap on the refused
/// parentRef explains it up the chain: the route's word on its parent, the listener, the
/// Gateway, the GatewayClass.
fn selected_and_explained(page: &mut Browser, checkout: &str, shots: &Path) {
    page.eval(&format!(
        "fairlead.cy.getElementById({checkout:?}).emit('tap'); true"
    ));
    assert_eq!(
        page.eval("document.getElementById('selected-health').textContent"),
        "failing"
    );
    let reasons = page.eval("document.getElementById('selected-reasons').textContent");
    assert!(
        reasons.as_str().unwrap().contains("NoReadyEndpoints"),
        "{reasons}"
    );
    let conditions = page.eval("document.getElementById('selected-conditions').textContent");
    assert!(
        conditions.as_str().unwrap().contains("Accepted"),
        "{conditions}"
    );
    let refused = "gateway.networking.k8s.io/HTTPRoute/shop/admin>parentRef>gateway.networking.k8s.io/Gateway/shop/shop/d8-http";
    until("the refused parentRef drawn", || {
        (page.eval(&drawn(refused)) == "failing").then_some(())
    });
    page.eval(&format!(
        "fairlead.cy.getElementById({refused:?}).emit('tap'); true"
    ));
    let steps = page.eval("[...document.querySelectorAll('#why > li')].map(li => li.textContent)");
    let steps: Vec<&str> = steps
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(steps.len() >= 4, "{steps:#?}");
    assert!(
        steps[0].starts_with("parentRef: HTTPRoute shop/admin → Listener shop/d8-http")
            && steps[0].contains("Accepted=False"),
        "{steps:#?}"
    );
    assert_eq!(
        steps[0].matches("NoMatchingParent").count(),
        1,
        "said once: {steps:#?}"
    );
    assert!(steps[1].starts_with("Listener shop/d8-http"), "{steps:#?}");
    assert!(steps[2].starts_with("Gateway shop/shop"), "{steps:#?}");
    assert!(steps[3].starts_with("GatewayClass d8-alb"), "{steps:#?}");
    page.screenshot(&shots.join("demo-why.png"));
}

/// The drawn nodes' healths.
const HEALTHS: &str = "fairlead.cy.nodes().map(n => n.data('health'))";

/// Filtered to what fails, only failing nodes are drawn, and every node again without the
/// filter; Find draws a match with its chain and nothing else.
fn filtered_and_found(page: &mut Browser) {
    let set = |page: &mut Browser, id: &str, value: &str, event: &str| {
        page.eval(&format!(
            "(() => {{ const s = document.getElementById({id:?}); s.value = {value:?}; s.dispatchEvent(new Event({event:?})); return true; }})()"
        ));
    };
    set(page, "health", "failing", "change");
    until("only failing nodes drawn", || {
        let healths = page.eval(HEALTHS);
        let healths = healths.as_array()?.clone();
        (!healths.is_empty() && healths.iter().all(|h| h == "failing")).then_some(())
    });
    assert_eq!(page.eval("location.search"), "?health=failing");
    set(page, "health", "", "change");
    until("every node drawn again", || {
        (page.eval(&drawn("/Service/shop/web")) == "healthy").then_some(())
    });
    let namespaces =
        page.eval("[...document.querySelectorAll('#namespace option')].map(o => o.value)");
    assert_eq!(namespaces, serde_json::json!(["", "shop"]));

    set(page, "search", "payments", "input");
    until("the payments chain alone", || {
        (page.eval(&drawn("/Service/shop/web")).is_null()).then_some(())
    });
    for id in [
        "/Service/shop/payments",
        "gateway.networking.k8s.io/HTTPRoute/shop/checkout",
        "gateway.networking.k8s.io/Gateway/shop/shop/d8-http",
        "gateway.networking.k8s.io/Gateway/shop/shop",
        "gateway.networking.k8s.io/GatewayClass//d8-alb",
    ] {
        assert!(!page.eval(&drawn(id)).is_null(), "{id} is in the chain");
    }
    let found = page.eval("fairlead.cy.nodes('.found').map(n => n.id())");
    let found = found.as_array().unwrap();
    assert!(
        found.contains(&"/Service/shop/payments".into())
            && found
                .iter()
                .all(|id| id.as_str().unwrap().contains("payments")),
        "{found:?}"
    );
    set(page, "search", "", "input");
    until("every node drawn again", || {
        (page.eval(&drawn("/Service/shop/web")) == "healthy").then_some(())
    });
}

/// PNG and SVG of what is drawn.
fn exported(page: &mut Browser, shots: &Path) {
    let png = page.eval(
        "(async () => { const b = fairlead.exportPng(); const head = new Uint8Array(await b.slice(0, 4).arrayBuffer()); return {size: b.size, head: [...head]}; })()",
    );
    assert_eq!(png["head"], serde_json::json!([0x89, b'P', b'N', b'G']));
    assert!(png["size"].as_u64().unwrap() > 20_000, "{png}");
    let svg = page.eval(
        "(() => { const text = fairlead.exportSvg(); const doc = new DOMParser().parseFromString(text, 'image/svg+xml'); return {text, error: doc.querySelector('parsererror') !== null, nodes: doc.querySelectorAll('g.node').length, drawn: fairlead.cy.nodes().length, failing: doc.querySelectorAll('g.node rect[stroke=\"#c62828\"]').length}; })()",
    );
    assert_eq!(svg["error"], false, "{}", svg["text"]);
    assert_eq!(svg["nodes"], svg["drawn"]);
    assert!(svg["failing"].as_u64().unwrap() >= 1);
    std::fs::write(shots.join("demo.svg"), svg["text"].as_str().unwrap()).unwrap();
}

/// The world of `namespaces` × `routes` HTTPRoutes (`team-NN/rNNNN`, two per Service) behind
/// one shared Gateway of the ALB's class.
fn many_routes(namespaces: usize, routes: usize) -> String {
    let mut yaml = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: d8-alb}\nspec: {controllerName: alb.network.deckhouse.io/gateway-controller}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: edge}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: shared, namespace: edge}\nspec:\n  gatewayClassName: d8-alb\n  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]\n",
    );
    for ns in 0..namespaces {
        yaml +=
            &format!("---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: team-{ns:02}}}\n");
        for r in 0..routes {
            let i = ns * routes + r;
            if r % 2 == 0 {
                yaml += &format!(
                    "---\napiVersion: v1\nkind: Service\nmetadata: {{name: s{i:04}, namespace: team-{ns:02}}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: s{i:04}, namespace: team-{ns:02}, labels: {{kubernetes.io/service-name: s{i:04}}}}}\naddressType: IPv4\nports: [{{name: http, port: 80}}]\nendpoints: [{{addresses: [10.1.{a}.{b}], conditions: {{ready: true}}}}]\n",
                    a = i / 250,
                    b = i % 250 + 1,
                );
            }
            yaml += &format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r{i:04}, namespace: team-{ns:02}}}\nspec:\n  parentRefs: [{{name: shared, namespace: edge}}]\n  hostnames: [r{i:04}.example.com]\n  rules: [{{backendRefs: [{{name: s{s:04}, port: 80}}]}}]\n",
                s = i - i % 2,
            );
        }
    }
    yaml
}

/// How many nodes the page draws, and how many its view holds (from the title; 0 and 0
/// before the page has its graph).
fn counts(page: &mut Browser) -> (u64, u64) {
    let drawn = page
        .eval("window.fairlead ? fairlead.cy.nodes().length : 0")
        .as_u64()
        .unwrap();
    let title = page.eval("document.title");
    let held = title
        .as_str()
        .unwrap()
        .split(" · ")
        .nth(1)
        .and_then(|n| n.strip_suffix(" nodes"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (drawn, held)
}

/// The graph API and viewer (the graph service's own router) serving the graph the graph's
/// builder makes of `yaml`, with the statuses fairlead's translator decides, then `edit`ed: a
/// world of any size without a control plane loading it object by object. The base URL; the
/// server stops with the runtime.
fn serve_world(
    runtime: &tokio::runtime::Runtime,
    yaml: &str,
    edit: impl FnOnce(&mut fairlead_graph::Graph),
) -> String {
    use fairlead_graph_service::{api, authz, metrics, publish};
    let (input, mut world) = fairlead_graph::world::from_yaml(yaml).unwrap();
    fairlead_graph::world::decided_statuses(&input, &mut world);
    let mut graph = fairlead_graph::build(&input, &world, 1_800_000_000);
    edit(&mut graph);
    let feed = std::sync::Arc::new(publish::Feed::default());
    assert!(feed.publish(graph));
    let registry = fairlead_kit::metrics::Metrics::new("graph-test").unwrap();
    let shared = api::Shared {
        feed,
        access: authz::Access::Everything,
        anonymous: Some(authz::User {
            name: "viewer".into(),
            groups: Vec::new(),
        }),
        metrics: metrics::GraphMetrics::new(&registry).unwrap(),
        stop: tokio_util::sync::CancellationToken::new(),
    };
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move {
        axum::serve(listener, api::router(std::sync::Arc::new(shared)))
            .await
            .unwrap();
    });
    format!("http://{addr}")
}

/// At 5,000 routes the page draws nothing until the view is narrowed, and says how big it is;
/// a namespace or Find draws at once in layers, and "draw anyway" draws all of it in columns.
/// The times are printed (BENCHMARKS.md keeps them), not asserted.
#[test]
fn five_thousand_routes_are_narrowed_before_they_are_drawn() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // One backendRef carries traffic, as the overlay puts it there from Prometheus.
    let route = "gateway.networking.k8s.io/HTTPRoute/team-31/r3117";
    let mut busy = String::new();
    let base = serve_world(&runtime, &many_routes(50, 100), |graph| {
        let (id, edge) = graph
            .edges
            .iter_mut()
            .find(|(_, e)| {
                e.source.as_str() == route
                    && e.relation == fairlead_graph::model::Relation::BackendRef
            })
            .expect("the route's backendRef");
        busy = id.to_string();
        fairlead_graph::model::Edge::edit(edge).traffic =
            Some(Box::new(fairlead_graph::model::Traffic {
                requests_per_second: 12.5,
                error_ratio: Some(0.02),
                p99_ms: Some(48.0),
            }));
    });
    let routes: serde_json::Value =
        serde_json::from_str(&get(&format!("{base}/api/v1/graph?kinds=HTTPRoute")).unwrap())
            .unwrap();
    assert_eq!(routes["elements"]["nodes"].as_array().unwrap().len(), 5000);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph");
    std::fs::create_dir_all(&shots).unwrap();

    let started = Instant::now();
    let mut page = Browser::open(&format!("{base}/graph/"));
    until("the page asks for a narrower view", || {
        let (drawn, held) = counts(&mut page);
        (held > 10_000 && drawn == 0).then_some(())
    });
    eprintln!("5,000 routes: the gate after {:?}", started.elapsed());
    let told = page.eval("document.getElementById('gate-count').textContent");
    assert!(told.as_str().unwrap().contains("(5000 routes)"), "{told}");
    page.screenshot(&shots.join("many-gate.png"));

    // A namespace: its 100 routes, their Services and slices, and the shared Gateway's chain.
    let started = Instant::now();
    page.eval("(() => { const s = document.getElementById('namespace'); s.value = 'team-07'; s.dispatchEvent(new Event('change')); return true; })()");
    until("one namespace drawn", || {
        let (drawn, held) = counts(&mut page);
        (held < 1000 && drawn == held && drawn >= 200).then_some(())
    });
    eprintln!("5,000 routes: team-07 drawn after {:?}", started.elapsed());
    assert_eq!(
        page.eval(&drawn("gateway.networking.k8s.io/HTTPRoute/team-07/r0742")),
        "healthy"
    );
    assert!(
        page.eval(&drawn("gateway.networking.k8s.io/HTTPRoute/team-08/r0842"))
            .is_null()
    );
    page.screenshot(&shots.join("many-namespace.png"));

    // Everything again, found: one route and its chain.
    page.eval("(() => { const f = document.getElementById('search'); f.value = 'team-31/r3117'; const s = document.getElementById('namespace'); s.value = ''; s.dispatchEvent(new Event('change')); return true; })()");
    let started = Instant::now();
    until("one route's chain drawn", || {
        let (drawn, held) = counts(&mut page);
        (held > 10_000 && (4..=8).contains(&drawn)).then_some(())
    });
    eprintln!(
        "5,000 routes: one chain found after {:?}",
        started.elapsed()
    );
    for id in [
        "gateway.networking.k8s.io/HTTPRoute/team-31/r3117",
        "/Service/team-31/s3116",
        "gateway.networking.k8s.io/Gateway/edge/shared",
    ] {
        assert!(!page.eval(&drawn(id)).is_null(), "{id} drawn");
    }
    assert_eq!(
        page.eval("new URLSearchParams(location.search).get('find')"),
        "team-31/r3117"
    );
    // The traffic overlay: on the edge's label and width, and in the panel.
    let label = page.eval(&format!(
        "fairlead.cy.getElementById({busy:?}).data('label')"
    ));
    assert_eq!(label, "w=1 · 12.5 rps · 2.00% 5xx · p99 48.0 ms");
    let width = page.eval(&format!(
        "fairlead.cy.getElementById({busy:?}).data('width')"
    ));
    assert!(width.as_f64().unwrap() > 3.0, "{width}");
    page.eval(&format!(
        "fairlead.cy.getElementById({busy:?}).emit('tap'); true"
    ));
    let table = page.eval("document.getElementById('selected-traffic').textContent");
    assert_eq!(table, "requests/s12.55xx share2.00%p9948.0 ms");
    page.screenshot(&shots.join("many-found.png"));

    // All of it anyway, in columns.
    page.eval("(() => { const f = document.getElementById('search'); f.value = ''; f.dispatchEvent(new Event('input')); return true; })()");
    until("the gate again", || {
        (counts(&mut page).0 == 0).then_some(())
    });
    let started = Instant::now();
    page.eval("document.getElementById('draw-anyway').click(); true");
    let (drawn, held) = counts(&mut page);
    assert_eq!(drawn, held);
    eprintln!(
        "5,000 routes: all {drawn} nodes drawn after {:?}",
        started.elapsed()
    );
    page.screenshot(&shots.join("many-all.png"));
}
