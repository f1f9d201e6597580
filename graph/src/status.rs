//! A node's `status` summary: a JSON object while the builder writes it, then sealed into its
//! compact JSON text. A `serde_json` map costs a B-tree node of room for eleven entries per
//! object, nested objects included (about 2.3 KiB per object of the benchmark's world, for
//! 170 bytes of text), and nothing reads a status back once it is drawn: it is only
//! serialized, which the text is already.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A status summary (see the module's documentation). Equal when its JSON text is.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// The entries being written (empty once sealed; an empty map allocates nothing).
    open: Map<String, Value>,
    /// The sealed text (never of an empty status: that stays open, costing nothing).
    sealed: Option<Box<RawValue>>,
}

impl Status {
    /// Sets `key` to `value` (a sealed status is opened again first).
    pub fn insert(&mut self, key: impl Into<String>, value: Value) {
        if let Some(text) = self.sealed.take() {
            self.open = serde_json::from_str(text.get()).unwrap_or_default();
        }
        self.open.insert(key.into(), value);
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.sealed.is_none() && self.open.is_empty()
    }

    /// Keeps it as its text from now on (cheap to call again).
    pub fn seal(&mut self) {
        if !self.open.is_empty()
            && let Ok(text) = serde_json::value::to_raw_value(&self.open)
        {
            self.sealed = Some(text);
            self.open = Map::new();
        }
    }

    /// Whether it is kept as text.
    pub fn is_sealed(&self) -> bool {
        self.sealed.is_some()
    }

    /// Its compact JSON text.
    pub(crate) fn text(&self) -> std::borrow::Cow<'_, str> {
        match &self.sealed {
            Some(text) => text.get().into(),
            None => serde_json::to_string(&self.open).unwrap_or_default().into(),
        }
    }
}

impl From<Map<String, Value>> for Status {
    fn from(open: Map<String, Value>) -> Self {
        Self { open, sealed: None }
    }
}

impl PartialEq for Status {
    fn eq(&self, other: &Self) -> bool {
        match (&self.sealed, &other.sealed) {
            (None, None) => self.open == other.open,
            _ => self.text() == other.text(),
        }
    }
}

impl Serialize for Status {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.sealed {
            Some(text) => text.serialize(s),
            None => self.open.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written() -> Status {
        let mut status = Status::default();
        status.insert("ports", json!([{"name": "http", "port": 80}]));
        status.insert("type", "ClusterIP".into());
        status
    }

    #[test]
    fn sealed_it_serializes_and_compares_as_it_did_open() {
        let open = written();
        let mut sealed = written();
        sealed.seal();
        assert!(sealed.is_sealed() && !open.is_sealed());
        assert_eq!(
            serde_json::to_string(&sealed).unwrap(),
            serde_json::to_string(&open).unwrap()
        );
        assert_eq!(sealed, open);
        assert_eq!(open, sealed);
        let mut other = written();
        other.insert("type", "NodePort".into());
        other.seal();
        assert_ne!(sealed, other);
        assert_ne!(open, other);
    }

    #[test]
    fn written_after_sealing_it_opens_again() {
        let mut status = written();
        status.seal();
        status.insert("ready", 2.into());
        assert!(!status.is_sealed());
        let entries = serde_json::to_value(&status).unwrap();
        assert_eq!(entries["ready"], 2);
        assert_eq!(entries["type"], "ClusterIP");
    }

    #[test]
    fn an_empty_status_stays_open_and_empty() {
        let mut status = Status::default();
        status.seal();
        assert!(status.is_empty() && !status.is_sealed());
        assert_eq!(serde_json::to_string(&status).unwrap(), "{}");
    }
}
