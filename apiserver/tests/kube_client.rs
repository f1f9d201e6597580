//! The embedded API server through `kube::Client`, as the components use it.

use std::collections::BTreeMap;
use std::time::Duration;

mod common;

use common::{JSON, raw, server};
use fairlead_apiserver::Config;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use kube::runtime::{Controller, controller::Action, watcher};
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "data": {"k": "v"}
    }))
    .unwrap()
}

#[tokio::test]
async fn crud_selectors_conflicts_and_patches() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let a = cms
        .create(&PostParams::default(), &cm("a", &[("app", "web")]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", &[("app", "db")]))
        .await
        .unwrap();
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    let rv_a: u64 = a
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();

    let err = cms
        .create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err}"
    );

    let web = cms
        .list(&ListParams::default().labels("app in (web,api)"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let not_web = cms
        .list(&ListParams::default().labels("app!=web"))
        .await
        .unwrap();
    assert_eq!(not_web.items[0].metadata.name.as_deref(), Some("b"));
    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);

    let mut stale = a.clone();
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v2"}})),
    )
    .await
    .unwrap();
    stale.data = Some(BTreeMap::from([("k".into(), "stale".into())]));
    let err = cms
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err}"
    );

    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([
            {"op": "add", "path": "/data/extra", "value": "x"}]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    let rv_patched: u64 = patched.metadata.resource_version.unwrap().parse().unwrap();
    assert!(
        rv_patched > rv_a + 1,
        "one global monotonic resourceVersion"
    );
    assert_eq!(patched.data.unwrap()["extra"], "x");

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let err = cms.get("a").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );
}

#[tokio::test]
async fn list_paging_with_limit_and_continue() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..7 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[]))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(3);
    loop {
        let page = cms.list(&params).await.unwrap();
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(names, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_watch_behind_the_window_gets_a_410_error_event() {
    let (_server, client) = server(Config {
        event_window: 3,
        ..Config::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..6 {
        cms.create(&PostParams::default(), &cm(&format!("w-{i}"), &[]))
            .await
            .unwrap();
    }
    let mut stream = cms
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test]
async fn watches_resume_and_see_selector_transitions() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    cms.create(&PostParams::default(), &cm("t", &[("app", "web")]))
        .await
        .unwrap();
    cms.patch(
        "t",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().labels("app=web").timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert!(matches!(first, WatchEvent::Added(ref c) if c.metadata.name.as_deref() == Some("t")));
    let second = stream.try_next().await.unwrap().unwrap();
    assert!(
        matches!(second, WatchEvent::Deleted(_)),
        "stopped matching: {second:?}"
    );
}

#[tokio::test]
async fn a_controller_sees_objects_created_after_it_started() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let controller = Controller::new(cms.clone(), watcher::Config::default())
        .run(
            move |obj: std::sync::Arc<ConfigMap>,
                  tx: std::sync::Arc<tokio::sync::mpsc::UnboundedSender<String>>| async move {
                let _ = tx.send(obj.metadata.name.clone().unwrap_or_default());
                Ok::<_, kube::Error>(Action::await_change())
            },
            |_, _, _| Action::requeue(Duration::from_secs(1)),
            std::sync::Arc::new(seen_tx),
        )
        .for_each(|_| async {});
    tokio::spawn(controller);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cms.create(&PostParams::default(), &cm("late", &[]))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(name) = seen_rx.recv().await {
            if name == "late" {
                return name;
            }
        }
        String::new()
    })
    .await
    .expect("the controller reconciled the new object");
    assert_eq!(seen, "late");
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn crds_serve_kinds_with_status_and_generation() {
    let (_server, client) = server(Config::default()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let crd = crds.get("widgets.example.com").await.unwrap();
    let established = crd.status.unwrap().conditions.unwrap();
    assert!(
        established
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
    );

    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("discovered");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural.ends_with("status")),
        "{:?}",
        caps.subresources
    );

    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut w = DynamicObject::new("w1", &ar);
    w.data = json!({"spec": {"size": 1}, "status": {"ignored": true}});
    let created = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );

    let labelled = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes keep the generation"
    );
    let resized = widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"x": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(resized.metadata.generation, Some(2));
    assert!(
        resized.data.get("status").is_none(),
        "the main resource ignores status"
    );
    let status = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["ready"], true);
    assert_eq!(
        status.data["spec"]["size"], 2,
        "the status endpoint ignores spec"
    );
    assert_eq!(status.metadata.generation, Some(2));

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let by_kind = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    assert_eq!(by_kind.plural, ar.plural);
}

