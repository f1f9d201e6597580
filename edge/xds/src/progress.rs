//! Whether each group's proxies run its latest configuration: every stream reports whether it
//! is settled — each type it was sent is ACKed at the version of the snapshot it is served
//! (the protocol states' `settled`) — and the tally per
//! group is read by whoever reports it (the control plane's `Synced` condition), woken by
//! [`Progress::subscribe`] when a tally changes. The same idea as go-control-plane's status
//! info per node, counted per group. A stream also reports its proxy's verdict on each type
//! ([`Stream::verdict`]): while some proxy rejects the latest configuration of a type, the
//! control plane says so on the Gateway (`Programmed=False`: `AddressNotUsable` when a
//! listener's address could not be bound, `Invalid` otherwise, with the proxy's reason).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fairlead_key::ObjectKey;
use tokio::sync::watch;

/// What one stream reported.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct StreamState {
    /// Settled.
    settled: bool,
    /// The types whose latest configuration its proxy rejected, with its reason.
    rejected: Rejected,
}

/// Rejections by type (its short name: `listener`, `secret`, …): the proxy's reason.
type Rejected = BTreeMap<&'static str, String>;

/// A proxy's rejection of a Gateway's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The type rejected (`listener`, `secret`, …).
    pub type_name: &'static str,
    /// The proxy's reason.
    pub message: String,
}

impl Rejection {
    /// Whether the proxy could not bind a listener's address (Envoy's "cannot bind").
    pub fn unbound(&self) -> bool {
        self.type_name == "listener" && self.message.contains("cannot bind")
    }
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
            rejected: Rejected::new(),
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

    /// What some proxy of `group` rejects of the group's latest configuration, if one does:
    /// a listener address it could not bind first, as that says why nothing is served there.
    pub fn rejected(&self, group: &ObjectKey) -> Option<Rejection> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let all =
            streams
                .get(group)?
                .values()
                .flat_map(|s| &s.rejected)
                .map(|(type_name, message)| Rejection {
                    type_name,
                    message: message.clone(),
                });
        all.min_by_key(|r| !r.unbound())
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
    rejected: Rejected,
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

    /// Reports the proxy's verdict on the configuration of `type_name`: `Some(why)` when it
    /// rejected it, `None` when it took it.
    pub fn verdict(&mut self, type_name: &'static str, rejected: Option<String>) {
        if self.rejected.get(type_name) == rejected.as_ref() {
            return;
        }
        match rejected {
            Some(why) => self.rejected.insert(type_name, why),
            None => self.rejected.remove(type_name),
        };
        let rejected = self.rejected.clone();
        self.progress.update(|streams| {
            if let Some(s) = streams
                .get_mut(&self.group)
                .and_then(|s| s.get_mut(&self.id))
            {
                s.rejected = rejected;
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
    fn a_rejection_is_reported_until_a_later_version_is_taken_or_the_stream_goes() {
        let progress = Arc::new(Progress::default());
        let group = ObjectKey::new("d8-alb", "main");
        let mut one = progress.open(&group);
        let mut two = progress.open(&group);
        let mut changes = progress.subscribe();
        changes.mark_unchanged();
        assert_eq!(progress.rejected(&group), None);
        two.verdict("secret", Some("OCSP response is required".into()));
        assert!(changes.has_changed().unwrap());
        let rejection = progress.rejected(&group).unwrap();
        assert_eq!(
            (
                rejection.type_name,
                rejection.message.as_str(),
                rejection.unbound()
            ),
            ("secret", "OCSP response is required", false)
        );
        // An address that cannot be bound says more of why nothing is served.
        one.verdict("listener", Some("cannot bind '192.0.2.1:80'".into()));
        let rejection = progress.rejected(&group).unwrap();
        assert!(rejection.unbound(), "{rejection:?}");
        one.verdict("listener", None);
        assert_eq!(progress.rejected(&group).unwrap().type_name, "secret");
        changes.mark_unchanged();
        two.verdict("secret", Some("OCSP response is required".into()));
        assert!(
            !changes.has_changed().unwrap(),
            "the same verdict wakes no one"
        );
        two.verdict("listener", None);
        assert_eq!(
            progress.rejected(&group).unwrap().type_name,
            "secret",
            "per type"
        );
        two.verdict("secret", None);
        assert_eq!(progress.rejected(&group), None);
        one.verdict("cluster", Some("bad".into()));
        drop(one);
        assert_eq!(progress.rejected(&group), None, "gone with its stream");
    }
}
