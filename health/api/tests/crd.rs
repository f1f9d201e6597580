//! The generated CRD, installed in the embedded API server: defaults applied, and bad
//! resources rejected with the field path.

use fairlead_apiserver::{ApiServer, Config};
use fairlead_health_api::{ServiceWithHealthchecks, crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

async fn api() -> (ApiServer, Api<ServiceWithHealthchecks>) {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd()).await.unwrap();
    (server, Api::namespaced(client, "default"))
}

async fn create(
    api: &Api<ServiceWithHealthchecks>,
    body: serde_json::Value,
) -> Result<ServiceWithHealthchecks, String> {
    let request = http::Request::post(
        "/apis/network.deckhouse.io/v1alpha1/namespaces/default/servicewithhealthchecks",
    )
    .header("content-type", "application/json")
    .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
    .unwrap();
    let response = api.clone().into_client().send(request).await.unwrap();
    let status = response.status();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    if status.is_success() {
        Ok(serde_json::from_value(value).unwrap())
    } else {
        Err(value["message"].as_str().unwrap_or_default().to_owned())
    }
}

fn swh(spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "db"}, "spec": spec})
}

#[tokio::test]
async fn defaults_are_applied() {
    let (_server, api) = api().await;
    let created = create(
        &api,
        swh(json!({"ports": [{"port": 5432}], "selector": {"app": "db"},
        "healthcheck": {"probes": [{"mode": "TCP", "tcp": {"targetPort": 5432}}]}})),
    )
    .await
    .unwrap();
    let spec = created.spec;
    assert_eq!(spec.healthcheck.initial_delay_seconds, 10);
    assert_eq!(spec.healthcheck.period_seconds, 10);
    let probe = &spec.healthcheck.probes[0];
    assert_eq!(
        (
            probe.timeout_seconds,
            probe.success_threshold,
            probe.failure_threshold
        ),
        (1, 1, 3)
    );
    assert_eq!(spec.ports[0].protocol, "TCP");
}

#[tokio::test]
async fn bad_resources_are_rejected_with_the_field_path() {
    let (_server, api) = api().await;
    let missing = create(&api, swh(json!({"ports": [{"port": 80}]})))
        .await
        .unwrap_err();
    assert!(
        missing.contains("spec.healthcheck: Required value"),
        "{missing}"
    );

    let out_of_range = create(
        &api,
        swh(json!({"ports": [{"port": 70000}],
        "healthcheck": {"probes": [{"mode": "TCP", "tcp": {"targetPort": 80}}]}})),
    )
    .await
    .unwrap_err();
    assert!(
        out_of_range.contains("spec.ports[0].port"),
        "{out_of_range}"
    );

    let wrong_block = create(
        &api,
        swh(json!({"ports": [{"port": 80}],
        "healthcheck": {"probes": [{"mode": "HTTP", "tcp": {"targetPort": 80}}]}})),
    )
    .await
    .unwrap_err();
    assert!(
        wrong_block.contains("spec.healthcheck.probes[0].http"),
        "{wrong_block}"
    );
    assert!(
        wrong_block.contains("mode HTTP needs the http block"),
        "{wrong_block}"
    );
    let two_blocks = create(
        &api,
        swh(json!({"ports": [{"port": 80}],
        "healthcheck": {"probes": [{"mode": "HTTP", "http": {"targetPort": 80}, "tcp": {"targetPort": 80}}]}})),
    )
    .await
    .unwrap_err();
    assert!(two_blocks.contains("no other probe block"), "{two_blocks}");

    let bad_mode = create(
        &api,
        swh(json!({"ports": [{"port": 80}],
        "healthcheck": {"probes": [{"mode": "UDP", "tcp": {"targetPort": 80}}]}})),
    )
    .await
    .unwrap_err();
    assert!(
        bad_mode.contains("spec.healthcheck.probes[0].mode: Unsupported value"),
        "{bad_mode}"
    );

    let duplicate = create(
        &api,
        swh(
            json!({"ports": [{"port": 80}, {"port": 80, "protocol": "TCP"}],
        "healthcheck": {"probes": [{"mode": "TCP", "tcp": {"targetPort": 80}}]}}),
        ),
    )
    .await
    .unwrap_err();
    assert!(
        duplicate.contains("spec.ports[1]: Duplicate value"),
        "{duplicate}"
    );
}

#[test]
fn the_crd_names_and_columns_match_deckhouse() {
    let crd = serde_json::to_value(crd()).unwrap();
    assert_eq!(
        crd["metadata"]["name"],
        "servicewithhealthchecks.network.deckhouse.io"
    );
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["swh"]));
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert!(version["subresources"]["status"].is_object());
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        vec!["Type", "Ready", "Endpoints", "ExternalIP", "Ports", "Age"]
    );
}
