//! Agent scenarios against the embedded API server with loopback backends: independent
//! resources over the same pods, withdrawal on a child-Service conflict, state reset on a new pod IP, terminating pods, and a
//! PostgreSQL primary told from its replica through a promotion.

mod common;

use std::time::Duration;

use common::{addresses, cluster, free_port_on, listen, pod, set_ip, start_agent, swh, wait_for};
use fairlead_health_api::ServiceWithHealthchecks;
use fairlead_kit::testing::postgres::{PASSWORD, Postgres};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

async fn create(client: &kube::Client, body: serde_json::Value) {
    let api: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(body).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_resources_over_the_same_pods_are_independent() {
    let (_server, client) = cluster().await;
    let ip = "127.0.0.6";
    let (up_port, down_port) = (free_port_on(ip), free_port_on(ip));
    let _up = listen(ip, up_port);
    pod(&client, "shared", "shared", "n1", ip).await;
    create(
        &client,
        swh(
            "healthy",
            "shared",
            up_port,
            json!([{"mode": "TCP", "tcp": {"targetPort": up_port}, "failureThreshold": 1}]),
        ),
    )
    .await;
    create(
        &client,
        swh(
            "broken",
            "shared",
            down_port,
            json!([{"mode": "TCP", "tcp": {"targetPort": down_port}, "failureThreshold": 1}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    wait_for(
        &client,
        "healthy-n1-main-ipv4-0",
        &[ip],
        Duration::from_secs(5),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        addresses(&client, "broken-n1-main-ipv4-0").await.is_empty(),
        "the failing resource publishes nothing"
    );
    assert_eq!(
        addresses(&client, "healthy-n1-main-ipv4-0").await,
        vec![ip],
        "and does not affect the other"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_service_conflict_withdraws_the_slices() {
    let (_server, client) = cluster().await;
    let ip = "127.0.0.10";
    let port = free_port_on(ip);
    let _backend = listen(ip, port);
    pod(&client, "owned", "owned", "n1", ip).await;
    create(
        &client,
        swh(
            "owned",
            "owned",
            port,
            json!([{"mode": "TCP", "tcp": {"targetPort": port}}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    wait_for(
        &client,
        "owned-n1-main-ipv4-0",
        &[ip],
        Duration::from_secs(5),
    )
    .await;
    let conflict = json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "ServiceWithHealthchecks",
        "metadata": {"name": "owned"}, "status": {"conditions": [{"type": "ChildServiceReady", "status": "False",
            "reason": "ChildServiceConflict", "message": "foreign", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    swhs.patch_status(
        "owned",
        &kube::api::PatchParams::apply("fairlead-health-controller").force(),
        &kube::api::Patch::Apply(&conflict),
    )
    .await
    .unwrap();
    wait_for(&client, "owned-n1-main-ipv4-0", &[], Duration::from_secs(3)).await;
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pod_ip_starts_from_a_fresh_state() {
    let (_server, client) = cluster().await;
    let (old_ip, new_ip) = ("127.0.0.7", "127.0.0.8");
    let port = free_port_on(old_ip);
    let _old = listen(old_ip, port);
    let _new = listen(new_ip, port);
    pod(&client, "mover", "mover", "n1", old_ip).await;
    // successThreshold 3: a fresh target needs three passes before it is published.
    create(
        &client,
        swh(
            "mover",
            "mover",
            port,
            json!([{"mode": "TCP", "tcp": {"targetPort": port}, "successThreshold": 3}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    wait_for(
        &client,
        "mover-n1-main-ipv4-0",
        &[old_ip],
        Duration::from_secs(6),
    )
    .await;
    set_ip(&client, "mover", new_ip).await;
    // The old state is not carried over: the new IP is withdrawn first (pending), then
    // published after three passes again.
    wait_for(&client, "mover-n1-main-ipv4-0", &[], Duration::from_secs(2)).await;
    let took = wait_for(
        &client,
        "mover-n1-main-ipv4-0",
        &[new_ip],
        Duration::from_secs(6),
    )
    .await;
    assert!(
        took >= Duration::from_millis(1500),
        "thresholds counted again from zero ({took:?})"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminating_pods_stay_published_as_draining() {
    let (_server, client) = cluster().await;
    let ip = "127.0.0.9";
    let port = free_port_on(ip);
    let _backend = listen(ip, port);
    pod(&client, "leaving", "leaving", "n1", ip).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.patch(
        "leaving",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    create(
        &client,
        swh(
            "leaving",
            "leaving",
            port,
            json!([{"mode": "TCP", "tcp": {"targetPort": port}}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    wait_for(
        &client,
        "leaving-n1-main-ipv4-0",
        &[ip],
        Duration::from_secs(5),
    )
    .await;
    pods.delete("leaving", &DeleteParams::default())
        .await
        .unwrap();
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), "default");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let slice = slices.get("leaving-n1-main-ipv4-0").await.unwrap();
        let conditions = slice.endpoints.unwrap()[0].conditions.clone().unwrap();
        if conditions.terminating == Some(true) {
            assert_eq!(
                (conditions.ready, conditions.serving),
                (Some(false), Some(true))
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the terminating pod is marked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slice_follows_the_postgresql_primary_through_a_promotion() {
    let (_server, client) = cluster().await;
    let primary = tokio::task::spawn_blocking(|| Postgres::start(None))
        .await
        .unwrap()
        .unwrap();
    let replica = primary.replica().unwrap();
    // Both servers listen on 127.0.0.1, each on its own port: one pod at 127.0.0.1 stands in
    // for both, and each resource's port targets one server with the same primary-only query.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": "pg"}, "type": "network.deckhouse.io/postgresql-credentials",
        "stringData": {"user": "postgres", "password": PASSWORD, "tlsMode": "Disabled"}}),
    )
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let wrong: Secret = serde_json::from_value(json!({"metadata": {"name": "pg-wrong"}, "type": "network.deckhouse.io/postgresql-credentials",
        "stringData": {"user": "postgres", "password": "nope", "tlsMode": "Disabled"}})).unwrap();
    secrets
        .create(&PostParams::default(), &wrong)
        .await
        .unwrap();
    pod(&client, "pg-0", "pg", "n1", "127.0.0.1").await;
    let probe = |port: u16, secret: &str| {
        json!([{"mode": "PostgreSQL", "failureThreshold": 1,
        "postgreSQL": {"targetPort": port, "dbName": "postgres", "query": "select not pg_is_in_recovery()", "authSecretName": secret}}])
    };
    create(
        &client,
        swh("first", "pg", primary.port(), probe(primary.port(), "pg")),
    )
    .await;
    create(
        &client,
        swh("second", "pg", replica.port(), probe(replica.port(), "pg")),
    )
    .await;
    create(
        &client,
        swh(
            "denied",
            "pg",
            primary.port(),
            probe(primary.port(), "pg-wrong"),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    wait_for(
        &client,
        "first-n1-main-ipv4-0",
        &["127.0.0.1"],
        Duration::from_secs(10),
    )
    .await;
    assert!(
        addresses(&client, "second-n1-main-ipv4-0").await.is_empty(),
        "the replica is not published"
    );

    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = swhs
            .get_status("denied")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let reasons: Vec<String> = status
            .endpoint_statuses
            .iter()
            .flat_map(|e| e.failure_reasons.clone())
            .collect();
        if reasons
            .iter()
            .any(|r| r.contains("password authentication failed"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the wrong password reaches the status: {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    primary.stop().unwrap();
    replica.promote().unwrap();
    wait_for(
        &client,
        "second-n1-main-ipv4-0",
        &["127.0.0.1"],
        Duration::from_secs(10),
    )
    .await;
    wait_for(
        &client,
        "first-n1-main-ipv4-0",
        &[],
        Duration::from_secs(10),
    )
    .await;

    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_agents_writing_at_once_lose_no_entry() {
    let (_server, client) = cluster().await;
    let ips: Vec<String> = (0..10).map(|i| format!("127.0.1.{}", i + 1)).collect();
    let port = free_port_on(&ips[0]);
    let _backends: Vec<_> = ips.iter().map(|ip| listen(ip, port)).collect();
    for (i, ip) in ips.iter().enumerate() {
        pod(
            &client,
            &format!("many-{i}"),
            "many",
            &format!("node-{i}"),
            ip,
        )
        .await;
    }
    create(
        &client,
        swh(
            "many",
            "many",
            port,
            json!([{"mode": "TCP", "tcp": {"targetPort": port}}]),
        ),
    )
    .await;
    let stops: Vec<_> = (0..10)
        .map(|i| start_agent(&client, &format!("node-{i}")))
        .collect();
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = swhs
            .get_status("many")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let entries: std::collections::BTreeSet<String> = status
            .endpoint_statuses
            .iter()
            .filter(|e| e.probes_successful)
            .map(|e| format!("{}@{}", e.pod_name, e.node_name.clone().unwrap_or_default()))
            .collect();
        if entries.len() == 10 {
            for i in 0..10 {
                assert!(
                    entries.contains(&format!("many-{i}@node-{i}")),
                    "{entries:?}"
                );
            }
            break;
        }
        assert!(std::time::Instant::now() < deadline, "only {entries:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for stop in stops {
        stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_failure_is_an_event_with_its_reason() {
    let (_server, client) = cluster().await;
    pod(&client, "nosecret", "nosecret", "n1", "127.0.0.11").await;
    create(
        &client,
        swh(
            "nosecret",
            "nosecret",
            5432,
            json!([{"mode": "PostgreSQL", "failureThreshold": 1,
        "postgreSQL": {"targetPort": 5432, "authSecretName": "missing"}}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ProbeFailed")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("Secret default/missing not found"))
            });
        if let Some(event) = found {
            assert_eq!(event.type_.as_deref(), Some("Warning"));
            assert_eq!(
                event.regarding.and_then(|r| r.name).as_deref(),
                Some("nosecret")
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no ProbeFailed event");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_are_retried_with_backoff() {
    let (_server, client) = cluster().await;
    let refusal =
        common::Refusal::start(&client, "no-slices", "discovery.k8s.io", "endpointslices").await;

    let ip = "127.0.0.12";
    let port = free_port_on(ip);
    let _backend = listen(ip, port);
    pod(&client, "retry", "retry", "n1", ip).await;
    create(
        &client,
        swh(
            "retry",
            "retry",
            port,
            json!([{"mode": "TCP", "tcp": {"targetPort": port}}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        addresses(&client, "retry-n1-main-ipv4-0").await.is_empty(),
        "writes are refused"
    );
    refusal.lift().await;
    // Without a retry the next attempt would be the 60 s resync.
    wait_for(
        &client,
        "retry-n1-main-ipv4-0",
        &[ip],
        Duration::from_secs(10),
    )
    .await;
    stop.cancel();
}

/// The failure reasons of a resource's endpoint entries.
async fn failure_reasons(client: &kube::Client, name: &str) -> Vec<String> {
    let swhs: Api<ServiceWithHealthchecks> = Api::namespaced(client.clone(), "default");
    swhs.get_status(name)
        .await
        .unwrap()
        .status
        .unwrap_or_default()
        .endpoint_statuses
        .iter()
        .flat_map(|e| e.failure_reasons.clone())
        .collect()
}

/// Waits until one of the resource's failure reasons ends with `reason`.
async fn wait_for_reason(client: &kube::Client, name: &str, reason: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reasons = failure_reasons(client, name).await;
        if reasons.iter().any(|r| r.ends_with(reason)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no failure reason {reason:?} in {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for a ProbeFailed Event containing `text`, then checks that, while the reason stays
/// the same, it is the only one.
async fn expect_one_event(client: &kube::Client, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while probe_failed_events(client, text).await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no ProbeFailed event with {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        probe_failed_events(client, text).await.len(),
        1,
        "one Event while the reason stays the same"
    );
}

/// The notes of the ProbeFailed Events that contain `text`.
async fn probe_failed_events(client: &kube::Client, text: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ProbeFailed"))
        .filter_map(|e| e.note)
        .filter(|note| note.contains(text))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_credentials_missing_or_mistyped_are_reported_and_fixed_without_a_restart() {
    let (_server, client) = cluster().await;
    let server = tokio::task::spawn_blocking(|| Postgres::start(None))
        .await
        .unwrap()
        .unwrap();
    pod(&client, "db-0", "db", "n1", "127.0.0.1").await;
    // The documented default thresholds (three failures), probing every second.
    create(
        &client,
        swh(
            "db",
            "db",
            server.port(),
            json!([{"mode": "PostgreSQL",
                "postgreSQL": {"targetPort": server.port(), "dbName": "postgres", "authSecretName": "cred"}}]),
        ),
    )
    .await;
    let stop = start_agent(&client, "n1");

    // 1. No Secret: the port is not ready, the status and one Warning Event say why.
    let missing = "Secret default/cred not found";
    wait_for_reason(&client, "db", missing).await;
    assert!(addresses(&client, "db-n1-main-ipv4-0").await.is_empty());
    expect_one_event(&client, missing).await;

    // 2. A generic Secret (`kubectl create secret generic` without --type): named as such.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = |type_: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": "cred"}, "type": type_,
            "stringData": {"user": "postgres", "password": PASSWORD, "tlsMode": "Disabled"}}))
        .unwrap()
    };
    secrets
        .create(&PostParams::default(), &secret("Opaque"))
        .await
        .unwrap();
    let mistyped = "Secret default/cred has type Opaque; PostgreSQL probes read only Secrets \
                    of type network.deckhouse.io/postgresql-credentials";
    wait_for_reason(&client, "db", mistyped).await;
    assert!(addresses(&client, "db-n1-main-ipv4-0").await.is_empty());
    expect_one_event(&client, mistyped).await;

    // 3. Recreated with the right type: probed and published within a few periods, with
    //    the same agent.
    secrets
        .delete("cred", &DeleteParams::default())
        .await
        .unwrap();
    secrets
        .create(
            &PostParams::default(),
            &secret("network.deckhouse.io/postgresql-credentials"),
        )
        .await
        .unwrap();
    wait_for(
        &client,
        "db-n1-main-ipv4-0",
        &["127.0.0.1"],
        Duration::from_secs(5),
    )
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reasons = failure_reasons(&client, "db").await;
        if reasons.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the status still says {reasons:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
}
