//! Watch caches for components: a kube-runtime watcher (with backoff) feeding a reflector
//! store, objects trimmed to what the component reads before they are cached, and a
//! notification on every change. The task ends with the component's stop token. Every
//! watcher of fairlead retries with [`backoff`].

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The retry pacing of every watcher: 0.2 s after the first failure, doubling to 1 s, each
/// wait stretched by a random part of itself (up to 2 s), back to 0.2 s after a minute
/// without failures.
///
/// kube-runtime's default grows to 30 s (client-go's reflector too): after the API server
/// was gone half a minute, a component saw changes again only 10–25 s after its return. A
/// component holds a handful of watches, so a retry every second or two while the API
/// server is away costs it nothing, and the jitter keeps many replicas from retrying in
/// step.
pub fn backoff()
-> kube::runtime::utils::ResetTimerBackoff<kube::runtime::watcher::ExponentialBackoff> {
    use std::time::Duration;
    let exponential = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(exponential.into(), Duration::from_secs(60))
}

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
        .backoff(backoff())
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

/// Projected objects by (namespace, name).
type Projected<V> = std::collections::HashMap<(String, String), Arc<V>>;

/// A watch cache that keeps a projection of each object (what the component reads, in a
/// compact type of its own) rather than the object: a `Pod` is about 2.4 KB before any of its
/// strings, the handful of fields an agent reads is a tenth of that. Keyed by namespace and
/// name; relists replace the whole content at once, as a reflector does.
pub struct Projection<V> {
    objects: Arc<std::sync::RwLock<Projected<V>>>,
    listed: tokio::sync::watch::Receiver<bool>,
}

impl<V> Clone for Projection<V> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            listed: self.listed.clone(),
        }
    }
}

/// The watch behind a [`Projection`] ended before its first list.
#[derive(Debug, thiserror::Error)]
#[error("the watch ended before its first list")]
pub struct NeverListed;

impl<V> Projection<V> {
    /// Every projected object.
    pub fn state(&self) -> Vec<Arc<V>> {
        self.read().values().cloned().collect()
    }

    /// The projection of `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<V>> {
        self.read()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Whether the first complete list has arrived.
    pub fn is_ready(&self) -> bool {
        *self.listed.borrow()
    }

    /// Waits for the first complete list.
    pub async fn wait_until_ready(&self) -> Result<(), NeverListed> {
        let mut listed = self.listed.clone();
        listed
            .wait_for(|listed| *listed)
            .await
            .map(|_| ())
            .map_err(|_| NeverListed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Projected<V>> {
        // A writer cannot panic while holding the lock (it only moves values in), so a
        // poisoned lock still holds a consistent map.
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Starts a watch that keeps `project(object)` of every object; `notify` wakes the component
/// after each change of a projection (an update that leaves the projection as it was, say a
/// field the projection drops, wakes nobody).
pub fn project<K, V, F>(
    api: Api<K>,
    config: watcher::Config,
    project: F,
    notify: Arc<Notify>,
    stop: CancellationToken,
) -> Projection<V>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    V: PartialEq + Send + Sync + 'static,
    F: Fn(&K) -> V + Send + 'static,
{
    use std::collections::HashMap;
    let (listed_tx, listed) = tokio::sync::watch::channel(false);
    let projection = Projection {
        objects: Arc::new(std::sync::RwLock::new(HashMap::new())),
        listed,
    };
    let objects = projection.objects.clone();
    let key = |object: &K| {
        let meta = object.meta();
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    };
    let stream = watcher(api, config).backoff(backoff());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut relist: Option<Projected<V>> = None;
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                item = stream.next() => match item {
                    Some(Ok(event)) => event,
                    Some(Err(err)) => {
                        tracing::warn!(error = %err, "watch failed; retrying with backoff");
                        continue;
                    }
                    None => return,
                },
            };
            let write = || {
                objects
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            };
            match event {
                watcher::Event::Init => relist = Some(HashMap::new()),
                watcher::Event::InitApply(object) => {
                    if let Some(relist) = relist.as_mut() {
                        relist.insert(key(&object), Arc::new(project(&object)));
                    }
                }
                watcher::Event::InitDone => {
                    if let Some(relist) = relist.take() {
                        *write() = relist;
                    }
                    listed_tx.send_replace(true);
                    notify.notify_one();
                }
                watcher::Event::Apply(object) => {
                    let value = Arc::new(project(&object));
                    let previous = write().insert(key(&object), value.clone());
                    if previous.is_none_or(|p| *p != *value) {
                        notify.notify_one();
                    }
                }
                watcher::Event::Delete(object) => {
                    if write().remove(&key(&object)).is_some() {
                        notify.notify_one();
                    }
                }
            }
        }
    });
    projection
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_watch_retries_within_two_seconds_however_long_the_outage() {
        let waits: Vec<Duration> = super::backoff().take(40).collect();
        assert!(waits[0] >= Duration::from_millis(200) && waits[0] < Duration::from_millis(400));
        assert!(
            waits.iter().all(|w| *w <= Duration::from_secs(2)),
            "{waits:?}"
        );
        // Grown to the cap: a minute's outage is retried about every second or two.
        assert!(
            waits[10..].iter().all(|w| *w >= Duration::from_secs(1)),
            "{waits:?}"
        );
    }
}
