//! `dryRun=All` (what `kubectl … --dry-run=server` sends, in the query or a deletion's
//! `DeleteOptions`): every verb and subresource is
//! checked and answered as it would be — validation, defaults, preconditions — and nothing is
//! stored: the objects, the store's resourceVersion and watchers see no change.

mod common;

use common::{JSON, raw, server};
use fairlead_apiserver::Config;
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// A request with a JSON-encoded body of `content_type`.
async fn send(
    client: &kube::Client,
    method: &str,
    content_type: &str,
    path: &str,
    body: &Value,
) -> (u16, Value) {
    let (code, _, answer) = raw(
        client,
        method,
        content_type,
        path,
        serde_json::to_vec(body).unwrap(),
    )
    .await;
    (code, answer)
}

/// The store's resourceVersion, as a list reports it.
async fn version(client: &kube::Client) -> String {
    let (code, list) = send(client, "GET", JSON, CONFIGMAPS, &Value::Null).await;
    assert_eq!(code, 200, "{list}");
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_dry_run_answers_every_write_and_stores_none() {
    let (_server, client) = server(Config::default()).await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "finalizers": ["example.com/hold"]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let (code, stored) = send(&client, "POST", JSON, DEPLOYMENTS, &deployment).await;
    assert_eq!(code, 201, "{stored}");
    let (code, _) = send(
        &client,
        "POST",
        JSON,
        CONFIGMAPS,
        &json!({"metadata": {"name": "kept"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(code, 201);
    let before = version(&client).await;
    let web = format!("{DEPLOYMENTS}/web");
    let (_, web_before) = send(&client, "GET", JSON, &web, &Value::Null).await;
    let kept = format!("{CONFIGMAPS}/kept");
    let (_, kept_before) = send(&client, "GET", JSON, &kept, &Value::Null).await;
    let dry = |path: &str| format!("{path}?dryRun=All");

    // Create: answered with what would be stored (defaults, uid), no resourceVersion.
    let (code, created) = send(
        &client,
        "POST",
        JSON,
        &dry(CONFIGMAPS),
        &json!({"metadata": {"name": "new"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["name"], "new");
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    assert!(created["metadata"].get("resourceVersion").is_none());
    // Validation still runs, and names the field.
    let (code, refused) = send(
        &client,
        "POST",
        JSON,
        &dry(CONFIGMAPS),
        &json!({"metadata": {"name": "Not_A_Name"}}),
    )
    .await;
    assert_eq!(code, 422, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("metadata.name"),
        "{refused}"
    );
    // So do preconditions: an existing name is still taken.
    let (code, _) = send(
        &client,
        "POST",
        JSON,
        &dry(CONFIGMAPS),
        &json!({"metadata": {"name": "kept"}}),
    )
    .await;
    assert_eq!(code, 409);

    // Every kind of update, each answered with the change made.
    let mut replaced = web_before.clone();
    replaced["spec"]["replicas"] = json!(5);
    for (method, content_type, path, body) in [
        ("PUT", JSON, web.clone(), replaced.clone()),
        (
            "PATCH",
            "application/merge-patch+json",
            web.clone(),
            json!({"spec": {"replicas": 5}}),
        ),
        (
            "PATCH",
            "application/strategic-merge-patch+json",
            web.clone(),
            json!({"spec": {"replicas": 5}}),
        ),
        (
            "PATCH",
            "application/json-patch+json",
            web.clone(),
            json!([{"op": "replace", "path": "/spec/replicas", "value": 5}]),
        ),
        (
            "PATCH",
            "application/apply-patch+yaml",
            format!("{web}?fieldManager=dry&force=true"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web"}, "spec": {"replicas": 5}}),
        ),
    ] {
        let path = if path.contains('?') {
            format!("{path}&dryRun=All")
        } else {
            dry(&path)
        };
        let (code, answer) = send(&client, method, content_type, &path, &body).await;
        assert_eq!(code, 200, "{method} {content_type}: {answer}");
        assert_eq!(
            answer["spec"]["replicas"], 5,
            "{method} {content_type}: {answer}"
        );
    }
    // An apply that would create.
    let (code, answer) = send(
        &client,
        "PATCH",
        "application/apply-patch+yaml",
        &format!("{CONFIGMAPS}/applied?fieldManager=dry&dryRun=All"),
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}}),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    // The status and scale subresources.
    let (code, answer) = send(
        &client,
        "PATCH",
        "application/merge-patch+json",
        &dry(&format!("{web}/status")),
        &json!({"status": {"replicas": 3}}),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["status"]["replicas"], 3);
    let (code, answer) = send(
        &client,
        "PATCH",
        "application/merge-patch+json",
        &dry(&format!("{web}/scale")),
        &json!({"spec": {"replicas": 7}}),
    )
    .await;
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["spec"]["replicas"], 7);

    // Deletes: one with a finalizer (marked), one without (removed), and a collection.
    let (code, answer) = send(&client, "DELETE", JSON, &dry(&web), &Value::Null).await;
    assert_eq!(code, 200, "{answer}");
    assert!(
        answer["metadata"]["deletionTimestamp"].is_string(),
        "{answer}"
    );
    let (code, answer) = send(&client, "DELETE", JSON, &dry(&kept), &Value::Null).await;
    assert_eq!(code, 200, "{answer}");
    // As kubectl says it: in the DeleteOptions body.
    let options = json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]});
    let (code, answer) = send(&client, "DELETE", JSON, &kept, &options).await;
    assert_eq!(code, 200, "{answer}");
    let (code, answer) = send(&client, "DELETE", JSON, CONFIGMAPS, &options).await;
    assert_eq!(code, 200, "{answer}");
    let (code, answer) = send(&client, "DELETE", JSON, &kept, &json!({"dryRun": ["Some"]})).await;
    assert_eq!(code, 400, "{answer}");
    let (code, answer) = send(&client, "DELETE", JSON, &dry(CONFIGMAPS), &Value::Null).await;
    assert_eq!(code, 200, "{answer}");

    // None of it stored.
    assert_eq!(version(&client).await, before, "a dry run was stored");
    for (path, was) in [(&web, &web_before), (&kept, &kept_before)] {
        let (code, now) = send(&client, "GET", JSON, path, &Value::Null).await;
        assert_eq!(code, 200, "{path}: {now}");
        assert_eq!(&now, was, "{path} changed");
    }
    for name in ["new", "applied"] {
        let (code, _) = send(
            &client,
            "GET",
            JSON,
            &format!("{CONFIGMAPS}/{name}"),
            &Value::Null,
        )
        .await;
        assert_eq!(code, 404, "{name} was created by a dry run");
    }

    // No other value exists.
    let (code, answer) = send(
        &client,
        "POST",
        JSON,
        &format!("{CONFIGMAPS}?dryRun=Yes"),
        &json!({"metadata": {"name": "other"}}),
    )
    .await;
    assert_eq!(code, 400, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("dryRun"),
        "{answer}"
    );
}
