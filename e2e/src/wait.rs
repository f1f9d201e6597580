//! Waiting for a world to settle: a check asked again until it holds, or a failure naming
//! what never happened.

use std::time::{Duration, Instant};

/// How long a world has to settle.
pub const SETTLE: Duration = Duration::from_secs(40);

/// Waits until `check` returns something (at most [`SETTLE`]), or fails naming `what`.
pub async fn until<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    until_within(SETTLE, what, check).await
}

/// Waits until `check` returns something (at most `limit`), or fails naming `what`.
pub async fn until_within<T>(
    limit: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `check` returns `Ok` (at most [`SETTLE`]), or fails naming `what` and what
/// the last check saw instead.
pub async fn until_seen<T>(what: &str, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + SETTLE;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "never: {what}; last seen: {seen}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (as [`until`]) for an Event in `namespace` about the object `regarding` (its name)
/// that `matches`; fails naming `what`.
pub async fn event(
    client: &kube::Client,
    namespace: &str,
    regarding: &str,
    what: &str,
    matches: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> k8s_openapi::api::events::v1::Event {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), namespace);
    until(what, async || {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding)
                    && matches(e)
            })
    })
    .await
}

/// Waits until the blocking `check` returns something (at most `limit`), or fails naming
/// `what` — for tests that drive commands rather than clients.
pub fn blocking_until<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
