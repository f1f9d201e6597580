//! The embedded API server through `kube::Client`, as the components use it.

use std::collections::BTreeMap;
use std::time::Duration;

use fairlead_apiserver::{ApiServer, Config};
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

async fn server(config: Config) -> (ApiServer, kube::Client) {
    let server = ApiServer::start(config).await.unwrap();
    let client = server.client().await.unwrap();
    (server, client)
}

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
        ..Config::default()
    };
    let (first, client) = server(config.clone()).await;
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

    let (_second, client) = server(config).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(cms.get_opt("kept").await.unwrap().is_some());
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
