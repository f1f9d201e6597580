//! The Gateway API conformance suite (v1.6.1 and what followed on its main branch), its tests
//! transcribed — their manifests as data under `conformance/` (each file names its source),
//! their assertions in this file, test by test under the suite's short names — and run
//! through `fairlead up` with one real Envoy per Gateway (`fairlead_e2e::conformance`).

use fairlead_e2e::conformance::{Want, World, manifest};

const INFRA: &str = "gateway-conformance-infra";
const SAME_NAMESPACE: &str = "gateway-conformance-infra/same-namespace";

/// A fresh `uuid` for the suite's flaky backend: each probe is counted on its own.
fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs the suite's retry cases: for each (path, the flaky backend's query, the statuses
/// wanted), requests with a new `uuid` each until the answer holds.
async fn retries(world: &World, cases: &[(&str, &str, &[u16])]) {
    for (path, query, status) in cases {
        world
            .expect(
                SAME_NAMESPACE,
                80,
                || format!("{path}?{query}&uuid={}", uuid()),
                Want {
                    status,
                    backend: Some("infra-backend-v3"),
                    namespace: INFRA,
                },
            )
            .await;
    }
}

/// HTTPRouteSimpleSameNamespace: a route in the Gateway's namespace reaches its backend.
async fn http_route_simple_same_namespace(world: &World) {
    let yaml = manifest("httproute-simple-same-namespace.yaml");
    world.apply(&yaml);
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-conformance-infra/gateway-conformance-infra-test",
            SAME_NAMESPACE,
        )
        .await;
    world
        .expect(
            SAME_NAMESPACE,
            80,
            || "/".to_owned(),
            Want {
                status: &[200],
                backend: Some("infra-backend-v1"),
                namespace: INFRA,
            },
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteCrossNamespace: a route in a namespace the Gateway's selector admits.
async fn http_route_cross_namespace(world: &World) {
    let yaml = manifest("httproute-cross-namespace.yaml");
    world.apply(&yaml);
    let gateway = "gateway-conformance-infra/backend-namespaces";
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-conformance-web-backend/cross-namespace",
            gateway,
        )
        .await;
    world
        .expect(
            gateway,
            80,
            || "/".to_owned(),
            Want {
                status: &[200],
                backend: Some("web-backend"),
                namespace: "gateway-conformance-web-backend",
            },
        )
        .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRetry: retried on the codes named, up to `attempts` retries; another code is
/// not retried; the last failure is what the client gets.
async fn http_route_retry(world: &World) {
    let yaml = manifest("httproute-retry.yaml");
    world.apply(&yaml);
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-conformance-infra/retries",
            SAME_NAMESPACE,
        )
        .await;
    let three = "/retry/code-500-attempts-3";
    let all = "/retry/code-all-attempts-2";
    retries(
        world,
        &[
            (three, "responseCode=500&succeedAfter=2", &[200]),
            (three, "responseCode=500&succeedAfter=4", &[500]),
            (three, "responseCode=503&succeedAfter=2", &[503]),
            (all, "responseCode=500&succeedAfter=1", &[200]),
            (all, "responseCode=500&succeedAfter=3", &[500]),
            (all, "responseCode=502&succeedAfter=1", &[200]),
            (all, "responseCode=502&succeedAfter=3", &[502]),
            (all, "responseCode=503&succeedAfter=1", &[200]),
            (all, "responseCode=503&succeedAfter=3", &[503]),
            (all, "responseCode=504&succeedAfter=1", &[200]),
            (all, "responseCode=504&succeedAfter=3", &[504]),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRetryConnectionError: without codes, a dropped connection is retried.
async fn http_route_retry_connection_error(world: &World) {
    let yaml = manifest("httproute-retry-connection-error.yaml");
    world.apply(&yaml);
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-conformance-infra/retries-connection-error",
            SAME_NAMESPACE,
        )
        .await;
    let path = "/retry/no-status-code-attempts-3";
    retries(
        world,
        &[
            (path, "succeedAfter=2", &[200]),
            (path, "succeedAfter=4", &[500, 503]),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// HTTPRouteRetryWithTimeouts: a try that outlives `backendRequest` is retried; the retries
/// stay within `request`.
async fn http_route_retry_with_timeouts(world: &World) {
    let yaml = manifest("httproute-retry-with-timeouts.yaml");
    world.apply(&yaml);
    world
        .route_accepted(
            "HTTPRoute",
            "gateway-conformance-infra/retries-with-timeouts",
            SAME_NAMESPACE,
        )
        .await;
    let backend = "/retry/backend-request-timeout-200ms";
    let request = "/retry/request-timeout-200ms";
    retries(
        world,
        &[
            (
                backend,
                "responseCode=500&succeedAfter=2&delayRetry=300ms",
                &[200],
            ),
            (
                backend,
                "responseCode=500&succeedAfter=3&delayRetry=300ms",
                &[504],
            ),
            (request, "responseCode=500&succeedAfter=1", &[200]),
            (
                request,
                "responseCode=500&succeedAfter=4&delayRetry=100ms",
                &[504],
            ),
        ],
    )
    .await;
    world.delete(&yaml).await;
}

/// GatewayInvalidParametersRef: parameters the class does not take are refused.
async fn gateway_invalid_parameters_ref(world: &World) {
    let yaml = manifest("gateway-invalid-parameters-ref.yaml");
    world.apply(&yaml);
    world
        .gateway_condition(
            "gateway-conformance-infra/gateway-invalid-parameters-ref",
            "Accepted",
            "False",
            "InvalidParameters",
        )
        .await;
    world.delete(&yaml).await;
}

/// The HTTP profile's tests transcribed so far, one world, one after the other (as the suite
/// runs them), each removing its manifests at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_api_conformance_suite_passes_through_real_envoy() {
    let world = World::start().await;
    http_route_simple_same_namespace(&world).await;
    http_route_cross_namespace(&world).await;
    http_route_retry(&world).await;
    http_route_retry_connection_error(&world).await;
    http_route_retry_with_timeouts(&world).await;
    gateway_invalid_parameters_ref(&world).await;
}