#[tokio::test]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let apply = |data: serde_json::Value| {
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": data}),
        )
    };
    let created = cms
        .patch(
            "ssa",
            &PatchParams::apply("ctl-a"),
            &apply(json!({"x": "1", "y": "2"})),
        )
        .await
        .unwrap();
    assert_eq!(created.data.as_ref().unwrap().len(), 2);
    let managed = created.metadata.managed_fields.unwrap();
    assert_eq!(managed[0].manager.as_deref(), Some("ctl-a"));
    assert_eq!(managed[0].operation.as_deref(), Some("Apply"));

    let err = cms
        .patch(
            "ssa",
            &PatchParams::apply("ctl-b"),
            &apply(json!({"x": "other"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.message.contains("ctl-a")),
        "{err}"
    );
    let forced = cms
        .patch(
            "ssa",
            &PatchParams::apply("ctl-b").force(),
            &apply(json!({"x": "other"})),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["x"], "other");

    let shrunk = cms
        .patch(
            "ssa",
            &PatchParams::apply("ctl-a"),
            &apply(json!({"z": "3"})),
        )
        .await
        .unwrap();
    let data = shrunk.data.unwrap();
    assert!(
        !data.contains_key("y"),
        "ctl-a no longer applies y: {data:?}"
    );
    assert_eq!(data["x"], "other", "x now belongs to ctl-b");
    assert_eq!(data["z"], "3");
}

/// A kind served at two versions: created by server-side apply at the one it is not stored
/// at (as `kubectl apply --server-side` of a `v1alpha2` TCPRoute does), read at both.
#[tokio::test]
async fn server_side_apply_creates_at_a_version_other_than_storage() {
    let (_server, client) = server(Config::default()).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = widget_crd();
    let mut older = crd.spec.versions[0].clone();
    older.name = "v1alpha1".into();
    older.storage = false;
    crd.spec.versions.push(older);
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let at = |version: &str| {
        let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
        Api::<DynamicObject>::namespaced_with(
            client.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
        )
    };
    let applied = at("v1alpha1")
        .patch(
            "old",
            &PatchParams::apply("ctl"),
            &Patch::Apply(
                json!({"apiVersion": "example.com/v1alpha1", "kind": "Widget",
                "metadata": {"name": "old"}, "spec": {"size": 1}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        applied.types.unwrap().api_version,
        "example.com/v1alpha1",
        "answered at the version asked"
    );
    let stored = at("v1").get("old").await.unwrap();
    assert_eq!(stored.data["spec"]["size"], 1);
    let again = at("v1alpha1")
        .patch(
            "old",
            &PatchParams::apply("ctl"),
            &Patch::Apply(
                json!({"apiVersion": "example.com/v1alpha1", "kind": "Widget",
                "metadata": {"name": "old"}, "spec": {"size": 2}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(again.data["spec"]["size"], 2);
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_content() {
    let (_server, client) = server(Config::default()).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap(),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    cms.create(&PostParams::default(), &cm("inside", &[]))
        .await
        .unwrap();
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let err = cms.create(&PostParams::default(), &cm("late", &[])).await;
    assert!(
        matches!(err, Err(kube::Error::Api(ref s)) if s.code == 403 || s.code == 404),
        "{err:?}"
    );
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if namespaces.get_opt("doomed").await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "namespace removed once empty");
    assert!(cms.get_opt("inside").await.unwrap().is_none());
}

#[tokio::test]
async fn state_and_watches_survive_a_restart_with_a_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: Some(dir.path().to_owned()),
        addr: ([127, 0, 0, 1], fairlead_kit::testing::free_port()).into(),
        ..Config::default()
    };
    let (first, client) = server(config.clone()).await;
    // What a user's kubeconfig holds: the CA and the token, kept across the restart.
    let kubeconfig = first.kubeconfig_yaml();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = cms
        .create(&PostParams::default(), &cm("kept", &[]))
        .await
        .unwrap();
    let seen_rv = a.metadata.resource_version.unwrap();
    cms.create(&PostParams::default(), &cm("after", &[]))
        .await
        .unwrap();
    first.shutdown();
    drop(first);

    // On the same address, once the first has let it go.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let second = loop {
        match fairlead_apiserver::ApiServer::start(config.clone()).await {
            Ok(started) => break started,
            Err(fairlead_apiserver::ServerError::Bind { .. })
                if std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    let client = second.client().await.unwrap();
    assert_eq!(second.kubeconfig_yaml(), kubeconfig);
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(cms.get_opt("kept").await.unwrap().is_some());
    let held = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    let held: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(held).unwrap(), "default");
    assert!(
        held.get_opt("kept").await.unwrap().is_some(),
        "the kubeconfig of before the restart still works"
    );
    let mut stream = cms
        .watch(&WatchParams::default().timeout(3), &seen_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => assert_eq!(c.metadata.name.as_deref(), Some("after")),
        other => panic!("the watch resumed from before the restart: {other:?}"),
    }
}

fn probe_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "probes.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "probes", "kind": "Probe"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                    "spec": {"type": "object", "required": ["mode"],
                        "x-kubernetes-validations": [{
                            "rule": "self.mode != 'HTTP' || has(self.http)",
                            "message": "mode HTTP needs an http block", "fieldPath": ".http"}],
                        "properties": {
                            "mode": {"type": "string", "enum": ["HTTP", "TCP"]},
                            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "period": {"type": "integer", "default": 10},
                            "http": {"type": "object", "properties": {"path": {"type": "string"}}}}}}}}}]}
    }))
    .unwrap()
}

