//! Every golden input of the translator (`edge/render/tests/golden/<case>/in.yaml`) is
//! what a real cluster accepts: applied object by object through the embedded API server with
//! the Gateway API bundle `fairlead up` installs (upstream's standard channel, every schema
//! and CEL rule), none is refused — except the objects a case keeps on purpose to show how
//! the translator defends itself against what older or experimental CRDs let through; those
//! carry the annotation `test.fairlead.io/crds-refuse` with the message the bundle refuses
//! them with, and must be refused with it. The namespaces objects live in exist, as in a
//! cluster. A golden only the translator's reader accepts would test a world no user can
//! build.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde::Deserialize as _;
use serde_json::{Value, json};

/// The annotation of an object the bundle refuses on purpose: the message it refuses it with.
const REFUSED: &str = "test.fairlead.io/crds-refuse";

/// Server-side applies one object; the server's message when it is refused.
async fn apply(
    client: &kube::Client,
    server: &fairlead_apiserver::ApiServer,
    object: &Value,
) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let Some(rt) = server.registry().lookup_kind(api_version, kind) else {
        return Err(format!("no such kind is served at {api_version}"));
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &rt.plural);
    let api: Api<DynamicObject> = if rt.namespaced {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    match api
        .patch(
            name,
            &PatchParams::apply("goldens").force(),
            &Patch::Apply(object),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(e.message),
        Err(e) => Err(e.to_string()),
    }
}

/// What is wrong with applying one case: objects refused that should not be, and marked
/// objects accepted or refused for another reason.
async fn check(case: &Path) -> Vec<String> {
    let (server, client) = common::cluster(fairlead_edge_model::CONTROLLER_NAME).await;
    let text = std::fs::read_to_string(case.join("in.yaml")).unwrap();
    let mut objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|object| !object.is_null())
        .collect();
    // Namespaces first: the ones declared, then the others objects live in.
    objects.sort_by_key(|object| object["kind"] != "Namespace");
    let declared: BTreeSet<String> = objects
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let used: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_owned))
        .collect();
    for namespace in used.difference(&declared).filter(|n| *n != "default") {
        let object =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        apply(&client, &server, &object).await.unwrap();
    }
    let mut wrong = Vec::new();
    for object in &objects {
        let what = format!(
            "{} {}/{}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        let expected = object["metadata"]["annotations"][REFUSED].as_str();
        match (apply(&client, &server, object).await, expected) {
            (Ok(()), None) => {}
            (Ok(()), Some(message)) => {
                wrong.push(format!(
                    "{what} is accepted, but marked refused with {message:?}"
                ));
            }
            (Err(said), None) => wrong.push(format!("{what} is refused: {said}")),
            (Err(said), Some(message)) if !said.contains(message) => {
                wrong.push(format!("{what} is refused with {said:?}, not {message:?}"));
            }
            (Err(_), Some(_)) => {}
        }
    }
    server.shutdown();
    wrong
}

#[tokio::test]
async fn every_golden_input_is_accepted_by_the_upstream_crds() {
    let goldens = Path::new(env!("CARGO_MANIFEST_DIR")).join("../render/tests/golden");
    let mut cases: Vec<_> = std::fs::read_dir(&goldens)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("in.yaml").exists())
        .collect();
    cases.sort();
    assert!(cases.len() > 40, "the goldens were found: {cases:?}");
    let mut wrong = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        wrong.extend(
            check(case)
                .await
                .into_iter()
                .map(|w| format!("{name}: {w}")),
        );
    }
    assert!(
        wrong.is_empty(),
        "golden inputs the upstream CRDs do not take as marked:\n{}",
        wrong.join("\n")
    );
}
