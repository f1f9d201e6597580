//! The object store: every object, one global monotonic `resourceVersion`, and the window of
//! recent events that watches resume from.
//!
//! Writes are linearised under one lock; each write takes the next resourceVersion, is appended
//! to the journal (when persistence is on) before it is acknowledged, enters the event window,
//! and is broadcast to live watches. A watch from a version older than the window is told
//! `Expired`, which clients answer by relisting.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::storage::journal::{Journal, JournalError, Record};

pub use crate::storage::key::StoreKey;

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event type as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed write.
#[derive(Clone, Debug)]
pub struct StoredEvent {
    /// The resourceVersion the write took.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Which object.
    pub key: StoreKey,
    /// The object after the write (for a deletion: the last state, at the deletion's version).
    pub object: Arc<Value>,
    /// The object before the write (selectors need it: an object can stop matching).
    pub previous: Option<Arc<Value>>,
}

/// Store failures, mapped to API statuses by the handlers.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Create of an existing object.
    #[error("already exists")]
    AlreadyExists,
    /// The object does not exist.
    #[error("not found")]
    NotFound,
    /// A precondition (resourceVersion or uid) did not hold.
    #[error(
        "the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict,
    /// The journal could not be written: the write is not acknowledged.
    #[error("persisting the write: {0}")]
    Journal(#[from] JournalError),
}

/// A watch asked for a version older than the retained window.
#[derive(Debug, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct Expired {
    /// The version asked for.
    pub requested: u64,
    /// The oldest version a watch can start from now.
    pub oldest: u64,
}

/// Live events of a watch.
pub type EventReceiver = broadcast::Receiver<Arc<StoredEvent>>;

/// Whether a write is stored or only checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// Stored, journaled and sent to watchers.
    Store,
    /// Checked and answered, never stored (`dryRun=All`).
    DryRun,
}

/// A write to commit.
#[derive(Debug)]
pub enum Write {
    /// Create; fails if the key exists.
    Create(Value),
    /// Replace; fails if absent, or if `expect_rv` is given and differs.
    Update {
        /// The new object.
        object: Value,
        /// The resourceVersion the writer read.
        expect_rv: Option<u64>,
    },
    /// Remove; fails if absent, or if a precondition differs.
    Delete {
        /// Required current resourceVersion.
        expect_rv: Option<u64>,
        /// Required current uid.
        expect_uid: Option<String>,
    },
}

struct Inner {
    rv: u64,
    objects: BTreeMap<StoreKey, Arc<Value>>,
    events: VecDeque<Arc<StoredEvent>>,
    /// Watches may start from any version >= this one.
    oldest_watchable: u64,
    window: usize,
    journal: Option<Journal>,
}

/// The store. Shared by reference (`Arc<Store>`).
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<StoredEvent>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.current_rv())
            .finish_non_exhaustive()
    }
}

/// How many events a slow watch may fall behind before it is expired and must relist.
const BROADCAST_CAPACITY: usize = 16 * 1024;

impl Store {
    /// An empty in-memory store keeping the last `window` events for watches.
    pub fn new(window: usize) -> Self {
        Self::from_parts(0, BTreeMap::new(), VecDeque::new(), window, None)
    }

