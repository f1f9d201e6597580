//! The GRPCRoute tests: method and header matching, listeners' hostnames, named rules, weights
//! — gRPC calls of tonic's client through Envoy to echo-basic's gRPC server.

use super::common::*;

/// The suite's gRPC backends.
const GRPC_V1: &str = "grpc-infra-backend-v1";
const GRPC_V2: &str = "grpc-infra-backend-v2";
const GRPC_V3: &str = "grpc-infra-backend-v3";

/// A call of `method` with `metadata`, to the Gateway's address.
fn call<'a>(method: &'a str, metadata: &'a [(&'a str, &'a str)]) -> Call<'a> {
    Call {
        method,
        authority: None,
        metadata,
    }
}

/// A call of `Echo` with `authority`.
fn to(authority: &str) -> Call<'_> {
    Call {
        method: "Echo",
        authority: Some(authority),
        metadata: &[],
    }
}

/// What a call must end with: answered by `backend` in the infra namespace, or (`None`)
/// `UNIMPLEMENTED`, as gRPC reads Envoy's 404 for a call no route takes.
fn want(backend: Option<&str>) -> GrpcWant<'_> {
    backend.map_or(GrpcWant::code(tonic::Code::Unimplemented), |b| {
        GrpcWant::backend(b, INFRA)
    })
}

/// Applies the test manifest `file`, waits for its GRPCRoutes `routes` on `gateway`, runs
/// `cases` on the Gateway's port 80 and removes the manifests.
async fn calls(
    world: &World,
    file: &str,
    gateway: &str,
    routes: &[&str],
    cases: &[(Call<'_>, Option<&str>)],
) {
    let keys: Vec<String> = routes.iter().map(|r| format!("{INFRA}/{r}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let yaml = world
        .routes_accepted(file, "GRPCRoute", &keys, gateway)
        .await;
    for (call, backend) in cases {
        world.expect_grpc(gateway, 80, *call, want(*backend)).await;
    }
    world.delete(&yaml).await;
}

/// GRPCExactMethodMatching.
pub(crate) async fn grpc_exact_method_matching(world: &World) {
    calls(
        world,
        "grpcroute-exact-method-matching.yaml",
        SAME_NAMESPACE,
        &["exact-matching"],
        &[
            (call("Echo", &[]), Some(GRPC_V1)),
            (call("EchoTwo", &[]), Some(GRPC_V2)),
            (call("EchoThree", &[]), None),
        ],
    )
    .await;
}

/// GRPCRouteHeaderMatching.
pub(crate) async fn grpc_route_header_matching(world: &World) {
    calls(
        world,
        "grpcroute-header-matching.yaml",
        SAME_NAMESPACE,
        &["grpc-header-matching"],
        &[
            (call("Echo", &[("Version", "one")]), Some(GRPC_V1)),
            (call("Echo", &[("Version", "two")]), Some(GRPC_V2)),
            (
                call("Echo", &[("Version", "two"), ("Color", "orange")]),
                Some(GRPC_V1),
            ),
            (
                call("Echo", &[("Version", "two"), ("Color", "blue")]),
                Some(GRPC_V2),
            ),
            (call("Echo", &[("Color", "orange")]), None),
            (call("Echo", &[("Some-Other-Header", "one")]), None),
            (call("Echo", &[("Color", "blue")]), Some(GRPC_V1)),
            (call("Echo", &[("Color", "green")]), Some(GRPC_V1)),
            (call("Echo", &[("Color", "red")]), Some(GRPC_V2)),
            (call("Echo", &[("Color", "yellow")]), Some(GRPC_V2)),
            (call("Echo", &[("Color", "purple")]), None),
        ],
    )
    .await;
}

/// GRPCRouteListenerHostnameMatching: four listeners of one port, each route on its own.
pub(crate) async fn grpc_route_listener_hostname_matching(world: &World) {
    calls(
        world,
        "grpcroute-listener-hostname-matching.yaml",
        &format!("{INFRA}/grpcroute-listener-hostname-matching"),
        &["backend-v1", "backend-v2", "backend-v3"],
        &[
            (to("bar.com"), Some(GRPC_V1)),
            (to("foo.bar.com"), Some(GRPC_V2)),
            (to("baz.bar.com"), Some(GRPC_V3)),
            (to("boo.bar.com"), Some(GRPC_V3)),
            (to("multiple.prefixes.bar.com"), Some(GRPC_V3)),
            (to("multiple.prefixes.foo.com"), Some(GRPC_V3)),
            (to("foo.com"), None),
            (to("no.matching.host"), None),
        ],
    )
    .await;
}

/// GRPCRouteNamedRule.
pub(crate) async fn grpc_route_named_rule(world: &World) {
    calls(
        world,
        "grpcroute-named-rule.yaml",
        SAME_NAMESPACE,
        &["grpc-named-rules"],
        &[
            (call("Echo", &[]), Some(GRPC_V1)),
            (call("EchoTwo", &[]), Some(GRPC_V2)),
        ],
    )
    .await;
}

/// GRPCRouteWeight: calls spread 70/30/0 over the backends.
pub(crate) async fn grpc_route_weight(world: &World) {
    let yaml = world
        .routes_accepted(
            "grpcroute-weight.yaml",
            "GRPCRoute",
            &[&format!("{INFRA}/weighted-backends")],
            SAME_NAMESPACE,
        )
        .await;
    let echo = call("Echo", &[]);
    world
        .expect_grpc(SAME_NAMESPACE, 80, echo, GrpcWant::backend("", INFRA))
        .await;
    weighted(
        || world.grpc_pod(SAME_NAMESPACE, 80, echo),
        &[(GRPC_V1, 0.7), (GRPC_V2, 0.3), (GRPC_V3, 0.0)],
    )
    .await;
    world.delete(&yaml).await;
}
