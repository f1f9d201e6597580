//! The protocol state machines, request by request: state of the world and delta.

mod common;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use fairlead_edge_xds::cache::{CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot};
use fairlead_edge_xds::delta::Delta;
use fairlead_edge_xds::sotw::{Sotw, Verdict};

fn request(type_url: &str, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

fn names(resources: &[envoy_types::pb::google::protobuf::Any], type_url: &str) -> Vec<String> {
    use prost::Message;
    resources
        .iter()
        .map(|a| {
            assert_eq!(a.type_url, type_url);
            match type_url {
                CLUSTER => {
                    envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(&*a.value)
                        .unwrap()
                        .name
                }
                LISTENER => {
                    envoy_types::pb::envoy::config::listener::v3::Listener::decode(&*a.value)
                        .unwrap()
                        .name
                }
                ROUTE => {
                    envoy_types::pb::envoy::config::route::v3::RouteConfiguration::decode(&*a.value)
                        .unwrap()
                        .name
                }
                ENDPOINT => {
                    envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment::decode(
                        &*a.value,
                    )
                    .unwrap()
                    .cluster_name
                }
                _ => unreachable!(),
            }
        })
        .collect()
}

#[test]
fn sotw_fetch_ack_update_and_removal() {
    let one = common::snapshot(false);
    let two = common::snapshot(true);
    let mut s = Sotw::new();

    let (r, v) = s.on_request(&request(CLUSTER, &[], "", ""), &one);
    let r = r.expect("the first request is answered");
    assert_eq!(v, None);
    assert!(!s.settled(&one), "sent, not yet ACKed");
    assert_eq!(names(&r.resources, CLUSTER), ["default/a/80"]);
    let (again, verdict) = s.on_request(&request(CLUSTER, &[], &r.version_info, &r.nonce), &one);
    assert!(s.settled(&one), "ACKed at the snapshot's version");
    assert!(!s.settled(&two), "a newer snapshot is not run yet");
    assert!(
        again.is_none(),
        "an ACK of the current version asks for nothing"
    );
    assert_eq!(
        verdict,
        Some(Verdict::Ack {
            type_url: CLUSTER.into(),
            version: r.version_info.clone()
        })
    );
    let (eds, _) = s.on_request(&request(ENDPOINT, &["default/a/80"], "", ""), &one);
    let eds = eds.unwrap();
    let (_, _) = s.on_request(
        &request(ENDPOINT, &["default/a/80"], &eds.version_info, &eds.nonce),
        &one,
    );
    let (rds, _) = s.on_request(&request(ROUTE, &["http-80"], "", ""), &one);
    let rds = rds.unwrap();
    assert_eq!(names(&rds.resources, ROUTE), ["http-80"]);

    // An update pushes the changed types in order: clusters, endpoints, ..., routes.
    let pushed = s.on_snapshot(&two);
    let order: Vec<&str> = pushed.iter().map(|p| p.type_url.as_str()).collect();
    assert_eq!(order, [CLUSTER, ENDPOINT, ROUTE]);
    assert_eq!(
        names(&pushed[0].resources, CLUSTER),
        ["default/a/80", "default/b/80"]
    );
    assert_eq!(
        names(&pushed[1].resources, ENDPOINT),
        ["default/a/80"],
        "only what was asked for"
    );

    // Removal: back to one backend; the whole cluster list no longer holds b.
    let pushed = s.on_snapshot(&one);
    assert_eq!(names(&pushed[0].resources, CLUSTER), ["default/a/80"]);
    // The same snapshot again pushes nothing.
    assert!(s.on_snapshot(&one).is_empty());
}

#[test]
fn sotw_ignores_stale_nonces_and_keeps_a_nacked_version_out() {
    let one = common::snapshot(false);
    let two = common::snapshot(true);
    let mut s = Sotw::new();
    let (first, _) = s.on_request(&request(CLUSTER, &[], "", ""), &one);
    let first = first.unwrap();
    let pushed = s.on_snapshot(&two);
    let second = &pushed[0];

    // An answer to the first response arrives late: stale, ignored entirely.
    let (r, v) = s.on_request(&request(CLUSTER, &[], "", &first.nonce), &two);
    assert!(r.is_none() && v.is_none());

    // The client rejects the second response.
    let mut nack = request(CLUSTER, &[], &first.version_info, &second.nonce);
    nack.error_detail = Some(RpcStatus {
        code: 3,
        message: "bad cluster".into(),
        ..Default::default()
    });
    let (r, v) = s.on_request(&nack, &two);
    assert!(!s.settled(&two), "a rejected version is not run");
    assert!(r.is_none(), "the rejected version is not sent again");
    assert!(matches!(v, Some(Verdict::Nack { ref message, .. }) if message == "bad cluster"));
    assert!(
        s.on_snapshot(&two).is_empty(),
        "nor on an unchanged snapshot"
    );
    // The next change goes out.
    let pushed = s.on_snapshot(&one);
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].type_url, CLUSTER);
}

#[test]
fn sotw_serves_proxyless_grpc_listeners_by_authority() {
    let one = common::snapshot(false);
    let mut s = Sotw::new();
    let (r, _) = s.on_request(&request(LISTENER, &["echo.example.com:80"], "", ""), &one);
    let r = r.unwrap();
    use prost::Message;
    let listener =
        envoy_types::pb::envoy::config::listener::v3::Listener::decode(&*r.resources[0].value)
            .unwrap();
    assert_eq!(listener.name, "echo.example.com:80");
    assert!(listener.api_listener.is_some(), "an API listener for gRPC");
    // A port the Gateway does not serve gets nothing.
    let (r, _) = s.on_request(&request(LISTENER, &["echo.example.com:81"], "", ""), &one);
    assert!(r.unwrap().resources.is_empty());
}

