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

/// The health the page draws node `id` with (`null` when it is not drawn).
fn drawn(id: &str) -> String {
    format!("document.querySelector('[data-id=\"{id}\"]')?.dataset.health ?? null")
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
    let stroke = page.eval(&format!(
        "document.querySelector('[data-id=\"{checkout}\"] rect').getAttribute('stroke')"
    ));
    assert_eq!(stroke, FAILING);
    let opened = page.eval("performance.timeOrigin");
    page.screenshot(&shots.join("demo.png"));

    selected_and_filtered(&mut page, checkout, &shots);

    // Left open, the page follows a change applied with kubectl.
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
    until("the page follows the change", || {
        let search = page.eval(&drawn("gateway.networking.k8s.io/HTTPRoute/shop/search"));
        (page.eval(&drawn(checkout)) == "healthy" && search == "healthy").then_some(())
    });
    assert_eq!(
        page.eval("performance.timeOrigin"),
        opened,
        "the same page, not reloaded"
    );
    page.screenshot(&shots.join("demo-after.png"));
}

/// A click shows the route's health, reasons and conditions; filtered to what fails, only
/// failing nodes are drawn, and every node again without the filter.
fn selected_and_filtered(page: &mut Browser, checkout: &str, shots: &Path) {
    // A click shows the route's health, reasons and conditions.
    page.eval(&format!(
        "document.querySelector('[data-id=\"{checkout}\"]').dispatchEvent(new MouseEvent('click'))"
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
    let conditions = page.eval("document.querySelector('#details table').textContent");
    assert!(
        conditions.as_str().unwrap().contains("Accepted"),
        "{conditions}"
    );
    page.screenshot(&shots.join("demo-selected.png"));

    // Filtered to what fails: only failing nodes are drawn.
    page.eval("(() => { const s = document.getElementById('health'); s.value = 'failing'; s.dispatchEvent(new Event('change')); })()");
    until("only failing nodes drawn", || {
        let healths =
            page.eval("[...document.querySelectorAll('g.node')].map(g => g.dataset.health)");
        let healths = healths.as_array()?.clone();
        (!healths.is_empty() && healths.iter().all(|h| h == "failing")).then_some(())
    });
    assert_eq!(
        page.eval(&drawn("/Service/shop/web")),
        serde_json::Value::Null
    );
    page.eval("(() => { const s = document.getElementById('health'); s.value = ''; s.dispatchEvent(new Event('change')); })()");
    until("every node drawn again", || {
        (page.eval(&drawn("/Service/shop/web")) == "healthy").then_some(())
    });
    let namespaces =
        page.eval("[...document.querySelectorAll('#namespace option')].map(o => o.value)");
    assert_eq!(namespaces, serde_json::json!(["", "shop"]));
}
