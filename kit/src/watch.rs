//! Watch caches for components: a kube-runtime watcher (with backoff) feeding a reflector
//! store, objects trimmed to what the component reads before they are cached, and a
//! notification on every change. The task ends with the component's stop token.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Starts a cached watch; `trim` drops what the component does not read (memory), `notify`
/// wakes the component after each change.
pub fn cache<K, F>(
    api: Api<K>,
    config: watcher::Config,
    trim: F,
    notify: Arc<Notify>,
    stop: CancellationToken,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    F: FnMut(&mut K) + Send + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(trim)
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                item = stream.next() => match item {
                    Some(Ok(_)) => notify.notify_one(),
                    Some(Err(err)) => tracing::warn!(error = %err, "watch failed; retrying with backoff"),
                    None => return,
                },
            }
        }
    });
    reader
}

/// A trim that keeps everything.
pub fn keep<K>(_: &mut K) {}

/// A trim that drops `metadata.managedFields` (kept where the apply helper needs them).
pub fn without_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}