async fn probes(client: &kube::Client) -> Api<DynamicObject> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &probe_crd())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Probe");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "probes"),
    )
}

fn probe(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Probe",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn invalid_fields(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn schema_and_cel_violations_are_422_naming_the_field() {
    let (_server, client) = server(Config::default()).await;
    let api = probes(&client).await;

    let created = api
        .create(
            &PostParams::default(),
            &probe("ok", json!({"mode": "TCP", "port": 80, "junk": 1})),
        )
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["period"], 10, "defaulted");
    assert!(created.data["spec"].get("junk").is_none(), "pruned");

    let (code, message) = invalid_fields(
        api.create(
            &PostParams::default(),
            &probe("bad", json!({"mode": "UDP", "port": 70000})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.mode: Unsupported value: \"UDP\""),
        "{message}"
    );
    assert!(message.contains("spec.port"), "{message}");

    let (code, message) = invalid_fields(
        api.create(
            &PostParams::default(),
            &probe("cel", json!({"mode": "HTTP"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("spec.http") && message.contains("mode HTTP needs an http block"),
        "{message}"
    );

    let (code, message) = invalid_fields(
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "example.com/v1",
            "kind": "Probe", "metadata": {"name": "nospec"}}))
            .unwrap(),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(code, 422);
    assert!(message.contains("spec: Required value"), "{message}");
}

#[tokio::test]
async fn field_validation_strict_rejects_unknown_fields() {
    let (_server, client) = server(Config::default()).await;
    probes(&client).await;
    let body = |name: &str| {
        serde_json::to_vec(&json!({"apiVersion": "example.com/v1", "kind": "Probe",
            "metadata": {"name": name}, "spec": {"mode": "TCP", "extra": true}}))
        .unwrap()
    };
    let path = "/apis/example.com/v1/namespaces/default/probes";
    let (code, _, status) = raw(
        &client,
        "POST",
        JSON,
        &format!("{path}?fieldValidation=Strict"),
        body("s"),
    )
    .await;
    assert_eq!(code, 400);
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("unknown field \"spec.extra\""), "{status}");

    let (code, headers, _) = raw(
        &client,
        "POST",
        JSON,
        &format!("{path}?fieldValidation=Warn"),
        body("w"),
    )
    .await;
    assert_eq!(code, 201);
    let warning = headers["warning"].to_str().unwrap();
    assert!(
        warning.contains("unknown field \\\"spec.extra\\\""),
        "{warning}"
    );

    let (code, _, _) = raw(
        &client,
        "POST",
        JSON,
        &format!("{path}?fieldValidation=Ignore"),
        body("i"),
    )
    .await;
    assert_eq!(code, 201);
}

#[tokio::test]
async fn bad_requests_answer_with_a_status() {
    let (server, client) = server(Config::default()).await;
    let path = "/api/v1/namespaces/default/configmaps";

    let (code, _, status) = raw(&client, "POST", JSON, path, b"{not json".to_vec()).await;
    assert_eq!(code, 400);
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("BadRequest"))
    );

    let (code, _, status) = raw(&client, "GET", JSON, "/api/v1/nothings", Vec::new()).await;
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));

    let huge = "x".repeat(fairlead_apiserver::serve::api::MAX_BODY_BYTES + 1);
    let body =
        serde_json::to_vec(&json!({"metadata": {"name": "big"}, "data": {"k": huge}})).unwrap();
    let (code, _, status) = raw(&client, "POST", JSON, path, body).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge"))
    );

    let tokenless = server
        .kubeconfig_yaml()
        .lines()
        .filter(|l| !l.trim_start().starts_with("token:"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("  user:\n", "  user: {}\n");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&tokenless).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let anonymous = kube::Client::try_from(config).unwrap();
    let (code, _, _) = raw(&anonymous, "GET", JSON, path, Vec::new()).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn writes_that_change_nothing_keep_the_resource_version() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let a = cms
        .create(&PostParams::default(), &cm("same", &[]))
        .await
        .unwrap();
    let again = cms
        .patch(
            "same",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(a.metadata.resource_version, again.metadata.resource_version);
    let apply = Patch::Apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}, "data": {"k": "v"}}),
    );
    let applied = cms
        .patch("same", &PatchParams::apply("m"), &apply)
        .await
        .unwrap();
    let reapplied = cms
        .patch("same", &PatchParams::apply("m"), &apply)
        .await
        .unwrap();
    assert_eq!(
        applied.metadata.resource_version,
        reapplied.metadata.resource_version
    );
}

