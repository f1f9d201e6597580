//! Golden files: every `tests/golden/<case>/in.yaml` (objects, with the statuses a controller
//! wrote; where an object carries none, the status fairlead's translator decides for it, as
//! the control plane would write it) is built into a graph at a fixed time, viewed as
//! `<case>/view.yaml` asks (a user's namespaces, the request's filters; everything when
//! absent), and compared with `<case>/graph.json` (validated by the checked-in JSON Schema)
//! and `<case>/graph.dot`.
//!
//! `UPDATE_GOLDEN=1 cargo test -p fairlead-graph --test golden` rewrites the expected files;
//! a person reviews the diff before it is committed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fairlead_graph::filter::{Filter, view};
use fairlead_graph::world::{decided_statuses, from_yaml};
use fairlead_graph::{Health, NodeId, build, render};
use serde::Deserialize;

/// 2027-01-15T08:00:00Z.
const NOW: i64 = 1_800_000_000;

/// What a case's `view.yaml` asks.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct View {
    /// The namespaces the user may list in (every one when absent).
    user_namespaces: Option<Vec<String>>,
    /// Whether the user may list cluster-scoped kinds.
    #[serde(default)]
    user_cluster: bool,
    namespace: Option<String>,
    root: Option<String>,
    depth: Option<usize>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    health: Vec<String>,
}

fn schema() -> (boon::Schemas, boon::SchemaIndex) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/graph.schema.json");
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource("graph.schema.json", document)
        .unwrap();
    let index = compiler.compile("graph.schema.json", &mut schemas).unwrap();
    (schemas, index)
}

fn outputs(case: &Path) -> (String, String) {
    let text = std::fs::read_to_string(case.join("in.yaml")).expect("in.yaml");
    let (input, mut world) = from_yaml(&text).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    decided_statuses(&input, &mut world);
    let graph = build(&input, &world, NOW);
    let v: View = std::fs::read_to_string(case.join("view.yaml"))
        .map(|t| serde_yaml_ng::from_str(&t).expect("view.yaml"))
        .unwrap_or_default();
    let visible = |node: &fairlead_graph::Node| match (&v.user_namespaces, &node.namespace) {
        (None, _) => true,
        (Some(_), None) => v.user_cluster,
        (Some(allowed), Some(ns)) => allowed.contains(ns),
    };
    let filter = Filter {
        namespace: v.namespace.clone(),
        root: v.root.as_deref().map(|r| NodeId::parse(r).expect("root")),
        depth: v.depth,
        kinds: v.kinds.iter().cloned().collect(),
        health: v
            .health
            .iter()
            .map(|h| Health::parse(h).expect("health"))
            .collect::<BTreeSet<_>>(),
    };
    let graph = view(&graph, &visible, &filter).expect("view");
    let json = serde_json::to_string_pretty(&render::json(&graph)).unwrap() + "\n";
    (json, render::dot(&graph))
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("in.yaml").exists())
        .collect();
    cases.sort();
    cases
}

#[test]
fn golden_graphs() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let (schemas, index) = schema();
    let mut failures = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 4, "the golden cases are there");
    for case in cases {
        let (json, dot) = outputs(&case);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        if let Err(e) = schemas.validate(&value, index) {
            failures.push(format!("{}: fails the schema: {e:#}", case.display()));
        }
        for (file, got) in [("graph.json", &json), ("graph.dot", &dot)] {
            let path = case.join(file);
            if update {
                std::fs::write(&path, got).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            if &want != got {
                failures.push(format!(
                    "{} differs (UPDATE_GOLDEN=1 to rewrite, then review)\n--- got\n{got}",
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_same_world_gives_the_same_graph_and_version() {
    for case in cases() {
        assert_eq!(outputs(&case), outputs(&case), "{}", case.display());
    }
}
