//! The instance CRDs in the embedded API server: valid instances of both kinds are accepted as
//! written; each rule refuses what it must with the field named; the immutable fields cannot
//! change on update.

use fairlead_edge_api::crd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

async fn cluster() -> (fairlead_apiserver::ApiServer, kube::Client) {
    let server = fairlead_apiserver::ApiServer::start(fairlead_apiserver::Config::default())
        .await
        .unwrap();
    let client = server.client().await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for c in crd::crds() {
        crds.create(&PostParams::default(), &c).await.unwrap();
    }
    (server, client)
}

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let (plural, namespaced) = match kind {
        "ClusterALBInstance" => ("clusteralbinstances", false),
        _ => ("albinstances", true),
    };
    let resource = ApiResource {
        group: "network.deckhouse.io".into(),
        version: "v1alpha1".into(),
        api_version: "network.deckhouse.io/v1alpha1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    if namespaced {
        Api::namespaced_with(client.clone(), "default", &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

fn instance(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "network.deckhouse.io/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

async fn create(client: &kube::Client, kind: &str, name: &str, spec: Value) -> Result<(), String> {
    match api(client, kind)
        .create(&PostParams::default(), &instance(kind, name, spec))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(e.message),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn instances_are_checked_as_the_schema_says() {
    let (_server, client) = cluster().await;
    // Valid, with every block.
    create(&client, "ClusterALBInstance", "main", json!({
        "gatewayName": "public-gw", "defaultDeckhouseGateway": true,
        "inlet": {"type": "LoadBalancer",
                  "loadBalancer": {"loadBalancerClass": "metallb", "httpPort": 80, "httpsPort": 0,
                                   "serviceAnnotations": {"example.com/lb": "fast"},
                                   "loadBalancerSourceRanges": ["0.0.0.0/0"]},
                  "additionalPorts": [{"port": 5432, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
        "acceptRequestsFrom": ["10.0.0.0/8", "2001:db8::/32"],
        "useProxyProtocol": true,
        "originalIPDetection": {"realIPHeader": "X-Forwarded-For", "setRealIPFrom": ["192.168.0.0/16"]},
        "envoyLogLevel": "Warning",
        "nodeSelector": {"node-role.kubernetes.io/frontend": ""},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "frontend", "effect": "NoSchedule"}],
        "geoIP": {"licenseKeySecretRef": {"name": "maxmind", "namespace": "d8-alb"},
                  "maxmindEditionIDs": ["GeoLite2-City", "GeoLite2-ASN"],
                  "headers": {"country": "x-geo-country"}},
        "openTelemetry": {"tracing": {"service": {"name": "otel", "namespace": "monitoring"}, "port": 4317, "protocol": "gRPC"}}
    }))
    .await
    .unwrap();
    create(&client, "ClusterALBInstance", "edge", json!({
        "gatewayName": "edge-gw", "inlet": {"type": "HostPort", "hostPort": {"httpPort": 80}}, "enableHTTP3": true
    }))
    .await
    .unwrap();
    create(
        &client,
        "ALBInstance",
        "team",
        json!({
            "gatewayName": "team-gw", "inlet": {"type": "LoadBalancer"}
        }),
    )
    .await
    .unwrap();
    // The ISP edition serves the ASN too; header names in any case.
    create(&client, "ClusterALBInstance", "isp", json!({
        "gatewayName": "isp-gw",
        "geoIP": {"maxmindMirror": {"url": "http://geoproxy-main.d8-alb.svc:8080/download"},
                  "maxmindEditionIDs": ["GeoIP2-ISP", "GeoIP2-Anonymous-IP"],
                  "headers": {"asn": "X-Geo-ASN", "isp": "x-geo-isp", "apple_private_relay": "x-relay",
                              "anon": "x-anon", "anon_tor": "x-tor"}}
    }))
    .await
    .unwrap();
    let stored = api(&client, "ClusterALBInstance")
        .get("main")
        .await
        .unwrap();
    assert_eq!(stored.data["spec"]["defaultDeckhouseGateway"], true);
    assert_eq!(
        stored.data["spec"]["geoIP"]["maxmindEditionIDs"][1],
        "GeoLite2-ASN"
    );

    let refused: Vec<(&str, Value, &str)> = vec![
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "useProxyProtocol": true, "enableHTTP3": true}),
            "useProxyProtocol and enableHTTP3 cannot both be true",
        ),
        (
            "ALBInstance",
            json!({"gatewayName": "g", "inlet": {"type": "HostPort", "hostPort": {"httpPort": 80}}}),
            "a HostPort inlet is for ClusterALBInstance only",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "inlet": {"type": "HostPort", "hostPort": {}}}),
            "a HostPort inlet needs httpPort, httpsPort or both",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "inlet": {"type": "HostPort", "hostPort": {"httpPort": 80}, "loadBalancer": {}}}),
            "a HostPort inlet takes hostPort settings, not loadBalancer",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "inlet": {"type": "LoadBalancer", "loadBalancer": {"httpPort": 0, "httpsPort": 0}}}),
            "httpPort and httpsPort cannot both be 0",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "acceptRequestsFrom": ["10.0.0.0/33"]}),
            "acceptRequestsFrom must be CIDRs",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "originalIPDetection": {"setRealIPFrom": ["proxy.local"]}}),
            "setRealIPFrom must be CIDRs",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindEditionIDs": ["GeoIP2-City", "GeoIP2-ISP", "GeoIP2-ASN", "GeoLite2-ASN", "GeoLite2-City"]}}),
            "spec.geoIP.maxmindEditionIDs",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindEditionIDs": ["GeoIP2-Country"]}}),
            "Unsupported value: \"GeoIP2-Country\"",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindEditionIDs": ["GeoIP2-City"]}}),
            "geoIP needs licenseKeySecretRef or maxmindMirror",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindMirror": {"url": "http://m"}, "maxmindEditionIDs": ["GeoLite2-ASN"],
                "headers": {"country": "x-country"}}}),
            "headers country, city, region need one of GeoIP2-City, GeoLite2-City in maxmindEditionIDs",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindMirror": {"url": "http://m"}, "maxmindEditionIDs": ["GeoLite2-City"],
                "headers": {"anon_vpn": "x-vpn"}}}),
            "headers anon, anon_vpn, anon_hosting, anon_tor, anon_proxy need one of GeoIP2-Anonymous-IP",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindMirror": {"url": "http://m"}, "maxmindEditionIDs": ["GeoLite2-City"],
                "headers": {"city": "x city"}}}),
            "spec.geoIP.headers.city: Invalid value: \"x city\"",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "geoIP": {"maxmindMirror": {"url": "geoproxy:8080"}, "maxmindEditionIDs": ["GeoLite2-City"]}}),
            "maxmindMirror.url must be http:// or https://",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "inlet": {"type": "LoadBalancer", "additionalPorts": [{"port": 9000, "protocol": "SCTP"}]}}),
            "Unsupported value: \"SCTP\"",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "openTelemetry": {"tracing": {"port": 4317}}}),
            "tracing names its collector by service or by url, one of them",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "openTelemetry": {"tracing": {"url": "otel:4317"}}}),
            "spec.openTelemetry.tracing.url: Invalid value",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "openTelemetry": {"tracing": {"service": {"name": "otel"}, "protocol": "HTTP", "path": "v1/traces"}}}),
            "path must start with /",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "g", "envoyLogLevel": "verbose"}),
            "Unsupported value: \"verbose\"",
        ),
        (
            "ClusterALBInstance",
            json!({"gatewayName": "Not_A_Label"}),
            "spec.gatewayName",
        ),
        (
            "ClusterALBInstance",
            json!({"inlet": {"type": "LoadBalancer"}}),
            "spec.gatewayName: Required value",
        ),
    ];
    let mut wrong = Vec::new();
    for (i, (kind, spec, message)) in refused.iter().enumerate() {
        match create(&client, kind, &format!("bad-{i}"), spec.clone()).await {
            Ok(()) => wrong.push(format!("{kind} {spec}: accepted")),
            Err(said) if !said.contains(message) => {
                wrong.push(format!("{kind} {spec}: {said:?} lacks {message:?}"));
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // A header key the provider does not know is an unknown field (refused under kubectl's
    // strict field validation, pruned otherwise).
    let strict = api(&client, "ClusterALBInstance")
        .patch(
            "continent",
            &PatchParams::apply("test").validation_strict(),
            &Patch::Apply(instance(
                "ClusterALBInstance",
                "continent",
                json!({"gatewayName": "g", "geoIP": {"maxmindMirror": {"url": "http://m"},
                    "maxmindEditionIDs": ["GeoLite2-City"], "headers": {"continent": "x-continent"}}}),
            )),
        )
        .await;
    match strict {
        Err(kube::Error::Api(e)) => assert!(
            e.message
                .contains("unknown field \"spec.geoIP.headers.continent\""),
            "{}",
            e.message
        ),
        other => panic!("an unknown header key was taken: {other:?}"),
    }

    // Immutable fields.
    let clusters = api(&client, "ClusterALBInstance");
    let change = |patch: Value| {
        let clusters = clusters.clone();
        async move {
            match clusters
                .patch("main", &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) => Err(e.message),
                Err(e) => panic!("{e}"),
            }
        }
    };
    let said = change(json!({"spec": {"inlet": {"type": "HostPort", "loadBalancer": null, "hostPort": {"httpPort": 80}}}}))
        .await
        .unwrap_err();
    assert!(said.contains("inlet.type is immutable"), "{said}");
    let said = change(json!({"spec": {"inlet": {"loadBalancer": {"loadBalancerClass": "other"}}}}))
        .await
        .unwrap_err();
    assert!(said.contains("loadBalancerClass is immutable"), "{said}");
    change(
        json!({"spec": {"inlet": {"loadBalancer": {"httpsPort": 443}}, "envoyLogLevel": "Debug"}}),
    )
    .await
    .expect("other fields change");
}

#[test]
fn the_crds_carry_printer_columns_and_short_names() {
    for c in crd::crds() {
        let columns: Vec<String> = c.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            ["Gateway", "Ready", "Synced", "Inlet", "Age"],
            "{}",
            c.spec.names.kind
        );
        assert!(
            c.spec
                .names
                .short_names
                .as_ref()
                .is_some_and(|s| !s.is_empty())
        );
    }
    assert_eq!(crd::cluster_alb_instance().spec.scope, "Cluster");
    assert_eq!(crd::alb_instance().spec.scope, "Namespaced");
}