#[tokio::test]
async fn finalizers_hold_and_deletecollection_clears() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut held = cm("held", &[("group", "x")]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    let created = cms.create(&PostParams::default(), &held).await.unwrap();
    cms.create(&PostParams::default(), &cm("free", &[("group", "x")]))
        .await
        .unwrap();
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("group=x"),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("free").await.unwrap().is_none());
    let marked = cms.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(
        marked.metadata.generation > created.metadata.generation,
        "deletion bumps generation"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        cms.get_opt("held").await.unwrap().is_none(),
        "removed with its last finalizer"
    );
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let (_server, client) = server(Config::default()).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = cms
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    let mut child = cm("child", &[]);
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    ]);
    cms.create(&PostParams::default(), &child).await.unwrap();
    cms.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(5), async {
        while cms.get_opt("owner").await.unwrap().is_some()
            || cms.get_opt("child").await.unwrap().is_some()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "foreground deletion removed the child, then the owner"
    );
}

#[tokio::test]
async fn a_watcher_behind_the_window_relists() {
    let (_server, client) = server(Config {
        event_window: 3,
        ..Config::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let others: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    let config = watcher::Config::default().timeout(1).disable_bookmarks();
    let mut events = watcher::watcher(cms.clone(), config).boxed();
    let mut inits = 0;
    let mut saw_late = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut wrote = false;
    while tokio::time::Instant::now() < deadline && !(inits >= 2 && saw_late) {
        let event = tokio::time::timeout(Duration::from_secs(5), events.try_next()).await;
        match event {
            Ok(Ok(Some(watcher::Event::Init))) => inits += 1,
            Ok(Ok(Some(watcher::Event::InitDone))) => {
                if !wrote {
                    // While the watcher idles, push the window past its version with writes it
                    // does not see; its next watch (every second) then gets a 410.
                    for i in 0..6 {
                        let s: k8s_openapi::api::core::v1::Secret =
                            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}}))
                                .unwrap();
                        others.create(&PostParams::default(), &s).await.unwrap();
                    }
                    cms.create(&PostParams::default(), &cm("late", &[]))
                        .await
                        .unwrap();
                    for i in 6..12 {
                        let s: k8s_openapi::api::core::v1::Secret =
                            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}}))
                                .unwrap();
                        others.create(&PostParams::default(), &s).await.unwrap();
                    }
                    wrote = true;
                }
            }
            Ok(Ok(Some(watcher::Event::InitApply(c) | watcher::Event::Apply(c)))) => {
                saw_late |= c.metadata.name.as_deref() == Some("late");
            }
            Ok(Ok(_)) | Err(_) => {}
            // The 410 surfaces as an error; the watcher recovers by relisting.
            Ok(Err(_)) => {}
        }
    }
    assert!(
        inits >= 2,
        "the watcher relisted after its version fell out of the window"
    );
    assert!(saw_late, "and it has every object");
}