    /// A store persisted in `journal`: replays it, keeping its tail as the event window.
    pub fn open(journal: Journal, window: usize) -> Result<Self, JournalError> {
        let mut objects = BTreeMap::new();
        let mut events = VecDeque::new();
        let mut rv = 0;
        let mut journal = journal;
        for record in journal.replay()? {
            rv = record.rv;
            let object = Arc::new(record.object);
            let (kind, previous) = if record.deleted {
                (EventType::Deleted, objects.remove(&record.key))
            } else {
                let previous = objects.insert(record.key.clone(), object.clone());
                let kind = if previous.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, previous)
            };
            events.push_back(Arc::new(StoredEvent {
                rv,
                kind,
                key: record.key,
                object,
                previous,
            }));
            if events.len() > window {
                events.pop_front();
            }
        }
        Ok(Self::from_parts(rv, objects, events, window, Some(journal)))
    }

    fn from_parts(
        rv: u64,
        objects: BTreeMap<StoreKey, Arc<Value>>,
        events: VecDeque<Arc<StoredEvent>>,
        window: usize,
        journal: Option<Journal>,
    ) -> Self {
        let oldest_watchable = events.front().map_or(rv, |e| e.rv - 1);
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        Self {
            inner: Mutex::new(Inner {
                rv,
                objects,
                events,
                oldest_watchable,
                window: window.max(1),
                journal,
            }),
            tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The newest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, key: &StoreKey) -> Option<Arc<Value>> {
        self.lock().objects.get(key).cloned()
    }

    /// Every object of a resource (in one namespace, or all), in key order, and the version
    /// the list is consistent at.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .range(range_start(resource, namespace)..)
            .take_while(|(k, _)| {
                k.resource == resource && namespace.is_none_or(|ns| k.namespace() == ns)
            })
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// Every key of a resource across namespaces, or of every resource in one namespace when
    /// `resource` is `None` (namespace deletion).
    pub fn keys(&self, resource: Option<&str>, namespace: Option<&str>) -> Vec<StoreKey> {
        self.lock()
            .objects
            .keys()
            .filter(|k| resource.is_none_or(|r| k.resource == r))
            .filter(|k| namespace.is_none_or(|ns| k.namespace() == ns))
            .cloned()
            .collect()
    }

    /// Every object, for the garbage collector's scan.
    pub fn all(&self) -> Vec<(StoreKey, Arc<Value>)> {
        self.lock()
            .objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Commits a write; returns the stored object (with its new resourceVersion).
    pub fn write(&self, key: &StoreKey, write: Write) -> Result<Arc<Value>, StoreError> {
        self.write_as(Commit::Store, key, write)
    }

    /// A write stored, or (`dryRun=All`) only checked: its preconditions hold or fail as a
    /// stored write's would, and the object it would store is returned, but nothing is
    /// stored, journaled or sent to watchers. A dry-run object keeps the resourceVersion it
    /// had (none when it would be created), as the real server's do.
    pub fn write_as(
        &self,
        commit: Commit,
        key: &StoreKey,
        write: Write,
    ) -> Result<Arc<Value>, StoreError> {
        let mut inner = self.lock();
        let current = inner.objects.get(key).cloned();
        let (kind, mut object) = match write {
            Write::Create(object) => {
                if current.is_some() {
                    return Err(StoreError::AlreadyExists);
                }
                (EventType::Added, object)
            }
            Write::Update { object, expect_rv } => {
                let current = current.as_ref().ok_or(StoreError::NotFound)?;
                if expect_rv.is_some_and(|rv| rv != resource_version(current)) {
                    return Err(StoreError::Conflict);
                }
                (EventType::Modified, object)
            }
            Write::Delete {
                expect_rv,
                expect_uid,
            } => {
                let current = current.as_ref().ok_or(StoreError::NotFound)?;
                if expect_rv.is_some_and(|rv| rv != resource_version(current))
                    || expect_uid
                        .is_some_and(|uid| current["metadata"]["uid"].as_str() != Some(&uid))
                {
                    return Err(StoreError::Conflict);
                }
                (EventType::Deleted, (**current).clone())
            }
        };
        if commit == Commit::DryRun {
            match current
                .as_deref()
                .map(|c| &c["metadata"]["resourceVersion"])
            {
                Some(rv) => object["metadata"]["resourceVersion"] = rv.clone(),
                None => {
                    if let Some(meta) = object["metadata"].as_object_mut() {
                        meta.remove("resourceVersion");
                    }
                }
            }
            return Ok(Arc::new(object));
        }
        let rv = inner.rv + 1;
        object["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        if let Some(journal) = inner.journal.as_mut() {
            journal.append(&Record {
                rv,
                key: key.clone(),
                deleted: kind == EventType::Deleted,
                object: object.clone(),
            })?;
        }
        inner.rv = rv;
        let object = Arc::new(object);
        if kind == EventType::Deleted {
            inner.objects.remove(key);
        } else {
            inner.objects.insert(key.clone(), object.clone());
        }
        let event = Arc::new(StoredEvent {
            rv,
            kind,
            key: key.clone(),
            object: object.clone(),
            previous: current,
        });
        inner.events.push_back(event.clone());
        if inner.events.len() > inner.window
            && let Some(dropped) = inner.events.pop_front()
        {
            inner.oldest_watchable = dropped.rv;
        }
        // Sent under the lock so that subscribers see events in resourceVersion order.
        let _ = self.tx.send(event);
        Ok(object)
    }

    /// The events after `rv` still in the window, and a receiver for every later one; both
    /// taken under the lock, so nothing falls between them.
    pub fn watch_from(&self, rv: u64) -> Result<(Vec<Arc<StoredEvent>>, EventReceiver), Expired> {
        let inner = self.lock();
        if rv < inner.oldest_watchable {
            return Err(Expired {
                requested: rv,
                oldest: inner.oldest_watchable,
            });
        }
        let backlog = inner.events.iter().filter(|e| e.rv > rv).cloned().collect();
        Ok((backlog, self.tx.subscribe()))
    }

    /// The oldest version a watch may start from.
    pub fn oldest_watchable(&self) -> u64 {
        self.lock().oldest_watchable
    }
}

fn range_start(resource: &str, namespace: Option<&str>) -> StoreKey {
    StoreKey::new(resource, namespace.unwrap_or_default(), "")
}

/// The resourceVersion of a stored object (0 when missing).
pub fn resource_version(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> StoreKey {
        StoreKey::new("configmaps", "default", name)
    }

    fn cm(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn versions_are_global_and_monotonic() {
        let store = Store::new(10);
        let a = store.write(&key("a"), Write::Create(cm("a"))).unwrap();
        let b = store.write(&key("b"), Write::Create(cm("b"))).unwrap();
        assert_eq!(resource_version(&a), 1);
        assert_eq!(resource_version(&b), 2);
        assert!(matches!(
            store.write(&key("a"), Write::Create(cm("a"))),
            Err(StoreError::AlreadyExists)
        ));
        assert!(matches!(
            store.write(
                &key("a"),
                Write::Update {
                    object: cm("a"),
                    expect_rv: Some(7)
                }
            ),
            Err(StoreError::Conflict)
        ));
        let deleted = store
            .write(
                &key("a"),
                Write::Delete {
                    expect_rv: None,
                    expect_uid: None,
                },
            )
            .unwrap();
        assert_eq!(resource_version(&deleted), 3);
        assert_eq!(store.list("configmaps", Some("default")).0.len(), 1);
        assert_eq!(store.list("configmaps", Some("other")).0.len(), 0);
    }

    #[test]
    fn a_dry_run_checks_a_write_and_stores_nothing() {
        let store = Store::new(10);
        let dry = |write| store.write_as(Commit::DryRun, &key("a"), write);
        let created = dry(Write::Create(cm("a"))).unwrap();
        assert_eq!(created["metadata"]["name"], "a");
        assert!(created["metadata"].get("resourceVersion").is_none());
        assert!(store.get(&key("a")).is_none(), "a dry-run create stored");
        assert_eq!(store.current_rv(), 0);
        let (_, mut events) = store.watch_from(0).unwrap();
        store.write(&key("a"), Write::Create(cm("a"))).unwrap();
        assert!(events.try_recv().is_ok());
        // Preconditions fail as they would.
        assert!(matches!(
            dry(Write::Create(cm("a"))),
            Err(StoreError::AlreadyExists)
        ));
        assert!(matches!(
            dry(Write::Update {
                object: cm("a"),
                expect_rv: Some(7)
            }),
            Err(StoreError::Conflict)
        ));
        let mut changed = cm("a");
        changed["data"] = json!({"k": "v"});
        let updated = dry(Write::Update {
            object: changed,
            expect_rv: Some(1),
        })
        .unwrap();
        assert_eq!(updated["data"]["k"], "v");
        assert_eq!(updated["metadata"]["resourceVersion"], "1");
        dry(Write::Delete {
            expect_rv: None,
            expect_uid: None,
        })
        .unwrap();
        assert_eq!(
            *store.get(&key("a")).unwrap(),
            json!({"metadata": {"name": "a", "namespace": "default", "resourceVersion": "1"}})
        );
        assert_eq!(store.current_rv(), 1);
        assert!(
            events.try_recv().is_err(),
            "a dry run was sent to a watcher"
        );
    }

    #[test]
    fn watches_older_than_the_window_expire() {
        let store = Store::new(2);
        for name in ["a", "b", "c"] {
            store.write(&key(name), Write::Create(cm(name))).unwrap();
        }
        assert!(store.watch_from(0).is_err());
        let (backlog, _) = store.watch_from(1).unwrap();
        assert_eq!(backlog.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![2, 3]);
        assert!(store.watch_from(3).unwrap().0.is_empty());
    }
}
