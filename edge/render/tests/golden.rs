//! Golden files at both seams of the pipeline (translate, then render): every
//! `tests/golden/<case>/in.yaml` (Gateway API objects and the Services, EndpointSlices,
//! Secrets and Namespaces they point at) is translated; its intermediate representation is compared with `<case>/ir.yaml` (per
//! Gateway: listeners, chains, virtual hosts, routes, clusters, certificates by name and
//! size), and the rendered resources with
//! `<case>/out/{listeners,routes,clusters,endpoints,secrets}.yaml` (one file per xDS type,
//! resources in proto3 JSON keyed by Gateway; `listeners-without-geoip.yaml` where a Gateway's
//! listeners carry Envoy's GeoIP filter) and `<case>/out/status.yaml`.
//!
//! `UPDATE_GOLDEN=1 cargo test -p fairlead-edge-render --test golden` rewrites the
//! expected files; a person reviews the diff before it is committed.
//!
//! Every generated resource must also pass the protoc-gen-validate rules of Envoy's API,
//! including the messages packed in its `Any` fields.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use envoy_types::pb::envoy as pb;
use fairlead_edge_model::input::Input;
use fairlead_edge_model::{CONTROLLER_NAME, Encoded};
use fairlead_edge_render::{Pipeline, run};
use fairlead_edge_translate::intermediate;
use prost::{Message, Name};

fn render<M: Message + Name + Default>(
    per_gateway: impl Iterator<Item = (String, Vec<Encoded>)>,
    problems: &mut Vec<String>,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (gateway, resources) in per_gateway {
        if resources.is_empty() {
            continue;
        }
        let mut list = Vec::new();
        for encoded in &resources {
            let resource: M = encoded.decode().expect("the translator's bytes decode");
            if let Err(e) = fairlead_envoy_protos::validate(&resource) {
                problems.push(format!(
                    "{gateway}: {} fails Envoy's rules: {e}",
                    M::full_name()
                ));
            }
            let json = fairlead_envoy_protos::to_json(&resource).expect("renders");
            // The snapshot serves a resource under the name the translator gives it, which
            // must be the one inside the message.
            let inner = json.get("name").or_else(|| json.get("clusterName"));
            if inner.and_then(|n| n.as_str()) != Some(encoded.name.as_str()) {
                problems.push(format!(
                    "{gateway}: {} {:?} is named {inner:?} in its message",
                    M::full_name(),
                    encoded.name
                ));
            }
            list.push(json);
        }
        out.insert(gateway, serde_json::Value::Array(list));
    }
    serde_json::Value::Object(out)
}

fn outputs(case: &Path) -> (BTreeMap<&'static str, String>, Vec<String>) {
    let text = std::fs::read_to_string(case.join("in.yaml")).expect("in.yaml");
    let input = Input::from_yaml(&text).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    let translation = run(&input, CONTROLLER_NAME);
    let gateways = &translation.gateways;
    let mut problems = Vec::new();
    let yaml = |v: &serde_json::Value| serde_yaml_ng::to_string(v).expect("yaml");
    let mut files = BTreeMap::new();
    files.insert(
        "listeners",
        yaml(&render::<pb::config::listener::v3::Listener>(
            gateways
                .iter()
                .map(|(k, r)| (k.to_string(), r.listeners.clone())),
            &mut problems,
        )),
    );
    // Only where some Gateway's listeners carry the GeoIP filter.
    if gateways.values().any(|r| r.without_geoip.is_some()) {
        files.insert(
            "listeners-without-geoip",
            yaml(&render::<pb::config::listener::v3::Listener>(
                gateways.iter().filter_map(|(k, r)| {
                    let variant = r.without_geoip.as_ref()?;
                    Some((k.to_string(), variant.listeners.clone()))
                }),
                &mut problems,
            )),
        );
    }
    files.insert(
        "routes",
        yaml(&render::<pb::config::route::v3::RouteConfiguration>(
            gateways
                .iter()
                .map(|(k, r)| (k.to_string(), r.routes.clone())),
            &mut problems,
        )),
    );
    files.insert(
        "clusters",
        yaml(&render::<pb::config::cluster::v3::Cluster>(
            gateways
                .iter()
                .map(|(k, r)| (k.to_string(), r.clusters.clone())),
            &mut problems,
        )),
    );
    files.insert(
        "endpoints",
        yaml(&render::<pb::config::endpoint::v3::ClusterLoadAssignment>(
            gateways
                .iter()
                .map(|(k, r)| (k.to_string(), r.endpoints.clone())),
            &mut problems,
        )),
    );
    files.insert(
        "secrets",
        yaml(
            &render::<pb::extensions::transport_sockets::tls::v3::Secret>(
                gateways
                    .iter()
                    .map(|(k, r)| (k.to_string(), r.secrets.clone())),
                &mut problems,
            ),
        ),
    );
    files.insert(
        "status",
        yaml(&serde_json::to_value(&translation.statuses).expect("status json")),
    );
    files.insert(
        "ir",
        yaml(&serde_json::to_value(intermediate(&input, CONTROLLER_NAME)).expect("IR json")),
    );
    (files, problems)
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/golden")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("in.yaml").exists())
        .collect();
    cases.sort();
    cases
}