#[tokio::test]
async fn bookmarks_timeouts_and_generate_name() {
    let (_server, client) = server(Config {
        bookmark_interval: Duration::from_millis(200),
        ..Config::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut generated = cm("", &[]);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let created = cms
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = created.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let started = tokio::time::Instant::now();
    let events: Vec<_> = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "timeoutSeconds ends the watch"
    );
    assert!(
        events.iter().any(|e| matches!(e, WatchEvent::Bookmark(_))),
        "{events:?}"
    );
}

#[tokio::test]
async fn strategic_merge_and_pod_field_selectors() {
    let (_server, client) = server(Config::default()).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    for (name, node) in [("a", "n1"), ("b", "n2")] {
        let pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app:1"}, {"name": "side", "image": "side:1"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 1);
    let err = pods
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 400),
        "{err}"
    );

    let patched = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "app", "image": "app:2"}]}})),
        )
        .await
        .unwrap();
    let containers = patched.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "merged by name, not replaced");
    assert_eq!(containers[0].image.as_deref(), Some("app:2"));
    assert_eq!(containers[1].image.as_deref(), Some("side:1"));
}

#[tokio::test]
async fn a_crd_with_rules_fairlead_cannot_run_is_accepted_and_reported() {
    let (server, client) = server(Config::default()).await;
    let mut crd = widget_crd();
    crd.metadata.name = Some("gizmos.example.com".into());
    crd.spec.names.plural = "gizmos".into();
    crd.spec.names.kind = "Gizmo".into();
    crd.spec.names.short_names = None;
    crd.spec.versions[0].schema = Some(serde_json::from_value(json!({"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.name.isFancy()"}, {"rule": "self.size > 0", "message": "size must be positive"}],
            "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}}}}}))
    .unwrap());
    let body = serde_json::to_vec(&crd).unwrap();
    let request = http::Request::post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .header("content-type", "application/json")
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = client.send(request).await.unwrap();
    assert_eq!(response.status(), 201, "the CRD is accepted");
    let warning = response.headers()["warning"].to_str().unwrap().to_owned();
    assert!(warning.contains("isFancy"), "{warning}");

    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gizmo");
    let gizmos: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "gizmos"),
    );
    let mut g = DynamicObject::new("g", &ApiResource::from_gvk_with_plural(&gvk, "gizmos"));
    g.data = json!({"spec": {"name": "x", "size": 0}});
    let err = gizmos.create(&PostParams::default(), &g).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.message.contains("size must be positive")),
        "{err}"
    );
    g.data = json!({"spec": {"name": "x", "size": 1}});
    gizmos
        .create(&PostParams::default(), &g)
        .await
        .expect("the unsupported rule is skipped");
    drop(server);
}
