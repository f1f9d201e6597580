//! The HTTPRoute retry tests, against the suite's flaky backend (`/retry/`).

use super::common::*;

/// A fresh `uuid` for the suite's flaky backend: each probe is counted on its own.
pub(crate) fn uuid() -> String {
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
pub(crate) async fn retries(world: &World, cases: &[(&str, &str, &[u16])]) {
    for (path, query, status) in cases {
        world
            .expect(
                SAME_NAMESPACE,
                80,
                Ask::each(|| format!("{path}?{query}&uuid={}", uuid())),
                Want {
                    status,
                    backend: Some("infra-backend-v3"),
                    namespace: INFRA,
                    ..Want::default()
                },
            )
            .await;
    }
}

/// HTTPRouteRetry: retried on the codes named, up to `attempts` retries; another code is
/// not retried; the last failure is what the client gets.
pub(crate) async fn http_route_retry(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries"],
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
pub(crate) async fn http_route_retry_connection_error(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry-connection-error.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries-connection-error"],
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
pub(crate) async fn http_route_retry_with_timeouts(world: &World) {
    let yaml = world
        .routes_accepted(
            "httproute-retry-with-timeouts.yaml",
            "HTTPRoute",
            &["gateway-conformance-infra/retries-with-timeouts"],
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