#[test]
fn translations_match_the_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut failures = Vec::new();
    let cases = cases();
    assert!(
        cases.len() >= 40,
        "{} golden cases; the translator's coverage asks for at least 40",
        cases.len()
    );
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let (files, problems) = outputs(case);
        failures.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
        let out = case.join("out");
        let variant = out.join("listeners-without-geoip.yaml");
        if !files.contains_key("listeners-without-geoip") && variant.exists() {
            if update {
                std::fs::remove_file(&variant).expect("remove golden");
            } else {
                failures.push(format!(
                    "{name}/out/listeners-without-geoip.yaml exists, but no Gateway has listeners without GeoIP"
                ));
            }
        }
        for (kind, actual) in files {
            // The IR sits between the input and the rendered resources.
            let (path, shown) = if kind == "ir" {
                (case.join("ir.yaml"), "ir.yaml".to_owned())
            } else {
                (out.join(format!("{kind}.yaml")), format!("out/{kind}.yaml"))
            };
            if update {
                std::fs::create_dir_all(&out).expect("out dir");
                std::fs::write(&path, &actual).expect("write golden");
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_default();
            if expected != actual {
                failures.push(format!(
                    "{name}/{shown} differs (UPDATE_GOLDEN=1 to regenerate, then review)\n--- expected\n{expected}\n+++ actual\n{actual}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A translator that remembers gives what a fresh one gives: here one translator goes through
/// every case in turn (so each case meets the memory of another, with its routes, Services
/// and entries of the same names where cases share them), then through each case again
/// (everything remembered).
#[test]
fn a_translator_that_remembers_gives_what_a_fresh_one_gives() {
    let mut translator = Pipeline::default();
    let inputs: Vec<(PathBuf, Input)> = cases()
        .into_iter()
        .map(|case| {
            let text = std::fs::read_to_string(case.join("in.yaml")).expect("in.yaml");
            let input = Input::from_yaml(&text).expect("reads");
            (case, input)
        })
        .collect();
    for round in ["after another case", "after itself"] {
        for (case, input) in &inputs {
            if round == "after itself" {
                translator.run(input, CONTROLLER_NAME);
            }
            assert!(
                translator.run(input, CONTROLLER_NAME) == run(input, CONTROLLER_NAME),
                "{}: translated {round}, the result differs from a fresh translation",
                case.display()
            );
        }
    }
}

/// What changed is translated again: one translator goes from each case to the case with its
/// routes changed (rules reversed, a hostname added, a backend weight changed), with its
/// Services' ports moved, with no endpoint ready, and without BackendTLSPolicies, back to
/// the case after each; every result is a fresh translation's.
#[test]
fn a_translator_that_remembers_follows_a_changed_route() {
    for case in cases() {
        let text = std::fs::read_to_string(case.join("in.yaml")).expect("in.yaml");
        let input = Input::from_yaml(&text).expect("reads");
        let mut changed = input.clone();
        for route in &mut changed.http_routes {
            let route = std::sync::Arc::make_mut(route);
            route.spec.rules.reverse();
            route.spec.hostnames.push("changed.example.com".into());
            if let Some(b) = route
                .spec
                .rules
                .first_mut()
                .and_then(|r| r.backend_refs.first_mut())
            {
                b.weight = Some(b.weight.unwrap_or(1) + 7);
            }
        }
        for route in &mut changed.grpc_routes {
            std::sync::Arc::make_mut(route).spec.rules.reverse();
        }
        // Or a Service changes its ports (routes resolve against it).
        let mut moved = input.clone();
        for service in &mut moved.services {
            let service = std::sync::Arc::make_mut(service);
            for port in service
                .spec
                .iter_mut()
                .flat_map(|s| s.ports.iter_mut().flatten())
            {
                port.port += 1;
            }
        }
        // Or endpoints stop being ready, or the BackendTLSPolicies go.
        let mut unready = input.clone();
        for slice in &mut unready.endpoint_slices {
            for endpoint in std::sync::Arc::make_mut(slice)
                .endpoints
                .iter_mut()
                .flatten()
            {
                endpoint.conditions.get_or_insert_default().ready = Some(false);
            }
        }
        let mut plain = input.clone();
        plain.backend_tls_policies.clear();
        let mut translator = Pipeline::default();
        let steps = [
            ("original", &input),
            ("changed", &changed),
            ("back", &input),
            ("Service moved", &moved),
            ("back", &input),
            ("endpoints not ready", &unready),
            ("back", &input),
            ("BackendTLSPolicies gone", &plain),
            ("back", &input),
        ];
        for (step, input) in steps {
            assert!(
                translator.run(input, CONTROLLER_NAME) == run(input, CONTROLLER_NAME),
                "{}: the {step} input, translated after the others, differs from a fresh translation",
                case.display()
            );
        }
    }
}

/// An input read from files may hold two objects of one name (a watch cannot): the
/// translator's memory is not fooled by a Service that stands in for a removed one, nor by
/// two routes of one name.
#[test]
fn a_translator_that_remembers_is_not_fooled_by_duplicate_names() {
    let head = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: d8-alb}\nspec: {controllerName: alb.network.deckhouse.io/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: apps}\nspec: {gatewayClassName: d8-alb, listeners: [{name: http, port: 80, protocol: HTTP}]}\n";
    let service = |name: &str| {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: apps}}\nspec: {{ports: [{{port: 80}}]}}\n"
        )
    };
    let route = |host: &str, backend: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: apps}}\nspec: {{parentRefs: [{{name: gw}}], hostnames: [{host}], rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]}}\n"
        )
    };
    let read = |text: String| Input::from_yaml(&text).expect("reads");
    let two_services = read(format!(
        "{head}{}{}{}",
        service("shop"),
        service("other"),
        route("a.example.com", "other")
    ));
    let one_twice = read(format!(
        "{head}{}{}{}",
        service("shop"),
        service("shop"),
        route("a.example.com", "other")
    ));
    let two_routes = read(format!(
        "{head}{}{}{}",
        service("shop"),
        route("a.example.com", "shop"),
        route("b.example.com", "missing")
    ));
    let mut translator = Pipeline::default();
    for (step, input) in [
        ("two Services", &two_services),
        ("one Service twice", &one_twice),
        ("two routes of one name", &two_routes),
    ] {
        assert!(
            translator.run(input, CONTROLLER_NAME) == run(input, CONTROLLER_NAME),
            "{step}: differs from a fresh translation"
        );
    }
}
