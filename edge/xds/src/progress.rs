//! Whether each group's proxies run its latest configuration: every stream reports whether it
//! is settled — each type it was sent is ACKed at the version of the snapshot it is served
//! (the protocol states' `settled`) — and the tally per
//! group is read by whoever reports it (the control plane's `Synced` condition), woken by
//! [`Progress::subscribe`] when a tally changes. The same idea as go-control-plane's status
//! info per node, counted per group. A stream also reports when its proxy could not bind its
//! listeners' addresses ([`Stream::unbound`]): the control plane says so on the Gateway
//! (`Programmed=False`, `AddressNotUsable`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fairlead_key::ObjectKey;
use tokio::sync::watch;

/// What one stream reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StreamState {
    /// Settled.
    settled: bool,
    /// Why its proxy could not bind its listeners' addresses, while it could not.
    unbound: Option<String>,
}

/// A group's streams, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Streams open.
    pub streams: usize,
    /// Of them, those running the group's latest configuration.
    pub settled: usize,
}

impl Tally {
    /// Some stream is open and every one is settled.
    pub fn synced(&self) -> bool {
        self.streams > 0 && self.settled == self.streams
    }
}

/// The settled state of every open stream, by group.
#[derive(Debug)]
pub struct Progress {
    streams: Mutex<BTreeMap<ObjectKey, BTreeMap<u64, StreamState>>>,
    next: std::sync::atomic::AtomicU64,
    changes: watch::Sender<u64>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            streams: Mutex::default(),
            next: std::sync::atomic::AtomicU64::new(0),
            changes: watch::Sender::new(0),
        }
    }
}

impl Progress {
    /// A stream of `group` opened, not settled yet; it leaves the tally when the returned
    /// handle is dropped.
    pub fn open(self: &Arc<Self>, group: &ObjectKey) -> Stream {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.update(|streams| {
            streams
                .entry(group.clone())
                .or_default()
                .insert(id, StreamState::default());
        });
        Stream {
            progress: self.clone(),
            group: group.clone(),
            id,
            settled: false,
            unbound: None,
        }
    }

    /// The tally of `group`.
    pub fn of(&self, group: &ObjectKey) -> Tally {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        streams.get(group).map_or_else(Tally::default, |s| Tally {
            streams: s.len(),
            settled: s.values().filter(|s| s.settled).count(),
        })
    }

    /// Why some proxy of `group` could not bind its listeners' addresses, if one could not.
    pub fn unbound(&self, group: &ObjectKey) -> Option<String> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        streams.get(group)?.values().find_map(|s| s.unbound.clone())
    }

    /// Changes whenever some tally does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn update(&self, change: impl FnOnce(&mut BTreeMap<ObjectKey, BTreeMap<u64, StreamState>>)) {
        {
            let mut streams = self
                .streams
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            change(&mut streams);
            streams.retain(|_, s| !s.is_empty());
        }
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// One open stream's place in the tally.
#[derive(Debug)]
pub struct Stream {
    progress: Arc<Progress>,
    group: ObjectKey,
    id: u64,
    settled: bool,
    unbound: Option<String>,
}

impl Stream {
    /// Reports whether the stream is settled now (a change only wakes the subscribers).
    pub fn set(&mut self, settled: bool) {
        if settled == self.settled {
            return;
        }
        self.settled = settled;
        self.progress.update(|streams| {
            if let Some(s) = streams
                .get_mut(&self.group)
                .and_then(|s| s.get_mut(&self.id))
            {
                s.settled = settled;
            }
        });
    }

    /// Reports why the proxy could not bind its listeners' addresses (`None`: it could, its
    /// listeners were taken).
    pub fn unbound(&mut self, why: Option<String>) {
        if why == self.unbound {
            return;
        }
        self.unbound.clone_from(&why);
        self.progress.update(|streams| {
            if let Some(s) = streams
                .get_mut(&self.group)
                .and_then(|s| s.get_mut(&self.id))
            {
                s.unbound = why;
            }
        });
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.progress.update(|streams| {
            if let Some(s) = streams.get_mut(&self.group) {
                s.remove(&self.id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_synced_when_every_open_stream_is_settled() {
        let progress = Arc::new(Progress::default());
        let group = ObjectKey::new("d8-alb", "main");
        let mut changes = progress.subscribe();
        assert!(!progress.of(&group).synced(), "no stream: not synced");
        let mut one = progress.open(&group);
        let mut two = progress.open(&group);
        assert!(changes.has_changed().expect("open"));
        changes.mark_unchanged();
        one.set(true);
        assert_eq!(
            progress.of(&group),
            Tally {
                streams: 2,
                settled: 1
            }
        );
        assert!(!progress.of(&group).synced());
        two.set(true);
        assert!(progress.of(&group).synced());
        assert!(changes.has_changed().expect("open"));
        changes.mark_unchanged();
        two.set(true);
        assert!(!changes.has_changed().expect("open"), "no change, no wake");
        one.set(false);
        drop(one);
        assert_eq!(
            progress.of(&group),
            Tally {
                streams: 1,
                settled: 1
            }
        );
        drop(two);
        assert_eq!(progress.of(&group), Tally::default());
        assert!(
            progress
                .of(&ObjectKey::new("d8-alb", "other"))
                .streams
                .eq(&0)
        );
    }

    #[test]
    fn a_stream_that_could_not_bind_is_reported_until_it_can_or_goes() {
        let progress = Arc::new(Progress::default());
        let group = ObjectKey::new("d8-alb", "main");
        let mut one = progress.open(&group);
        let _two = progress.open(&group);
        assert_eq!(progress.unbound(&group), None);
        one.unbound(Some("cannot bind '192.0.2.1:80'".into()));
        assert_eq!(
            progress.unbound(&group).as_deref(),
            Some("cannot bind '192.0.2.1:80'")
        );
        one.unbound(None);
        assert_eq!(progress.unbound(&group), None);
        one.unbound(Some("cannot bind".into()));
        drop(one);
        assert_eq!(progress.unbound(&group), None, "gone with its stream");
    }
}