#[test]
fn a_reconnecting_sotw_client_gets_everything() {
    let one = common::snapshot(false);
    let mut first = Sotw::new();
    let (r, _) = first.on_request(&request(CLUSTER, &[], "", ""), &one);
    let version = r.unwrap().version_info;
    let mut again = Sotw::new();
    let mut reconnect = request(CLUSTER, &[], &version, "");
    reconnect.version_info = version;
    let (r, _) = again.on_request(&reconnect, &one);
    assert_eq!(names(&r.unwrap().resources, CLUSTER), ["default/a/80"]);
}

fn delta_request(type_url: &str, subscribe: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.into(),
        resource_names_subscribe: subscribe.iter().map(|n| (*n).to_owned()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

#[test]
fn delta_sends_differences_and_reconnects_with_what_the_client_holds() {
    let one = common::snapshot(false);
    let two = common::snapshot(true);
    let mut d = Delta::new();
    let (r, _) = d.on_request(&delta_request(CLUSTER, &[], ""), &one);
    let r = r.unwrap();
    assert_eq!(
        r.resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["default/a/80"]
    );
    let held: Vec<(String, String)> = r
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect();
    assert!(!d.settled(), "sent, not yet ACKed");
    let (ack, verdict) = d.on_request(&delta_request(CLUSTER, &[], &r.nonce), &one);
    assert!(ack.is_none());
    assert!(matches!(verdict, Some(Verdict::Ack { .. })));
    assert!(d.settled());

    // Adding b sends b only.
    let pushed = d.on_snapshot(&two);
    assert!(!d.settled(), "the change is not ACKed yet");
    let mut nack = delta_request(CLUSTER, &[], &pushed[0].nonce);
    nack.error_detail = Some(RpcStatus {
        code: 3,
        message: "bad cluster".into(),
        ..Default::default()
    });
    let (_, verdict) = d.on_request(&nack, &two);
    assert!(matches!(verdict, Some(Verdict::Nack { .. })));
    assert!(!d.settled(), "a rejected change is not run");
    assert_eq!(pushed.len(), 1);
    assert_eq!(
        pushed[0]
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["default/b/80"]
    );
    assert!(pushed[0].removed_resources.is_empty());
    // Removing it says so.
    let pushed = d.on_snapshot(&one);
    assert!(pushed[0].resources.is_empty());
    assert_eq!(pushed[0].removed_resources, ["default/b/80"]);

    // A reconnect that reports a (current) and an old version of b receives b's removal only.
    let mut again = Delta::new();
    let mut reconnect = delta_request(CLUSTER, &[], "");
    reconnect.initial_resource_versions = held.into_iter().collect();
    reconnect
        .initial_resource_versions
        .insert("default/b/80".into(), "old".into());
    let (r, _) = again.on_request(&reconnect, &one);
    let r = r.unwrap();
    assert!(r.resources.is_empty(), "a is current: {:?}", r.resources);
    assert_eq!(r.removed_resources, ["default/b/80"]);
}

#[test]
fn delta_named_subscriptions_follow_subscribe_and_unsubscribe() {
    let two = common::snapshot(true);
    let mut d = Delta::new();
    let (r, _) = d.on_request(&delta_request(ENDPOINT, &["default/a/80"], ""), &two);
    let r = r.unwrap();
    assert_eq!(
        r.resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["default/a/80"]
    );
    let mut more = delta_request(ENDPOINT, &["default/b/80"], &r.nonce);
    more.resource_names_unsubscribe = vec!["default/a/80".into()];
    let (r, _) = d.on_request(&more, &two);
    let r = r.unwrap();
    assert_eq!(
        r.resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["default/b/80"]
    );
    assert!(
        r.removed_resources.is_empty(),
        "unsubscribed names are not reported removed"
    );
    let empty = Snapshot::default();
    let pushed = d.on_snapshot(&empty);
    assert_eq!(pushed[0].removed_resources, ["default/b/80"]);
}

#[test]
fn delta_subscriptions_on_a_stale_nonce_are_taken_without_a_verdict() {
    let two = common::snapshot(true);
    let mut d = Delta::new();
    let (first, _) = d.on_request(&delta_request(ENDPOINT, &["default/a/80"], ""), &two);
    let first = first.unwrap();
    // The client subscribes b before answering the first response (no nonce), …
    let (second, _) = d.on_request(&delta_request(ENDPOINT, &["default/b/80"], ""), &two);
    assert_eq!(second.unwrap().resources[0].name, "default/b/80");
    // … then ACKs the first, superseded, response and drops a with it.
    let mut late = delta_request(ENDPOINT, &[], &first.nonce);
    late.resource_names_unsubscribe = vec!["default/a/80".into()];
    let (response, verdict) = d.on_request(&late, &two);
    assert!(response.is_none(), "{response:?}");
    assert!(verdict.is_none(), "a stale ACK is no verdict");
    assert!(!d.settled(), "the response naming b is not ACKed yet");
    // a is no longer subscribed: its removal is not reported, b's is.
    let pushed = d.on_snapshot(&Snapshot::default());
    assert_eq!(pushed[0].removed_resources, ["default/b/80"]);
}
